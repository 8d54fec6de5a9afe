package engine_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// TestDestroyOutcomes: destroy calls "destroyed" only what existed and was removed; an object
// already gone is reported absent; a target with nothing of its own is forgotten; one that
// cannot be reached is failed, named in the error with its cause, and stays recorded, so the
// next destroy (reachable again) removes it. A dry run plans without touching anything.
func TestDestroyOutcomes(t *testing.T) {
	var mu sync.Mutex
	world := map[string]bool{} // the objects outside the filesystem
	unreachable := map[string]bool{}
	run := func(ctx context.Context, s *engine.Step) error {
		mu.Lock()
		world[s.Target().Name] = true
		mu.Unlock()
		return s.WriteFile("record.json", []byte(`{"name":"`+s.Target().Name+`"}`), 0o644)
	}
	destroy := func(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
		if _, err := s.Prev("record.json"); err != nil {
			return 0, err
		}
		mu.Lock()
		defer mu.Unlock()
		n := s.Target().Name
		if unreachable[n] {
			return 0, errors.New("connection refused")
		}
		if !world[n] {
			return engine.AlreadyAbsent, nil
		}
		delete(world, n)
		return engine.Destroyed, nil
	}
	check := func(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
		return engine.RecordOnly, nil
	}
	ts := []*engine.Target{
		{Name: "net/lab", External: true, Run: run, Destroy: destroy},
		{Name: "vm/a", Deps: []string{"net/lab"}, External: true, Run: run, Destroy: destroy},
		{Name: "vm/b", Deps: []string{"net/lab"}, External: true, Run: run, Destroy: destroy},
		{Name: "disk/c", External: true, Run: run, Destroy: destroy},
		{Name: "vm/c", Deps: []string{"disk/c"}, External: true, Run: run, Destroy: destroy},
		{Name: "host/check", External: true, Run: func(ctx context.Context, s *engine.Step) error { return s.WriteFile("ok", nil, 0o644) }, Destroy: check},
		{Name: "cluster/up", Deps: []string{"vm/a"}, External: true, Run: func(ctx context.Context, s *engine.Step) error { return s.WriteFile("ok", nil, 0o644) }},
	}
	out := t.TempDir()
	o := engine.Options{Values: synthetic.MapValues{}, OutDir: out, Targets: ts, Jobs: 1}
	bo := o
	bo.Goals = []string{"net", "disk", "vm", "host", "cluster"}
	if _, err := engine.Build(context.Background(), bo); err != nil {
		t.Fatal(err)
	}
	delete(world, "vm/b") // removed by hand (virsh undefine)
	unreachable["vm/c"] = true

	dry := o
	dry.DryRun = true
	rep, err := engine.Destroy(context.Background(), dry)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "planned", sortedCopy(rep.Planned), []string{"cluster/up", "disk/c", "host/check", "net/lab", "vm/a", "vm/b", "vm/c"})
	if len(world) != 4 || len(rep.Destroyed) != 0 {
		t.Fatalf("a dry run changed the world: %v, report %+v", world, rep)
	}

	rep, err = engine.Destroy(context.Background(), o)
	if err == nil || err.Error() != "vm/c: not destroyed (still recorded): connection refused" {
		t.Errorf("destroy with vm/c unreachable returned %v", err)
	}
	eq(t, "destroyed", sortedCopy(rep.Destroyed), []string{"net/lab", "vm/a"})
	eq(t, "absent", rep.Absent, []string{"vm/b"})
	eq(t, "forgotten", sortedCopy(rep.Forgotten), []string{"cluster/up", "host/check"})
	eq(t, "failed", rep.Failed, []string{"vm/c"})
	eq(t, "kept", rep.Kept, []string{"disk/c"})
	if rep.KeptFor["disk/c"] != "vm/c" {
		t.Errorf("disk/c kept for %q, want vm/c", rep.KeptFor["disk/c"])
	}
	if !world["vm/c"] || !world["disk/c"] || len(world) != 2 {
		t.Fatalf("world after destroy: %v, want only vm/c and its disk", world)
	}

	unreachable["vm/c"] = false
	rep, err = engine.Destroy(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "destroyed again", rep.Destroyed, []string{"vm/c", "disk/c"})
	if n := len(rep.Absent) + len(rep.Forgotten) + len(rep.Failed) + len(rep.Kept); n != 0 || len(world) != 0 {
		t.Fatalf("second destroy: %+v, world %v", rep, world)
	}
	rep, err = engine.Destroy(context.Background(), o)
	if err != nil || len(rep.Destroyed)+len(rep.Absent)+len(rep.Forgotten)+len(rep.Failed) != 0 {
		t.Fatalf("third destroy found records: %+v, %v", rep, err)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	slices.Sort(c)
	return c
}

// orphanLab is a Source whose families can undo what an undeclared External target made.
type orphanLab struct {
	synthetic.MapValues
	declared []*engine.Target
	destroy  func(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error)
}

func (l *orphanLab) Declare() []*engine.Target { return l.declared }
func (l *orphanLab) Orphans(names []string) []*engine.Target {
	var out []*engine.Target
	for _, n := range names {
		out = append(out, &engine.Target{Name: n, External: true, Destroy: l.destroy, Run: nopRun})
	}
	return out
}

// TestPruneSaysAbsent: after a node is removed from the config, a build destroys its VM and
// counts it destroyed only when it still existed; one removed by hand is forgotten as already
// absent, not counted.
func TestPruneSaysAbsent(t *testing.T) {
	world := map[string]bool{}
	run := func(ctx context.Context, s *engine.Step) error {
		world[s.Target().Name] = true
		return s.WriteFile("record.json", []byte(s.Target().Name), 0o644)
	}
	vm := func(n string) *engine.Target { return &engine.Target{Name: "vm/" + n, External: true, Run: run} }
	lab := &orphanLab{MapValues: synthetic.MapValues{}, declared: []*engine.Target{vm("a"), vm("b"), vm("c")},
		destroy: func(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
			if !world[s.Target().Name] {
				return engine.AlreadyAbsent, nil
			}
			delete(world, s.Target().Name)
			return engine.Destroyed, nil
		}}
	out := t.TempDir()
	var errb bytes.Buffer
	o := engine.Options{Config: lab, OutDir: out, Goals: []string{"vm"}, Jobs: 1, Stderr: &errb}
	if _, err := engine.Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	lab.declared = lab.declared[:1] // b and c removed from the config
	delete(world, "vm/c")           // c's VM removed by hand
	r, err := engine.Build(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "destroyed", r.Destroyed, []string{"vm/b"})
	for _, want := range []string{"labbuild: destroyed vm/b (no longer declared by the config)\n",
		"labbuild: forgot vm/c (no longer declared by the config; already absent)\n"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if len(world) != 1 || !world["vm/a"] {
		t.Errorf("world after the prune: %v, want only vm/a", world)
	}
	if r, _ := engine.Build(context.Background(), o); len(r.Destroyed) != 0 {
		t.Errorf("a second build destroyed %v: the orphans were not forgotten", r.Destroyed)
	}
}
