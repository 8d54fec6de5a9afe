package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/render/mco"
	"sigs.k8s.io/yaml"
)

// TestMatchesRealMCO: for every ../shared/fixtures/mco-real/<release>/<lab>/ (what labbuild
// handed the real MCO of that release for a sample lab, and what the real programs wrote), the
// stand-in built for that release, run with the same inputs and command lines (render/mco
// OperatorArgs and ControllerArgs, the --manifest-dir as targets/mco.go stages it), writes the
// same files, byte for byte: the operator's bootstrap manifests and the controller's rendered
// MachineConfigs, pools and ControllerConfig. A release folder added beside 4.18 (4.20, 4.22,
// okd-4.22) is taken without a change here.
func TestMatchesRealMCO(t *testing.T) {
	shared := testenv.RequireShared(t)
	root := filepath.Join(shared, "fixtures/mco-real")
	rels, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rels {
		if !r.IsDir() {
			continue
		}
		rel, okd := strings.CutPrefix(r.Name(), "okd-")
		if _, ok := releases[rel]; !ok {
			t.Errorf("fixtures/mco-real/%s: the stand-in plays no release %q (it plays %v)", r.Name(), rel, sortedReleases())
			continue
		}
		templates := filepath.Join(shared, "fixtures/versions", rel, "mco/templates")
		if rel == "4.18" {
			templates = filepath.Join(shared, "fixtures/mco/templates")
		}
		labs, err := os.ReadDir(filepath.Join(root, r.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range labs {
			if !l.IsDir() {
				continue
			}
			n++
			dir := filepath.Join(root, r.Name(), l.Name())
			t.Run(r.Name()+"/"+l.Name(), func(t *testing.T) {
				playRelease(t, rel, okd)
				got := runLikeLabbuild(t, dir, templates)
				compareTrees(t, dir, got)
			})
		}
	}
	if n == 0 {
		t.Fatalf("no <release>/<lab> folders under %s", root)
	}
}

// playRelease makes this test binary's stand-in play rel (the build's -X main.payloadRelease and
// -tags scos, as the sample payload builds it) until the test ends.
func playRelease(t *testing.T, rel string, okd bool) {
	t.Helper()
	oldRel, oldSCOS := payloadRelease, scos
	payloadRelease, scos = rel, okd
	if okd {
		payloadRelease = "okd-" + rel
	}
	t.Cleanup(func() { payloadRelease, scos = oldRel, oldSCOS })
}

func sortedReleases() []string {
	var out []string
	for r := range releases {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// runLikeLabbuild runs the operator and controller bootstraps on dir/inputs as targets/mco.go
// does and returns the directory holding operator-bootstrap/ and controller-bootstrap/.
func runLikeLabbuild(t *testing.T, dir, templates string) string {
	t.Helper()
	in := filepath.Join(dir, "inputs")
	out := t.TempDir()
	// The payload version is the FeatureGate status's (mco/inputs writes it for the release);
	// the release image is the one labbuild passed, which the real ControllerConfig records.
	var fg struct {
		Status struct {
			FeatureGates []struct{ Version string } `json:"featureGates"`
		} `json:"status"`
	}
	fgDoc := readYAMLJSON(t, filepath.Join(in, mco.FeatureGateFile))
	if err := json.Unmarshal(fgDoc, &fg); err != nil || len(fg.Status.FeatureGates) == 0 {
		t.Fatalf("%s: no status.featureGates[0].version (%v)", mco.FeatureGateFile, err)
	}
	version := fg.Status.FeatureGates[0].Version
	cc, err := os.ReadFile(filepath.Join(dir, "operator-bootstrap", mco.OperatorManifestDir, "machineconfigcontroller-controllerconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^  releaseImage: (\S+)$`).FindSubmatch(cc)
	if m == nil {
		t.Fatal("the real ControllerConfig has no spec.releaseImage")
	}
	opDest := filepath.Join(out, "operator-bootstrap")
	if code, log := run(t, "machine-config-operator", mco.OperatorArgs(in, opDest, string(m[1]), version)); code != 0 {
		t.Fatalf("operator bootstrap exit %d:\n%s", code, log)
	}
	// The controller's --manifest-dir: the operator's bootstrap manifests, the FeatureGate and
	// the 99-<role>-ssh MachineConfigs (render/manifests, with the key the real render carries).
	mdir := filepath.Join(out, "mcc-bootstrap")
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(opDest, mco.OperatorManifestDir))
	if err != nil {
		t.Fatal(err)
	}
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range entries {
		copyFile(filepath.Join(opDest, mco.OperatorManifestDir, e.Name()), filepath.Join(mdir, e.Name()))
	}
	copyFile(filepath.Join(in, mco.FeatureGateFile), filepath.Join(mdir, filepath.Base(mco.FeatureGateFile)))
	key := sshKeyOf(t, filepath.Join(dir, "base/master/config.ign"))
	for _, role := range mco.Pools {
		f, err := manifests.SSHMachineConfig(role, key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mdir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctlDest := filepath.Join(out, "controller-bootstrap")
	args := mco.ControllerArgs(templates, mdir, ctlDest, filepath.Join(opDest, mco.OperatorPullSecret), version)
	if code, log := run(t, "machine-config-controller", args); code != 0 {
		t.Fatalf("controller bootstrap exit %d:\n%s", code, log)
	}
	return out
}

// readYAMLJSON reads a YAML or JSON file as JSON.
func readYAMLJSON(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if json.Valid(b) {
		return b
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	j, _ := json.Marshal(v)
	return j
}

// sshKeyOf returns the core user's key of a rendered config.
func sshKeyOf(t *testing.T, ign string) string {
	t.Helper()
	var c struct {
		Passwd struct {
			Users []struct {
				Name              string
				SSHAuthorizedKeys []string `json:"sshAuthorizedKeys"`
			}
		}
	}
	b, err := os.ReadFile(ign)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &c); err != nil || len(c.Passwd.Users) == 0 || len(c.Passwd.Users[0].SSHAuthorizedKeys) == 0 {
		t.Fatalf("%s: no ssh key (%v)", ign, err)
	}
	return c.Passwd.Users[0].SSHAuthorizedKeys[0]
}

// compareTrees requires the same files under operator-bootstrap/ and controller-bootstrap/ of
// real and got, byte for byte.
func compareTrees(t *testing.T, real, got string) {
	t.Helper()
	for _, sub := range []string{"operator-bootstrap", "controller-bootstrap"} {
		want, have := treeFiles(t, filepath.Join(real, sub)), treeFiles(t, filepath.Join(got, sub))
		for p := range want {
			if _, ok := have[p]; !ok {
				t.Errorf("%s/%s: written by the real MCO, not by the stand-in", sub, p)
			}
		}
		for p, b := range have {
			w, ok := want[p]
			if !ok {
				t.Errorf("%s/%s: written by the stand-in, not by the real MCO", sub, p)
				continue
			}
			if !bytes.Equal(b, w) {
				t.Errorf("%s/%s differs from the real MCO's (%d vs %d bytes): %s", sub, p, len(b), len(w), firstDiff(b, w))
			}
		}
	}
}

func treeFiles(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// firstDiff shows the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  stand-in: %.300q\n  real:     %.300q", i+1, gl, wl)
		}
	}
	return "same lines, different bytes"
}
