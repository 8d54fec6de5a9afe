package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/graph"
	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// synth is a synthetic project for engine tests: n targets, f config fields.
type synth struct {
	t      *testing.T
	n, f   int
	out    string
	values synthetic.MapValues
	ts     []*engine.Target
	now    time.Time
}

func newSynth(t *testing.T, n, f int) *synth {
	s := &synth{t: t, n: n, f: f, out: t.TempDir(), values: synthetic.MapValues{}, now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	s.values["syn.unused"] = json.RawMessage(`"u"`)
	s.ts = synthetic.Targets(synthetic.Spec{N: n, Fields: f}, s.values)
	return s
}

func (s *synth) build(mod func(*engine.Options)) *engine.Result {
	s.t.Helper()
	o := engine.Options{Values: s.values, OutDir: s.out, Targets: s.ts, Jobs: 2, Now: func() time.Time { return s.now }}
	if mod != nil {
		mod(&o)
	}
	r, err := engine.Build(context.Background(), o)
	if err != nil {
		s.t.Fatalf("build: %v", err)
	}
	return r
}

func (s *synth) set(field, v string) { s.values[field] = json.RawMessage(`"` + v + `"`) }

// downstream returns the sorted names of the targets reading field and all their dependents.
func (s *synth) downstream(field string) []string {
	nodes := make([]graph.Node, len(s.ts))
	var roots []int
	for i, t := range s.ts {
		nodes[i] = graph.Node{Name: t.Name, Deps: t.Deps}
		for _, r := range t.Reads {
			if r == field {
				roots = append(roots, i)
			}
		}
	}
	g, err := graph.New(nodes)
	if err != nil {
		s.t.Fatal(err)
	}
	var out []string
	for i, in := range g.Downstream(roots) {
		if in {
			out = append(out, g.Name(i))
		}
	}
	sort.Strings(out)
	return out
}

func (s *synth) readers(field string) []string {
	var out []string
	for _, t := range s.ts {
		if t.Reads[0] == field {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out
}

func (s *synth) snapshot() map[string]string {
	m := map[string]string{}
	filepath.Walk(s.out, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || strings.Contains(p, "/.labbuild") {
			return nil
		}
		b, _ := os.ReadFile(p)
		m[strings.TrimPrefix(p, s.out)] = string(b)
		return nil
	})
	return m
}

func eq(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %v\n want %v", what, got, want)
	}
}

func TestIncremental(t *testing.T) {
	tests := []struct {
		name     string
		edit     func(s *synth)
		opts     func(*engine.Options)
		executed func(s *synth) []string
		reused   func(s *synth) []string
	}{
		{"second run executes nothing", func(s *synth) {}, nil, nil, nil},
		{"edit one field", func(s *synth) { s.set("syn.v3", "changed") }, nil,
			func(s *synth) []string { return s.downstream("syn.v3") }, nil},
		{"edit an undeclared field", func(s *synth) { s.set("syn.unused", "changed") }, nil, nil, nil},
		{"early cutoff: same bytes stop the wave", func(s *synth) { s.set("syn.v3", "X") }, nil,
			func(s *synth) []string { return s.readers("syn.v3") }, nil},
		{"-B executes all", func(s *synth) {}, func(o *engine.Options) { o.Force = true },
			func(s *synth) []string {
				var all []string
				for _, t := range s.ts {
					all = append(all, t.Name)
				}
				sort.Strings(all)
				return all
			}, nil},
		{"deleting one output restores that target only", func(s *synth) {
			os.Remove(filepath.Join(s.out, "syn/t00077/out.txt"))
		}, nil, nil, func(s *synth) []string { return []string{"syn/t00077"} }},
		{"modifying one output restores that target only", func(s *synth) {
			os.WriteFile(filepath.Join(s.out, "syn/t00101/out.txt"), []byte("edited by hand"), 0o644)
		}, nil, nil, func(s *synth) []string { return []string{"syn/t00101"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSynth(t, 300, 10)
			first := s.build(nil)
			if len(first.Built) != 300 {
				t.Fatalf("first build executed %d, want 300", len(first.Built))
			}
			clean := s.snapshot()
			tt.edit(s)
			before := cache.Hashed()
			r := s.build(tt.opts)
			var wantExec, wantReused []string
			if tt.executed != nil {
				wantExec = tt.executed(s)
			}
			if tt.reused != nil {
				wantReused = tt.reused(s)
			}
			eq(t, "executed", r.Built, wantExec)
			eq(t, "reused", r.Restored, wantReused)
			if tt.name == "second run executes nothing" {
				if d := cache.Hashed().Bytes - before.Bytes; d != 0 {
					t.Errorf("null build hashed %d bytes", d)
				}
				if len(r.UpToDate) != 300 {
					t.Errorf("up to date %d, want 300", len(r.UpToDate))
				}
			}
			if strings.HasPrefix(tt.name, "deleting") || strings.HasPrefix(tt.name, "modifying") {
				if got := s.snapshot(); !reflect.DeepEqual(got, clean) {
					t.Errorf("outputs differ from the clean build after restore")
				}
			}
		})
	}
}

func TestConstructiveTraces(t *testing.T) {
	s := newSynth(t, 120, 4)
	s.build(nil)
	want := s.snapshot()
	s.set("syn.v1", "other")
	r := s.build(nil)
	if len(r.Built) == 0 {
		t.Fatal("edit executed nothing")
	}
	s.set("syn.v1", "x") // back to the first value: every output is in the store
	r = s.build(nil)
	eq(t, "executed after switching back", r.Built, nil)
	if len(r.Restored) == 0 {
		t.Error("nothing restored after switching back")
	}
	if got := s.snapshot(); !reflect.DeepEqual(got, want) {
		t.Error("outputs after switching back differ from the first build")
	}
}

func TestExplainNamesTheChange(t *testing.T) {
	s := newSynth(t, 60, 2)
	s.build(nil)
	s.set("syn.v0", "new")
	var errb bytes.Buffer
	r := s.build(func(o *engine.Options) { o.Explain = true; o.Stderr = &errb })
	var direct, up *engine.PlanItem
	for i := range r.Plan {
		switch r.Plan[i].Target {
		case "syn/t00000":
			direct = &r.Plan[i]
		case "syn/t00050":
			up = &r.Plan[i]
		}
	}
	if direct == nil || !reflect.DeepEqual(direct.Reasons, []engine.Reason{{Kind: engine.InputChanged, Input: "config:syn.v0", Old: `"x"`, New: `"new"`}}) ||
		direct.Why() != "config syn.v0 changed" {
		t.Errorf("syn/t00000 plan %+v, want reason 'config syn.v0 changed'", direct)
	}
	if up == nil || !strings.Contains(up.Why(), "upstream syn/t000") {
		t.Errorf("syn/t00050 plan %+v, want an upstream reason", up)
	}
	if !strings.Contains(errb.String(), "labbuild explain: syn/t00000: build: config syn.v0 changed") {
		t.Errorf("--explain output:\n%s", errb.String())
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	s := newSynth(t, 120, 4)
	var o bytes.Buffer
	r := s.build(func(opt *engine.Options) { opt.DryRun = true; opt.Stdout = &o })
	if len(r.Plan) != 120 || len(r.Built) != 0 {
		t.Fatalf("dry run on an empty directory: %d planned, %d executed", len(r.Plan), len(r.Built))
	}
	if ents, _ := os.ReadDir(s.out); len(ents) != 0 {
		t.Fatalf("dry run wrote %d entries into the output directory", len(ents))
	}
	s.build(nil)
	snap := s.snapshot()
	st, _ := os.ReadFile(filepath.Join(s.out, ".labbuild/state"))
	s.set("syn.v2", "dry")
	r = s.build(func(opt *engine.Options) { opt.DryRun = true })
	planned := map[string]engine.Action{}
	for _, p := range r.Plan {
		planned[p.Target] = p.Action
	}
	for _, n := range s.readers("syn.v2") {
		if planned[n] != engine.ActionBuild {
			t.Errorf("%s planned %q, want build", n, planned[n])
		}
	}
	if len(r.Plan) != len(s.downstream("syn.v2")) {
		t.Errorf("plan has %d items, want %d", len(r.Plan), len(s.downstream("syn.v2")))
	}
	st2, _ := os.ReadFile(filepath.Join(s.out, ".labbuild/state"))
	if !reflect.DeepEqual(snap, s.snapshot()) || !bytes.Equal(st, st2) {
		t.Error("dry run changed outputs or state")
	}
}

func TestKeepGoingReportsRootCauseOnce(t *testing.T) {
	s := newSynth(t, 150, 3)
	boom := s.ts[10]
	boom.Run = func(ctx context.Context, st *engine.Step) error {
		st.Logf("step one")
		st.Logf("step two")
		return errors.New("boom")
	}
	var errb bytes.Buffer
	o := engine.Options{Values: s.values, OutDir: s.out, Targets: s.ts, Jobs: 2, KeepGoing: true, Stderr: &errb}
	r, err := engine.Build(context.Background(), o)
	var be *engine.BuildError
	if !errors.As(err, &be) || !reflect.DeepEqual(be.Failed, []string{"syn/t00010"}) {
		t.Fatalf("err %v, want a BuildError naming syn/t00010", err)
	}
	if c := strings.Count(errb.String(), "FAILED:"); c != 1 {
		t.Errorf("%d FAILED lines, want 1:\n%s", c, errb.String())
	}
	if !strings.Contains(errb.String(), "FAILED: syn/t00010: boom") {
		t.Errorf("failure output lacks the target and cause:\n%s", errb.String())
	}
	// Then the log's last lines, indented under their path.
	if want := "  last lines of " + engine.LogPath(s.out, "syn/t00010") + ":\n    step one\n    step two\n"; !strings.Contains(errb.String(), want) {
		t.Errorf("failure output lacks the log's tail %q:\n%s", want, errb.String())
	}
	// Everything downstream of t00010 is skipped, everything else built.
	var down []string
	g := map[string]bool{}
	for _, n := range s.ts {
		g[n.Name] = false
	}
	nodes := make([]graph.Node, len(s.ts))
	for i, t := range s.ts {
		nodes[i] = graph.Node{Name: t.Name, Deps: t.Deps}
	}
	gg, _ := graph.New(nodes)
	for i, in := range gg.Downstream([]int{10}) {
		if in && i != 10 {
			down = append(down, gg.Name(i))
		}
	}
	sort.Strings(down)
	eq(t, "skipped", r.Skipped, down)
	if len(r.Built) != 150-1-len(down) {
		t.Errorf("executed %d, want %d", len(r.Built), 150-1-len(down))
	}
	// Without -k nothing new starts after the failure.
	s2 := newSynth(t, 150, 3)
	s2.ts[0].Run = func(ctx context.Context, st *engine.Step) error { return errors.New("first") }
	r2, err := engine.Build(context.Background(), engine.Options{Values: s2.values, OutDir: s2.out, Targets: s2.ts, Jobs: 1})
	if err == nil || len(r2.Built) >= 149 {
		t.Errorf("without -k: err %v, executed %d", err, len(r2.Built))
	}
}

func TestUndeclaredReadFails(t *testing.T) {
	vals := synthetic.MapValues{"a.declared": json.RawMessage(`1`), "a.other": json.RawMessage(`2`)}
	ts := []*engine.Target{{Name: "x/sneaky", Reads: []string{"a.declared"}, Run: func(ctx context.Context, s *engine.Step) error {
		var v int
		return s.Value("a.other", &v)
	}}}
	_, err := engine.Build(context.Background(), engine.Options{Values: vals, OutDir: t.TempDir(), Targets: ts})
	if err == nil {
		t.Fatal("reading an undeclared field succeeded")
	}
	ts[0].Run = func(ctx context.Context, s *engine.Step) error { _, err := s.DepFile("x/other", "f"); return err }
	if _, err := engine.Build(context.Background(), engine.Options{Values: vals, OutDir: t.TempDir(), Targets: ts}); err == nil {
		t.Fatal("reading an undeclared upstream succeeded")
	}
	ts[0].Reads = []string{"a.missing"}
	if _, err := engine.Build(context.Background(), engine.Options{Values: vals, OutDir: t.TempDir(), Targets: ts}); err == nil || !strings.Contains(err.Error(), `"a.missing"`) {
		t.Fatalf("declaring a field the config lacks: %v", err)
	}
}

// TestStickyAndExpiry: a sticky "key" is never re-run by -B; a "cert" that goes stale at a
// time is renewed, with its dependents, when the injected clock passes it.
func TestStickyAndExpiry(t *testing.T) {
	vals := synthetic.MapValues{"pki.alg": json.RawMessage(`"RSA-2048"`)}
	runs := map[string]int{}
	mk := func(name string, deps []string, stale time.Duration, sticky bool) *engine.Target {
		return &engine.Target{Name: name, Deps: deps, Reads: []string{"pki.alg"}, Sticky: sticky, Run: func(ctx context.Context, s *engine.Step) error {
			runs[name]++
			if stale > 0 {
				s.SetStaleAt(s.Epoch().Add(stale))
			}
			body := fmt.Sprintf("%s epoch=%d run=%d", name, s.Epoch().Unix(), runs[name])
			if sticky {
				body = fmt.Sprintf("%s random=%d", name, time.Now().UnixNano()) // stands in for a fresh key
			}
			return s.WriteFile("data", []byte(body), 0o600)
		}}
	}
	ts := []*engine.Target{
		mk("pki/key/ca", nil, 0, true),
		mk("pki/ca/root", []string{"pki/key/ca"}, 3650*24*time.Hour, false),
		mk("pki/cert/short", []string{"pki/ca/root"}, 24*time.Hour, false),
		mk("kubeconfig/x", []string{"pki/cert/short"}, 0, false),
		mk("kubeconfig/y", []string{"pki/ca/root"}, 0, false),
	}
	out := t.TempDir()
	now := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	b := func(mod func(*engine.Options)) *engine.Result {
		o := engine.Options{Values: vals, OutDir: out, Targets: ts, Now: func() time.Time { return now }}
		if mod != nil {
			mod(&o)
		}
		r, err := engine.Build(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	b(nil)
	key, _ := os.ReadFile(filepath.Join(out, "pki/key/ca/data"))
	if st, _ := os.Stat(filepath.Join(out, "pki/key/ca/data")); st.Mode().Perm() != 0o600 {
		t.Errorf("key mode %v, want 0600", st.Mode().Perm())
	}
	r := b(func(o *engine.Options) { o.Force = true })
	eq(t, "-B executed", r.Built, []string{"kubeconfig/x", "kubeconfig/y", "pki/ca/root", "pki/cert/short"})
	if k2, _ := os.ReadFile(filepath.Join(out, "pki/key/ca/data")); !bytes.Equal(key, k2) {
		t.Error("-B minted a new key")
	}
	now = now.Add(23 * time.Hour) // before the short cert's stale time
	eq(t, "executed before stale", b(nil).Built, nil)
	now = now.Add(2 * time.Hour) // past it
	r = b(nil)
	eq(t, "executed after stale", r.Built, []string{"kubeconfig/x", "pki/cert/short"})
	os.RemoveAll(filepath.Join(out, "pki/key/ca"))
	r = b(nil)
	eq(t, "key restored, not re-run", r.Restored, []string{"pki/key/ca"})
	if k2, _ := os.ReadFile(filepath.Join(out, "pki/key/ca/data")); !bytes.Equal(key, k2) {
		t.Error("restoring the key changed it")
	}
	r = b(func(o *engine.Options) { o.Regenerate = []string{"pki/key/ca"} })
	if len(r.Built) != 5 {
		t.Errorf("--regenerate executed %v, want the key and everything under it", r.Built)
	}
}

func TestCorruptStoreIsAMiss(t *testing.T) {
	s := newSynth(t, 60, 2)
	s.build(nil)
	want := s.snapshot()
	// Corrupt every object, then delete the outputs: restore must notice and re-run.
	filepath.Walk(filepath.Join(s.out, ".labbuild/cache/objects"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			os.WriteFile(p, []byte("garbage"), 0o600)
		}
		return nil
	})
	os.RemoveAll(filepath.Join(s.out, "syn"))
	r := s.build(nil)
	if len(r.Built) != 60 {
		t.Errorf("executed %d after corrupting the store, want 60", len(r.Built))
	}
	if !reflect.DeepEqual(want, s.snapshot()) {
		t.Error("outputs differ from the clean build")
	}
}

func TestStaleOutputFilesRemoved(t *testing.T) {
	vals := synthetic.MapValues{"a.n": json.RawMessage(`2`)}
	ts := []*engine.Target{{Name: "x/files", Reads: []string{"a.n"}, Run: func(ctx context.Context, s *engine.Step) error {
		var n int
		s.Value("a.n", &n)
		for i := 0; i < n; i++ {
			if err := s.WriteFile(fmt.Sprintf("f%d", i), []byte("x"), 0o644); err != nil {
				return err
			}
		}
		return nil
	}}}
	out := t.TempDir()
	o := engine.Options{Values: vals, OutDir: out, Targets: ts}
	engine.Build(context.Background(), o)
	vals["a.n"] = json.RawMessage(`1`)
	engine.Build(context.Background(), o)
	if _, err := os.Stat(filepath.Join(out, "x/files/f1")); !os.IsNotExist(err) {
		t.Error("an output the new run did not write is still there")
	}
}

func TestSelectGoals(t *testing.T) {
	p, err := engine.Load(engine.Options{Values: synthetic.MapValues{}, Targets: []*engine.Target{
		{Name: "pki/a", Run: nopRun}, {Name: "pki/b", Run: nopRun}, {Name: "manifests/static-pods/etcd", Run: nopRun},
		{Name: "libvirt/vm", Run: nopRun, External: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		goals []string
		want  []string
		err   string
	}{
		{nil, []string{"manifests/static-pods/etcd", "pki/a", "pki/b"}, ""},
		{[]string{"pki"}, []string{"pki/a", "pki/b"}, ""},
		{[]string{"manifests/static-pods"}, []string{"manifests/static-pods/etcd"}, ""},
		{[]string{"libvirt"}, []string{"libvirt/vm"}, ""},
		{[]string{"nope"}, nil, `unknown target or family "nope"`},
	}
	for _, tt := range tests {
		ids, err := p.Select(tt.goals)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%v: err %v, want %q", tt.goals, err, tt.err)
			}
			continue
		}
		var got []string
		for _, i := range ids {
			got = append(got, p.Targets[i].Name)
		}
		sort.Strings(got)
		eq(t, fmt.Sprint(tt.goals), got, tt.want)
	}
}

func nopRun(ctx context.Context, s *engine.Step) error { return nil }

func TestConcurrentBuildsInOneProcess(t *testing.T) {
	s := newSynth(t, 200, 5)
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := engine.Build(context.Background(), engine.Options{Values: s.values, OutDir: s.out, Targets: s.ts, Jobs: 2})
			errs <- err
		}()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if r := s.build(nil); len(r.UpToDate) != 200 {
		t.Errorf("after two concurrent builds, %d up to date, want 200", len(r.UpToDate))
	}
}

// TestCriticalPathFirst: among ready targets the one with the longest chain of dependents
// starts first (private keys before leaf files in a real lab), even when declared last.
func TestCriticalPathFirst(t *testing.T) {
	var mu sync.Mutex
	var started []string
	run := func(ctx context.Context, s *engine.Step) error {
		mu.Lock()
		started = append(started, s.Target().Name)
		mu.Unlock()
		return s.WriteFile("out", []byte(s.Target().Name), 0o644)
	}
	var ts []*engine.Target
	leaves := 4*runtime.NumCPU() + 4
	for i := 0; i < leaves; i++ {
		ts = append(ts, &engine.Target{Name: fmt.Sprintf("leaf/l%02d", i), Run: run})
	}
	for i, prev := 0, ""; i < 4; i++ {
		tg := &engine.Target{Name: fmt.Sprintf("zz/c%d", i), Run: run}
		if prev != "" {
			tg.Deps = []string{prev}
		}
		ts, prev = append(ts, tg), tg.Name
	}
	if _, err := engine.Build(context.Background(), engine.Options{Values: synthetic.MapValues{}, OutDir: t.TempDir(), Targets: ts, Jobs: 1}); err != nil {
		t.Fatal(err)
	}
	// Each worker takes one ready target before any runs; the chain's root is the first taken.
	if i := slices.Index(started, "zz/c0"); i < 0 || i >= runtime.NumCPU() {
		t.Errorf("zz/c0 started %dth of %v; want among the first %d", i+1, started, runtime.NumCPU())
	}
}

// TestStopNamesOnlyDependents: without -k, "skipped, upstream failed" names exactly the failed
// target's dependents; what the build never reached is "not started", one count, not a list;
// and an interrupt (Ctrl-C) calls nothing failed.
func TestStopNamesOnlyDependents(t *testing.T) {
	s := newSynth(t, 150, 3)
	s.ts[10].Run = func(ctx context.Context, st *engine.Step) error { return errors.New("boom") }
	var errb bytes.Buffer
	r, err := engine.Build(context.Background(), engine.Options{Values: s.values, OutDir: s.out, Targets: s.ts, Jobs: 1, Stderr: &errb})
	if err == nil {
		t.Fatal("a failing target did not fail the build")
	}
	nodes := make([]graph.Node, len(s.ts))
	for i, t := range s.ts {
		nodes[i] = graph.Node{Name: t.Name, Deps: t.Deps}
	}
	gg, _ := graph.New(nodes)
	var down []string
	for i, in := range gg.Downstream([]int{10}) {
		if in && i != 10 {
			down = append(down, gg.Name(i))
		}
	}
	sort.Strings(down)
	eq(t, "skipped", r.Skipped, down)
	eq(t, "failed", r.Failed, []string{"syn/t00010"})
	if len(r.NotStarted) == 0 {
		t.Fatal("without -k some targets should not have started")
	}
	seen := map[string]int{}
	for _, l := range [][]string{r.Built, r.Restored, r.UpToDate, r.Failed, r.Skipped, r.NotStarted} {
		for _, n := range l {
			seen[n]++
		}
	}
	for _, tg := range s.ts {
		if seen[tg.Name] != 1 {
			t.Errorf("%s counted %d times in the result", tg.Name, seen[tg.Name])
		}
	}
	out := errb.String()
	if want := "labbuild: skipped, upstream failed: " + strings.Join(down, ", ") + "\n"; !strings.Contains(out, want) {
		t.Errorf("stderr lacks %q:\n%s", want, out)
	}
	if want := fmt.Sprintf("labbuild: %d not started (", len(r.NotStarted)); !strings.Contains(out, want) {
		t.Errorf("stderr lacks %q:\n%s", want, out)
	}

	// Ctrl-C while a target runs: nothing is failed, nothing prints FAILED.
	s2 := newSynth(t, 20, 2)
	ctx, cancel := context.WithCancel(context.Background())
	s2.ts[0].Run = func(c context.Context, st *engine.Step) error { cancel(); <-c.Done(); return c.Err() }
	var errb2 bytes.Buffer
	r2, err := engine.Build(ctx, engine.Options{Values: s2.values, OutDir: s2.out, Targets: s2.ts, Jobs: 1, Stderr: &errb2})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted build returned %v, want context.Canceled", err)
	}
	if len(r2.Failed) != 0 || strings.Contains(errb2.String(), "FAILED") {
		t.Errorf("an interrupt called targets failed: %v\n%s", r2.Failed, errb2.String())
	}
	if !slices.Contains(r2.NotStarted, "syn/t00000") || !strings.Contains(errb2.String(), "not started (interrupted)") {
		t.Errorf("the interrupted target is not reported as not started: %v\n%s", r2.NotStarted, errb2.String())
	}
}

// The null build is the fast path's alone (the scheduler visits nothing), with input files
// named by absolute and by relative paths; a file whose path needs decoding (a JSON escape)
// falls back to the scheduler, which still finds it up to date.
func TestNullBuildIsTheFastPath(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	const n = 120
	for i := 0; i < n; i++ {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("%d.txt", i)), []byte(fmt.Sprintf("source %d\n", i)), 0o644)
	}
	ts, vals := synthetic.Graph(synthetic.Spec{N: n, Fields: 10, SrcDir: src}, synthetic.MapValues{})
	mv := synthetic.MapValues{}
	for _, tg := range ts {
		for _, f := range append(append([]string{}, tg.Reads...), tg.Files...) {
			mv[f], _ = vals.Lookup(f)
		}
	}
	mv["syn.src7"] = json.RawMessage(`"src/7.txt"`)          // relative to the config's directory
	mv["syn.src8"] = json.RawMessage(`"src/\u0038.txt"`)     // an escape: the scheduler's case
	mv["syn.src9"] = json.RawMessage(`"./src/../src/9.txt"`) // not clean: the scheduler's case
	cfg := filepath.Join(dir, "lab.yaml")
	time.Sleep(2 * engine.RacyWindow) // sources older than the build: recorded (see fileDigest)
	o := engine.Options{Values: mv, Targets: ts, OutDir: filepath.Join(dir, "out"), ConfigPath: cfg, Jobs: 2}
	if _, err := engine.Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	var stats bytes.Buffer
	o.Stats, o.Stderr = true, &stats
	before := cache.Hashed()
	r, err := engine.Build(context.Background(), o)
	if err != nil || len(r.UpToDate) != n {
		t.Fatalf("null build: %d up to date, %v", len(r.UpToDate), err)
	}
	if d := cache.Hashed().Files - before.Files; d != 0 {
		t.Errorf("null build hashed %d files", d)
	}
	// syn/t00008 and syn/t00009 and what depends on them go through the scheduler.
	p, _ := engine.Load(o)
	down := p.Graph.Downstream([]int{8, 9})
	want := n
	for _, in := range down {
		if in {
			want--
		}
	}
	if !strings.Contains(stats.String(), fmt.Sprintf("(%d up to date)", want)) {
		t.Errorf("stats %q: want the fast path to finish %d targets", stats.String(), want)
	}
}

// TestLogTail: the last n lines of a log, each ending in a newline; "" for a missing or empty
// log.
func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, content string
		n             int
		want          string
	}{
		{"missing", "", 3, ""},
		{"empty", "", 3, ""},
		{"fewer lines", "a\nb\n", 3, "a\nb\n"},
		{"more lines", "a\nb\nc\nd\n", 2, "c\nd\n"},
		{"no final newline", "a\nb", 1, "b\n"},
		{"trailing blank lines", "a\nb\n\n\n", 1, "b\n"},
		{"FAILED last", "ran x\nFAILED: t: boom\n", 1, "FAILED: t: boom\n"},
	} {
		p := filepath.Join(dir, c.name+".log")
		if c.name != "missing" {
			if err := os.WriteFile(p, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := engine.LogTail(p, c.n); got != c.want {
			t.Errorf("%s: LogTail(%d) = %q, want %q", c.name, c.n, got, c.want)
		}
	}
}
