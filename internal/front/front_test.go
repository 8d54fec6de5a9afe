package front

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/cache"
)

// TestFrontImports keeps the front small: it may link only the standard library and
// labbuild's cache package, and nothing that makes the binary dynamically linked or slow to
// start (net and os/user pull in cgo resolvers; crypto/tls and the like their init tables).
// cmd/labbuild-full's TestStartupImports guards the full binary.
func TestFrontImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.Standard}} {{.ImportPath}}", "../../cmd/labbuild").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	allowed := map[string]bool{
		"github.com/labbuild/labbuild/cache":          true,
		"github.com/labbuild/labbuild/internal/front": true,
		"github.com/labbuild/labbuild/cmd/labbuild":   true,
	}
	forbidden := []string{"net", "os/user", "runtime/cgo", "crypto/tls", "plugin"}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		standard, pkg, _ := strings.Cut(l, " ")
		if standard != "true" && !allowed[pkg] {
			t.Errorf("the front links %s: only the standard library and labbuild's cache package are allowed", pkg)
		}
		for _, f := range forbidden {
			if pkg == f || strings.HasPrefix(pkg, f+"/") {
				t.Errorf("the front links %s", pkg)
			}
		}
		n++
	}
	if n < 10 {
		t.Fatalf("go list printed %d packages: the check checks nothing", n)
	}
}

func TestPathArgs(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		dir, file, out string
		ok             bool
	}{
		{nil, "", "", "out", true},
		{[]string{"-o", "o2", "pki"}, "", "", "o2", true},
		{[]string{"--out=o3", "-C", "d"}, "d", "", "o3", true},
		{[]string{"-Cd", "-qko", "x"}, "d", "", "x", true},
		{[]string{"-j4", "--out", "y", "--directory=z"}, "z", "", "y", true},
		{[]string{"-f", "-o", "ignition"}, "", "-o", "out", true}, // -o is -f's value
		{[]string{"--file=l/../lab.yaml", "-qf", "x.yaml"}, "", "x.yaml", "out", true},
		{[]string{"--synthetic", "100", "-q"}, "", "", "out", true},
		{[]string{"--", "-o", "x"}, "", "", "out", true},
		{[]string{"--frobnicate"}, "", "", "", false},
		{[]string{"-x"}, "", "", "", false},
		{[]string{"-o"}, "", "", "", false},
	} {
		dir, file, out, ok := pathArgs(tc.args)
		if ok != tc.ok || ok && (dir != tc.dir || file != tc.file || out != tc.out) {
			t.Errorf("pathArgs(%q) = %q %q %q %v, want %q %q %q %v", tc.args, dir, file, out, ok, tc.dir, tc.file, tc.out, tc.ok)
		}
	}
}

// TestDigestEntry: an entry recorded with its digest (a racy file the full binary reads whole,
// cache.RacyWindow) replays only while the file's bytes have that digest, whatever its
// fingerprint says; without a digest the fingerprint alone decides.
func TestDigestEntry(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	out := filepath.Join(dir, "out")
	os.MkdirAll(filepath.Join(out, ".labbuild"), 0o755)
	os.WriteFile(filepath.Join(out, ".labbuild", "lock"), nil, 0o644)
	f := filepath.Join(dir, "lab.yaml")
	os.WriteFile(f, []byte("x"), 0o644)
	full := filepath.Join(dir, "labbuild"+FullSuffix)
	os.WriteFile(full, []byte("#!/bin/false\n"), 0o755)
	fp, _ := cache.Stat(f)
	bin, _ := cache.Stat(full)
	wd, _ := cache.Getwd()
	for _, tc := range []struct {
		name   string
		digest []byte // nil: no digest
		replay bool
	}{
		{"no digest", nil, true},
		{"the file's digest", digestOf("x"), true},
		{"other bytes", digestOf("y"), false},
	} {
		var files []byte
		if tc.digest == nil {
			files = cache.AppendStampFile(nil, cache.StampAbs, []byte(f), fp)
		} else {
			files = cache.AppendStampFile(nil, cache.StampAbs|cache.StampDigest, []byte(f), fp)
			files = append(files, tc.digest...)
		}
		s := &cache.Stamp{Cwd: wd, Argv: []string{"x"}, OutDir: out, ValidUntil: time.Now().Add(time.Hour).UnixNano(),
			BinaryFP: bin, Env: cache.StampEnv(nil), Output: []cache.StampChunk{{Fd: 1, Data: []byte("ok\n")}},
			Files: files, NFiles: 1}
		if err := cache.WriteStamp(filepath.Join(out, ".labbuild"), cache.StampKey(wd, s.Argv), s); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		execed := false
		code := Main(Env{Args: []string{"labbuild", "x"}, Stdout: &stdout, Stderr: &stderr, Self: filepath.Join(dir, "labbuild"), Now: time.Now,
			Environ: []string{"LABBUILD_FRONT=explain"},
			Exec:    func(string, []string, []string) error { execed = true; return os.ErrPermission }})
		if got := !execed && code == 0 && stdout.String() == "ok\n"; got != tc.replay {
			t.Errorf("%s: replayed %v (exit %d, %q, %q), want %v", tc.name, got, code, stdout.String(), stderr.String(), tc.replay)
		}
		if !tc.replay && !strings.Contains(stderr.String(), "its bytes") {
			t.Errorf("%s: the explanation %q does not say its bytes changed", tc.name, stderr.String())
		}
		if tc.digest == nil || !tc.replay {
			continue
		}
		// Past the racy window, a replay settles the stamp: the digest goes, the entry stays.
		later := func() time.Time { return time.Now().Add(cache.RacyWindow + time.Second) }
		if code := Main(Env{Args: []string{"labbuild", "x"}, Stdout: &stdout, Stderr: &stderr, Self: filepath.Join(dir, "labbuild"), Now: later,
			Environ: []string{"LABBUILD_FRONT=explain"},
			Exec:    func(string, []string, []string) error { execed = true; return os.ErrPermission }}); code != 0 || execed {
			t.Fatalf("%s: a later replay: exit %d, %q", tc.name, code, stderr.String())
		}
		b, _ := os.ReadFile(filepath.Join(out, ".labbuild", cache.StampDir, cache.StampKey(wd, s.Argv)))
		settled, err := cache.DecodeStamp(b)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		cache.StampFiles(settled.Files, func(_ byte, p []byte, _ cache.Fingerprint, d []byte) bool {
			if d != nil || string(p) != f {
				t.Errorf("%s: settled stamp has %s with digest %x", tc.name, p, d)
			}
			n++
			return true
		})
		if n != 1 || settled.NFiles != 1 {
			t.Errorf("%s: settled stamp has %d entries", tc.name, n)
		}
	}
}

// TestMissingFull: without labbuild-full beside it, the front says what to do and exits 2.
func TestMissingFull(t *testing.T) {
	var stdout, stderr bytes.Buffer
	dir := t.TempDir()
	code := Main(Env{Args: []string{"labbuild", "-n"}, Stdout: &stdout, Stderr: &stderr, Self: filepath.Join(dir, "labbuild"), Now: time.Now,
		Exec: func(path string, argv, env []string) error { _, err := os.Stat(path); return err }})
	if code != 2 || !strings.Contains(stderr.String(), filepath.Join(dir, "labbuild-full")) || !strings.Contains(stderr.String(), "LABBUILD_FULL") {
		t.Fatalf("exit %d, %q: want 2 and a message naming labbuild-full and LABBUILD_FULL", code, stderr.String())
	}
}

// TestCheckFilesParts: a stamp large enough to be checked on several CPUs finds a change in
// any part, and cache.SplitStampFiles cuts only at entry boundaries.
func TestCheckFilesParts(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	fp, _ := cache.Stat(filepath.Join(dir, "f"))
	const n = 9000
	for _, bad := range []int{-1, 0, n / 2, n - 1} {
		var files []byte
		for i := 0; i < n; i++ {
			e := fp
			if i == bad {
				e.Size++
			}
			files = cache.AppendStampFile(files, cache.StampOut, []byte("f"), e)
		}
		parts := cache.SplitStampFiles(files, (n+2)/3)
		if len(parts) != 3 || !bytes.Equal(bytes.Join(parts, nil), files) {
			t.Fatalf("SplitStampFiles: %d parts", len(parts))
		}
		for _, p := range parts {
			if !cache.StampFiles(p, func(byte, []byte, cache.Fingerprint, []byte) bool { return true }) {
				t.Fatal("a part does not decode on its own")
			}
		}
		why, _ := checkFiles(&cache.Stamp{OutDir: dir, Files: files, NFiles: n})
		if (why == "") != (bad < 0) {
			t.Errorf("entry %d changed: checkFiles says %q", bad, why)
		}
	}
}

func digestOf(s string) []byte { d := cache.Sum([]byte(s)); return d[:] }
