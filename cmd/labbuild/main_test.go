package main

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"labbuild": func() { os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

var update = flag.Bool("update", false, "rewrite the golden sections (cmp targets) of testdata/script/*.txtar")

// TestScripts runs the CLI flows in testdata/script: "second run does nothing", "edit one field
// rebuilds exactly these", "-n changes nothing", bad config exits 2.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: false,
		UpdateScripts:       *update,
		Setup: func(e *testscript.Env) error {
			e.Setenv("HOME", e.WorkDir)
			return nil
		},
	})
}
