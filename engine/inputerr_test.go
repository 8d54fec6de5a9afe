package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// sourcedValues are synthetic.MapValues that know where each field was set, as package targets' Config.
type sourcedValues struct{ synthetic.MapValues }

func (sourcedValues) Where(f string) string { return "my-lab.yaml:7" }
func (sourcedValues) Source() string        { return "my-lab.yaml" }

// sourcedConfig is a Source (as package targets' *Config) whose values know where each field
// was set: Load wraps a Source's values to keep their encodings, and messages must still name
// the lab file and line through that wrapper.
type sourcedConfig struct {
	sourcedValues
	ts []*engine.Target
}

func (c sourcedConfig) Declare() []*engine.Target { return c.ts }

// TestSharedCauseOnce: five targets declare one input file that cannot be read; with -k the
// cause is printed once, naming the field, where the lab file sets it and the path, and each
// target's FAILED line refers to it. Each target's log keeps the full error. In a dry run too.
func TestSharedCauseOnce(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "pull-secret.json")
	vals := sourcedValues{synthetic.MapValues{"access.pullSecretFile": json.RawMessage(`"` + missing + `"`)}}
	var ts []*engine.Target
	for _, n := range []string{"release/a", "release/b", "manifests/c", "ignition/d", "ignition/e"} {
		ts = append(ts, &engine.Target{Name: n, Files: []string{"access.pullSecretFile"}, Run: func(ctx context.Context, s *engine.Step) error {
			b, err := s.File("access.pullSecretFile")
			if err != nil {
				return err
			}
			return s.WriteFile("out", b, 0o600)
		}})
	}
	ts = append(ts, &engine.Target{Name: "pki/ok", Run: func(ctx context.Context, s *engine.Step) error { return s.WriteFile("out", nil, 0o644) }})
	cause := "labbuild: cannot read access.pullSecretFile (my-lab.yaml:7) names " + missing +
		": no such file or directory; set access.pullSecretFile to an existing, readable file\n"
	for _, c := range []struct {
		name string
		dry  bool
		opts engine.Options
	}{
		{"values", false, engine.Options{Values: vals, Targets: ts}},
		{"values, dry run", true, engine.Options{Values: vals, Targets: ts}},
		{"config", false, engine.Options{Config: sourcedConfig{vals, ts}}},
		{"config, dry run", true, engine.Options{Config: sourcedConfig{vals, ts}}},
	} {
		dry := c.dry
		var errb bytes.Buffer
		out := t.TempDir()
		o := c.opts
		o.OutDir, o.Jobs, o.KeepGoing, o.DryRun, o.Stderr = out, 2, true, dry, &errb
		r, err := engine.Build(context.Background(), o)
		var be *engine.BuildError
		if !errors.As(err, &be) || len(be.Failed) != 5 {
			t.Fatalf("%s: err %v, want 5 failed", c.name, err)
		}
		got := errb.String()
		if strings.Count(got, cause) != 1 || strings.Count(got, "cannot read") != 1 {
			t.Errorf("%s: the cause is not printed exactly once:\n%s", c.name, got)
		}
		if i, j := strings.Index(got, cause), strings.Index(got, "FAILED:"); i < 0 || j < i {
			t.Errorf("%s: the cause does not come before the first FAILED line:\n%s", c.name, got)
		}
		for _, n := range r.Failed {
			if want := "FAILED: " + n + ": needs access.pullSecretFile, which cannot be read (above)\n"; !strings.Contains(got, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", c.name, want, got)
			}
		}
		if !dry {
			b, _ := os.ReadFile(filepath.Join(out, ".labbuild", "log", "release", "a.log"))
			if !strings.Contains(string(b), "names "+missing+": no such file or directory") {
				t.Errorf("release/a's log lacks the full cause:\n%s", b)
			}
		}
	}
}
