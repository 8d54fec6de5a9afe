package cache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestStampRoundTrip(t *testing.T) {
	files := AppendStampFile(nil, StampOut, []byte("pki/ca/root/ca.crt"), Fingerprint{Size: 1200, Mtime: 1795508460899849076, Ino: 42, Mode: 0o644})
	files = AppendStampFile(files, StampAbs|StampAbsent, []byte("/lab/lab.yaml"), Fingerprint{})
	s := &Stamp{Cwd: "/lab", Argv: []string{"-q", "pki"}, OutDir: "/lab/out", Config: "/lab/lab.yaml", BaseDir: "/lab", Start: 7, ValidUntil: 9,
		Binary: "/bin/labbuild-full", BinaryFP: Fingerprint{Size: 1, Mtime: -2, Ino: 3, Mode: 0o755}, TTY: StampStderrTTY,
		Env:    StampEnv([]string{"LABBUILD_X=1", "LABBUILD_FULL=/x", "PATH=/bin", "NO_COLOR="}),
		Output: []StampChunk{{1, []byte("labbuild: no work to do (… in ")}, {0, []byte{}}, {1, []byte("s)\n")}}, Files: files, NFiles: 2}
	if len(s.Env) != 2 {
		t.Fatalf("StampEnv: %v, want LABBUILD_X and NO_COLOR only", s.Env)
	}
	b := s.Encode()
	got, err := DecodeStamp(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
	}
	var paths []string
	StampFiles(got.Files, func(base byte, path []byte, fp Fingerprint, _ []byte) bool {
		paths = append(paths, string(path))
		return true
	})
	if !reflect.DeepEqual(paths, []string{"pki/ca/root/ca.crt", "/lab/lab.yaml"}) {
		t.Fatalf("entries: %q", paths)
	}
	for i := range b { // every damaged byte and every truncation is a miss, never a crash
		c := bytes.Clone(b)
		c[i] ^= 0x10
		if _, err := DecodeStamp(c); err == nil {
			t.Fatalf("byte %d damaged: decoded", i)
		}
		if _, err := DecodeStamp(b[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", i)
		}
	}
}

// TestRecorderRacy: a file read whole that changed within RacyWindow of the run's start is
// recorded with the digest of its bytes, one older without; and Fill refuses a stamp when such
// a file changed after it was recorded.
func TestRecorderRacy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("v1"), 0o644)
	fp, _ := Stat(p)
	for _, tc := range []struct {
		start  int64
		digest bool
	}{{fp.Changed() + RacyWindow + 1, false}, {fp.Changed() + RacyWindow, true}, {fp.Changed(), true}} {
		var r StampCollector
		r.SetStart(tc.start)
		r.Stat(p)
		s := &Stamp{Start: tc.start}
		if why := r.Fill(s); why != "" {
			t.Fatalf("Fill: %s", why)
		}
		var got []byte
		StampFiles(s.Files, func(_ byte, _ []byte, _ Fingerprint, d []byte) bool { got = d; return true })
		if want := Sum([]byte("v1")); (got != nil) != tc.digest || got != nil && !bytes.Equal(got, want[:]) {
			t.Errorf("start = change + %d ns: digest %x, want one: %v", tc.start-fp.Changed(), got, tc.digest)
		}
	}
	var r StampCollector
	r.SetStart(fp.Changed())
	r.Stat(p)
	os.WriteFile(p, []byte("v2"), 0o644)
	os.Chtimes(p, time.Unix(0, fp.Mtime), time.Unix(0, fp.Mtime))
	if why := r.Fill(&Stamp{}); !strings.Contains(why, "changed during the run") {
		t.Errorf("changed after it was recorded: Fill says %q", why)
	}
}

// TestAbs: Abs takes ".." as the kernel does, after the symlink before it.
func TestAbs(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	os.MkdirAll(filepath.Join(dir, "a/b"), 0o755)
	os.Symlink(filepath.Join(dir, "a/b"), filepath.Join(dir, "link"))
	t.Chdir(filepath.Join(dir, "link"))
	t.Setenv("PWD", filepath.Join(dir, "link")) // what a shell's cd link leaves
	for _, tc := range []struct{ in, want string }{
		{"../lab.yaml", filepath.Join(dir, "a/lab.yaml")},
		{"lab.yaml", filepath.Join(dir, "a/b/lab.yaml")},
		{".", filepath.Join(dir, "a/b")},
		{dir + "/link/../x", filepath.Join(dir, "a/x")},
		{dir + "/a/./b//c", filepath.Join(dir, "a/b/c")},
	} {
		if got, err := Abs(tc.in); err != nil || got != tc.want {
			t.Errorf("Abs(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestPruneStamps: past StampKeep the oldest stamps go, and so does any older than StampMaxAge
// and a temporary file a killed write left; a young temporary file stays.
func TestPruneStamps(t *testing.T) {
	meta := t.TempDir()
	dir := filepath.Join(meta, StampDir)
	os.MkdirAll(dir, 0o755)
	now := time.Now()
	for i := 0; i < StampKeep+5; i++ {
		p := filepath.Join(dir, fmt.Sprintf("k%03d", i))
		os.WriteFile(p, nil, 0o600)
		at := now.Add(-time.Duration(i) * time.Minute)
		os.Chtimes(p, at, at)
	}
	old := filepath.Join(dir, "old")
	os.WriteFile(old, nil, 0o600)
	os.Chtimes(old, now.Add(-StampMaxAge-time.Hour), now.Add(-StampMaxAge-time.Hour))
	os.WriteFile(filepath.Join(dir, ".tmp-killed"), nil, 0o600)
	os.Chtimes(filepath.Join(dir, ".tmp-killed"), now.Add(-time.Hour), now.Add(-time.Hour))
	os.WriteFile(filepath.Join(dir, ".tmp-young"), nil, 0o600)
	if err := WriteStamp(meta, "new", &Stamp{}); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{".tmp-young"}
	for i := 0; i < StampKeep-1; i++ {
		want = append(want, fmt.Sprintf("k%03d", i))
	}
	want = append(want, "new")
	if !reflect.DeepEqual(names, want) {
		t.Errorf("after pruning: %q\nwant %q", names, want)
	}
}

// TestStateDamagedJournalRewrites: after a damaged journal frame, a new record survives a
// reload (it used to be appended after the damage, where the journal is never read).
func TestStateDamagedJournalRewrites(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	s, _ := LoadState(p)
	s.SetTarget("a", &TargetState{Key: Sum([]byte("a"))})
	s.Close()
	s, _ = LoadState(p)
	s.SetTarget("b", &TargetState{Key: Sum([]byte("b"))})
	s.Close()
	b, _ := os.ReadFile(p)
	b[len(b)-3] ^= 0xff // the last frame's checksum
	os.WriteFile(p, b, 0o644)
	s, _ = LoadState(p)
	s.SetTarget("c", &TargetState{Key: Sum([]byte("c"))})
	s.Close()
	s, _ = LoadState(p)
	defer s.Close()
	if s.Target("a") == nil || s.Target("c") == nil {
		t.Errorf("after a damaged frame and a write: a %v, c %v; want both", s.Target("a") != nil, s.Target("c") != nil)
	}
}

// TestWriteFileAtomic: a write creates or replaces the file with the content and mode asked
// for and leaves no temporary file; a write into a missing directory fails and creates
// nothing.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.conf")
	for _, tc := range []struct {
		data string
		mode os.FileMode
	}{{"first\n", 0o644}, {"second, longer\n", 0o600}} {
		if err := WriteFileAtomic(p, []byte(tc.data), tc.mode); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != tc.data {
			t.Errorf("content %q, %v; want %q", b, err, tc.data)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != tc.mode {
			t.Errorf("mode %v, %v; want %v", st.Mode().Perm(), err, tc.mode)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("directory holds %d entries, want the file alone", len(ents))
		}
	}
	missing := filepath.Join(dir, "no", "f.conf")
	if err := WriteFileAtomic(missing, []byte("x"), 0o644); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	if _, err := os.Stat(filepath.Dir(missing)); !os.IsNotExist(err) {
		t.Errorf("the missing directory exists after the failed write: %v", err)
	}
}

// TestRecorderOnceEach: a fingerprint recorded by several targets (the pull secret every
// certificate's key reads) is one entry of the stamp, so the front stats it once; the same
// path with another fingerprint, or another base, stays an entry of its own.
func TestRecorderOnceEach(t *testing.T) {
	fp := Fingerprint{Size: 3, Mtime: 5, Ino: 7, Mode: 0o600}
	other := fp
	other.Mtime++
	var r StampCollector
	for i := 0; i < 3; i++ {
		r.Add(AppendStampFile(nil, StampBase, []byte("pull-secret.json"), fp), 1)
	}
	r.Add(AppendStampFile(AppendStampFile(nil, StampOut, []byte("pki/ca/ca.crt"), fp), StampBase, []byte("pull-secret.json"), other), 2)
	r.Add(AppendStampFile(nil, StampAbs, []byte("pull-secret.json"), fp), 1)
	var s Stamp
	if why := r.Fill(&s); why != "" {
		t.Fatal(why)
	}
	var got []string
	StampFiles(s.Files, func(base byte, path []byte, fp Fingerprint, _ []byte) bool {
		got = append(got, fmt.Sprintf("%d %s %d", base, path, fp.Mtime))
		return true
	})
	want := []string{"2 pull-secret.json 5", "1 pki/ca/ca.crt 5", "2 pull-secret.json 6", "0 pull-secret.json 5"}
	if !reflect.DeepEqual(got, want) || s.NFiles != len(want) {
		t.Errorf("entries %q (NFiles %d), want %q", got, s.NFiles, want)
	}
}
