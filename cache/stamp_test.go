package cache

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestStampRoundTrip(t *testing.T) {
	files := AppendStampFile(nil, StampOut, []byte("pki/ca/root/ca.crt"), Fingerprint{Size: 1200, Mtime: 1795508460899849076, Ino: 42, Mode: 0o644})
	files = AppendStampFile(files, StampAbs|StampAbsent, []byte("/lab/lab.yaml"), Fingerprint{})
	s := &Stamp{Cwd: "/lab", Argv: []string{"-q", "pki"}, OutDir: "/lab/out", BaseDir: "/lab", Start: 7, ValidUntil: 9,
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
	StampFiles(got.Files, func(base byte, path []byte, fp Fingerprint) bool { paths = append(paths, string(path)); return true })
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

// TestRecorderRacy: a consulted file changed within RacyWindow of the run's start may not be
// stamped; one older may.
func TestRecorderRacy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, nil, 0o644)
	fp, _ := Stat(p)
	for _, tc := range []struct {
		start int64
		ok    bool
	}{{fp.Mtime + RacyWindow + 1, true}, {fp.Mtime + RacyWindow, false}, {fp.Mtime, false}} {
		var r Recorder
		r.Stat(p)
		s := &Stamp{Start: tc.start}
		if why := r.Fill(s); (why == "") != tc.ok {
			t.Errorf("start = mtime + %d ns: Fill says %q", tc.start-fp.Mtime, why)
		}
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
