package main

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/front"
	"github.com/labbuild/labbuild/internal/rig/testenv"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"labbuild": func() { os.Exit(process(os.Args[1:])) }, // as main, signals included
		// The front (cmd/labbuild) over this binary's labbuild command: testdata/script/front.txtar.
		"labbuild-front": func() {
			full, _ := exec.LookPath("labbuild")
			os.Exit(front.Main(front.Env{Args: os.Args, Environ: append(os.Environ(), "LABBUILD_FULL="+full),
				Stdout: os.Stdout, Stderr: os.Stderr, Self: os.Args[0], Now: time.Now, Exec: syscall.Exec}))
		},
	})
}

var update = flag.Bool("update", false, "rewrite the golden sections (cmp targets) of testdata/script/*.txtar")

// TestScripts runs the CLI flows in testdata/script: "second run does nothing", "edit one field
// rebuilds exactly these", "-n changes nothing", bad config exits 2.
//
// Every script finds $SAMPLE_LAB: a lab.yaml on the offline sample release (an OCI layout of
// real 4.18 CRDs and the MCO stand-in, internal/rig/payload), so flows reach Ignition.
func TestScripts(t *testing.T) {
	sr := testenv.StartSampleRelease(t, true)
	lab, err := yaml.Marshal(map[string]any{
		"release": map[string]any{"image": sr.Image, "mirrors": sr.Mirrors},
		"access":  map[string]any{"pullSecretFile": sr.PullSecretFile, "sshKeyFile": sr.SSHKeyFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	sample := filepath.Join(t.TempDir(), "sample-lab.yaml")
	if err := os.WriteFile(sample, lab, 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: false,
		UpdateScripts:       *update,
		Setup: func(e *testscript.Env) error {
			e.Setenv("HOME", e.WorkDir)
			e.Setenv("SAMPLE_LAB", sample)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exit2 CMD ARGS... runs CMD and fails unless it exits with status 2 (bad usage or
			// lab config), which `! exec` cannot tell from 1 (a target failed).
			"exit2": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) == 0 {
					ts.Fatalf("usage: exit2 command [args...]")
				}
				err := ts.Exec(args[0], args[1:]...)
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
					ts.Fatalf("%s: %v; want exit status 2", strings.Join(args, " "), err)
				}
			},
		},
	})
}
