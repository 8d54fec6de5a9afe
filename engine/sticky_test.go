package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// stickyLab is a sticky key, a certificate made from it and a file made from that.
type stickyLab struct {
	t    *testing.T
	out  string
	ts   []*engine.Target
	vals synthetic.MapValues
}

func newStickyLab(t *testing.T) *stickyLab {
	l := &stickyLab{t: t, out: t.TempDir(), vals: synthetic.MapValues{"pki.alg": json.RawMessage(`"RSA-2048"`)}}
	mk := func(name string, deps []string, sticky bool) *engine.Target {
		return &engine.Target{Name: name, Deps: deps, Reads: []string{"pki.alg"}, Sticky: sticky, Run: func(ctx context.Context, s *engine.Step) error {
			body := name
			if sticky {
				body = fmt.Sprintf("%s random=%d", name, time.Now().UnixNano()) // a fresh key each run
			} else {
				for _, d := range deps {
					b, err := s.DepFile(d, "data")
					if err != nil {
						return err
					}
					body += " from " + string(b)
				}
			}
			return s.WriteFile("data", []byte(body), 0o600)
		}}
	}
	l.ts = []*engine.Target{mk("pki/key/ca", nil, true), mk("pki/ca/root", []string{"pki/key/ca"}, false), mk("kubeconfig/x", []string{"pki/ca/root"}, false)}
	return l
}

func (l *stickyLab) build(mod func(*engine.Options)) (*engine.Result, error, string) {
	var errb bytes.Buffer
	o := engine.Options{Values: l.vals, OutDir: l.out, Targets: l.ts, Jobs: 2, Stderr: &errb, KeepGoing: true}
	if mod != nil {
		mod(&o)
	}
	r, err := engine.Build(context.Background(), o)
	return r, err, errb.String()
}

func (l *stickyLab) key() []byte {
	b, _ := os.ReadFile(filepath.Join(l.out, "pki/key/ca/data"))
	return b
}

// entryAndObject returns the paths of the sticky key's store entry and its object.
func (l *stickyLab) entryAndObject() (string, string) {
	st, err := cache.LoadState(filepath.Join(l.out, ".labbuild/state"))
	if err != nil {
		l.t.Fatal(err)
	}
	defer st.Close()
	ts := st.Target("pki/key/ca")
	if ts == nil {
		l.t.Fatal("no record of pki/key/ca")
	}
	h := ts.Key.String()
	entry := filepath.Join(l.out, ".labbuild/cache/actions", h[:2], h)
	d := cache.Sum(l.key()).String()
	return entry, filepath.Join(l.out, ".labbuild/cache/objects", d[:2], d)
}

// TestStickyNeverMadeAnewUnasked: a sticky key whose store entry or object is damaged (a byte
// flipped, cut short, zeroed, removed), with its outputs gone (labbuild clean, or the file
// removed), is an error naming it, what was found and the two ways out — in the plan (-n,
// blocked) and in the build (failed, its dependents skipped) — and the key on disk is never a
// new one; --regenerate makes a new one. With the store intact it is restored.
func TestStickyNeverMadeAnewUnasked(t *testing.T) {
	damage := map[string]func(p string) error{
		"flipped": func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)/2] ^= 0x04
			return os.WriteFile(p, b, 0o600)
		},
		"truncated": func(p string) error { return os.Truncate(p, 3) },
		"zeroed": func(p string) error {
			st, err := os.Stat(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, make([]byte, st.Size()), 0o600)
		},
		"removed": os.Remove,
	}
	for _, what := range []string{"entry", "object"} {
		for _, how := range []string{"flipped", "truncated", "zeroed", "removed"} {
			for _, lost := range []string{"clean", "output removed"} {
				if what == "entry" && how == "removed" && lost == "clean" {
					continue // nothing left says it was made: a first build (below)
				}
				name := fmt.Sprintf("%s %s, %s", what, how, lost)
				t.Run(name, func(t *testing.T) {
					l := newStickyLab(t)
					if _, err, _ := l.build(nil); err != nil {
						t.Fatal(err)
					}
					key := l.key()
					entry, object := l.entryAndObject()
					p := map[string]string{"entry": entry, "object": object}[what]
					if err := damage[how](p); err != nil {
						t.Fatal(err)
					}
					if lost == "clean" {
						if _, err := engine.Clean(context.Background(), engine.Options{Values: l.vals, OutDir: l.out, Targets: l.ts}, engine.CleanOptions{}); err != nil {
							t.Fatal(err)
						}
					} else {
						os.Remove(filepath.Join(l.out, "pki/key/ca/data"))
					}
					// The plan: blocked, the error on stderr, nothing written.
					r, _, stderr := l.build(func(o *engine.Options) { o.DryRun = true })
					if st := r.State("pki/key/ca"); st != engine.StateBlocked {
						t.Errorf("-n: pki/key/ca is %v, want blocked", st)
					}
					checkStickyMessage(t, "-n", stderr)
					// The build: failed, the dependents skipped, no key made.
					r, err, stderr := l.build(nil)
					var be *engine.BuildError
					if !errors.As(err, &be) || len(r.Built) != 0 || len(r.Skipped) != 2 {
						t.Errorf("build: %v, built %v, skipped %v; want pki/key/ca failed and 2 skipped", err, r.Built, r.Skipped)
					}
					checkStickyMessage(t, "build", stderr)
					if k := l.key(); k != nil && !bytes.Equal(k, key) {
						t.Fatalf("a new key was made: %q, was %q", k, key)
					}
					// The way out: --regenerate, which makes a new one and what is made from it.
					r, err, _ = l.build(func(o *engine.Options) { o.Regenerate = []string{"pki/key/ca"} })
					if err != nil || len(r.Built) != 3 {
						t.Errorf("--regenerate: %v, built %v", err, r.Built)
					}
					if bytes.Equal(l.key(), key) {
						t.Error("--regenerate kept the old key")
					}
					if r, err, _ := l.build(nil); err != nil || len(r.UpToDate) != 3 {
						t.Errorf("after --regenerate: %v, %+v", err, r)
					}
				})
			}
		}
	}
	t.Run("store intact: restored", func(t *testing.T) {
		l := newStickyLab(t)
		l.build(nil)
		key := l.key()
		engine.Clean(context.Background(), engine.Options{Values: l.vals, OutDir: l.out, Targets: l.ts}, engine.CleanOptions{})
		if r, err, _ := l.build(nil); err != nil || len(r.Restored) != 3 || !bytes.Equal(l.key(), key) {
			t.Errorf("restore after clean: %v, %+v", err, r)
		}
	})
	t.Run("nothing left: made", func(t *testing.T) {
		l := newStickyLab(t)
		l.build(nil)
		entry, _ := l.entryAndObject()
		os.Remove(entry)
		engine.Clean(context.Background(), engine.Options{Values: l.vals, OutDir: l.out, Targets: l.ts}, engine.CleanOptions{})
		if r, err, _ := l.build(nil); err != nil || len(r.Built) != 3 {
			t.Errorf("with no trace of the key: %v, %+v; want it made as in a first build", err, r)
		}
	})
}

func checkStickyMessage(t *testing.T, what, stderr string) {
	t.Helper()
	for _, want := range []string{"pki/key/ca is a sticky secret", "cannot be restored", "restore the content store", "labbuild --regenerate pki/key/ca",
		"replaces the 2 targets made from it: pki/ca/root, kubeconfig/x"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("%s: stderr lacks %q:\n%s", what, want, stderr)
		}
	}
}

// TestCleanCacheKeepsSticky: clean --cache keeps the sticky key (the next build restores it and
// makes the rest come out the same); with Sticky (--regenerate all) the key goes too and the
// next build makes a new one; a dry run removes nothing and says the same.
func TestCleanCacheKeepsSticky(t *testing.T) {
	l := newStickyLab(t)
	l.build(nil)
	key := l.key()
	o := engine.Options{Values: l.vals, OutDir: l.out, Targets: l.ts}
	before := snapshotAll(t, l.out)
	dry := o
	dry.DryRun = true
	plan, err := engine.Clean(context.Background(), dry, engine.CleanOptions{Cache: true})
	if err != nil {
		t.Fatal(err)
	}
	if after := snapshotAll(t, l.out); after != before {
		t.Fatalf("clean --cache -n changed the output directory:\n%s\n---\n%s", before, after)
	}
	rep, err := engine.Clean(context.Background(), o, engine.CleanOptions{Cache: true})
	if err != nil || fmt.Sprint(rep) != fmt.Sprint(plan) {
		t.Fatalf("clean --cache: %+v %v; -n said %+v", rep, err, plan)
	}
	if len(rep.Cleaned) != 3 || rep.Store.EntriesRemoved != 2 || rep.Store.EntriesKept != 1 || fmt.Sprint(rep.Sticky) != "[pki/key/ca]" || rep.StickyUsers != 2 {
		t.Errorf("report %+v", rep)
	}
	if r, err, _ := l.build(nil); err != nil || len(r.Restored) != 1 || len(r.Built) != 2 || !bytes.Equal(l.key(), key) {
		t.Errorf("after clean --cache: %v, %+v; want the key restored, the rest built", err, r)
	}
	rep, err = engine.Clean(context.Background(), o, engine.CleanOptions{Cache: true, Sticky: true})
	if err != nil || rep.Store.EntriesRemoved != 3 {
		t.Fatalf("clean --cache --regenerate all: %+v %v", rep, err)
	}
	if r, err, _ := l.build(nil); err != nil || len(r.Built) != 3 || bytes.Equal(l.key(), key) {
		t.Errorf("after clean --cache --regenerate all: %v, %+v; want a new key", err, r)
	}
}

// snapshotAll lists every path under dir with its mode, size, mtime and content digest.
func snapshotAll(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		d := ""
		if fi.Mode().IsRegular() {
			c, _ := os.ReadFile(p)
			d = cache.Sum(c).Short()
		}
		fmt.Fprintf(&b, "%s %v %d %d %s\n", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), d)
		return nil
	})
	return b.String()
}

// TestRacyInputHashedAgain: an input file changed within the racy window of a build's start
// (its wall clock, injected) is not recorded, so the next build hashes it again — an edit made
// within the same timestamp tick is then seen — while one changed before the window is
// recorded and the next build hashes nothing.
func TestRacyInputHashedAgain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  time.Duration // the build's wall clock, after the file's last change
		hashes bool          // the next build hashes the file again
	}{
		{"within the same second", 300 * time.Millisecond, true},
		{"just inside the window", engine.RacyWindow - 100*time.Millisecond, true},
		{"past the window", engine.RacyWindow + 100*time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src")
			os.MkdirAll(src, 0o755)
			for i := 0; i < 3; i++ {
				os.WriteFile(filepath.Join(src, fmt.Sprintf("%d.txt", i)), []byte(fmt.Sprintf("source %d\n", i)), 0o644)
			}
			fp, err := cache.Stat(filepath.Join(src, "2.txt"))
			if err != nil {
				t.Fatal(err)
			}
			wall := func() time.Time { return time.Unix(0, fp.Changed()).Add(tc.after) }
			o := withSynthetic(engine.Options{OutDir: filepath.Join(dir, "out"), Jobs: 2, Wall: wall}, 3, src)
			if _, err := engine.Build(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			before := cache.Hashed()
			if r, err := engine.Build(context.Background(), withSynthetic(o, 3, src)); err != nil || len(r.UpToDate) != 3 {
				t.Fatalf("null build: %v %+v", err, r)
			}
			if got := cache.Hashed().Files - before.Files; (got > 0) != tc.hashes {
				t.Errorf("the null build hashed %d files; want hashing: %v", got, tc.hashes)
			}
		})
	}
}
