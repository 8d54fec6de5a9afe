package graph

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./graph -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func names(g *Graph, ids []int) []string {
	var out []string
	for _, i := range ids {
		out = append(out, g.Name(i))
	}
	return out
}

// small is a diamond plus a separate leaf, declared out of order.
var small = []Node{
	{Name: "pki/cert/b", Deps: []string{"pki/key/b", "pki/ca/root"}},
	{Name: "pki/ca/root", Deps: []string{"pki/key/root"}},
	{Name: "pki/key/root"},
	{Name: "pki/key/b"},
	{Name: "kubeconfig/admin", Deps: []string{"pki/cert/b", "pki/ca/root"}},
	{Name: "aaa/leaf"},
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name  string
		nodes []Node
		want  string
		cycle []string
	}{
		{"unknown dep", []Node{{Name: "a/x", Deps: []string{"a/missing"}}}, `a/x depends on unknown target "a/missing"`, nil},
		{"duplicate", []Node{{Name: "a/x"}, {Name: "a/x"}}, `target "a/x" declared twice`, nil},
		{"self loop", []Node{{Name: "a/x", Deps: []string{"a/x"}}}, "", []string{"a/x", "a/x"}},
		{"three cycle", []Node{{Name: "a/1", Deps: []string{"a/2"}}, {Name: "a/2", Deps: []string{"a/3"}}, {Name: "a/3", Deps: []string{"a/1"}}, {Name: "a/0", Deps: []string{"a/1"}}}, "", []string{"a/1", "a/2", "a/3", "a/1"}},
		{"empty name", []Node{{Name: ""}}, "node 0 has no name", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.nodes)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.cycle != nil {
				var ce *CycleError
				if !errors.As(err, &ce) {
					t.Fatalf("got %v, want a cycle", err)
				}
				if !reflect.DeepEqual(ce.Cycle, tt.cycle) {
					t.Fatalf("cycle %v, want %v", ce.Cycle, tt.cycle)
				}
				return
			}
			if err.Error() != tt.want {
				t.Fatalf("got %q, want %q", err, tt.want)
			}
		})
	}
}

func TestOrderStableAndValid(t *testing.T) {
	g, err := New(small)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"aaa/leaf", "pki/key/b", "pki/key/root", "pki/ca/root", "pki/cert/b", "kubeconfig/admin"}
	if got := names(g, g.Order()); !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	// The same nodes declared in another order give the same order.
	rev := append([]Node(nil), small...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	g2, err := New(rev)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(g2, g2.Order()); !reflect.DeepEqual(got, want) {
		t.Fatalf("reversed declaration gives order %v", got)
	}
}

func TestClosureAndDownstream(t *testing.T) {
	g, _ := New(small)
	id := func(n string) int { i, _ := g.ID(n); return i }
	sel := func(in []bool) []string {
		var out []string
		for _, i := range g.Order() {
			if in[i] {
				out = append(out, g.Name(i))
			}
		}
		return out
	}
	if got, want := sel(g.Closure([]int{id("pki/cert/b")})), []string{"pki/key/b", "pki/key/root", "pki/ca/root", "pki/cert/b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("closure %v, want %v", got, want)
	}
	if got, want := sel(g.Downstream([]int{id("pki/key/root")})), []string{"pki/key/root", "pki/ca/root", "pki/cert/b", "kubeconfig/admin"}; !reflect.DeepEqual(got, want) {
		t.Errorf("downstream %v, want %v", got, want)
	}
}

func TestWriters(t *testing.T) {
	g, _ := New(small)
	attrs := func(i int) map[string]string {
		if strings.HasPrefix(g.Name(i), "pki/key") {
			return map[string]string{"color": "green"}
		}
		return nil
	}
	var dot, tree, js bytes.Buffer
	if err := g.DOT(&dot, nil, attrs, map[string]string{"label": "test"}); err != nil {
		t.Fatal(err)
	}
	// The library walks maps: ten writes must give one output.
	for i := 0; i < 10; i++ {
		var again bytes.Buffer
		g.DOT(&again, nil, attrs, map[string]string{"label": "test"})
		if again.String() != dot.String() {
			t.Fatalf("DOT output not deterministic:\n%s\n---\n%s", dot.String(), again.String())
		}
	}
	golden(t, "small.dot", dot.Bytes())
	if err := g.Tree(&tree, nil, func(i int) string { return "#" + fmt.Sprint(len(g.Deps(i))) }); err != nil {
		t.Fatal(err)
	}
	golden(t, "small.tree", tree.Bytes())
	if err := g.JSON(&js, nil, attrs); err != nil {
		t.Fatal(err)
	}
	golden(t, "small.json", js.Bytes())
}

// Synthetic returns a layered DAG of n nodes: each depends on up to three nodes of the layer
// before, like a build graph (keys -> certs -> kubeconfigs -> configs).
func Synthetic(n int) []Node {
	nodes := make([]Node, n)
	width := 50
	for i := range nodes {
		nodes[i].Name = fmt.Sprintf("syn/t%05d", i)
		if i >= width {
			layerStart := (i/width - 1) * width
			for k := 0; k < 3; k++ {
				d := layerStart + (i*7+k*13)%width
				dep := fmt.Sprintf("syn/t%05d", d)
				if k == 0 || dep != nodes[i].Deps[len(nodes[i].Deps)-1] {
					nodes[i].Deps = append(nodes[i].Deps, dep)
				}
			}
		}
	}
	return nodes
}

func BenchmarkNewAndOrder(b *testing.B) {
	for _, n := range []int{150, 1000, 10000} {
		nodes := Synthetic(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				g, err := New(nodes)
				if err != nil {
					b.Fatal(err)
				}
				_ = g.Closure([]int{n - 1})
			}
		})
	}
}
