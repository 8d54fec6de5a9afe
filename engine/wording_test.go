package engine_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// TestReasonWordingEngine: a build's result — what was built, restored, left up to date, each
// target's state, the plan's actions and counts — and what it prints do not depend on the
// words of any reason. Each kind is reworded in turn to an opaque token (⟦hex of the words⟧)
// and the same builds run again: the typed result must be equal, and the printed text equal
// once the tokens are decoded. It covers the reasons only a real build shows (a store entry
// that cannot be restored, an orphan destroyed), which cmd/labbuild-full's TestReasonWording cannot
// reach with its read-only commands.
func TestReasonWordingEngine(t *testing.T) {
	type outcome struct {
		built, restored, upToDate, failed []string
		plan                              []string // target, action, state: reasons
		states                            map[string]engine.State
		count                             engine.PlanCount
		stderr                            string // sorted lines: workers print in any order
	}
	summarize := func(r *engine.Result, stderr string, names []string) outcome {
		o := outcome{built: r.Built, restored: r.Restored, upToDate: r.UpToDate, failed: r.Failed,
			states: map[string]engine.State{}, count: engine.CountPlan(r.Plan)}
		for _, p := range r.Plan {
			o.plan = append(o.plan, fmt.Sprintf("%s %s %s: %s", p.Target, p.Action, p.State, p.Why()))
		}
		for _, n := range names {
			o.states[n] = r.State(n)
		}
		lines := strings.Split(stderr, "\n")
		sort.Strings(lines)
		o.stderr = strings.Join(lines, "\n")
		return o
	}
	// The store unusable: an output deleted, every stored object corrupt (its size kept, so the
	// entry is found), so the restore fails and the target is built again; explained on stderr.
	storeUnusable := func() outcome {
		s := newSynth(t, 60, 2)
		s.build(nil)
		filepath.Walk(filepath.Join(s.out, ".labbuild/cache/objects"), func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				os.WriteFile(p, bytes.Repeat([]byte("x"), int(info.Size())), 0o600)
			}
			return nil
		})
		os.RemoveAll(filepath.Join(s.out, "syn/t00007"))
		var errb bytes.Buffer
		r := s.build(func(o *engine.Options) { o.Explain, o.Stderr = true, &errb })
		var names []string
		for _, tg := range s.ts {
			names = append(names, tg.Name)
		}
		return summarize(r, errb.String(), names)
	}
	// Orphans: two VMs the config no longer declares, planned, then destroyed.
	orphans := func() outcome {
		run := func(ctx context.Context, s *engine.Step) error {
			return s.WriteFile("record.json", []byte(s.Target().Name), 0o644)
		}
		vm := func(n string) *engine.Target { return &engine.Target{Name: "vm/" + n, External: true, Run: run} }
		lab := &orphanLab{MapValues: synthetic.MapValues{}, declared: []*engine.Target{vm("a"), vm("b"), vm("c")},
			destroy: func(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) { return engine.Destroyed, nil }}
		var errb bytes.Buffer
		o := engine.Options{Config: lab, OutDir: t.TempDir(), Goals: []string{"vm"}, Jobs: 1, Stderr: &errb, Explain: true}
		if _, err := engine.Build(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		lab.declared = lab.declared[:1]
		o.DryRun = true
		plan, err := engine.Build(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		o.DryRun = false
		r, err := engine.Build(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		out := summarize(r, errb.String(), []string{"vm/a"})
		out.plan = append(out.plan, summarize(plan, "", nil).plan...)
		return out
	}
	runAll := func() []outcome { return []outcome{storeUnusable(), orphans()} }
	want := runAll()
	token := regexp.MustCompile(`⟦([0-9a-f]*)⟧`)
	for k := engine.ReasonKind(1); int(k) < len(engine.ReasonText); k++ {
		words := engine.ReasonText[k]
		engine.ReasonText[k] = func(r engine.Reason) string { return "⟦" + hex.EncodeToString([]byte(words(r))) + "⟧" }
		got := runAll()
		engine.ReasonText[k] = words
		decode := func(s string) string {
			return token.ReplaceAllStringFunc(s, func(m string) string {
				b, _ := hex.DecodeString(token.FindStringSubmatch(m)[1])
				return string(b)
			})
		}
		for i := range got {
			shown := strings.Contains(got[i].stderr+strings.Join(got[i].plan, "\n"), "⟦")
			for j := range got[i].plan {
				got[i].plan[j] = decode(got[i].plan[j])
			}
			lines := strings.Split(decode(got[i].stderr), "\n")
			sort.Strings(lines)
			got[i].stderr = strings.Join(lines, "\n")
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("reason kind %d reworded: scenario %d's result differs:\n got  %+v\n want %+v", k, i, got[i], want[i])
			}
			if (k == engine.StoreUnusable && i == 0 || k == engine.Undeclared && i == 1) && !shown {
				t.Errorf("reason kind %d: scenario %d does not show it", k, i)
			}
		}
	}
}
