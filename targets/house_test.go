package targets

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoEngineAliases: each engine thing has one name. No file of package targets or of the CLI
// declares a type alias, constant or variable that only renames an engine identifier
// (`type Step = engine.Step`, `const Keep = engine.Keep`): families and the CLI use engine's
// names directly (issue 23 retired targets/engine.go's facade of 30 such names).
func TestNoEngineAliases(t *testing.T) {
	for _, dir := range []string{".", "../cmd/labbuild-full"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, f := range files {
			fset := token.NewFileSet()
			af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok {
					continue
				}
				for _, s := range g.Specs {
					var rhs []ast.Expr
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Assign.IsValid() {
							rhs = []ast.Expr{s.Type}
						}
					case *ast.ValueSpec:
						rhs = s.Values
					}
					for _, e := range rhs {
						if sel, ok := e.(*ast.SelectorExpr); ok {
							if x, ok := sel.X.(*ast.Ident); ok && x.Name == "engine" {
								t.Errorf("%s: renames engine.%s; use engine's name", fset.Position(e.Pos()), sel.Sel.Name)
							}
						}
					}
				}
			}
		}
	}
}

// rooms is the map of the house (docs/how-it-works.md, "The map of the house"): each room of
// the module and the rooms its non-test code may import. A room is a package path relative to
// the module, or a prefix ending in "/" for a folder of them; the most specific entry wins.
// An allowed entry ending in "/" allows every package under it. A package that is in no room
// fails TestRoomImports: a new room goes into this table and the map together.
var rooms = map[string][]string{
	"graph":  {},
	"cache":  {},
	"engine": {"graph", "cache"},
	// The lab config: read by the CLI, the families and the rig; it knows none of them.
	"lab": {},
	// The families: the engine's names, the lab config, the renderers, the adapters.
	"targets": {"engine", "lab", "render/", "targets/"},
	// Adapters to the outside world (a registry, libvirt, the BMC, the Kubernetes API, polling,
	// host daemons and programs): no engine, no families, so each is usable and testable alone.
	"targets/":               {"render/", "targets/"},
	"render/":                {"render/"}, // pure: values in, bytes out
	"internal/front":         {"cache"},   // TestFrontImports: the standard library and cache only
	"internal/gather":        {},
	"internal/nodessh":       {},
	"internal/rig/synthetic": {"engine"}, // the synthetic graph: tests, benchmarks, the bench build
	"internal/tools":         {},
	"cmd/labbuild-full":      {"engine", "graph", "cache", "lab", "targets", "internal/front", "internal/gather", "internal/nodessh", "targets/bmc", "targets/virt"},
	"cmd/labbuild":           {"internal/front"},
	"cmd/labbuild-sample":    {"internal/rig/repo", "internal/rig/payload"},
	// The rig: what fakes the world for the tests and the sample lab. Nothing in the product
	// imports it (TestProductLinksNoRig).
	"internal/rig/repo":               {},
	"internal/rig/payload":            {},
	"internal/rig/testenv":            {"internal/rig/repo", "internal/rig/payload", "render/"},
	"internal/rig/rehearsal":          {"lab", "render/", "targets/", "internal/rig/isofs"},
	"internal/rig/isofs":              {}, // the live ISO stand-in: ISO 9660 images with karg areas
	"internal/rig/standin/mco":        {"render/"},
	"internal/rig/standin/runtimecfg": {"render/"},
}

// TestRoomImports checks every package's module imports (`go list`, non-test code) against
// rooms, so the map in docs/how-it-works.md cannot drift from the code.
func TestRoomImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	const mod = "github.com/labbuild/labbuild/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	room := func(pkg string) (string, bool) {
		best := ""
		for r := range rooms {
			if (pkg == r || strings.HasSuffix(r, "/") && strings.HasPrefix(pkg, r)) && len(r) > len(best) {
				best = r
			}
		}
		return best, best != ""
	}
	allowed := func(r, imp string) bool {
		for _, a := range rooms[r] {
			if imp == a || strings.HasSuffix(a, "/") && strings.HasPrefix(imp, a) {
				return true
			}
		}
		return false
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], mod)
		if !ok {
			continue
		}
		r, ok := room(pkg)
		if !ok {
			t.Errorf("%s is in no room: add it to rooms and to the map in docs/how-it-works.md", pkg)
			continue
		}
		seen++
		for _, imp := range f[1:] {
			if imp, ok := strings.CutPrefix(imp, mod); ok && !allowed(r, imp) {
				t.Errorf("%s imports %s: room %s may import only %v (docs/how-it-works.md, the map of the house)", pkg, imp, r, rooms[r])
			}
		}
	}
	if seen < 20 {
		t.Fatalf("go list named %d of the module's packages: not the whole module", seen)
	}
}

// TestProductLinksNoRig: the product's binaries link nothing of the rig. `go list -deps` of
// cmd/labbuild-full (labbuild-full) and cmd/labbuild (labbuild) holds no package under
// internal/rig/, no stand-in, testenv or synthetic graph, and not `testing`; cmd/labbuild-sample,
// which `make run` runs, may use the rig's sample payload but links no `testing` either; and no
// stand-in is a folder of cmd/ (they live in internal/rig/standin, issue 34). The benchmark
// build (-tags bench) links the synthetic graph and nothing else of the rig, as cmd/go keeps
// its test hooks behind a build tag (testgo.go).
func TestProductLinksNoRig(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	const mod = "github.com/labbuild/labbuild/"
	rig := func(p string) bool {
		m, ok := strings.CutPrefix(p, mod)
		return ok && (strings.HasPrefix(m, "internal/rig/") || strings.Contains(m, "standin") ||
			strings.Contains(m, "testenv") || strings.Contains(m, "synthetic"))
	}
	isTesting := func(p string) bool { return p == "testing" || strings.HasPrefix(p, "testing/") }
	for _, c := range []struct {
		bins      []string
		tags      string // the benchmark build (-tags bench) links the synthetic graph alone
		want      string // a package the list must hold, so an empty list cannot pass
		mayUseRig bool
	}{
		{[]string{"../cmd/labbuild-full", "../cmd/labbuild"}, "", mod + "targets", false},
		{[]string{"../cmd/labbuild-full"}, "bench", mod + "internal/rig/synthetic", false},
		{[]string{"../cmd/labbuild-sample"}, "", mod + "internal/rig/payload", true},
	} {
		out, err := exec.Command("go", append([]string{"list", "-deps", "-tags", c.tags}, c.bins...)...).Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", c.bins, err)
		}
		pkgs := strings.Fields(string(out))
		if !slices.Contains(pkgs, c.want) {
			t.Fatalf("go list -deps %v lacks %s: the list is not the binaries'", c.bins, c.want)
		}
		for _, p := range pkgs {
			if isTesting(p) || rig(p) && !c.mayUseRig && !(c.tags == "bench" && p == c.want) {
				t.Errorf("%v links %s: the product links no rig and no testing (docs/how-it-works.md, the map of the house)", c.bins, p)
			}
		}
	}
	dirs, err := os.ReadDir("../cmd")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if strings.Contains(d.Name(), "standin") {
			t.Errorf("cmd/%s: a stand-in is rig, not a product command; it belongs in internal/rig/standin", d.Name())
		}
	}
}
