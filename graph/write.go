package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/dominikbraun/graph/draw"
)

// collect builds a slice of draw options; inference names the library's unexported type.
func collect[F any](fs ...F) []F { return fs }

// DOT writes the selected nodes (nil selects all) as Graphviz DOT, edges pointing from a
// dependency to its dependent, with per-node attributes from attrs (label, color, ...) and
// graph attributes ga. It uses dominikbraun/graph's writer and sorts its statements, because
// the library walks maps and would otherwise print a different file each run.
func (g *Graph) DOT(w io.Writer, selected []bool, attrs func(id int) map[string]string, ga map[string]string) error {
	lg, err := g.Library(selected, attrs)
	if err != nil {
		return err
	}
	opts := collect(draw.GraphAttribute("rankdir", "LR"))
	for _, k := range sortedKeys(ga) {
		opts = append(opts, draw.GraphAttribute(k, ga[k]))
	}
	var buf bytes.Buffer
	if err := draw.DOT(lg, &buf, opts...); err != nil {
		return err
	}
	var head, stmts []string
	for _, l := range strings.Split(buf.String(), "\n") {
		t := strings.TrimSpace(l)
		switch {
		case t == "" || t == "}":
		case strings.HasPrefix(t, `"`):
			stmts = append(stmts, "\t"+t)
		default:
			head = append(head, l)
		}
	}
	sort.Strings(stmts)
	_, err = io.WriteString(w, strings.Join(head, "\n")+"\n"+strings.Join(stmts, "\n")+"\n}\n")
	return err
}

// Tree writes the selected nodes as an indented dependency tree: each root (a selected node no
// selected node depends on), then its dependencies below it. A subtree already printed is
// shown once more by name with "(see above)", so output stays linear in the graph's size.
// label gives the text after each name (a doc line, a status), or nil.
func (g *Graph) Tree(w io.Writer, selected []bool, label func(id int) string) error {
	isSel := func(i int) bool { return selected == nil || selected[i] }
	var roots []int
	for _, i := range g.order {
		if !isSel(i) {
			continue
		}
		root := true
		for _, j := range g.Dependents(i) {
			if isSel(j) {
				root = false
				break
			}
		}
		if root {
			roots = append(roots, i)
		}
	}
	sort.Slice(roots, func(a, b int) bool { return g.names[roots[a]] < g.names[roots[b]] })
	printed := make([]bool, len(g.names))
	var walk func(i, depth int) error
	walk = func(i, depth int) error {
		line := strings.Repeat("  ", depth) + g.names[i]
		if printed[i] && len(g.Deps(i)) > 0 {
			line += " (see above)"
		} else if label != nil {
			if l := label(i); l != "" {
				line += "  " + l
			}
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
		if printed[i] {
			return nil
		}
		printed[i] = true
		deps := append([]int(nil), g.Deps(i)...)
		sort.Slice(deps, func(a, b int) bool { return g.names[deps[a]] < g.names[deps[b]] })
		for _, j := range deps {
			if isSel(j) {
				if err := walk(j, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, r := range roots {
		if err := walk(r, 0); err != nil {
			return err
		}
	}
	return nil
}

// JSONNode is one node in JSON output: its name, its dependencies, and caller attributes.
type JSONNode struct {
	Name  string            `json:"name"`
	Deps  []string          `json:"deps"`
	Attrs map[string]string `json:"attrs,omitempty"`
}

// JSON writes the selected nodes in topological order as a JSON array of JSONNode.
func (g *Graph) JSON(w io.Writer, selected []bool, attrs func(id int) map[string]string) error {
	out := []JSONNode{}
	for _, i := range g.order {
		if selected != nil && !selected[i] {
			continue
		}
		n := JSONNode{Name: g.names[i], Deps: []string{}}
		for _, j := range g.Deps(i) {
			if selected == nil || selected[j] {
				n.Deps = append(n.Deps, g.names[j])
			}
		}
		sort.Strings(n.Deps)
		if attrs != nil {
			n.Attrs = attrs(i)
		}
		out = append(out, n)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
