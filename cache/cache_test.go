package cache

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestStateRoundTripAndTornFrames(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	s, _ := LoadState(p)
	a := &TargetState{Key: Sum([]byte("ka")), OutDigest: Sum([]byte("oa")), Epoch: 5, StaleAt: 9, Outputs: []OutputState{{Rel: "x/tls.crt", FP: Fingerprint{Size: 3, Mtime: 7, Ino: 11, Mode: 0o600}}}}
	b := &TargetState{Key: Sum([]byte("kb")), Failed: true}
	s.SetTarget("pki/a", a)
	s.SetTarget("pki/b", b)
	s.SetFile("/p/secret", FileState{FP: Fingerprint{Size: 1, Mtime: 2, Ino: 3, Mode: 0o644}, Digest: Sum([]byte("f"))})
	s.Close()

	tests := []struct {
		name         string
		mangle       func(data []byte) []byte
		wantA, wantB bool
	}{
		{"intact", func(d []byte) []byte { return d }, true, true},
		{"torn last frame", func(d []byte) []byte { return d[:len(d)-20] }, true, true},
		{"damaged first frame: the journal ends before it", func(d []byte) []byte {
			d = append([]byte{}, d...)
			d[stateHeaderSize+10] ^= 0xff
			return d
		}, false, false},
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
			defer s2.Close()
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
	s3.Close()
}

// The snapshot is read in place; the journal shadows it; a damaged snapshot reads as empty
// and is replaced by the next write.
func TestStateSnapshotAndJournal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	s, _ := LoadState(p)
	want := map[string]*TargetState{}
	for i := 0; i < 300; i++ {
		name := fmt.Sprintf("syn/t%05d", i)
		ts := &TargetState{Key: Sum([]byte(name)), OutDigest: Sum([]byte("o" + name)), Epoch: int64(i), Outputs: []OutputState{{Rel: "out.txt", FP: Fingerprint{Size: int64(i), Mtime: 1, Ino: 2, Mode: 0o644}}, {Rel: "b/c", FP: Fingerprint{Size: 9}}}}
		s.SetTarget(name, ts)
		want[name] = ts
		s.SetFile(fmt.Sprintf("/src/%d.txt", i), FileState{FP: Fingerprint{Size: int64(i)}, Digest: Sum([]byte(name))})
	}
	if err := s.Compact(false); err != nil { // a cold build's journal is the whole state
		t.Fatal(err)
	}
	s.Close()
	s, _ = LoadState(p)
	if s.jBytes != 0 || s.tTab == nil || len(s.targets) != 0 {
		t.Fatalf("after compaction: journal %d bytes, table %v, overlay %d", s.jBytes, s.tTab != nil, len(s.targets))
	}
	for name, ts := range want {
		if got := s.Target(name); !reflect.DeepEqual(got, ts) {
			t.Fatalf("%s = %+v, want %+v", name, got, ts)
		}
		r, ok := s.View(name)
		if !ok || r.Key() != ts.Key || r.OutDigest() != ts.OutDigest || r.Epoch() != ts.Epoch || !reflect.DeepEqual(r.OutputNames(), []string{"out.txt", "b/c"}) {
			t.Fatalf("record of %s differs", name)
		}
	}
	if f, ok := s.File("/src/7.txt"); !ok || f.FP.Size != 7 {
		t.Fatalf("file /src/7.txt = %+v %v", f, ok)
	}
	if _, ok := s.File("/src/none"); ok || s.Target("syn/none") != nil {
		t.Fatal("an unrecorded name was found")
	}
	// Journal over the snapshot: a change and a deletion survive a reload.
	s.SetTarget("syn/t00001", &TargetState{Epoch: 42})
	s.DeleteTarget("syn/t00002")
	s.Close()
	s, _ = LoadState(p)
	if got := s.Target("syn/t00001"); got == nil || got.Epoch != 42 {
		t.Fatalf("journalled change lost: %+v", got)
	}
	if s.Target("syn/t00002") != nil {
		t.Fatal("journalled deletion lost")
	}
	if names := s.Names(); len(names) != 299 || names[0] != "syn/t00000" || names[2] != "syn/t00003" {
		t.Fatalf("Names() = %d names starting %v", len(names), names[:3])
	}
	s.Compact(true)
	s.Close()
	s, _ = LoadState(p)
	if got := s.Target("syn/t00001"); got == nil || got.Epoch != 42 || s.Target("syn/t00002") != nil || len(s.Names()) != 299 {
		t.Fatal("compaction lost the journal's records")
	}
	s.Close()

	data, _ := os.ReadFile(p)
	data[len(data)/2] ^= 0xff
	os.WriteFile(p, data, 0o644)
	s, _ = LoadState(p)
	if len(s.Names()) != 0 {
		t.Fatal("a damaged snapshot was read")
	}
	s.SetTarget("a/x", &TargetState{Epoch: 1})
	s.Close()
	s, _ = LoadState(p)
	if names := s.Names(); !reflect.DeepEqual(names, []string{"a/x"}) {
		t.Fatalf("after a damaged snapshot and one write: %v", names)
	}
	s.Close()
}

// A version-2 (text) state is migrated, not lost: its records read back, and the first write
// rewrites the file as version 4.
func TestStateMigratesV2(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	k, o, d := Sum([]byte("k")), Sum([]byte("o")), Sum([]byte("f"))
	v2 := stateHeaderV2 +
		"T\tpki/a\t" + k.String() + "\t" + o.String() + "\t5\t9\t-\t1\n" +
		"O\tx/tls.crt\t3\t7\t11\t600\n" +
		"T\tpki/gone\t" + k.String() + "\t" + o.String() + "\t5\t0\t-\t0\n" +
		"D\tpki/gone\n" +
		"F\t/p/secret\t1\t2\t3\t644\t" + d.String() + "\n"
	os.WriteFile(p, []byte(v2), 0o644)
	s, err := LoadState(p)
	if err != nil {
		t.Fatal(err)
	}
	wantA := &TargetState{Key: k, OutDigest: o, Epoch: 5, StaleAt: 9, Outputs: []OutputState{{Rel: "x/tls.crt", FP: Fingerprint{Size: 3, Mtime: 7, Ino: 11, Mode: 0o600}}}}
	if got := s.Target("pki/a"); !reflect.DeepEqual(got, wantA) {
		t.Fatalf("migrated pki/a = %+v", got)
	}
	if s.Target("pki/gone") != nil {
		t.Fatal("a deleted v2 record came back")
	}
	s.SetTarget("pki/b", &TargetState{Epoch: 3})
	s.Close()
	data, _ := os.ReadFile(p)
	if !bytes.HasPrefix(data, []byte(stateHeader)) {
		t.Fatalf("state after a write starts %q, want version 4", data[:20])
	}
	s, _ = LoadState(p)
	defer s.Close()
	if got := s.Target("pki/a"); !reflect.DeepEqual(got, wantA) || s.Target("pki/b") == nil {
		t.Fatal("records lost in the migration")
	}
	if f, ok := s.File("/p/secret"); !ok || f.Digest != d || f.FP.Mode != 0o644 {
		t.Fatalf("file record lost in the migration: %+v", f)
	}
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
	s2, _ := LoadState(p)
	defer s2.Close()
	if s2.jBytes != 0 {
		t.Fatalf("compacted state has a %d-byte journal", s2.jBytes)
	}
	if got := s2.Target("a/x"); got == nil || got.Epoch != 99 || len(s2.Names()) != 1 {
		t.Fatalf("after compaction a/x = %+v", got)
	}
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
	l1, err := Acquire(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan int, 1)
	got := make(chan *Lock)
	go func() {
		l2, _ := Acquire(context.Background(), p, func(pid int) { waited <- pid })
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

// TestLockHolderAndCancel: a shared holder, which writes nothing into the lock file, is the
// one a waiter names (not the PID a dead writer left there), and a waiter whose context ends
// returns at once with that error.
func TestLockHolderAndCancel(t *testing.T) {
	p := filepath.Join(t.TempDir(), "lock")
	if err := os.WriteFile(p, []byte(fmt.Sprintf("%-19d\n", 999999999)), 0o644); err != nil { // a PID no process has
		t.Fatal(err)
	}
	// The shared holder: another process (flock(1) where present, else this process).
	holder := os.Getpid()
	var sh *Lock
	if fl, err := exec.LookPath("flock"); err == nil {
		cmd := exec.Command(fl, "--shared", p, "sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for i := 0; ; i++ { // until flock(1) holds it
			f, _ := os.Open(p)
			if len(Holders(f)) > 0 || i == 200 {
				f.Close()
				break
			}
			f.Close()
			time.Sleep(10 * time.Millisecond)
		}
		holder = cmd.Process.Pid
	} else if sh, err = AcquireShared(context.Background(), p, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan int, 1)
	done := make(chan error, 1)
	go func() {
		_, err := Acquire(ctx, p, func(pid int) { waited <- pid })
		done <- err
	}()
	if pid := <-waited; pid != holder {
		t.Errorf("waiting reports pid %d, want the shared holder %d", pid, holder)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v, want context.Canceled", err)
	}
	sh.Release()
}

// A key is SHA-256 over length-prefixed parts (8-byte little-endian lengths): the format keys
// in existing stores were made with, whatever the Hasher's implementation.
func TestHasherFormat(t *testing.T) {
	h := NewHasher()
	h.Add("version", []byte("3"))
	h.Add2("dep:", "pki/ca", []byte{1, 2})
	var raw []byte
	for _, p := range []string{"version", "3", "dep:pki/ca", "\x01\x02"} {
		raw = append(raw, byte(len(p)), 0, 0, 0, 0, 0, 0, 0)
		raw = append(raw, p...)
	}
	if h.Sum() != Sum(raw) {
		t.Fatal("Hasher's digest differs from SHA-256 over the length-prefixed parts")
	}
	h.Reset()
	h.Add("version", []byte("3"))
	if h.Sum() == Sum(raw) {
		t.Fatal("Reset kept parts")
	}
}

// TestSealedRecords: an entry or epoch record is a miss when any byte of it changes (a flipped
// bit in a stale time keeps the JSON valid: the digest catches it), when it is cut short or
// zeroed; an unsealed (older) entry is a miss unless pinned, when its objects are hashed.
func TestSealedRecords(t *testing.T) {
	dir := t.TempDir()
	c := Open(filepath.Join(dir, "cache"))
	src := filepath.Join(dir, "f")
	os.WriteFile(src, []byte("hello"), 0o644)
	d, _, _ := c.PutFile(src)
	e := &Entry{Key: Sum([]byte("k")), Target: "a/b", Outputs: []File{{Path: "f", Mode: 0o644, Size: 5, Digest: d}}, StaleAt: 1795508460899849076, Epoch: 7}
	e.OutputDigest = OutputDigest(e.Outputs)
	if err := c.PutAction(e); err != nil {
		t.Fatal(err)
	}
	good, _ := os.ReadFile(c.actionPath(e.Key))
	base := Sum([]byte("base"))
	if err := c.PutEpoch(base, EpochRecord{Epoch: 7, StaleAt: 1795508460899849076}); err != nil {
		t.Fatal(err)
	}
	goodEpoch, _ := os.ReadFile(c.epochPath(base))
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		os.WriteFile(c.actionPath(e.Key), b, 0o600)
		if _, err := c.GetAction(e.Key); err == nil {
			t.Fatalf("entry with byte %d flipped (%q): served", i, b[max(0, i-8):min(len(b), i+8)])
		}
		os.WriteFile(c.actionPath(e.Key), good[:i], 0o600)
		if _, err := c.GetAction(e.Key); err == nil {
			t.Fatalf("entry cut to %d bytes: served", i)
		}
	}
	os.WriteFile(c.actionPath(e.Key), make([]byte, len(good)), 0o600)
	if _, err := c.GetAction(e.Key); !errors.Is(err, ErrMiss) || !c.HasEntry(e.Key) {
		t.Fatalf("zeroed entry: %v (exists %v)", err, c.HasEntry(e.Key))
	}
	for i := range goodEpoch {
		b := bytes.Clone(goodEpoch)
		b[i] ^= 0x01
		os.WriteFile(c.epochPath(base), b, 0o600)
		if r, ok := c.GetEpoch(base); ok {
			t.Fatalf("epoch with byte %d flipped: served %+v", i, r)
		}
	}
	// Unsealed, as an older labbuild wrote it: a miss, unless pinned and its objects verify.
	legacy, _ := json.Marshal(e)
	os.WriteFile(c.actionPath(e.Key), legacy, 0o600)
	if _, err := c.GetAction(e.Key); !errors.Is(err, ErrMiss) {
		t.Errorf("unsealed entry: %v, want a miss", err)
	}
	e.Pinned = true
	legacy, _ = json.Marshal(e)
	os.WriteFile(c.actionPath(e.Key), legacy, 0o600)
	if _, err := c.GetAction(e.Key); err != nil {
		t.Errorf("unsealed pinned entry with good objects: %v", err)
	}
	os.WriteFile(c.objectPath(d), []byte("HELLO"), 0o600)
	if _, err := c.GetAction(e.Key); !errors.Is(err, ErrMiss) {
		t.Errorf("unsealed pinned entry with a damaged object: %v, want a miss", err)
	}
	if err := c.Verify(e); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Errorf("Verify of a damaged object: %v", err)
	}
}

// TestClearUnpinned: clean --cache keeps pinned entries, their objects and damaged entries,
// and removes the rest; dry, it removes nothing and counts the same.
func TestClearUnpinned(t *testing.T) {
	dir := t.TempDir()
	c := Open(dir)
	put := func(name, content string, pinned bool) *Entry {
		f := filepath.Join(t.TempDir(), "f")
		os.WriteFile(f, []byte(content), 0o644)
		d, n, _ := c.PutFile(f)
		e := &Entry{Key: Sum([]byte(name)), Target: name, Pinned: pinned, Outputs: []File{{Path: "f", Size: n, Digest: d}}}
		e.OutputDigest = OutputDigest(e.Outputs)
		c.PutAction(e)
		return e
	}
	key := put("pki/key/root", "secret key", true)
	other := put("a/other", "other bytes", false)
	damaged := put("pki/key/other", "other key", true)
	os.WriteFile(c.actionPath(damaged.Key), []byte("{damaged"), 0o600)
	plan, err := c.ClearUnpinned(true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetAction(other.Key); err != nil {
		t.Fatalf("a dry run removed an entry: %v", err)
	}
	st, err := c.ClearUnpinned(false)
	if err != nil || st != plan {
		t.Fatalf("ClearUnpinned = %+v %v, dry run said %+v", st, err, plan)
	}
	if st.EntriesRemoved != 1 || st.EntriesKept != 2 || st.ObjectsRemoved != 2 {
		t.Errorf("stats %+v: want 1 entry removed, 2 kept (the pinned, the damaged), 2 objects removed", st)
	}
	if _, err := c.GetAction(key.Key); err != nil {
		t.Errorf("pinned entry: %v", err)
	}
	if _, err := c.GetAction(other.Key); err == nil {
		t.Error("unpinned entry kept")
	}
	if !c.HasEntry(damaged.Key) {
		t.Error("damaged entry removed: a sticky secret's loss would go unnoticed")
	}
}
