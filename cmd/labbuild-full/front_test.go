package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/internal/front"
)

// frontWorld runs the front (internal/front) in-process, in a directory of its own; its Exec
// runs this binary's run() in-process as the full binary would run after syscall.Exec.
type frontWorld struct {
	t      *testing.T
	full   string    // LABBUILD_FULL
	now    time.Time // the front's clock; zero: time.Now
	stdout *os.File  // the front's stdout when set (a terminal); else a buffer
	// beforeFull runs just before the full binary (a case that holds the lock releases it).
	beforeFull func()
}

// frontRun is one front invocation: what it printed, whether it ran the full binary, and the
// exit status.
type frontRun struct {
	stdout, stderr string
	deferred       bool
	code           int
}

type execDone struct{ code int }

func (w *frontWorld) front(args ...string) (r frontRun) {
	w.t.Helper()
	var stdout, stderr bytes.Buffer
	environ := append(os.Environ(), "LABBUILD_FULL="+w.full)
	if os.Getenv("LABBUILD_FRONT") == "" {
		environ = append(environ, "LABBUILD_FRONT=explain")
	}
	e := front.Env{
		Args: append([]string{"labbuild"}, args...), Environ: environ,
		Stdout: &stdout, Stderr: &stderr, Self: "/nonexistent/labbuild",
		Now: func() time.Time {
			if !w.now.IsZero() {
				return w.now
			}
			return time.Now()
		},
		Exec: func(path string, argv, env []string) error {
			if path != w.full {
				return syscall.ENOENT
			}
			if w.beforeFull != nil {
				w.beforeFull()
			}
			wd, _ := os.Getwd()
			code := run(context.Background(), argv[1:], &stdout, &stderr)
			os.Chdir(wd) // -C: the process ends here after a real exec
			panic(execDone{code})
		},
	}
	if w.stdout != nil {
		e.Stdout = w.stdout
	}
	func() {
		defer func() {
			if p := recover(); p != nil {
				d, ok := p.(execDone)
				if !ok {
					panic(p)
				}
				r.deferred, r.code = true, d.code
			}
		}()
		r.code = front.Main(e)
	}()
	r.stdout, r.stderr = stdout.String(), stderr.String()
	return r
}

// untilReplay runs null builds until the front replays, at most two: after a build the first is
// the full binary's (it writes the stamp), the second must be the front's replay, however
// recent the files the build wrote or read (racy ones are stamped with their digests,
// cache.RacyWindow). It returns the full binary's run (if any) and the replay.
func (w *frontWorld) untilReplay(args ...string) (full, replay frontRun) {
	w.t.Helper()
	for i := 0; i < 2; i++ {
		settle()
		r := w.front(args...)
		if r.code != 0 || !strings.Contains(r.stdout, "no work to do") {
			w.t.Fatalf("null build: %+v", r)
		}
		if !r.deferred {
			return full, r // the first when the run before was already a null build
		}
		full = r
	}
	w.t.Fatalf("the second null build after a build was not a replay: %+v", full)
	return
}

// settle lets the clock move on a little, so that a mutation's timestamps differ from those of
// the run before it on a file system with fine timestamps (the racy rules are what the 1-second
// case in TestFrontDifferential checks).
func settle() { time.Sleep(20 * time.Millisecond) }

var duration = regexp.MustCompile(`in [0-9]+\.[0-9]{2}s\)`)

// TestFrontReplayOrDefer proves the front's replay safe: after each mutation of a fact a null
// build rests on, the front runs the full binary (whose verdict is then the right one), and
// with no mutation it replays the full binary's output byte for byte (but the duration)
// without running it.
func TestFrontReplayOrDefer(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LABBUILD_FRONT", "explain") // the full binary's side says why it wrote no stamp
	args := []string{"--synthetic", "20", "-q"}
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, w *frontWorld, dir string) // nil: no mutation
		args   []string                                      // the front's command line, when not args
		want   string                                        // the deferred run's stdout (regexp)
		why    string                                        // in the front's explanation
	}{
		{name: "no mutation"},
		{name: "touch input", want: "no work to do", why: "src/3.txt changed",
			mutate: func(t *testing.T, w *frontWorld, dir string) {
				future := time.Now().Add(time.Hour)
				os.Chtimes(filepath.Join(dir, "src/3.txt"), future, future)
			}},
		{name: "edit input", want: `[1-9][0-9]* built`, why: "src/3.txt changed",
			mutate: func(t *testing.T, w *frontWorld, dir string) {
				os.WriteFile(filepath.Join(dir, "src/3.txt"), []byte("edited\n"), 0o644)
			}},
		{name: "delete output", want: `1 restored`, why: "gone",
			mutate: func(t *testing.T, w *frontWorld, dir string) { removeOneOutput(t, dir) }},
		{name: "modify output", want: `1 restored`, why: "changed",
			mutate: func(t *testing.T, w *frontWorld, dir string) {
				p := oneOutput(t, dir)
				os.WriteFile(p, []byte("tampered\n"), 0o644)
			}},
		{name: "LABBUILD_ variable", want: "no work to do", why: "environment changed (LABBUILD_ANYTHING)",
			mutate: func(t *testing.T, w *frontWorld, dir string) { t.Setenv("LABBUILD_ANYTHING", "x") }},
		{name: "NO_COLOR", want: "no work to do", why: "environment changed (NO_COLOR)",
			mutate: func(t *testing.T, w *frontWorld, dir string) { t.Setenv("NO_COLOR", "1") }},
		{name: "full binary replaced", want: "no work to do", why: "full binary changed",
			mutate: func(t *testing.T, w *frontWorld, dir string) {
				w.full = filepath.Join(t.TempDir(), "labbuild-full")
				copyFile(t, self, w.full)
			}},
		{name: "another goal's build", want: "no work to do", why: "syn/t00001/out.txt changed",
			mutate: func(t *testing.T, w *frontWorld, dir string) {
				if code := run(context.Background(), []string{"--synthetic", "20", "-q", "-B", "syn/t00001"}, new(bytes.Buffer), new(bytes.Buffer)); code != 0 {
					t.Fatalf("-B syn/t00001: exit %d", code)
				}
			}},
		{name: "past the daily trim", want: "no work to do", why: "past the stamp's validity",
			mutate: func(t *testing.T, w *frontWorld, dir string) { w.now = time.Now().Add(25 * time.Hour) }},
		{name: "synthetic.yaml written", want: "[1-9][0-9]* built", why: "synthetic.yaml appeared",
			mutate: func(t *testing.T, w *frontWorld, dir string) {
				os.WriteFile(filepath.Join(dir, "synthetic.yaml"), []byte("syn.v3: edited\n"), 0o644)
			}},
		{name: "other arguments", args: []string{"--synthetic", "20", "-q", "-j1"}, want: "no work to do", why: "no stamp"},
		{name: "-n", args: []string{"--synthetic", "20", "-q", "-n"}, want: "nothing to do", why: "no stamp"},
		{name: "-B", args: []string{"--synthetic", "20", "-q", "-B"}, want: "20 built|20 restored", why: "no stamp"},
		{name: "unknown flag", args: []string{"--synthetic", "20", "-q", "--frobnicate"}, want: "", why: "a flag the front does not parse"},
		{name: "terminal", want: "no work to do", why: "terminal",
			mutate: func(t *testing.T, w *frontWorld, dir string) { w.stdout = terminal(t) }},
		{name: "corrupt stamp", want: "no work to do", why: "not a valid stamp",
			mutate: func(t *testing.T, w *frontWorld, dir string) {
				p := stampPath(t, dir)
				b, _ := os.ReadFile(p)
				b[len(b)/2] ^= 1
				os.WriteFile(p, b, 0o600)
			}},
		{name: "truncated stamp", want: "no work to do", why: "not a valid stamp",
			mutate: func(t *testing.T, w *frontWorld, dir string) {
				p := stampPath(t, dir)
				b, _ := os.ReadFile(p)
				os.WriteFile(p, b[:len(b)-9], 0o600)
			}},
		{name: "lock held", want: "no work to do", why: "holds the lock",
			mutate: func(t *testing.T, w *frontWorld, dir string) {
				l, err := cache.Acquire(context.Background(), filepath.Join(dir, "out/.labbuild/lock"), nil)
				if err != nil {
					t.Fatal(err)
				}
				w.beforeFull = func() { l.Release() }
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			os.MkdirAll("src", 0o755)
			for i := 0; i < 20; i++ {
				os.WriteFile(fmt.Sprintf("src/%d.txt", i), []byte(fmt.Sprintf("source %d\n", i)), 0o644)
			}
			w := &frontWorld{t: t, full: self}
			t.Setenv("LABBUILD_STAMP", "1") // what the front's exec sets; run() reads it in-process
			if r := w.front(args...); !r.deferred || r.code != 0 || !strings.Contains(r.stdout, "20 built") {
				t.Fatalf("cold build: %+v", r)
			}
			// The first null build may find input files too new to trust (the engine's racy
			// rule) and record them, writing the state: then the next one leaves the stamp.
			null, r := w.untilReplay(args...)
			if !null.deferred {
				t.Fatalf("the first null build was not the full binary's: %+v", r)
			}
			if got, want := duration.ReplaceAllString(r.stdout, "in Xs)"), duration.ReplaceAllString(null.stdout, "in Xs)"); got != want || r.stderr != withoutFront(null.stderr) {
				t.Fatalf("replay: got %q %q, want the full binary's %q %q", r.stdout, r.stderr, null.stdout, null.stderr)
			}
			if tc.mutate == nil && tc.args == nil {
				return
			}
			if tc.mutate != nil {
				settle()
				tc.mutate(t, w, dir)
			}
			a := args
			if tc.args != nil {
				a = tc.args
			}
			r = w.front(a...)
			if !r.deferred {
				t.Fatalf("after the mutation the front replayed: %+v", r)
			}
			if !strings.Contains(r.stderr, tc.why) {
				t.Errorf("the front's explanation: got %q, want it to say %q", r.stderr, tc.why)
			}
			if !regexp.MustCompile(tc.want).MatchString(r.stdout) || (tc.want == "" && r.stdout != "" && !strings.Contains(r.stdout, "syn/")) {
				t.Errorf("the full binary's verdict: got %q, want %q", r.stdout, tc.want)
			}
		})
	}
}

// TestFrontLabConfig: the lab config's facts — lab.yaml absent (the embedded default), then
// created, edited, and -f and -C command lines — each make the front run the full binary;
// unchanged, the front replays.
func TestFrontLabConfig(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("LABBUILD_STAMP", "1")
	t.Setenv("LABBUILD_FRONT", "explain")
	w := &frontWorld{t: t, full: self}
	step := func(name string, args []string, wantDeferred bool, want string) {
		t.Helper()
		settle()
		r := w.front(args...)
		if r.deferred != wantDeferred || r.code != 0 || !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Fatalf("%s: labbuild %s: want deferred=%v and %q, got %+v", name, strings.Join(args, " "), wantDeferred, want, r)
		}
	}
	goal := []string{"haproxy/config"}
	step("cold, embedded default", goal, true, "1 built")
	w.untilReplay(goal...)
	mustOutput(t, "init")
	step("lab.yaml created (same values)", goal, true, "no work to do")
	w.untilReplay(goal...)
	b, _ := os.ReadFile("lab.yaml")
	os.WriteFile("lab.yaml", append(b, "\n# a comment\n"...), 0o644)
	step("lab.yaml edited (a comment)", goal, true, "no work to do")
	w.untilReplay(goal...)
	os.WriteFile("lab.yaml", bytes.Replace(b, []byte("apiVIP: 192.168.126.10 "), []byte("apiVIP: 192.168.126.9  "), 1), 0o644)
	step("lab.yaml edited (apiVIP)", goal, true, "1 built")
	os.WriteFile("other.yaml", b, 0o644)
	f := []string{"-f", "other.yaml", "haproxy/config"}
	step("-f other.yaml", f, true, "1 (built|restored)")
	w.untilReplay(f...)
	os.Remove("other.yaml")
	settle()
	if r := w.front(f...); !r.deferred || r.code != 2 || !strings.Contains(r.stderr, "other.yaml") {
		t.Fatalf("-f file removed: want the full binary's exit 2 naming other.yaml, got %+v", r)
	}
	os.Mkdir("sub", 0o755)
	os.Rename("lab.yaml", "sub/lab.yaml")
	os.Rename("out", "sub/out")
	c := []string{"-C", "sub", "haproxy/config"}
	step("-C sub", c, true, "1 restored")
	w.untilReplay(c...)
	step("lab.yaml moved away: the default again", goal, true, "1 built")
}

// withoutFront drops the front's own explanation lines.
func withoutFront(s string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if !strings.HasPrefix(l, "labbuild: front:") {
			b.WriteString(l)
		}
	}
	return b.String()
}

func mustOutput(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("labbuild %v: exit %d: %s", args, code, errb.String())
	}
	return out.String()
}

func oneOutput(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "out/syn/t00005/*"))
	if len(m) == 0 {
		t.Fatal("no output of syn/t00005")
	}
	return m[0]
}

func removeOneOutput(t *testing.T, dir string) { os.Remove(oneOutput(t, dir)) }

func stampPath(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "out/.labbuild/stamps/*"))
	if len(m) != 1 {
		t.Fatalf("stamps: %v", m)
	}
	return m[0]
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	os.Remove(to)
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// terminal returns the terminal side of a new pseudo-terminal (progress_test.go's openPTY),
// its other side drained.
func terminal(t *testing.T) *os.File {
	m, s := openPTY(t)
	t.Cleanup(func() { m.Close(); s.Close() })
	go func() {
		b := make([]byte, 4096)
		for {
			if _, err := m.Read(b); err != nil {
				return
			}
		}
	}()
	return s
}

// TestFrontVersion: the front answers version itself, byte for byte as the full binary does.
func TestFrontVersion(t *testing.T) {
	self, _ := os.Executable()
	w := &frontWorld{t: t, full: self}
	for _, args := range [][]string{{"version"}, {"--version"}, {"version", "--json"}, {"--json", "--version"}} {
		r := w.front(args...)
		var full bytes.Buffer
		if code := run(context.Background(), args, &full, new(bytes.Buffer)); code != 0 || r.deferred || r.code != 0 || r.stdout != full.String() {
			t.Errorf("labbuild %v: front %+v, full binary %q (exit %d)", args, r, full.String(), code)
		}
	}
	if r := w.front("version", "-C", "x"); !r.deferred {
		t.Errorf("version with another flag: the front answered %+v; only the full binary knows", r)
	}
	t.Setenv("LABBUILD_FRONT", "off") // always the full binary, version included
	if r := w.front("version"); !r.deferred || r.code != 0 || !strings.HasPrefix(r.stdout, "labbuild ") {
		t.Errorf("LABBUILD_FRONT=off labbuild version: %+v, want the full binary's", r)
	}
}
