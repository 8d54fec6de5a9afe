package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// runCompletion prints a completion script for bash, zsh or fish. It completes every verb, each
// verb's own flags and the global flags, flag values (formats, views, shells, files,
// directories), and target and family names. Names come from `labbuild list` at completion time
// with the -f, -C and -o already on the command line, so they follow that lab.yaml.
func runCompletion(ctx context.Context, c *cli, args []string) error {
	if len(args) != 1 {
		return usagef("completion: name a shell: bash, zsh or fish")
	}
	fs := newFlags(&cli{})
	var vs []string
	for v := range verbs {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	flagWords := func(verb string) string {
		own, global := splitFlags(fs, verb)
		var w []string
		for _, s := range []*pflag.FlagSet{own, global} {
			s.VisitAll(func(f *pflag.Flag) {
				w = append(w, "--"+f.Name)
				if f.Shorthand != "" {
					w = append(w, "-"+f.Shorthand)
				}
			})
		}
		return strings.Join(w, " ")
	}
	switch args[0] {
	case "bash":
		var cases strings.Builder
		for _, v := range vs {
			fmt.Fprintf(&cases, "        %s) flags=%q ;;\n", v, flagWords(v))
		}
		fmt.Fprintf(c.stdout, `# labbuild bash completion: source <(labbuild completion bash)
_labbuild() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local verb=build i w ctx=()
    # The verb, and the -f/-C/-o already given (target names follow that lab).
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${COMP_WORDS[i]}
        case "$w" in
            -f|--file|-C|--directory|-o|--out) ctx+=("$w" "${COMP_WORDS[i+1]}"); ((i++)) ;;
            --file=*|--directory=*|--out=*) ctx+=("$w") ;;
            -*) ;;
            *) if [[ $verb == build && " %s " == *" $w "* ]]; then verb=$w; fi ;;
        esac
    done
    case "$prev" in
        -f|--file|--output) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        -C|--directory|-o|--out) COMPREPLY=($(compgen -d -- "$cur")); return ;;
        --format) COMPREPLY=($(compgen -W "dot svg png tree json" -- "$cur")); return ;;
        --by) COMPREPLY=($(compgen -W "target family" -- "$cur")); return ;;
        -d|--debug) COMPREPLY=($(compgen -W "explain stats" -- "$cur")); return ;;
        -j|--jobs) return ;;
    esac
    local flags
    case "$verb" in
%s    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags" -- "$cur"))
        return
    fi
    case "$verb" in
        completion) COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")); return ;;
        help) COMPREPLY=($(compgen -W "%s" -- "$cur")); return ;;
        init|config|certs|status|version) return ;;
        ssh|console|gather)
            # Node names: the lab's VMs (libvirt/vm/NODE).
            COMPREPLY=($(compgen -W "$(labbuild "${ctx[@]}" list libvirt/vm 2>/dev/null | awk '{sub("^libvirt/vm/", "", $1); print $1}')" -- "$cur"))
            return ;;
    esac
    local names fams verbs=""
    names=$(labbuild "${ctx[@]}" list 2>/dev/null | awk '{print $1}')
    fams=$(printf '%%s\n' $names | cut -d/ -f1 | sort -u)
    [[ $verb == build ]] && verbs="%s"
    COMPREPLY=($(compgen -W "$verbs $fams $names" -- "$cur"))
}
complete -F _labbuild labbuild
`, strings.Join(vs, " "), cases.String(), strings.Join(vs, " "), strings.Join(vs, " "))
	case "zsh":
		// zsh runs the bash function through bashcompinit: one script, the same behaviour.
		fmt.Fprintf(c.stdout, "#compdef labbuild\n# labbuild zsh completion: source <(labbuild completion zsh)\nautoload -U +X bashcompinit && bashcompinit\n")
		c2 := *c
		if err := runCompletion(ctx, &c2, []string{"bash"}); err != nil {
			return err
		}
	case "fish":
		fmt.Fprintf(c.stdout, "# labbuild fish completion: labbuild completion fish > ~/.config/fish/completions/labbuild.fish\ncomplete -c labbuild -f\n")
		fmt.Fprintf(c.stdout, "function __labbuild_ctx\n    set -l t (commandline -opc)\n    for i in (seq 2 (count $t))\n        switch $t[$i]\n            case -f --file -C --directory -o --out\n                set -l j (math $i + 1)\n                echo $t[$i]; echo $t[$j]\n        end\n    end\nend\n")
		for _, v := range vs {
			fmt.Fprintf(c.stdout, "complete -c labbuild -n __fish_use_subcommand -a %s -d %q\n", v, verbs[v].short)
		}
		fmt.Fprintf(c.stdout, "complete -c labbuild -n 'not __fish_seen_subcommand_from completion help init config certs status version ssh console gather' -a '(labbuild (__labbuild_ctx) list 2>/dev/null | string split -f1 \" \")'\n")
		fmt.Fprintf(c.stdout, "complete -c labbuild -n '__fish_seen_subcommand_from ssh console gather' -a '(labbuild (__labbuild_ctx) list libvirt/vm 2>/dev/null | string split -f1 \" \" | string replace libvirt/vm/ \"\")'\n")
		fmt.Fprintf(c.stdout, "complete -c labbuild -n '__fish_seen_subcommand_from completion' -a 'bash zsh fish'\n")
		fmt.Fprintf(c.stdout, "complete -c labbuild -n '__fish_seen_subcommand_from help' -a '%s'\n", strings.Join(vs, " "))
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			line := "complete -c labbuild -l " + f.Name
			if f.Shorthand != "" {
				line += " -s " + f.Shorthand
			}
			switch f.Name {
			case "format":
				line += " -xa 'dot svg png tree json'"
			case "by":
				line += " -xa 'target family'"
			case "file", "output":
				line += " -rF"
			case "directory", "out":
				line += " -xa '(__fish_complete_directories)'"
			}
			fmt.Fprintf(c.stdout, "%s -d %q\n", line, f.Usage)
		})
	default:
		return usagef("completion: unknown shell %q (bash, zsh or fish)", args[0])
	}
	return nil
}
