package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// runCompletion prints a completion script. Target names come from `labbuild list` at
// completion time, so per-node targets follow the user's lab.yaml.
func runCompletion(ctx context.Context, c *cli, args []string) error {
	if len(args) != 1 {
		return usagef("completion: name a shell: bash, zsh or fish")
	}
	var vs []string
	for v := range verbs {
		if v != "build" {
			vs = append(vs, v)
		}
	}
	sort.Strings(vs)
	flags := "-j -k -n -B -C -f -o -q --explain --json --format --output --all --cache --regenerate --help --version"
	words := strings.Join(vs, " ")
	switch args[0] {
	case "bash":
		fmt.Fprintf(c.stdout, `# labbuild bash completion: source <(labbuild completion bash)
_labbuild() {
    local cur=${COMP_WORDS[COMP_CWORD]}
    local prev=${COMP_WORDS[COMP_CWORD-1]}
    case "$prev" in
        -C|-o|--output|-f) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --format) COMPREPLY=($(compgen -W "dot svg png tree json" -- "$cur")); return ;;
        completion) COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")); return ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "%s" -- "$cur"))
        return
    fi
    local names
    names=$(labbuild list 2>/dev/null | awk '{print $1}')
    local fams
    fams=$(printf '%%s\n' $names | cut -d/ -f1 | sort -u)
    COMPREPLY=($(compgen -W "%s $fams $names" -- "$cur"))
}
complete -F _labbuild labbuild
`, flags, words)
	case "zsh":
		fmt.Fprintf(c.stdout, `#compdef labbuild
# labbuild zsh completion: labbuild completion zsh > "${fpath[1]}/_labbuild"
_labbuild() {
    local -a names
    names=(%s ${(f)"$(labbuild list 2>/dev/null | awk '{print $1}')"})
    names+=(${(u)${names[@]%%%%/*}})
    _arguments '-j[jobs]:N' '-k[keep going]' '-n[dry run]' '-B[rebuild all]' '-C[directory]:dir:_files -/' \
        '-f[lab config]:file:_files' '--explain[why targets run]' '--json[JSON output]' \
        '--format[graph format]:format:(dot svg png tree json)' '*:target:($names)'
}
_labbuild "$@"
`, words)
	case "fish":
		fmt.Fprintf(c.stdout, "# labbuild fish completion\ncomplete -c labbuild -f\n")
		fmt.Fprintf(c.stdout, "complete -c labbuild -n __fish_use_subcommand -a '%s'\n", words)
		fmt.Fprintf(c.stdout, "complete -c labbuild -a '(labbuild list 2>/dev/null | string split -f1 \" \")'\n")
		for _, f := range []struct{ s, l, d string }{{"j", "jobs", "run N targets at once"}, {"k", "keep-going", "keep going"}, {"n", "dry-run", "print the plan"}, {"B", "always-make", "rebuild all"}, {"C", "directory", "change directory"}, {"f", "file", "lab config"}} {
			fmt.Fprintf(c.stdout, "complete -c labbuild -s %s -l %s -d '%s'\n", f.s, f.l, f.d)
		}
		fmt.Fprintf(c.stdout, "complete -c labbuild -l format -xa 'dot svg png tree json'\n")
	default:
		return usagef("completion: unknown shell %q (bash, zsh or fish)", args[0])
	}
	return nil
}
