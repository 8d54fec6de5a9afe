package lab

import (
	"bytes"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	yaml3 "gopkg.in/yaml.v3"
)

// checkYAML checks the shape of a lab config against Config before it is decoded: every key
// must be a field (an unknown one is named by its path, with the closest known name and its
// line), every value must have the field's kind (a mapping, a list, a whole number, a scalar).
// It returns the line of every field path the file sets (nodes addressed by name, as
// "nodes.master-1.ip", and by index, "nodes[1].ip"), for messages.
//
// The decoding itself stays with sigs.k8s.io/yaml (YAML → JSON → encoding/json, the way
// Kubernetes reads manifests); yaml.v3 is used here only for its node positions.
func checkYAML(data []byte, file string) (map[string]int, ConfigErrors) {
	pos := map[string]int{}
	var doc yaml3.Node
	if err := yaml3.Unmarshal(data, &doc); err != nil {
		msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 0
		if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
			line, _ = strconv.Atoi(m[1])
			msg = m[2]
		}
		if l := errorLine(data, msg); l > 0 {
			line = l
		}
		return pos, ConfigErrors{{File: file, Line: line, Msg: "not valid YAML: " + msg,
			Fix: "fix the YAML syntax (indent with spaces; quote values that contain ': ' or start with '*', '&', '!', '%' or '@')"}}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return pos, nil // an empty file: every field keeps its default
	}
	w := &yamlWalker{file: file, pos: pos}
	w.walk(doc.Content[0], reflect.TypeOf(Config{}), "", 0)
	return pos, w.errs
}

var yamlLineRE = lazyRegexp(`^line ([0-9]+): (.*)$`)

// errorLine returns the line that holds a YAML syntax error whose message is msg: the first
// line after which the document, cut there, fails to parse with the same message (0 if none
// does). yaml.v3 names the line where the enclosing construct started, 0-based for parser
// errors (decode.go, parser.fail: context_mark before problem_mark, +1 only for scanner
// errors), so an unclosed flow on line 3 was reported at line 2, and a key dedented on line 5
// inside a mapping opened on line 2 at line 1. Only a bad file pays for the extra parses.
func errorLine(data []byte, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	end := 0
	for i, l := range lines {
		end += len(l)
		var n yaml3.Node
		err := yaml3.Unmarshal(data[:end], &n)
		if err == nil {
			continue
		}
		m := strings.TrimPrefix(err.Error(), "yaml: ")
		if s := yamlLineRE.FindStringSubmatch(m); s != nil {
			m = s[2]
		}
		if m == msg {
			return i + 1
		}
	}
	return 0
}

type yamlWalker struct {
	file  string
	pos   map[string]int
	errs  ConfigErrors
	depth int
}

func (w *yamlWalker) bad(path string, line int, msg, fix string) {
	if len(w.errs) >= 100 { // a pathological file: the first hundred problems are enough
		return
	}
	w.errs = append(w.errs, &ConfigError{File: w.file, Line: line, Field: path, Msg: msg, Fix: fix})
}

// kindName names a node's YAML kind for messages.
func kindName(n *yaml3.Node) string {
	switch n.Kind {
	case yaml3.MappingNode:
		return "a mapping"
	case yaml3.SequenceNode:
		return "a list"
	case yaml3.ScalarNode:
		switch n.ShortTag() {
		case "!!int":
			return "a number"
		case "!!float":
			return "a decimal number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		}
		return "a string"
	}
	return "an alias"
}

func joinPath(path, seg string) string {
	if path == "" {
		return seg
	}
	return path + "." + seg
}

// walk checks node n against type t at field path (display) path.
func (w *yamlWalker) walk(n *yaml3.Node, t reflect.Type, path string, line int) {
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > 50 {
		w.bad(path, n.Line, "nested too deeply", "see `labbuild init` for the shape of every field")
		return
	}
	for n.Kind == yaml3.AliasNode {
		if n.Alias == nil || w.depth > 50 {
			return
		}
		n = n.Alias
		w.depth++
	}
	if n.Kind == yaml3.ScalarNode && n.ShortTag() == "!!null" {
		return // null keeps the default (encoding/json leaves the field alone)
	}
	where := path
	if where == "" {
		where = "the lab config"
	}
	for t.Kind() == reflect.Pointer { // an optional section (mirror:)
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml3.MappingNode {
			w.bad(path, n.Line, fmt.Sprintf("is %s; want a mapping of fields", kindName(n)), "see `labbuild init` for "+where+"'s fields")
			return
		}
		fields := structFields(t)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.ShortTag() == "!!merge" {
				w.walk(v, t, path, k.Line)
				continue
			}
			fp := joinPath(path, k.Value)
			if k.Kind != yaml3.ScalarNode {
				w.bad(path, k.Line, "a key is "+kindName(k), "keys are field names")
				continue
			}
			if prev, dup := seen[k.Value]; dup {
				w.bad(fp, k.Line, fmt.Sprintf("set twice (first on line %d)", prev), "keep one")
				continue
			}
			seen[k.Value] = k.Line
			ft, ok := fields[k.Value]
			if !ok {
				w.unknown(fp, path, k, fields)
				continue
			}
			w.pos[fp] = k.Line
			w.walk(v, ft, fp, k.Line)
		}
	case reflect.Slice:
		if n.Kind != yaml3.SequenceNode {
			w.bad(path, n.Line, fmt.Sprintf("is %s; want a list", kindName(n)), "write one item per line, each starting with '- '")
			return
		}
		names := map[string]bool{}
		for i, e := range n.Content {
			ep := fmt.Sprintf("%s[%d]", path, i)
			w.pos[ep] = e.Line
			if e.Kind == yaml3.MappingNode {
				for j := 0; j+1 < len(e.Content); j += 2 {
					if e.Content[j].Value == "name" && e.Content[j+1].Kind == yaml3.ScalarNode && !names[e.Content[j+1].Value] && e.Content[j+1].Value != "" {
						names[e.Content[j+1].Value] = true
						// Record the by-index paths too; messages name the element by name,
						// as Validate does ("nodes.master-1.ip").
						sub := &yamlWalker{file: w.file, pos: w.pos, depth: w.depth}
						sub.walk(e, t.Elem(), ep, e.Line)
						ep = path + "." + e.Content[j+1].Value
						w.pos[ep] = e.Line
					}
				}
			}
			w.walk(e, t.Elem(), ep, e.Line)
		}
	case reflect.Map:
		if n.Kind != yaml3.MappingNode {
			w.bad(path, n.Line, fmt.Sprintf("is %s; want a mapping", kindName(n)), "write one `key: value` per line")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			fp := fmt.Sprintf("%s[%q]", path, k.Value)
			w.pos[fp] = k.Line
			w.walk(v, t.Elem(), fp, k.Line)
		}
	case reflect.Int:
		if n.Kind != yaml3.ScalarNode || n.ShortTag() != "!!int" {
			w.bad(path, n.Line, fmt.Sprintf("is %s; want a whole number", kindName(n)), "write digits only, unquoted")
			return
		}
		if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 32); err != nil {
			w.bad(path, n.Line, fmt.Sprintf("%s is out of range", n.Value), "use a smaller number")
		}
	case reflect.Bool:
		// YAML 1.2 booleans only: YAML 1.1's yes/on mean a boolean to some readers, a string to others.
		if n.Kind != yaml3.ScalarNode || n.ShortTag() != "!!bool" {
			w.bad(path, n.Line, fmt.Sprintf("is %s %q; want true or false", kindName(n), n.Value), "write true or false, unquoted")
		}
	case reflect.String:
		if n.Kind != yaml3.ScalarNode {
			w.bad(path, n.Line, fmt.Sprintf("is %s; want a string", kindName(n)), "write a single value (quote it if it contains ': ')")
		}
	}
}

// unknown reports key k (at field path fp) as unknown, with the closest known name.
func (w *yamlWalker) unknown(fp, parent string, k *yaml3.Node, fields map[string]reflect.Type) {
	names := make([]string, 0, len(fields))
	for f := range fields {
		names = append(names, f)
	}
	sort.Strings(names)
	if best, ok := Nearest(k.Value, names); ok {
		w.bad(fp, k.Line, "unknown field; did you mean "+joinPath(parent, best)+"?", "rename it to "+best)
		return
	}
	where := parent
	if where == "" {
		where = "the top level"
	}
	w.bad(fp, k.Line, "unknown field", where+" has: "+strings.Join(names, ", "))
}

// structFields maps the JSON names of t's exported fields to their types.
func structFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}
