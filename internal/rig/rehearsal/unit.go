package rehearsal

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Service is the part of a systemd service unit (with its drop-ins applied) the rehearsal
// runs: the environment from Environment= and EnvironmentFile= lines, ExecStartPre's commands,
// ExecStart's argv and the WorkingDirectory= it runs in ("" for the service manager's default, /).
type Service struct {
	Env     map[string]string
	Pre     []Command
	Argv    []string
	WorkDir string
}

// Command is one ExecStartPre= line: its argv (environment expanded, prefix removed) and
// whether its failure is ignored (the "-" prefix, systemd.service(5) table 1).
type Command struct {
	Argv          []string
	IgnoreFailure bool
}

// ParseService reads unit name from the node root (root/etc/systemd/system/<name> and its
// <name>.d/*.conf drop-ins, in name order, as systemd does) and returns its environment and
// ExecStart with ${VAR} and $VAR expanded from that environment (systemd.service(5),
// "Command lines"), and the ExecStartPre= commands in order (an empty one resets the list, as
// systemd does). Environment files are read from the node root; a missing one prefixed
// with "-" is skipped, as systemd does. Only the last ExecStart counts (a drop-in's empty
// ExecStart= resets the list).
func ParseService(root, name string) (*Service, error) {
	dir := filepath.Join(root, "etc", "systemd", "system")
	files := []string{filepath.Join(dir, name)}
	drop, _ := filepath.Glob(filepath.Join(dir, name+".d", "*.conf"))
	files = append(files, drop...) // Glob sorts
	s := &Service{Env: map[string]string{}}
	var exec string
	var pre []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("rehearsal: unit %s: %w", name, err)
		}
		section := ""
		for _, line := range joinContinuations(string(b)) {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
				continue
			}
			if strings.HasPrefix(line, "[") {
				section = line
				continue
			}
			if section != "[Service]" {
				continue
			}
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				continue
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch k {
			case "Environment":
				for _, w := range splitWords(v) {
					if ek, ev, ok := strings.Cut(w, "="); ok {
						s.Env[ek] = ev
					}
				}
			case "EnvironmentFile":
				optional := strings.HasPrefix(v, "-")
				p := strings.TrimPrefix(v, "-")
				b, err := NodeFile(root, p)
				if err != nil {
					if optional && os.IsNotExist(err) {
						continue
					}
					return nil, fmt.Errorf("rehearsal: unit %s: EnvironmentFile %s: %w", name, p, err)
				}
				for _, l := range strings.Split(string(b), "\n") {
					l = strings.TrimSpace(l)
					if l == "" || strings.HasPrefix(l, "#") {
						continue
					}
					if ek, ev, ok := strings.Cut(l, "="); ok {
						s.Env[strings.TrimSpace(ek)] = strings.Trim(strings.TrimSpace(ev), `"'`)
					}
				}
			case "ExecStart":
				exec = v
			case "WorkingDirectory":
				s.WorkDir = v
			case "ExecStartPre":
				if v == "" {
					pre = nil
				} else {
					pre = append(pre, v)
				}
			}
		}
	}
	if exec == "" {
		return nil, fmt.Errorf("rehearsal: unit %s has no ExecStart", name)
	}
	// Prefixes such as "-" or "@" (systemd.service(5) table 1) are not used by the units
	// the rehearsal runs; strip the harmless ones.
	exec = strings.TrimLeft(exec, "-+!")
	for _, w := range splitWords(exec) {
		s.Argv = append(s.Argv, expand(w, s.Env))
	}
	for _, p := range pre {
		c := Command{IgnoreFailure: strings.HasPrefix(strings.TrimLeft(p, "+!@:"), "-")}
		for _, w := range splitWords(strings.TrimLeft(p, "-+!@:")) {
			c.Argv = append(c.Argv, expand(w, s.Env))
		}
		s.Pre = append(s.Pre, c)
	}
	return s, nil
}

// NodeFile reads node path p as the node sees it: from the node root, else from the host
// directory the root is overlaid on (/etc/os-release comes from the host).
func NodeFile(root, p string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
	if os.IsNotExist(err) {
		return os.ReadFile(p)
	}
	return b, err
}

var varRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

func expand(w string, env map[string]string) string {
	return varRE.ReplaceAllStringFunc(w, func(m string) string {
		name := strings.Trim(m, "${}")
		return env[name]
	})
}

// joinContinuations joins lines ending in a backslash, as systemd does.
func joinContinuations(s string) []string {
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\"))
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(l)
		out = append(out, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// splitWords splits a systemd value into words, honouring double and single quotes.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
