package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// TestProbeReasonLogged: an External target that its Probe sends to run although its record is
// current writes the Probe's answer as the first line of its log, so the log says why a null
// build acted; a target the Probe keeps does not run, and its log stays as it was.
func TestProbeReasonLogged(t *testing.T) {
	probe := engine.ProbeResult{Action: engine.Keep}
	ts := []*engine.Target{{Name: "cluster/up", External: true,
		Run: func(ctx context.Context, s *engine.Step) error {
			s.Logf("waited")
			return s.WriteFile("record.json", []byte("{}"), 0o644)
		},
		Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) { return probe, nil },
	}}
	out := t.TempDir()
	build := func() *engine.Result {
		t.Helper()
		r, err := engine.Build(context.Background(), engine.Options{Values: synthetic.MapValues{}, OutDir: out, Targets: ts, Goals: []string{"cluster/up"}, Jobs: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	logOf := func() string {
		b, _ := os.ReadFile(filepath.Join(out, ".labbuild", "log", "cluster", "up.log"))
		return string(b)
	}
	build()
	if got := logOf(); got != "waited\n" {
		t.Errorf("first build's log %q, want only the Run's line", got)
	}
	probe = engine.ProbeResult{Action: engine.Update, Reason: "1/2 ClusterOperators Available (waiting: etcd)"}
	if r := build(); len(r.Built) != 1 {
		t.Fatalf("the Probe's update ran %v", r.Built)
	}
	if got, want := logOf(), "probe: update: 1/2 ClusterOperators Available (waiting: etcd)\nwaited\n"; got != want {
		t.Errorf("log after the Probe's update %q, want %q", got, want)
	}
	probe = engine.ProbeResult{Action: engine.Keep}
	if r := build(); len(r.Built) != 0 || !strings.HasPrefix(logOf(), "probe: update:") {
		t.Errorf("a kept target ran %v or lost its log %q", r.Built, logOf())
	}
}
