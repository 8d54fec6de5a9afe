package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/labbuild/labbuild/cache"
)

// hostileDeadline bounds each labbuild process these tests start. It is no timing assertion:
// a process past it hung (blocked on a FIFO, reading /dev/zero), and the test fails saying so.
// Each must in fact end at once (exit 2 within a second, issue 39), far inside it.
const hostileDeadline = 60 * time.Second

// labbuildProc returns this test binary run as labbuild (TestMain's testscript command) in dir.
func labbuildProc(ctx context.Context, t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Args[0] = "labbuild"
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LABBUILD_STAMP=", "HOME="+dir)
	return cmd
}

// TestHostileInputs: a FIFO, a device, a directory or an oversized file named as the lab
// config, the pull secret or the SSH key — with -f or without, with -n or not, by build and by
// the read-only verbs — ends labbuild with exit 2 and one clear line naming the file and what
// it is (or the cap), never a hang, a goroutine dump or the file's content; an error about a
// long value quotes a short prefix of it.
func TestHostileInputs(t *testing.T) {
	big := func(dir, name string, n int, head, tail string) {
		f, err := os.Create(filepath.Join(dir, name))
		must(t, err)
		w := bufio.NewWriter(f)
		w.WriteString(head)
		for i := 0; i < n; i++ {
			w.WriteByte('a')
		}
		w.WriteString(tail)
		must(t, w.Flush())
		must(t, f.Close())
	}
	fifo := func(dir, name string) { must(t, syscall.Mkfifo(filepath.Join(dir, name), 0o644)) }
	relab := func(dir, ps, key string) {
		must(t, os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte(fmt.Sprintf("pki: {keyAlgorithm: ECDSA-P256}\naccess: {pullSecretFile: %s, sshKeyFile: %s}\n", ps, key)), 0o644))
	}
	cases := []struct {
		name  string
		setup func(dir string)
		args  []string
		says  []string
	}{
		{"lab.yaml a FIFO", func(d string) { os.Remove(filepath.Join(d, "lab.yaml")); fifo(d, "lab.yaml") }, []string{"pki"}, []string{"lab.yaml", "named pipe (FIFO)", "fix:"}},
		{"lab.yaml a FIFO, -n", func(d string) { os.Remove(filepath.Join(d, "lab.yaml")); fifo(d, "lab.yaml") }, []string{"-n", "pki"}, []string{"named pipe (FIFO)"}},
		{"lab.yaml a FIFO, config", func(d string) { os.Remove(filepath.Join(d, "lab.yaml")); fifo(d, "lab.yaml") }, []string{"config"}, []string{"named pipe (FIFO)"}},
		{"-f a FIFO", func(d string) { fifo(d, "f.yaml") }, []string{"-f", "f.yaml", "pki"}, []string{"f.yaml", "named pipe (FIFO)"}},
		{"-f a FIFO, -n", func(d string) { fifo(d, "f.yaml") }, []string{"-n", "-f", "f.yaml"}, []string{"named pipe (FIFO)"}},
		{"-f a FIFO, status --json", func(d string) { fifo(d, "f.yaml") }, []string{"-f", "f.yaml", "status", "--json"}, []string{"named pipe (FIFO)"}},
		{"-f /dev/zero", nil, []string{"-f", "/dev/zero", "pki"}, []string{"/dev/zero", "character device"}},
		{"-f /dev/urandom", nil, []string{"-f", "/dev/urandom", "pki"}, []string{"/dev/urandom", "character device"}},
		{"-f a directory", func(d string) { must(t, os.Mkdir(filepath.Join(d, "conf"), 0o755)) }, []string{"-f", "conf", "pki"}, []string{"conf", "a directory"}},
		{"pull secret a FIFO", func(d string) { fifo(d, "ps.fifo"); relab(d, "ps.fifo", "key.pub") }, []string{"manifests/cluster/pull-secret"},
			[]string{"access.pullSecretFile", "ps.fifo", "named pipe (FIFO)"}},
		{"pull secret a FIFO, -n", func(d string) { fifo(d, "ps.fifo"); relab(d, "ps.fifo", "key.pub") }, []string{"-n", "manifests/cluster/pull-secret"},
			[]string{"access.pullSecretFile", "named pipe (FIFO)"}},
		{"pull secret /dev/zero", func(d string) { relab(d, "/dev/zero", "key.pub") }, []string{"manifests/cluster/pull-secret"},
			[]string{"access.pullSecretFile", "character device"}},
		{"SSH key a FIFO", func(d string) { fifo(d, "key.fifo"); relab(d, "ps.json", "key.fifo") }, []string{"manifests/cluster/ssh"},
			[]string{"access.sshKeyFile", "named pipe (FIFO)"}},
		{"lab.yaml 50 MB", func(d string) { big(d, "lab.yaml", 50_000_000, "cluster: {name: ", "}\n") }, []string{"pki"}, []string{"lab.yaml", "over the 1 MiB cap"}},
		{"pull secret 50 MB", func(d string) { big(d, "ps.json", 50_000_000, `{"auths":{"x":{"auth":"`, `"}}}`) }, []string{"manifests/cluster/pull-secret"},
			[]string{"access.pullSecretFile", "over the 1 MiB cap"}},
		{"a 900 KB value", func(d string) { big(d, "lab.yaml", 900_000, "cluster: {name: ", "}\n") }, []string{"pki"}, []string{"cluster.name", "(900000 bytes)"}},
	}
	n := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLab(t, dir)
			if tc.setup != nil {
				tc.setup(dir)
			}
			before := treeSnapshot(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), hostileDeadline)
			defer cancel()
			var stdout, stderr bytes.Buffer
			cmd := labbuildProc(ctx, t, dir, tc.args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("labbuild %s hung (killed after %v)\n%s", strings.Join(tc.args, " "), hostileDeadline, stderr.String())
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitUsage {
				t.Errorf("labbuild %s: %v, want exit 2\n%s", strings.Join(tc.args, " "), err, stderr.String())
			}
			out := stdout.String() + stderr.String()
			for _, w := range tc.says {
				if !strings.Contains(out, w) {
					t.Errorf("labbuild %s: output lacks %q:\n%.2000s", strings.Join(tc.args, " "), w, out)
				}
			}
			if strings.Contains(out, "goroutine ") || len(out) > 4096 || strings.Contains(out, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa") {
				t.Errorf("labbuild %s: %d bytes of output, a goroutine dump or a long value echoed:\n%.2000s", strings.Join(tc.args, " "), len(out), out)
			}
			if after := treeSnapshot(t, dir); after != before {
				t.Errorf("labbuild %s changed the lab directory:\n%s", strings.Join(tc.args, " "), diffLines(before, after))
			}
			if !t.Failed() {
				n++
			}
		})
	}
	t.Logf("hostile inputs: %d/%d ended with exit 2, a clear line, nothing written", n, len(cases))
}

// TestSignalEndsWait: SIGTERM or SIGINT ends labbuild waiting for the output directory's lock
// — a build, a dry run, clean — at once (exit 130, "interrupted"), leaving the directory as it
// was; and the waiting line names the process that holds the lock now (a dry run's shared hold
// writes no PID: the file still names a dead writer), not the PID in the file.
func TestSignalEndsWait(t *testing.T) {
	dir := t.TempDir()
	writeLab(t, dir)
	wd, _ := os.Getwd()
	var out bytes.Buffer
	if code := run(context.Background(), []string{"-C", dir, "-q", "pki"}, &out, &out); code != 0 {
		t.Fatalf("build: %d\n%s", code, out.String())
	}
	os.Chdir(wd)
	lockPath := filepath.Join(dir, "out", ".labbuild", "lock")
	n := 0
	for _, tc := range []struct {
		name   string
		args   []string
		shared bool // the test holds the lock shared (a dry run's hold), else exclusive
		sig    syscall.Signal
	}{
		{"build, SIGTERM", []string{"-q", "pki"}, true, syscall.SIGTERM},
		{"build, SIGINT", []string{"-q", "pki"}, true, syscall.SIGINT},
		{"dry run, SIGTERM", []string{"-n", "pki"}, false, syscall.SIGTERM},
		{"clean, SIGINT", []string{"clean"}, true, syscall.SIGINT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must(t, os.WriteFile(lockPath, []byte(fmt.Sprintf("%-19d\n", 999999999)), 0o644)) // a writer long gone
			var lk *cache.Lock
			var err error
			if tc.shared {
				lk, err = cache.AcquireShared(context.Background(), lockPath, nil)
			} else {
				lk, err = cache.Acquire(context.Background(), lockPath, nil)
			}
			must(t, err)
			defer lk.Release()
			before := treeSnapshot(t, dir)
			ctx, cancel := context.WithTimeout(context.Background(), hostileDeadline)
			defer cancel()
			cmd := labbuildProc(ctx, t, dir, tc.args...)
			stderr, err := cmd.StderrPipe()
			must(t, err)
			must(t, cmd.Start())
			line, err := bufio.NewReader(stderr).ReadString('\n')
			if err != nil {
				t.Fatalf("no waiting line: %v", err)
			}
			if want := fmt.Sprintf("held by process %d", os.Getpid()); !strings.Contains(line, "waiting for the lock") || !strings.Contains(line, want) {
				t.Errorf("waiting line %q: want it to name the holder, %q", line, want)
			}
			must(t, cmd.Process.Signal(tc.sig))
			rest, _ := io.ReadAll(stderr)
			err = cmd.Wait()
			if ctx.Err() != nil {
				t.Fatalf("labbuild %s did not end on %v (killed after %v)", strings.Join(tc.args, " "), tc.sig, hostileDeadline)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != exitSignals || !strings.Contains(string(rest), "interrupted") {
				t.Errorf("labbuild %s on %v: %v, stderr %q; want exit 130, interrupted", strings.Join(tc.args, " "), tc.sig, err, rest)
			}
			if after := treeSnapshot(t, dir); after != before {
				t.Errorf("labbuild %s, interrupted, changed the lab directory:\n%s", strings.Join(tc.args, " "), diffLines(before, after))
			}
			if !t.Failed() {
				n++
			}
		})
	}
	t.Logf("signals: %d/4 waits ended at once, nothing written", n)
}

// TestRacyEditRebuilt: on a file system with whole-second timestamps (a loop-mounted ext4 with
// 128-byte inodes; needs root), the pull secret edited, at the same size, within the second a
// build read it keeps its fingerprint; the full binary must not have trusted that fingerprint
// (issue 39: "no work to do" for ever after, in 6 of 22 trials), so the next build rebuilds.
// Past the racy window the file is recorded, and null builds hash nothing.
func TestRacyEditRebuilt(t *testing.T) {
	root := frontRoot(t, true)
	dir := filepath.Join(root, "lab")
	must(t, os.Mkdir(dir, 0o755))
	writeLab(t, dir)
	wd, _ := os.Getwd()
	build := func() (int, string) {
		var out bytes.Buffer
		code := run(context.Background(), []string{"-C", dir, "manifests/cluster/pull-secret"}, &out, &out)
		os.Chdir(wd)
		return code, out.String()
	}
	if code, out := build(); code != 0 {
		t.Fatalf("cold build: %d\n%s", code, out)
	}
	ps := filepath.Join(dir, "ps.json")
	orig, err := os.ReadFile(ps)
	must(t, err)
	other := otherAuth(t, orig)
	content := [2][]byte{other, orig}
	for try := 0; ; try++ {
		if try == 5 {
			t.Fatal("no edit landed within the second of the build's read in 5 tries: the machine is too slow for this test")
		}
		// Just after a second starts: write, build (which reads it), edit, all in that second.
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 30*time.Millisecond)))
		must(t, os.WriteFile(ps, content[0], 0o600))
		read, err := cache.Stat(ps)
		must(t, err)
		if code, out := build(); code != 0 || strings.Contains(out, "no work to do") {
			t.Fatalf("build after the first edit: %d\n%s", code, out)
		}
		must(t, os.WriteFile(ps, content[1], 0o600))
		edited, err := cache.Stat(ps)
		must(t, err)
		if edited != read {
			content[0], content[1] = content[1], content[0]
			continue // the second turned between the two writes: try again
		}
		break
	}
	if code, out := build(); code != 0 || !strings.Contains(out, "1 built") && !strings.Contains(out, "1 restored") {
		t.Fatalf("the build after an edit within the second of the last read: exit %d; want the target made again (built or restored):\n%s", code, out)
	}
	time.Sleep(cache.RacyWindow + 100*time.Millisecond)
	build() // past the window: the file is recorded
	before := cache.Hashed()
	if code, out := build(); code != 0 || !strings.Contains(out, "no work to do") {
		t.Fatalf("null build: %d\n%s", code, out)
	}
	if n := cache.Hashed().Files - before.Files; n != 0 {
		t.Errorf("a null build past the racy window hashed %d files", n)
	}
}
