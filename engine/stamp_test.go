package engine_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// TestRecordNullBuild: with Options.Record, a null build records exactly the fingerprints its
// fast path compared (every output of the closure, and the state file), and a validity limit
// at the earliest renewal time in the closure; a build that ran anything, or whose closure has
// an External target, may not be stamped.
func TestRecordNullBuild(t *testing.T) {
	vals := synthetic.MapValues{"pki.alg": json.RawMessage(`"RSA-2048"`)}
	mk := func(name string, deps []string, stale time.Duration) *engine.Target {
		return &engine.Target{Name: name, Deps: deps, Reads: []string{"pki.alg"}, Run: func(ctx context.Context, s *engine.Step) error {
			if stale > 0 {
				s.SetStaleAt(s.Epoch().Add(stale))
			}
			return s.WriteFile("data", []byte(name), 0o644)
		}}
	}
	ts := []*engine.Target{
		mk("pki/ca/root", nil, 3650*24*time.Hour),
		mk("pki/cert/short", []string{"pki/ca/root"}, 24*time.Hour),
		mk("kubeconfig/x", []string{"pki/cert/short"}, 0),
		{Name: "cluster/x", Deps: []string{"kubeconfig/x"}, External: true, Run: func(ctx context.Context, s *engine.Step) error { return s.WriteFile("rec", nil, 0o644) }},
	}
	out := t.TempDir()
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	build := func(goals []string, rec *cache.StampCollector) *engine.Result {
		t.Helper()
		r, err := engine.Build(context.Background(), engine.Options{Values: vals, OutDir: out, Targets: ts, Goals: goals, Now: func() time.Time { return now }, Stamp: rec})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	settle := func() { time.Sleep(3 * cache.RacyWindow * time.Nanosecond) }

	var cold cache.StampCollector
	build([]string{"kubeconfig/x", "cluster/x"}, &cold)
	if why := cold.Fill(&cache.Stamp{}); !strings.Contains(why, "not up to date") {
		t.Errorf("a build that ran targets: Fill says %q, want it refused", why)
	}
	settle()
	start := time.Now().UnixNano()
	var null cache.StampCollector
	if r := build([]string{"kubeconfig/x"}, &null); len(r.UpToDate) != 3 {
		t.Fatalf("null build: %+v", r)
	}
	s := &cache.Stamp{Start: start}
	if why := null.Fill(s); why != "" {
		t.Fatalf("null build: Fill refused: %s", why)
	}
	if want := now.Add(24 * time.Hour).UnixNano(); s.ValidUntil != want {
		t.Errorf("ValidUntil = %v, want pki/cert/short's renewal %v", time.Unix(0, s.ValidUntil).UTC(), time.Unix(0, want).UTC())
	}
	var got []string
	cache.StampFiles(s.Files, func(base byte, path []byte, fp cache.Fingerprint, _ []byte) bool {
		p := string(path)
		if base&^cache.StampDigest == cache.StampAbs {
			p, _ = filepath.Rel(out, p)
		}
		got = append(got, p)
		return true
	})
	slices.Sort(got)
	want := []string{".labbuild/state", "kubeconfig/x/data", "pki/ca/root/data", "pki/cert/short/data"}
	if !slices.Equal(got, want) || s.NFiles != len(want) || s.OutDir != out {
		t.Errorf("recorded %q (%d) in %s, want %q in %s", got, s.NFiles, s.OutDir, want, out)
	}

	settle()
	var ext cache.StampCollector
	build([]string{"cluster/x"}, &ext)
	if why := ext.Fill(&cache.Stamp{}); !strings.Contains(why, "External") {
		t.Errorf("a closure with an External target: Fill says %q, want it refused", why)
	}
}
