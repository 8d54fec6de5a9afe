package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
)

// TestDestroyOutcomes: destroy calls "destroyed" only what existed and was removed; an object
// already gone is reported absent; a target with nothing of its own is forgotten; one that
// cannot be reached is failed, named in the error with its cause, and stays recorded, so the
// next destroy (reachable again) removes it. A dry run plans without touching anything.
func TestDestroyOutcomes(t *testing.T) {
	var mu sync.Mutex
	world := map[string]bool{} // the objects outside the filesystem
	unreachable := map[string]bool{}
	run := func(ctx context.Context, s *Step) error {
		mu.Lock()
		world[s.Target().Name] = true
		mu.Unlock()
		return s.WriteFile("record.json", []byte(`{"name":"`+s.Target().Name+`"}`), 0o644)
	}
	destroy := func(ctx context.Context, s *Step) (DestroyOutcome, error) {
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
			return AlreadyAbsent, nil
		}
		delete(world, n)
		return Destroyed, nil
	}
	check := func(ctx context.Context, s *Step) (DestroyOutcome, error) { return RecordOnly, nil }
	ts := []*Target{
		{Name: "net/lab", External: true, Run: run, Destroy: destroy},
		{Name: "vm/a", Deps: []string{"net/lab"}, External: true, Run: run, Destroy: destroy},
		{Name: "vm/b", Deps: []string{"net/lab"}, External: true, Run: run, Destroy: destroy},
		{Name: "disk/c", External: true, Run: run, Destroy: destroy},
		{Name: "vm/c", Deps: []string{"disk/c"}, External: true, Run: run, Destroy: destroy},
		{Name: "host/check", External: true, Run: func(ctx context.Context, s *Step) error { return s.WriteFile("ok", nil, 0o644) }, Destroy: check},
		{Name: "cluster/up", Deps: []string{"vm/a"}, External: true, Run: func(ctx context.Context, s *Step) error { return s.WriteFile("ok", nil, 0o644) }},
	}
	out := t.TempDir()
	o := Options{Values: MapValues{}, OutDir: out, Targets: ts, Jobs: 1}
	bo := o
	bo.Goals = []string{"net", "disk", "vm", "host", "cluster"}
	if _, err := Build(context.Background(), bo); err != nil {
		t.Fatal(err)
	}
	delete(world, "vm/b") // removed by hand (virsh undefine)
	unreachable["vm/c"] = true

	dry := o
	dry.DryRun = true
	rep, err := Destroy(context.Background(), dry)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "planned", sortedCopy(rep.Planned), []string{"cluster/up", "disk/c", "host/check", "net/lab", "vm/a", "vm/b", "vm/c"})
	if len(world) != 4 || len(rep.Destroyed) != 0 {
		t.Fatalf("a dry run changed the world: %v, report %+v", world, rep)
	}

	rep, err = Destroy(context.Background(), o)
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
	rep, err = Destroy(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	eq(t, "destroyed again", rep.Destroyed, []string{"vm/c", "disk/c"})
	if n := len(rep.Absent) + len(rep.Forgotten) + len(rep.Failed) + len(rep.Kept); n != 0 || len(world) != 0 {
		t.Fatalf("second destroy: %+v, world %v", rep, world)
	}
	rep, err = Destroy(context.Background(), o)
	if err != nil || len(rep.Destroyed)+len(rep.Absent)+len(rep.Forgotten)+len(rep.Failed) != 0 {
		t.Fatalf("third destroy found records: %+v, %v", rep, err)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	slices.Sort(c)
	return c
}
