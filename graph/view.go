package graph

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Reduce returns the transitive reduction of the selected subgraph (nil selects all): for each
// node ID, the selected deps whose edge is kept. An edge j→i is dropped when j is also an
// ancestor of another selected dep of i, so every path stays and no edge repeats one. The graph
// is acyclic, so the reduction is unique. Cost: O(V·(V/64)) words for the ancestor bitsets plus
// O(E·V/64) for the test; 10,000 nodes take about 12 MB.
//
// dominikbraun/graph's TransitiveReduction gives the same edges (a test compares them) but runs
// a depth-first search per edge over maps, which is too slow for `graph --all` on synthetic
// graphs of 10,000 targets.
func (g *Graph) Reduce(selected []bool) [][]int {
	n := len(g.names)
	isSel := func(i int) bool { return selected == nil || selected[i] }
	words := (n + 63) / 64
	anc := make([][]uint64, n) // anc[i]: selected strict ancestors of i (its deps, transitively)
	for _, i := range g.order {
		if !isSel(i) {
			continue
		}
		a := make([]uint64, words)
		for _, j := range g.Deps(i) {
			if !isSel(j) {
				continue
			}
			a[j/64] |= 1 << (j % 64)
			for w, x := range anc[j] {
				a[w] |= x
			}
		}
		anc[i] = a
	}
	out := make([][]int, n)
	for _, i := range g.order {
		if !isSel(i) {
			continue
		}
		for _, j := range g.Deps(i) {
			if !isSel(j) {
				continue
			}
			redundant := false
			for _, k := range g.Deps(i) {
				if k != j && isSel(k) && anc[k][j/64]&(1<<(j%64)) != 0 {
					redundant = true
					break
				}
			}
			if !redundant {
				out[i] = append(out[i], j)
			}
		}
	}
	return out
}

// Group is one node of a quotient graph: the selected nodes a grouping function put together.
type Group struct {
	Name string
	IDs  []int // members, in the graph's topological order
}

// GroupEdge is an edge of a quotient graph: Count edges of the underlying graph go from a
// member of group From (the dependency) to a member of group To (the dependent).
type GroupEdge struct {
	From, To string
	Count    int
}

// Quotient groups the selected nodes by key (a family name, say) and returns the groups in
// order of their first member in the topological order, and the edges between distinct groups
// with how many underlying edges each stands for, sorted by (From, To). Edges inside a group
// are not returned.
func (g *Graph) Quotient(selected []bool, key func(id int) string) ([]Group, []GroupEdge) {
	idx := map[string]int{}
	var groups []Group
	for _, i := range g.order {
		if selected != nil && !selected[i] {
			continue
		}
		k := key(i)
		gi, ok := idx[k]
		if !ok {
			gi = len(groups)
			idx[k] = gi
			groups = append(groups, Group{Name: k})
		}
		groups[gi].IDs = append(groups[gi].IDs, i)
	}
	counts := map[[2]string]int{}
	for _, grp := range groups {
		for _, i := range grp.IDs {
			for _, j := range g.Deps(i) {
				if selected != nil && !selected[j] {
					continue
				}
				if from := key(j); from != grp.Name {
					counts[[2]string{from, grp.Name}]++
				}
			}
		}
	}
	edges := make([]GroupEdge, 0, len(counts))
	for k, c := range counts {
		edges = append(edges, GroupEdge{From: k[0], To: k[1], Count: c})
	}
	sort.Slice(edges, func(a, b int) bool {
		if edges[a].From != edges[b].From {
			return edges[a].From < edges[b].From
		}
		return edges[a].To < edges[b].To
	})
	return groups, edges
}

// ReduceGroupEdges drops the quotient edges implied by others (From reaches To through other
// groups), the transitive reduction of the group graph. The group graph of a DAG can have
// cycles (pki → kubeconfig → pki); edges on a cycle are kept.
func ReduceGroupEdges(edges []GroupEdge) []GroupEdge {
	adj := map[string][]string{}
	for _, e := range edges {
		adj[e.From] = append(adj[e.From], e.To)
	}
	reach := func(from, to string, skip GroupEdge) bool {
		seen := map[string]bool{from: true}
		stack := []string{}
		for _, n := range adj[from] {
			if n != skip.To {
				stack = append(stack, n)
			}
		}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if n == to {
				return true
			}
			if seen[n] {
				continue
			}
			seen[n] = true
			stack = append(stack, adj[n]...)
		}
		return false
	}
	var out []GroupEdge
	for _, e := range edges {
		// Another path from e.From to e.To that does not begin with e itself, and e.To does not
		// reach back to e.From (a cycle, where reduction is not unique).
		if reach(e.From, e.To, e) && !reach(e.To, e.From, GroupEdge{}) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Doc is a Graphviz document for WriteDOT: graph attributes, default node and edge attributes,
// clusters of nodes, nodes outside clusters, and edges. WriteDOT writes it in the given order,
// so the same Doc always gives the same bytes.
type Doc struct {
	Attrs, NodeAttrs, EdgeAttrs Attrs
	Clusters                    []Cluster
	Nodes                       []DocNode
	Edges                       []DocEdge
}

// Attrs are DOT attributes; WriteDOT writes them sorted by key.
type Attrs map[string]string

// Cluster is a `subgraph cluster_<ID>` with its own attributes (label, colour) and nodes.
type Cluster struct {
	ID    string
	Attrs Attrs
	Nodes []DocNode
}

// DocNode is one node statement.
type DocNode struct {
	ID    string
	Attrs Attrs
}

// DocEdge is one edge statement, From → To.
type DocEdge struct {
	From, To string
	Attrs    Attrs
}

// WriteDOT writes d as a Graphviz digraph. IDs and values are quoted and escaped.
func WriteDOT(w io.Writer, d Doc) error {
	var b strings.Builder
	b.WriteString("digraph {\n")
	for _, k := range sortedKeys(d.Attrs) {
		fmt.Fprintf(&b, "\t%s=%s;\n", k, quote(d.Attrs[k]))
	}
	if len(d.NodeAttrs) > 0 {
		fmt.Fprintf(&b, "\tnode [%s];\n", attrList(d.NodeAttrs))
	}
	if len(d.EdgeAttrs) > 0 {
		fmt.Fprintf(&b, "\tedge [%s];\n", attrList(d.EdgeAttrs))
	}
	for _, c := range d.Clusters {
		fmt.Fprintf(&b, "\tsubgraph %s {\n", quote("cluster_"+c.ID))
		for _, k := range sortedKeys(c.Attrs) {
			fmt.Fprintf(&b, "\t\t%s=%s;\n", k, quote(c.Attrs[k]))
		}
		for _, n := range c.Nodes {
			writeNode(&b, "\t\t", n)
		}
		b.WriteString("\t}\n")
	}
	for _, n := range d.Nodes {
		writeNode(&b, "\t", n)
	}
	for _, e := range d.Edges {
		fmt.Fprintf(&b, "\t%s -> %s", quote(e.From), quote(e.To))
		if len(e.Attrs) > 0 {
			fmt.Fprintf(&b, " [%s]", attrList(e.Attrs))
		}
		b.WriteString(";\n")
	}
	b.WriteString("}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeNode(b *strings.Builder, indent string, n DocNode) {
	fmt.Fprintf(b, "%s%s", indent, quote(n.ID))
	if len(n.Attrs) > 0 {
		fmt.Fprintf(b, " [%s]", attrList(n.Attrs))
	}
	b.WriteString(";\n")
}

func attrList(a Attrs) string {
	parts := make([]string, 0, len(a))
	for _, k := range sortedKeys(a) {
		parts = append(parts, k+"="+quote(a[k]))
	}
	return strings.Join(parts, ", ")
}

// quote makes s a DOT quoted string: backslash and double quote escaped, newlines as \n.
func quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
