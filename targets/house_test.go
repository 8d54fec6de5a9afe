package targets

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// TestNoEngineAliases: each engine thing has one name. No file of package targets or of the CLI
// declares a type alias, constant or variable that only renames an engine identifier
// (`type Step = engine.Step`, `const Keep = engine.Keep`): families and the CLI use engine's
// names directly (issue 23 retired targets/engine.go's facade of 30 such names).
func TestNoEngineAliases(t *testing.T) {
	for _, dir := range []string{".", "../cmd/labbuild"} {
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
