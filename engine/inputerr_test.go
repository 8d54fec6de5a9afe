package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sourcedValues are MapValues that know where each field was set, as package targets' Config.
type sourcedValues struct{ MapValues }

func (sourcedValues) Where(f string) string { return "my-lab.yaml:7" }
func (sourcedValues) Source() string        { return "my-lab.yaml" }

// TestSharedCauseOnce: five targets declare one input file that cannot be read; with -k the
// cause is printed once, naming the field, where the lab file sets it and the path, and each
// target's FAILED line refers to it. Each target's log keeps the full error. In a dry run too.
func TestSharedCauseOnce(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "pull-secret.json")
	vals := sourcedValues{MapValues{"access.pullSecretFile": json.RawMessage(`"` + missing + `"`)}}
	var ts []*Target
	for _, n := range []string{"release/a", "release/b", "manifests/c", "ignition/d", "ignition/e"} {
		ts = append(ts, &Target{Name: n, Files: []string{"access.pullSecretFile"}, Run: func(ctx context.Context, s *Step) error {
			b, err := s.File("access.pullSecretFile")
			if err != nil {
				return err
			}
			return s.WriteFile("out", b, 0o600)
		}})
	}
	ts = append(ts, &Target{Name: "pki/ok", Run: func(ctx context.Context, s *Step) error { return s.WriteFile("out", nil, 0o644) }})
	cause := "labbuild: cannot read access.pullSecretFile (my-lab.yaml:7) names " + missing +
		": no such file or directory; set access.pullSecretFile to an existing, readable file\n"
	for _, dry := range []bool{false, true} {
		var errb bytes.Buffer
		out := t.TempDir()
		r, err := Build(context.Background(), Options{Values: vals, OutDir: out, Targets: ts, Jobs: 2, KeepGoing: true, DryRun: dry, Stderr: &errb})
		var be *BuildError
		if !errors.As(err, &be) || len(be.Failed) != 5 {
			t.Fatalf("dry %v: err %v, want 5 failed", dry, err)
		}
		got := errb.String()
		if strings.Count(got, cause) != 1 || strings.Count(got, "cannot read") != 1 {
			t.Errorf("dry %v: the cause is not printed exactly once:\n%s", dry, got)
		}
		if i, j := strings.Index(got, cause), strings.Index(got, "FAILED:"); i < 0 || j < i {
			t.Errorf("dry %v: the cause does not come before the first FAILED line:\n%s", dry, got)
		}
		for _, n := range r.Failed {
			if want := "FAILED: " + n + ": needs access.pullSecretFile, which cannot be read (above)\n"; !strings.Contains(got, want) {
				t.Errorf("dry %v: stderr lacks %q:\n%s", dry, want, got)
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
