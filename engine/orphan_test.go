package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// TestPlanSummary counts External actions Terraform's way; undecided External builds and file
// targets go to a second sentence.
func TestPlanSummary(t *testing.T) {
	ext := func(a engine.Action) engine.PlanItem { return engine.PlanItem{Target: "x", Action: a, External: true} }
	for _, tc := range []struct {
		plan []engine.PlanItem
		want string
	}{
		{nil, ""},
		{[]engine.PlanItem{{Target: "pki/ca", Action: engine.ActionBuild}}, ""},
		{[]engine.PlanItem{ext(engine.Create), ext(engine.Create), ext(engine.Create), ext(engine.Update)},
			"Plan: 3 to create, 1 to update in place, 0 to replace, 0 to destroy."},
		{[]engine.PlanItem{ext(engine.Replace), ext(engine.ActionDestroy), ext(engine.ActionRestore), ext(engine.ActionBuild), {Target: "ignition/worker-2", Action: engine.ActionBuild}},
			"Plan: 0 to create, 0 to update in place, 1 to replace, 1 to destroy. Then 1 to check again once their upstreams are built; 1 file targets to build."},
	} {
		if got := engine.CountPlan(tc.plan).Terraform(); got != tc.want {
			t.Errorf("CountPlan(%v).Terraform()\n got %q\nwant %q", tc.plan, got, tc.want)
		}
	}
}

// orphanConfig declares ts and undoes recorded targets through orphan.
type orphanConfig struct {
	synthetic.MapValues
	ts     []*engine.Target
	orphan func(names []string) []*engine.Target
}

func (c orphanConfig) Declare() []*engine.Target               { return c.ts }
func (c orphanConfig) Orphans(names []string) []*engine.Target { return c.orphan(names) }

// TestOrphanDepsAndLog removes a target from the config: its orphan's Destroy reads the
// recorded output of a declared upstream it names in Deps (as a removed node's Node deletion
// reads the admin kubeconfig), and what it logs is printed on stderr with its name.
func TestOrphanDepsAndLog(t *testing.T) {
	kc := &engine.Target{Name: "kc/admin", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
		return s.WriteFile("kubeconfig", []byte("server: x\n"), 0o600)
	}}
	ext := func(name string) *engine.Target {
		return &engine.Target{Name: name, Version: 1, External: true, Deps: []string{"kc/admin"}, Run: func(ctx context.Context, s *engine.Step) error {
			return s.WriteFile("record.json", []byte("{}\n"), 0o644)
		}}
	}
	var got string
	orphan := func(names []string) []*engine.Target {
		var out []*engine.Target
		for _, n := range names {
			out = append(out, &engine.Target{Name: n, External: true, Deps: []string{"kc/admin", "kc/none"}, Run: ext(n).Run,
				Destroy: func(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
					b, err := s.DepFile("kc/admin", "kubeconfig")
					if err != nil {
						return 0, err
					}
					got = string(b)
					if _, err := s.DepPath("kc/none", "x"); err == nil {
						return 0, errors.New("an unrecorded dep was handed over")
					}
					s.Logf("drained and deleted")
					return engine.Destroyed, nil
				}})
		}
		return out
	}
	out := t.TempDir()
	c := orphanConfig{MapValues: synthetic.MapValues{}, ts: []*engine.Target{kc, ext("fam/a"), ext("fam/b")}, orphan: orphan}
	if _, err := engine.Build(context.Background(), engine.Options{Config: c, OutDir: out, Goals: []string{"fam"}}); err != nil {
		t.Fatal(err)
	}
	c.ts = []*engine.Target{kc, ext("fam/a")}
	var stderr strings.Builder
	r, err := engine.Build(context.Background(), engine.Options{Config: c, OutDir: out, Goals: []string{"fam"}, Stderr: &stderr})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Destroyed) != 1 || r.Destroyed[0] != "fam/b" || got != "server: x\n" {
		t.Errorf("destroyed %v, read %q", r.Destroyed, got)
	}
	if !strings.Contains(stderr.String(), "labbuild: fam/b: drained and deleted\n") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}
