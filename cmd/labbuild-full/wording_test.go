package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
)

// TestReasonWording is the proof that nothing in the CLI decides by a reason's words: graph
// colours, plan actions, states, counts and exit statuses come from the verdict's typed values
// (engine.State, engine.Action, engine.ReasonKind). For every reason kind in turn it rewords
// that kind alone — its words become an opaque token, ⟦hex of the words⟧, so no word of the
// original is left to match — and runs the same read-only commands (plans, JSON plans, the
// graph views, explain) on the same output directories. Decoding the tokens must give back,
// byte for byte, what the commands printed with the real words: only that reason's own
// rendering changed. A renderer that matched a reason's text ("never built", "restore", …)
// would print something else and fail here. The scenario reaches every kind but StoreUnusable
// and Undeclared, which only a real build shows (TestReasonWordingEngine, in engine).
func TestReasonWording(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	old := syntheticExtra
	defer func() { syntheticExtra = old }()
	labbuild := func(dir string, args ...string) (int, string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"-C", dir, "--synthetic", "60"}, args...), &out, &errb)
		os.Chdir(wd)
		return code, out.String(), errb.String()
	}
	must := func(dir string, args ...string) {
		t.Helper()
		if code, out, errs := labbuild(dir, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
	}
	write := func(path, s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// fresh: nothing built (never built, missing).
	fresh := t.TempDir()
	// lab: built, then every kind of change the CLI can show (see wordingTargets).
	lab := t.TempDir()
	x := wordingTargets(lab)
	syntheticExtra = x.all
	write(filepath.Join(lab, "fail"), "")
	if code, out, errs := labbuild(lab, "-k", "-q"); code != exitFailed {
		t.Fatalf("first build with x/flaky failing: exit %d\n%s%s", code, out, errs)
	}
	must(lab, "-q", "x/ext")
	os.Remove(filepath.Join(lab, "fail"))
	write(filepath.Join(lab, "drift"), "")
	write(filepath.Join(lab, "synthetic.yaml"), "syn.v3: changed\n")
	os.Remove(filepath.Join(lab, "out/syn/t00007/out.txt"))
	write(filepath.Join(lab, "out/syn/t00008/out.txt"), "edited by hand\n")
	x.reads.Reads = []string{"syn.v1", "syn.v2"}        // an input added
	x.drop.Reads = []string{"syn.v1"}                   // an input removed
	x.order.Deps = []string{"syn/t00002", "syn/t00001"} // the same inputs, another key
	later := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)
	// unrecorded: built, the store gone, then an edit (the earlier inputs are not recorded).
	unrecorded := t.TempDir()
	must(unrecorded, "-q")
	os.RemoveAll(filepath.Join(unrecorded, "out/.labbuild/cache"))
	write(filepath.Join(unrecorded, "synthetic.yaml"), "syn.v5: changed\n")
	// blocked: built from sources, then one source gone (could not be evaluated).
	blocked := synthDir(t, 60)
	must(blocked, "-q")
	os.Remove(filepath.Join(blocked, "src/5.txt")) // syn/t00056 reads syn/t00005

	cmds := []struct {
		dir  string
		args []string
	}{
		{fresh, []string{"-n"}},
		{fresh, []string{"-n", "--json"}},
		{fresh, []string{"graph"}},
		{fresh, []string{"graph", "--format", "tree"}},
		{fresh, []string{"explain", "syn/t00055"}},
		{lab, []string{"-n"}},
		{lab, []string{"-n", "--json"}},
		{lab, []string{"-n", "-B"}},
		{lab, []string{"-n", "--regenerate", "x/key"}},
		{lab, []string{"-n", "--now", later, "x/cert"}},
		{lab, []string{"-n", "x/ext"}},
		{lab, []string{"graph"}},
		{lab, []string{"graph", "--all", "--by", "family"}},
		{lab, []string{"graph", "--all", "--format", "tree"}},
		{lab, []string{"graph", "--all", "--format", "json"}},
		{lab, []string{"explain", "syn/t00003"}},
		{lab, []string{"explain", "--json", "syn/t00053"}},
		{lab, []string{"explain", "syn/t00007"}},
		{lab, []string{"explain", "syn/t00008"}},
		{lab, []string{"explain", "x/flaky"}},
		{lab, []string{"explain", "x/ext"}},
		{unrecorded, []string{"-n"}},
		{blocked, []string{"-n", "-k", "--json"}},
		{blocked, []string{"-n", "-k"}},
		{blocked, []string{"graph", "--format", "tree"}},
		{blocked, []string{"explain", "syn/t00056"}},
	}
	digits := regexp.MustCompile(`[0-9]+\.[0-9]+s\b`) // durations, if any
	runCmds := func() []string {
		outs := make([]string, len(cmds))
		for i, c := range cmds {
			code, out, errs := labbuild(c.dir, c.args...)
			outs[i] = digits.ReplaceAllString(fmt.Sprintf("exit %d\n%s--- stderr\n%s", code, out, errs), "<d>s")
		}
		return outs
	}
	// A plan that stops at its first error (no -k) names the targets it did not reach: which
	// they are depends on the workers' timing, so that rendering is checked on a fixed result.
	fixed := &engine.Result{Failed: []string{"a/failed"}, Skipped: []string{"a/skipped"}, NotStarted: []string{"a/not-started"},
		UpToDate: []string{"a/up-to-date"}}
	renderFixed := func() string {
		var out bytes.Buffer
		c := &cli{stdout: &out}
		printPlan(c, fixed)
		if err := printPlanJSON(c, fixed); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	runAll := func() []string { return append(runCmds(), renderFixed()) }
	want := runAll()
	token := regexp.MustCompile(`⟦([0-9a-f]*)⟧`)
	decode := func(s string) string {
		return token.ReplaceAllStringFunc(s, func(m string) string {
			b, _ := hex.DecodeString(token.FindStringSubmatch(m)[1])
			return string(b)
		})
	}
	for k := engine.ReasonKind(1); int(k) < len(engine.ReasonText); k++ {
		words := engine.ReasonText[k]
		engine.ReasonText[k] = func(r engine.Reason) string { return "⟦" + hex.EncodeToString([]byte(words(r))) + "⟧" }
		got := runAll()
		engine.ReasonText[k] = words
		shown := false
		for i := range got {
			what := "the fixed plan"
			if i < len(cmds) {
				what = "`labbuild " + strings.Join(cmds[i].args, " ") + "`"
			}
			shown = shown || strings.Contains(got[i], "⟦")
			if d := decode(got[i]); d != want[i] {
				t.Errorf("reason kind %d reworded: %s printed more than that reason differently:\n--- reworded, decoded\n%s\n--- as worded\n%s",
					k, what, d, want[i])
			}
		}
		switch {
		case k == engine.StoreUnusable || k == engine.Undeclared:
			// Only a real build shows these: TestReasonWordingEngine.
		case !shown:
			t.Errorf("reason kind %d: no command of the scenario shows it; the test proves nothing for it", k)
		}
	}
}

// wordingTargets are TestReasonWording's targets beside the synthetic graph, each there to
// give one kind of reason: x/flaky fails while dir/fail exists (last attempt failed), x/reads
// and x/drop get an input added and removed, x/order its upstreams reordered (inputs changed,
// none of them), x/cert goes stale an hour after it is made (renewal), x/key is sticky
// (--regenerate), and x/ext is External, its Probe seeing drift while dir/drift exists.
type wordingSet struct {
	all                                     []*engine.Target
	flaky, reads, drop, order, cert, key, e *engine.Target
}

func wordingTargets(dir string) wordingSet {
	write := func(ctx context.Context, s *engine.Step) error {
		return s.WriteFile("out", []byte(s.Target().Name+"\n"), 0o644)
	}
	var w wordingSet
	w.flaky = &engine.Target{Name: "x/flaky", Reads: []string{"syn.v0"}, Run: func(ctx context.Context, s *engine.Step) error {
		if _, err := os.Stat(filepath.Join(dir, "fail")); err == nil {
			return errors.New("told to fail")
		}
		return write(ctx, s)
	}}
	w.reads = &engine.Target{Name: "x/reads", Reads: []string{"syn.v1"}, Run: write}
	w.drop = &engine.Target{Name: "x/drop", Reads: []string{"syn.v1", "syn.v2"}, Run: write}
	w.order = &engine.Target{Name: "x/order", Deps: []string{"syn/t00001", "syn/t00002"}, Run: write}
	w.cert = &engine.Target{Name: "x/cert", Reads: []string{"syn.v4"}, Run: func(ctx context.Context, s *engine.Step) error {
		s.SetStaleAt(s.Epoch().Add(time.Hour))
		return write(ctx, s)
	}}
	w.key = &engine.Target{Name: "x/key", Sticky: true, Run: write}
	w.e = &engine.Target{Name: "x/ext", External: true, Deps: []string{"x/key"}, Run: write,
		Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
			if _, err := os.Stat(filepath.Join(dir, "drift")); err == nil {
				return engine.ProbeResult{Action: engine.Update, Reason: "the object was edited by hand"}, nil
			}
			return engine.ProbeResult{Action: engine.Keep}, nil
		}}
	w.all = []*engine.Target{w.flaky, w.reads, w.drop, w.order, w.cert, w.key, w.e}
	return w
}
