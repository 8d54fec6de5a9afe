package lab

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fieldConsts returns the string constants fields.go declares, by value: the field paths.
func fieldConsts(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "fields.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				if bl, ok := vs.Values[i].(*ast.BasicLit); ok && bl.Kind == token.STRING && vs.Type == nil {
					v, _ := strconv.Unquote(bl.Value)
					out[v] = n.Name
				}
			}
		}
	}
	return out
}

// pathLiterals returns the string literals of the Go file at path (or of src, when not nil)
// that write a config field path: equal to a dotted one of dotted, or starting a node's or a
// role's path. The constant declarations of lab/fields.go are where the paths live.
func pathLiterals(path string, src any, dotted map[string]bool) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		return nil, err
	}
	decl := map[*ast.BasicLit]bool{}
	if filepath.Clean(path) == filepath.Join("..", "lab", "fields.go") {
		for _, dcl := range f.Decls {
			if g, ok := dcl.(*ast.GenDecl); ok && g.Tok == token.CONST {
				ast.Inspect(g, func(n ast.Node) bool {
					if bl, ok := n.(*ast.BasicLit); ok {
						decl[bl] = true
					}
					return true
				})
			}
		}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		bl, ok := n.(*ast.BasicLit)
		if !ok || bl.Kind != token.STRING || decl[bl] {
			return true
		}
		if v, err := strconv.Unquote(bl.Value); err == nil && (dotted[v] || strings.HasPrefix(v, nodesPrefix) || strings.HasPrefix(v, sizesPrefix)) {
			out = append(out, fset.Position(bl.Pos()).String()+": "+bl.Value)
		}
		return true
	})
	return out, nil
}

// dottedPaths returns fields.go's dotted field paths.
func dottedPaths(t *testing.T) map[string]bool {
	t.Helper()
	dotted := map[string]bool{}
	for v := range fieldConsts(t) {
		if strings.Contains(v, ".") {
			dotted[v] = true
		}
	}
	if len(dotted) < 40 {
		t.Fatalf("found %d dotted field constants in fields.go, want every lab.yaml field", len(dotted))
	}
	return dotted
}

// TestFieldPathsOnce: outside tests, each config field path is written once in the
// repository's Go code, as its constant in fields.go; families, the engine and the CLI name a
// field by the constant (or NodePath and SizePath for a node's or a role's), so that a field
// cannot be renamed in one place and read under its old name in another. A string literal
// equal to a dotted field path ("network.apiVIP"), or starting a node's or a role's path
// ("nodes.", "sizes."), anywhere else fails. One-word paths ("platform", "nodes") are left
// out: the words are also a Kubernetes object's name, a program's, a JSON key's.
func TestFieldPathsOnce(t *testing.T) {
	dotted := dottedPaths(t)
	root := ".."
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the walk starts at the module root: %v", err)
	}
	var bad []string
	files := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "out") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		files++
		hits, err := pathLiterals(p, nil, dotted)
		bad = append(bad, hits...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files, want the whole module", files)
	}
	slices.Sort(bad)
	for _, b := range bad {
		t.Errorf("%s: a config field path written outside its constant in lab/fields.go", b)
	}
}

// TestFieldPathsOnceCatches: the check finds a literal field path and a node path's prefix,
// and leaves a message that mentions a field alone.
func TestFieldPathsOnceCatches(t *testing.T) {
	src := `package x
var a = "network.apiVIP"
var b = "nodes." + name + ".ip"
var c = "set network.apiVIP: 10.0.0.1"
`
	hits, err := pathLiterals("x.go", src, dottedPaths(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`x.go:2:9: "network.apiVIP"`, `x.go:3:9: "nodes."`}; !slices.Equal(hits, want) {
		t.Errorf("found %q, want %q", hits, want)
	}
}

// jsonWalk is how Lookup answered before it read typed fields: the whole config marshalled
// to generic JSON and walked by the dotted path (in a list, a segment matches an element's
// "name", else an index). TestLookupMatchesJSONWalk holds Lookup to its bytes, so that no
// action key changes.
func jsonWalk(c *Config, p string) ([]byte, bool) {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		panic(err)
	}
	for _, seg := range strings.Split(p, ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[seg]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			found := false
			for _, e := range x {
				if m, ok := e.(map[string]any); ok && m["name"] == seg {
					v, found = e, true
					break
				}
			}
			if !found {
				i, err := strconv.Atoi(seg)
				if err != nil || i < 0 || i >= len(x) {
					return nil, false
				}
				v = x[i]
			}
		default:
			return nil, false
		}
	}
	out, err := json.Marshal(v)
	return out, err == nil
}

// TestLookupMatchesJSONWalk: for labs that set every kind of field (optional ones unset and
// set, the mirror section absent, off and on, nodes with their own sizes and MACs), Lookup
// returns the same bytes, and the same absence, as the JSON walk did, for every field path,
// every node's and role's fields, whole sections and nodes, and paths that do not exist.
func TestLookupMatchesJSONWalk(t *testing.T) {
	labs := map[string]string{
		"default": "",
		"optional fields set": `platform: baremetal
release:
  mirrors:
    quay.io/openshift-release-dev/ocp-release: registry.lab:5000/ocp/release
    quay.io/openshift-release-dev/ocp-v4.0-art-dev: "oci:/srv/<mirror>&more"
network: {loadBalancer: in-cluster, externalBridge: baremetal}
libvirt: {memoryOvercommit: true}
nodes:
  - {name: bootstrap, role: bootstrap, ip: 192.168.126.100}
  - {name: master-0, role: master, ip: 192.168.126.101, mac: "52:54:00:aa:bb:01"}
  - {name: "0", role: master, ip: 192.168.126.102, memoryMiB: 20000}
  - {name: master-2, role: master, ip: 192.168.126.103, vcpus: 6, diskGiB: 120}
  - {name: worker-0, role: worker, ip: 192.168.126.110}
mirror: {enabled: true, port: 5001}
`,
		"mirror off":  "mirror: {enabled: false}\nplatform: \"\"\n",
		"two hosts":   twoHosts,
		"one worker":  "nodes:\n  - {name: bootstrap, role: bootstrap, ip: 192.168.126.100}\n  - {name: master-0, role: master, ip: 192.168.126.101}\n  - {name: worker-0, role: worker, ip: 192.168.126.110}\n",
		"three works": "nodes:\n  - {name: b, role: bootstrap, ip: 192.168.126.100}\n  - {name: m, role: master, ip: 192.168.126.101}\n  - {name: w0, role: worker, ip: 192.168.126.110}\n  - {name: w1, role: worker, ip: 192.168.126.111}\n  - {name: w2, role: worker, ip: 192.168.126.112}\n",
	}
	for name, y := range labs {
		c := DefaultConfig()
		if y != "" {
			var err error
			if c, err = ParseConfig([]byte(y), "lab.yaml"); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		var paths []string
		for i := range fields {
			paths = append(paths, fields[i].path)
		}
		for i, n := range c.Nodes {
			paths = append(paths, Nodes+"."+n.Name, Nodes+"."+strconv.Itoa(i), Nodes+"."+strconv.Itoa(i)+".ip")
			for _, f := range nodeFields {
				paths = append(paths, NodePath(n.Name, f.f))
			}
		}
		for _, role := range []string{RoleBootstrap, RoleMaster, RoleWorker} {
			paths = append(paths, Sizes+"."+role)
			for _, f := range nodeFields {
				paths = append(paths, SizePath(role, f.f))
			}
		}
		for i, h := range c.Hosts {
			paths = append(paths, Hosts+"."+h.Name, Hosts+"."+strconv.Itoa(i), Hosts+"."+strconv.Itoa(i)+".uri")
			for _, f := range []HostField{HostName, HostURI, HostUnderlay} {
				paths = append(paths, HostPath(h.Name, f))
			}
		}
		paths = append(paths, HostPath("nope", HostURI), NodePath("nope", NodeIP), NodePath("master-0", "nope"), SizePath("nope", NodeVCPUs), "cluster.nope", "nope", Nodes+".99.ip", "platform.x")
		for _, p := range paths {
			want, wok := jsonWalk(c, p)
			if strings.HasPrefix(p, "derived.") {
				continue // not lab.yaml fields: TestLookupDerived
			}
			got, ok := c.Lookup(p)
			if ok != wok || string(got) != string(want) {
				t.Errorf("%s: Lookup(%q) = %s, %v; the JSON walk: %s, %v", name, p, got, ok, want, wok)
			}
		}
	}
}

// TestLookupDerived: the derived fields count the masters and the workers up to 2.
func TestLookupDerived(t *testing.T) {
	c := DefaultConfig()
	for p, want := range map[string]string{DerivedMasters: "3", DerivedWorkers: "2"} {
		if got, ok := c.Lookup(p); !ok || string(got) != want {
			t.Errorf("Lookup(%s) = %s, %v; want %s", p, got, ok, want)
		}
	}
	c.Nodes = c.NodesByRole(RoleMaster)[:1]
	if got, _ := c.Lookup(DerivedWorkers); string(got) != "0" {
		t.Errorf("no workers: Lookup(%s) = %s, want 0", DerivedWorkers, got)
	}
}
