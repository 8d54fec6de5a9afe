package cache

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestStateRoundTripAndTornLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	s, _ := LoadState(p)
	a := &TargetState{Key: Sum([]byte("ka")), OutDigest: Sum([]byte("oa")), Epoch: 5, StaleAt: 9, Outputs: []OutputState{{Rel: "x/tls.crt", FP: Fingerprint{Size: 3, Mtime: 7, Ino: 11, Mode: 0o600}}}}
	b := &TargetState{Key: Sum([]byte("kb")), Failed: true}
	s.SetTarget("pki/a", a)
	s.SetTarget("pki/b", b)
	s.SetFile("/p/secret", FileState{FP: Fingerprint{Size: 1, Mtime: 2, Ino: 3, Mode: 0o644}, Digest: Sum([]byte("f"))})
	s.Close()

	tests := []struct {
		name   string
		mangle func(data []byte) []byte
		wantA  bool
		wantB  bool
	}{
		{"intact", func(d []byte) []byte { return d }, true, true},
		{"torn last record", func(d []byte) []byte { return d[:len(d)-20] }, true, true},
		{"record cut after its T line", func(d []byte) []byte {
			// Drop pki/a's O line: its record is incomplete and must be ignored.
			i := indexOf(d, "O\t")
			j := i + indexOf(d[i:], "\n") + 1
			return append(append([]byte{}, d[:i]...), d[j:]...)
		}, false, true},
		{"unknown header", func(d []byte) []byte { return append([]byte("labbuild-state 0\n"), d[len(stateHeader):]...) }, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, _ := os.ReadFile(p)
			q := filepath.Join(t.TempDir(), "state")
			os.WriteFile(q, tt.mangle(data), 0o644)
			s2, err := LoadState(q)
			if err != nil {
				t.Fatal(err)
			}
			if got := s2.Target("pki/a"); (got != nil) != tt.wantA || (got != nil && !reflect.DeepEqual(got, a)) {
				t.Errorf("pki/a = %+v, want present=%v", got, tt.wantA)
			}
			if got := s2.Target("pki/b"); (got != nil) != tt.wantB || (got != nil && !got.Failed) {
				t.Errorf("pki/b = %+v, want present=%v", got, tt.wantB)
			}
		})
	}
	s3, _ := LoadState(p)
	if f, ok := s3.File("/p/secret"); !ok || f.FP.Mode != 0o644 {
		t.Errorf("file record %+v %v: the mode must survive (else every null build re-hashes)", f, ok)
	}
}

func indexOf(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

func TestStateCompacts(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	s, _ := LoadState(p)
	for i := 0; i < 100; i++ {
		s.SetTarget("a/x", &TargetState{Epoch: int64(i)})
	}
	s.DeleteTarget("a/gone")
	if err := s.Compact(false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	data, _ := os.ReadFile(p)
	if lines := len(splitLines(data)); lines != 2 {
		t.Fatalf("compacted state has %d lines, want header + 1", lines)
	}
	s2, _ := LoadState(p)
	if got := s2.Target("a/x"); got == nil || got.Epoch != 99 {
		t.Fatalf("after compaction a/x = %+v", got)
	}
}

func splitLines(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == '\n' {
			out = append(out, string(b[start:i]))
			start = i + 1
		}
	}
	return out
}

func TestStoreCorruptionIsAMiss(t *testing.T) {
	dir := t.TempDir()
	c := Open(filepath.Join(dir, "cache"))
	src := filepath.Join(dir, "f")
	os.WriteFile(src, []byte("hello"), 0o644)
	d, n, err := c.PutFile(src)
	if err != nil || n != 5 || d != Sum([]byte("hello")) {
		t.Fatalf("PutFile = %s %d %v", d.Short(), n, err)
	}
	e := &Entry{Key: Sum([]byte("k")), Target: "a/b", Outputs: []File{{Path: "f", Mode: 0o644, Size: 5, Digest: d}}}
	e.OutputDigest = OutputDigest(e.Outputs)
	if err := c.PutAction(e); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetAction(e.Key); err != nil {
		t.Fatalf("GetAction: %v", err)
	}
	dst := filepath.Join(dir, "out", "f")
	tmp := filepath.Join(dir, "tmp")
	os.MkdirAll(tmp, 0o700)
	if err := c.Materialize(d, 5, dst, 0o600, tmp); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dst); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	// Same size, other bytes: the digest check catches it, and the destination is untouched.
	os.WriteFile(c.objectPath(d), []byte("HELLO"), 0o600)
	os.WriteFile(dst, []byte("keep"), 0o644)
	err = c.Materialize(d, 5, dst, 0o644, tmp)
	if !errors.Is(err, ErrMiss) {
		t.Fatalf("corrupt object: err %v, want ErrMiss", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "keep" {
		t.Errorf("a failed materialize changed the destination to %q", b)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("%d temporary files left", len(ents))
	}
	if _, err := c.GetAction(e.Key); !errors.Is(err, ErrMiss) {
		t.Errorf("entry whose object was dropped: %v, want ErrMiss", err)
	}
	os.WriteFile(c.actionPath(e.Key), []byte("{not json"), 0o600)
	if _, err := c.GetAction(e.Key); !errors.Is(err, ErrMiss) {
		t.Errorf("corrupt entry: %v, want ErrMiss", err)
	}
}

func TestTrimKeepsPinnedAndRecent(t *testing.T) {
	dir := t.TempDir()
	c := Open(dir)
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	put := func(name, content string, pinned bool, age time.Duration) *Entry {
		f := filepath.Join(t.TempDir(), "f")
		os.WriteFile(f, []byte(content), 0o644)
		d, n, _ := c.PutFile(f)
		e := &Entry{Key: Sum([]byte(name)), Target: name, Pinned: pinned, Outputs: []File{{Path: "f", Size: n, Digest: d}}}
		e.OutputDigest = OutputDigest(e.Outputs)
		c.PutAction(e)
		old := now.Add(-age)
		os.Chtimes(c.actionPath(e.Key), old, old)
		return e
	}
	key := put("pki/key/root", "secret key", true, 400*24*time.Hour)
	old := put("a/old", "old bytes", false, 40*24*time.Hour)
	recent := put("a/recent", "recent bytes", false, time.Hour)
	st, err := c.Trim(30*24*time.Hour, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if st.EntriesRemoved != 1 || st.ObjectsRemoved != 1 {
		t.Errorf("trim stats %+v, want 1 entry and 1 object removed", st)
	}
	if _, err := c.GetAction(key.Key); err != nil {
		t.Errorf("pinned key trimmed: %v", err)
	}
	if _, err := c.GetAction(recent.Key); err != nil {
		t.Errorf("recent entry trimmed: %v", err)
	}
	if _, err := c.GetAction(old.Key); err == nil {
		t.Error("old entry kept")
	}
	// A size limit below what the recent entry needs removes it too, but never the pinned key.
	c.Trim(0, 1, now)
	if _, err := c.GetAction(key.Key); err != nil {
		t.Errorf("pinned key trimmed by size: %v", err)
	}
	if _, err := c.GetAction(recent.Key); err == nil {
		t.Error("size limit kept the recent entry")
	}
}

func TestLockWaits(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	l1, err := Acquire(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan int, 1)
	got := make(chan *Lock)
	go func() {
		l2, _ := Acquire(p, func(pid int) { waited <- pid })
		got <- l2
	}()
	if pid := <-waited; pid != os.Getpid() {
		t.Errorf("waiting reports pid %d, want %d", pid, os.Getpid())
	}
	select {
	case <-got:
		t.Fatal("second Acquire returned while the lock was held")
	case <-time.After(50 * time.Millisecond):
	}
	l1.Release()
	(<-got).Release()
}
