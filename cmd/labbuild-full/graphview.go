package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/graph"
)

// stateColor fills each state's nodes (Graphviz X11 colours). A target's state is its verdict
// in a dry run (engine.Result.State): nothing is built to find it. A legend lists the states
// in engine.States' order, and a family is coloured by its worst (the last in that order).
var stateColor = map[engine.State]string{
	engine.StateUpToDate: "palegreen", engine.StateRestorable: "lightblue", engine.StateStale: "orange",
	engine.StateMissing: "gray90", engine.StateFailed: "tomato", engine.StateBlocked: "khaki",
}

// graphFamilies is the stage order of the families, left to right in the family view and in the
// legend of the target view; families not listed follow by name.
var graphFamilies = []string{"release", "pki", "kubeconfig", "manifests", "mco", "ignition", "rhcos", "libvirt", "haproxy", "cluster"}

func familyRank(f string) int {
	for i, x := range graphFamilies {
		if x == f {
			return i
		}
	}
	return len(graphFamilies)
}

// graphView is what runGraph draws: the project, the selection, each target's state (the dry
// run's result).
type graphView struct {
	p        *engine.Project
	sel      []bool
	res      *engine.Result
	allEdges bool
}

// targetDoc is the target view: one Graphviz cluster per family, nodes filled by state,
// External targets as boxes, the transitive reduction of the edges unless allEdges, and a
// legend with each state's count.
func (v *graphView) targetDoc() graph.Doc {
	g := v.p.Graph
	d := graph.Doc{
		Attrs:     graph.Attrs{"rankdir": "LR", "fontname": "Helvetica", "newrank": "true", "ranksep": "0.3", "nodesep": "0.05"},
		NodeAttrs: graph.Attrs{"shape": "ellipse", "style": "filled", "fontname": "Helvetica", "fontsize": "14"},
		EdgeAttrs: graph.Attrs{"color": "gray40", "arrowsize": "0.6"},
	}
	byFam := map[string][]graph.DocNode{}
	counts := map[engine.State]int{}
	for _, i := range g.Order() {
		if !v.sel[i] {
			continue
		}
		t := v.p.Targets[i]
		s := v.res.State(t.Name)
		counts[s]++
		a := graph.Attrs{"fillcolor": stateColor[s], "tooltip": t.Doc + " (" + s.String() + ")"}
		if t.External {
			a["shape"] = "box"
		}
		// Inside its family's cluster a node is labelled without the family prefix.
		if f := engine.Family(t.Name); f != t.Name {
			a["label"] = strings.TrimPrefix(t.Name, f+"/")
		}
		byFam[engine.Family(t.Name)] = append(byFam[engine.Family(t.Name)], graph.DocNode{ID: t.Name, Attrs: a})
	}
	for _, f := range sortedFamilies(byFam) {
		nodes := byFam[f]
		sort.Slice(nodes, func(a, b int) bool { return nodes[a].ID < nodes[b].ID })
		d.Clusters = append(d.Clusters, graph.Cluster{ID: f, Nodes: nodes, Attrs: graph.Attrs{
			"label": fmt.Sprintf("%s (%d)", f, len(nodes)), "style": "rounded", "color": "gray60", "fontsize": "14",
		}})
	}
	d.Clusters = append(d.Clusters, legend(counts))
	var kept [][]int
	if v.allEdges {
		kept = make([][]int, g.Len())
		for _, i := range g.Order() {
			if v.sel[i] {
				for _, j := range g.Deps(i) {
					if v.sel[j] {
						kept[i] = append(kept[i], j)
					}
				}
			}
		}
	} else {
		kept = g.Reduce(v.sel)
	}
	for i, ds := range kept {
		for _, j := range ds {
			d.Edges = append(d.Edges, graph.DocEdge{From: g.Name(j), To: g.Name(i)})
		}
	}
	sortEdges(d.Edges)
	label := "labbuild targets: edges point from a dependency to its dependent"
	if !v.allEdges {
		label += " (transitive reduction; --all-edges for every edge)"
	}
	d.Attrs["label"] = label
	return d
}

// familyDoc is the family view: one node per family with its target count and states, edges
// between families labelled with how many target edges they stand for.
func (v *graphView) familyDoc() graph.Doc {
	g := v.p.Graph
	groups, edges := g.Quotient(v.sel, func(i int) string { return engine.Family(g.Name(i)) })
	if !v.allEdges {
		edges = graph.ReduceGroupEdges(edges)
	}
	d := graph.Doc{
		Attrs:     graph.Attrs{"rankdir": "LR", "fontname": "Helvetica", "label": "labbuild families: targets per family by state; edge labels count target edges"},
		NodeAttrs: graph.Attrs{"shape": "box", "style": "rounded,filled", "fontname": "Helvetica"},
		EdgeAttrs: graph.Attrs{"fontname": "Helvetica", "fontsize": "14"},
	}
	sort.SliceStable(groups, func(a, b int) bool { return familyRank(groups[a].Name) < familyRank(groups[b].Name) })
	counts := map[engine.State]int{}
	for _, grp := range groups {
		per := map[engine.State]int{}
		for _, i := range grp.IDs {
			s := v.res.State(g.Name(i))
			per[s]++
			counts[s]++
		}
		var parts []string
		worst := engine.StateUpToDate
		for _, s := range engine.States() {
			if per[s] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", per[s], s))
				worst = s
			}
		}
		d.Nodes = append(d.Nodes, graph.DocNode{ID: grp.Name, Attrs: graph.Attrs{
			"label": fmt.Sprintf("%s\n%d targets\n%s", grp.Name, len(grp.IDs), strings.Join(parts, ", ")), "fillcolor": stateColor[worst],
		}})
	}
	for _, e := range edges {
		d.Edges = append(d.Edges, graph.DocEdge{From: e.From, To: e.To, Attrs: graph.Attrs{"label": fmt.Sprint(e.Count)}})
	}
	d.Clusters = append(d.Clusters, legend(counts))
	return d
}

// legend is a cluster with one node per state present, filled with its colour and counted.
func legend(counts map[engine.State]int) graph.Cluster {
	c := graph.Cluster{ID: "legend", Attrs: graph.Attrs{"label": "state", "style": "rounded", "color": "gray60"}}
	for _, s := range engine.States() {
		if counts[s] == 0 {
			continue
		}
		c.Nodes = append(c.Nodes, graph.DocNode{ID: "legend: " + s.String(), Attrs: graph.Attrs{
			"label": fmt.Sprintf("%s (%d)", s, counts[s]), "fillcolor": stateColor[s], "shape": "box", "style": "filled",
		}})
	}
	return c
}

func sortedFamilies[T any](m map[string]T) []string {
	fs := make([]string, 0, len(m))
	for f := range m {
		fs = append(fs, f)
	}
	sort.Slice(fs, func(a, b int) bool {
		if ra, rb := familyRank(fs[a]), familyRank(fs[b]); ra != rb {
			return ra < rb
		}
		return fs[a] < fs[b]
	})
	return fs
}

func sortEdges(es []graph.DocEdge) {
	sort.Slice(es, func(a, b int) bool {
		if es[a].From != es[b].From {
			return es[a].From < es[b].From
		}
		return es[a].To < es[b].To
	})
}

// runGraph prints the graph of the selected targets in the requested format and view.
func runGraph(ctx context.Context, c *cli, args []string) error {
	switch c.by {
	case "", "target", "family":
	default:
		return usagef("graph --by %q: want target or family", c.by)
	}
	switch c.format {
	case "dot", "tree", "json", "svg", "png":
	default:
		return usagef("graph --format %q: want dot, svg, png, tree or json", c.format)
	}
	goals := args
	if c.all && len(args) == 0 {
		var err error
		if goals, err = c.allTargets(); err != nil {
			return err
		}
	}
	p, res, _, err := c.status(ctx, goals, false)
	if err != nil {
		return err
	}
	ids, err := p.Select(goals)
	if err != nil {
		return err
	}
	v := &graphView{p: p, sel: p.Graph.Closure(ids), res: res, allEdges: c.allEdges}

	// An image is not for a terminal: written to a file unless --output names one or stdout is
	// redirected.
	out := c.output
	if (c.format == "png" || c.format == "svg") && out == "" && c.stdoutTTY {
		out = "labbuild-graph." + c.format
	}
	if out != "" && c.dryRun {
		fix := "drop -n or --output"
		if c.output == "" {
			fix = "drop -n, or redirect standard output, where the image then goes"
		}
		return usagef("graph: -n writes nothing, and this would write %s (fix: %s)", out, fix)
	}
	var buf bytes.Buffer
	switch c.format {
	case "tree":
		err = p.Graph.Tree(&buf, v.sel, func(i int) string { return "[" + res.State(p.Targets[i].Name).String() + "]" })
	case "json":
		err = p.Graph.JSON(&buf, v.sel, func(i int) map[string]string {
			return map[string]string{"state": res.State(p.Targets[i].Name).String(), "family": p.Targets[i].Family(), "doc": p.Targets[i].Doc}
		})
	default:
		doc := v.targetDoc()
		if c.by == "family" {
			doc = v.familyDoc()
		}
		err = graph.WriteDOT(&buf, doc)
		if err == nil && c.format != "dot" {
			err = renderDot(ctx, c.format, &buf, c.stderr)
		}
	}
	if err != nil {
		return err
	}
	if out != "" {
		if err := cache.WriteFileAtomic(out, buf.Bytes(), 0o644); err != nil {
			return err
		}
		if c.format == "png" || c.format == "svg" {
			fmt.Fprintf(c.stderr, "labbuild: wrote %s (%d bytes)\n", out, buf.Len())
		}
		return nil
	}
	// A reader that closed the pipe (labbuild graph | head) has what it wanted: with SIGPIPE
	// ignored the write returns EPIPE, which is not an error, instead of killing the process.
	signal.Ignore(syscall.SIGPIPE)
	return writeOut(c.stdout, buf.Bytes())
}

// renderDot replaces buf's DOT with Graphviz's rendering in format (svg, png).
func renderDot(ctx context.Context, format string, buf *bytes.Buffer, stderr io.Writer) error {
	dot, err := exec.LookPath("dot")
	if err != nil {
		return fmt.Errorf("graph --format %s needs Graphviz's dot: apt-get install graphviz (or use --format dot)", format)
	}
	cmd := exec.CommandContext(ctx, dot, "-T"+format)
	cmd.Stdin, cmd.Stderr = bytes.NewReader(buf.Bytes()), stderr
	img, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("graph: dot -T%s: %w", format, err)
	}
	buf.Reset()
	buf.Write(img)
	return nil
}

// writeOut writes b to stdout; a reader that went away (labbuild graph | head) is not an error.
func writeOut(w io.Writer, b []byte) error {
	_, err := w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		return nil
	}
	return err
}
