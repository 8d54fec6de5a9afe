package graph

import (
	"bytes"
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"testing"

	dgraph "github.com/dominikbraun/graph"
)

// edgeSet lists the kept edges "dep -> dependent", sorted.
func edgeSet(g *Graph, kept [][]int) []string {
	var out []string
	for i, ds := range kept {
		for _, j := range ds {
			out = append(out, g.Name(j)+" -> "+g.Name(i))
		}
	}
	sort.Strings(out)
	return out
}

// libraryReduction is dominikbraun/graph's transitive reduction of the same graph: the reference.
func libraryReduction(t *testing.T, g *Graph) []string {
	t.Helper()
	lg, err := g.Library(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	red, err := dgraph.TransitiveReduction(lg)
	if err != nil {
		t.Fatal(err)
	}
	edges, err := red.Edges()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range edges {
		out = append(out, e.Source+" -> "+e.Target)
	}
	sort.Strings(out)
	return out
}

// TestReduceMatchesLibrary: Reduce keeps exactly the edges dominikbraun/graph's
// TransitiveReduction keeps, on the diamond and on random DAGs.
func TestReduceMatchesLibrary(t *testing.T) {
	g, err := New(small)
	if err != nil {
		t.Fatal(err)
	}
	got := edgeSet(g, g.Reduce(nil))
	want := []string{"pki/ca/root -> pki/cert/b", "pki/cert/b -> kubeconfig/admin", "pki/key/b -> pki/cert/b", "pki/key/root -> pki/ca/root"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Reduce(small) = %q, want %q", got, want)
	}
	if lib := libraryReduction(t, g); !reflect.DeepEqual(got, lib) {
		t.Fatalf("Reduce = %q, library = %q", got, lib)
	}
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 20; trial++ {
		var nodes []Node
		for i := 0; i < 40; i++ {
			n := Node{Name: fmt.Sprintf("n%02d", i)}
			for j := 0; j < i; j++ {
				if rng.Intn(6) == 0 {
					n.Deps = append(n.Deps, fmt.Sprintf("n%02d", j))
				}
			}
			nodes = append(nodes, n)
		}
		g, err := New(nodes)
		if err != nil {
			t.Fatal(err)
		}
		if got, lib := edgeSet(g, g.Reduce(nil)), libraryReduction(t, g); !reflect.DeepEqual(got, lib) {
			t.Fatalf("trial %d: Reduce = %q\nlibrary = %q", trial, got, lib)
		}
	}
}

// TestReduceSelected: edges through an unselected node do not make a selected edge redundant.
func TestReduceSelected(t *testing.T) {
	g, err := New(small)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := g.ID("pki/ca/root")
	admin, _ := g.ID("kubeconfig/admin")
	sel := make([]bool, g.Len())
	sel[root], sel[admin] = true, true
	if got := edgeSet(g, g.Reduce(sel)); !reflect.DeepEqual(got, []string{"pki/ca/root -> kubeconfig/admin"}) {
		t.Fatalf("got %q", got)
	}
}

func TestQuotient(t *testing.T) {
	g, err := New(small)
	if err != nil {
		t.Fatal(err)
	}
	fam := func(i int) string { return g.Name(i)[:3] }
	groups, edges := g.Quotient(nil, fam)
	var names []string
	for _, gr := range groups {
		names = append(names, fmt.Sprintf("%s:%d", gr.Name, len(gr.IDs)))
	}
	if want := []string{"aaa:1", "pki:4", "kub:1"}; !reflect.DeepEqual(names, want) {
		t.Errorf("groups = %q, want %q", names, want)
	}
	if want := []GroupEdge{{"pki", "kub", 2}}; !reflect.DeepEqual(edges, want) {
		t.Errorf("edges = %+v, want %+v", edges, want)
	}
	// a → b → c plus a → c: the reduction drops a → c; a cycle x ⇄ y is kept whole.
	in := []GroupEdge{{"a", "b", 1}, {"a", "c", 5}, {"b", "c", 1}, {"x", "y", 1}, {"y", "x", 1}}
	want := []GroupEdge{{"a", "b", 1}, {"b", "c", 1}, {"x", "y", 1}, {"y", "x", 1}}
	if got := ReduceGroupEdges(in); !reflect.DeepEqual(got, want) {
		t.Errorf("ReduceGroupEdges = %+v, want %+v", got, want)
	}
}

func TestWriteDOT(t *testing.T) {
	var buf bytes.Buffer
	err := WriteDOT(&buf, Doc{
		Attrs:     Attrs{"rankdir": "LR", "label": `a "quoted" label`},
		NodeAttrs: Attrs{"shape": "box"},
		Clusters:  []Cluster{{ID: "pki", Attrs: Attrs{"label": "pki (2)"}, Nodes: []DocNode{{ID: "pki/a"}, {ID: "pki/b", Attrs: Attrs{"fillcolor": "red", "style": "filled"}}}}},
		Nodes:     []DocNode{{ID: "lone"}},
		Edges:     []DocEdge{{From: "pki/a", To: "pki/b"}, {From: "pki/b", To: "lone", Attrs: Attrs{"label": "3"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "doc.dot", buf.Bytes())
}
