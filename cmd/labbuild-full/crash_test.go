package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func init() {
	// The test binary doubles as labbuild for child processes that tests kill.
	if os.Getenv("LABBUILD_TEST_CHILD") == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
}

// synthDir makes a directory with a synthetic graph's source files.
func synthDir(t *testing.T, n int) string {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "src"), 0o755)
	for i := 0; i < n; i++ {
		os.WriteFile(filepath.Join(dir, "src", fmt.Sprintf("%d.txt", i)), []byte(fmt.Sprintf("source %d\n", i)), 0o644)
	}
	return dir
}

func child(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "LABBUILD_TEST_CHILD=1")
	return cmd
}

// tree returns every file under dir/out except the engine's own .labbuild directory, and
// fails on leftovers of interrupted writes anywhere in out/.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	root := filepath.Join(dir, "out")
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if info.IsDir() {
			if rel == filepath.Join(".labbuild", "tmp") || rel == filepath.Join(".labbuild", "cache", "tmp") {
				if ents, _ := os.ReadDir(p); len(ents) > 0 {
					t.Errorf("leftover temporary files in %s after a complete build", rel)
				}
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(rel, ".labbuild") {
			return nil
		}
		b, _ := os.ReadFile(p)
		m[rel] = string(b)
		return nil
	})
	return m
}

// TestCrashSafety SIGKILLs a labbuild child at random points (at least 20 of 40 kills must land
// mid-build); each following build
// must end with outputs byte-identical to a clean build and no partial files anywhere.
func TestCrashSafety(t *testing.T) {
	if testing.Short() {
		t.Skip("kills child processes: not in -short")
	}
	const n = 300
	args := []string{"--synthetic", fmt.Sprint(n), "--synthetic-delay", "2ms", "-j2", "-q"}
	ref := synthDir(t, n)
	if out, err := child(ref, args...).CombinedOutput(); err != nil {
		t.Fatalf("reference build: %v\n%s", err, out)
	}
	want := tree(t, ref)
	if len(want) != n {
		t.Fatalf("reference build has %d outputs, want %d", len(want), n)
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	dir := synthDir(t, n)
	kills := 0
	for round := 0; round < 40; round++ {
		// Alternate: kill a fresh build, a build after clean (restores), and a -B build.
		extra := []string{}
		window := 250 // ms: a full build of n targets takes longer than this
		switch round % 3 {
		case 1:
			child(dir, append(args, "clean")...).Run()
			window = 25 // a restore from the store is quick
		case 2:
			extra = []string{"-B"}
		}
		cmd := child(dir, append(args, extra...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rng.Intn(window)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		// Count only kills that landed while the child still ran.
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			kills++
		}
		var out bytes.Buffer
		c := child(dir, args...)
		c.Stdout, c.Stderr = &out, &out
		if err := c.Run(); err != nil {
			t.Fatalf("round %d: build after kill: %v\n%s", round, err, out.String())
		}
		if got := tree(t, dir); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: outputs differ from a clean build (%d vs %d files)", round, len(got), len(want))
		}
		// And it is really up to date.
		c = child(dir, "--synthetic", fmt.Sprint(n), "-n")
		b, _ := c.CombinedOutput()
		if !strings.Contains(string(b), "nothing to do") {
			t.Fatalf("round %d: not up to date after the repair build:\n%s", round, b)
		}
	}
	if kills < 20 {
		t.Fatalf("only %d kills landed while the child ran", kills)
	}
	t.Logf("%d of 40 kills landed mid-build", kills)
}

// TestConcurrentProcesses runs two labbuild processes on one output directory at once: both
// succeed, and the result equals a clean build.
func TestConcurrentProcesses(t *testing.T) {
	const n = 200
	args := []string{"--synthetic", fmt.Sprint(n), "--synthetic-delay", "1ms", "-q"}
	ref := synthDir(t, n)
	if out, err := child(ref, args...).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	dir := synthDir(t, n)
	var outs [2]bytes.Buffer
	cmds := [2]*exec.Cmd{child(dir, args...), child(dir, args...)}
	for i, c := range cmds {
		c.Stdout, c.Stderr = &outs[i], &outs[i]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i].String())
		}
	}
	all := outs[0].String() + outs[1].String()
	if !strings.Contains(all, "waiting for the lock") {
		t.Logf("the second process did not have to wait (it started after the first finished)")
	}
	if !strings.Contains(all, fmt.Sprintf("%d built", n)) || !strings.Contains(all, fmt.Sprintf("%d up to date", n)) {
		t.Errorf("want one process to build all and the other to find all up to date:\n%s", all)
	}
	if !reflect.DeepEqual(tree(t, dir), tree(t, ref)) {
		t.Error("outputs differ from a clean build")
	}
}
