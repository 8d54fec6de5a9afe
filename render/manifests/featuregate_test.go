package manifests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// fixtureRoots are the releases' fixture folders below ../shared (OKD 4.22's cluster-config-api
// image is OCP 4.22's: ../shared/fixtures/versions/okd-4.22/NOTES.md).
var fixtureRoots = map[string]string{
	"4.18":     "fixtures/release",
	"4.20":     "fixtures/versions/4.20/release",
	"4.22":     "fixtures/versions/4.22/release",
	"okd-4.22": "fixtures/versions/4.22/release",
}

// payloadFeatureGates reads the FeatureGate files of release's cluster-config-api /manifests
// fixture (every file: the selection must not go by name).
func payloadFeatureGates(t testing.TB, release string) map[string][]byte {
	t.Helper()
	dir := filepath.Join(testenv.RequireShared(t), fixtureRoots[release], "cluster-config-api/manifests")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// TestFeatureGatePerRelease is the FeatureGate table test: for every release, cluster profile
// and feature set of the fixtures (28 rows), the status FeatureGateStatusOf reads from that
// release's payload manifests is what that release's openshift/api `render` computes. The
// counts are the real render's, built off-repo from api release-4.18 f9b2d1ae, release-4.20
// 05da40ea and release-4.22 9fda5179 and run on an installer-style FeatureGate for each row
// (issue 37's research note, §2.5; not run here); the gate lists are pinned in
// testdata/featuregates/<release>.golden (go test -update rewrites them from the fixtures), with
// a few gates that moved between releases named below, so a wrong selection cannot pass.
func TestFeatureGatePerRelease(t *testing.T) {
	const smha, ibm = "self-managed-high-availability", "ibm-cloud-managed"
	type row struct {
		profile, set      string
		enabled, disabled int
	}
	for _, rel := range []struct {
		release, version string
		rows             []row
		on, off          []string // gates enabled / disabled in Default on self-managed-high-availability
	}{
		{"4.18", "4.18.0", []row{
			{smha, "Default", 33, 52}, {smha, "TechPreviewNoUpgrade", 78, 7}, {smha, "DevPreviewNoUpgrade", 79, 6},
			{ibm, "Default", 33, 52}, {ibm, "TechPreviewNoUpgrade", 77, 8}, {ibm, "DevPreviewNoUpgrade", 78, 7},
		}, []string{"NewOLM", "AdminNetworkPolicy"}, []string{"GatewayAPI"}},
		{"4.20", "4.20.0", []row{
			{smha, "Default", 38, 64}, {smha, "TechPreviewNoUpgrade", 93, 9}, {smha, "DevPreviewNoUpgrade", 97, 5},
			{ibm, "Default", 37, 65}, {ibm, "TechPreviewNoUpgrade", 87, 15}, {ibm, "DevPreviewNoUpgrade", 91, 11},
		}, []string{"GatewayAPI", "HighlyAvailableArbiter"}, nil},
		{"4.22", "4.22.0", []row{
			{smha, "Default", 33, 85}, {smha, "TechPreviewNoUpgrade", 99, 19}, {smha, "DevPreviewNoUpgrade", 111, 7}, {smha, "OKD", 33, 85},
			{ibm, "Default", 30, 88}, {ibm, "TechPreviewNoUpgrade", 92, 26}, {ibm, "DevPreviewNoUpgrade", 104, 14}, {ibm, "OKD", 30, 88},
		}, []string{"EVPN", "NoRegistryClusterInstall"}, []string{"OSStreams", "ClusterAPIMachineManagement", "CRDCompatibilityRequirementOperator"}},
		{"okd-4.22", "4.22.0-okd-scos.1", []row{
			{smha, "Default", 33, 85}, {smha, "TechPreviewNoUpgrade", 99, 19}, {smha, "DevPreviewNoUpgrade", 111, 7}, {smha, "OKD", 33, 85},
			{ibm, "Default", 30, 88}, {ibm, "TechPreviewNoUpgrade", 92, 26}, {ibm, "DevPreviewNoUpgrade", 104, 14}, {ibm, "OKD", 30, 88},
		}, []string{"EVPN"}, []string{"OSStreams"}},
	} {
		t.Run(rel.release, func(t *testing.T) {
			m := payloadFeatureGates(t, rel.release)
			var golden bytes.Buffer
			for _, r := range rel.rows {
				st, err := FeatureGateStatusOf(FeatureGateInput{Manifests: m, Version: rel.version, Profile: r.profile, FeatureSet: r.set})
				if err != nil {
					t.Errorf("%s %s: %v", r.profile, r.set, err)
					continue
				}
				if len(st.Enabled) != r.enabled || len(st.Disabled) != r.disabled || st.Version != rel.version {
					t.Errorf("%s %s: %d enabled / %d disabled, version %q; the release's render gives %d / %d, %q",
						r.profile, r.set, len(st.Enabled), len(st.Disabled), st.Version, r.enabled, r.disabled, rel.version)
				}
				fmt.Fprintf(&golden, "%s %s version=%s\nenabled: %s\ndisabled: %s\n", r.profile, r.set, st.Version,
					strings.Join(st.Enabled, " "), strings.Join(st.Disabled, " "))
				if r.profile == smha && r.set == "Default" {
					for _, g := range rel.on {
						if !contains(st.Enabled, g) {
							t.Errorf("%s Default: %s is not enabled", rel.release, g)
						}
					}
					for _, g := range rel.off {
						if !contains(st.Disabled, g) {
							t.Errorf("%s Default: %s is not disabled", rel.release, g)
						}
					}
				}
			}
			checkGolden(t, filepath.Join("testdata", "featuregates", rel.release+".golden"), golden.Bytes())
		})
	}
}

// cvoTemplate reads release's /bootstrap/bootstrap-pod.yaml fixture.
func cvoTemplate(t testing.TB, release string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RequireShared(t), fixtureRoots[release], "cvo/bootstrap/bootstrap-pod.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCVOPodPerRelease renders each release's own CVO bootstrap pod: labbuild's kubeconfig and
// pull policy, and what each release added (4.20 readOnlyRootFilesystem, 4.22 the profile
// annotation its render's Include needs), pinned in testdata/golden/cvo-<release>.yaml.
func TestCVOPodPerRelease(t *testing.T) {
	for _, rel := range []string{"4.18", "4.20", "4.22"} {
		b, err := CVOPodFromPayload(cvoTemplate(t, rel), imgRelease, "self-managed-high-availability")
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		s := string(b)
		for _, want := range []string{"--kubeconfig=" + KubeconfigsDir + "/localhost.kubeconfig", "imagePullPolicy: IfNotPresent",
			"--release-image=" + imgRelease, "value: self-managed-high-availability"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: no %q in\n%s", rel, want, s)
			}
		}
		if got := strings.Contains(s, "readOnlyRootFilesystem: true"); got != (rel != "4.18") {
			t.Errorf("%s: readOnlyRootFilesystem %v", rel, got)
		}
		if got := strings.Contains(s, "include.release.openshift.io/self-managed-high-availability: \"true\""); got != (rel == "4.22") {
			t.Errorf("%s: profile annotation %v", rel, got)
		}
		if strings.Contains(s, "/etc/kubernetes/kubeconfig\n") || strings.Contains(s, "{{") {
			t.Errorf("%s: upstream kubeconfig path or template left:\n%s", rel, s)
		}
		checkGolden(t, filepath.Join("testdata", "golden", "cvo-"+rel+".yaml"), b)
	}
	if _, err := CVOPodFromPayload([]byte("kind: Pod\nspec:\n  nosuchfield: 1\n"), imgRelease, "x"); err == nil || !strings.Contains(err.Error(), "nosuchfield") {
		t.Errorf("unknown field: %v, want an error naming it", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// checkGolden compares got with the golden file (go test -update rewrites it).
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update to accept):\n%s", path, got)
	}
}

// TestFeatureGateRefusals: what the releases' renders refuse, labbuild refuses before the
// build, naming what the payload has: OKD on 4.18 and 4.20 (the real render: "no information
// found for FeatureSet=\"OKD\""), a profile without FeatureGate files, a 4.22 version whose
// major does not parse ("problem parsing payload version"; 4.20's render never parses it), a
// major the 4.22 files do not hold, and a payload holding two files for one selection.
func TestFeatureGateRefusals(t *testing.T) {
	m418, m420, m422 := payloadFeatureGates(t, "4.18"), payloadFeatureGates(t, "4.20"), payloadFeatureGates(t, "4.22")
	in := func(m map[string][]byte, version, profile, set string) FeatureGateInput {
		return FeatureGateInput{Manifests: m, Version: version, Profile: profile, FeatureSet: set}
	}
	const smha = "self-managed-high-availability"
	two := map[string][]byte{}
	for k, v := range m422 {
		two[k] = v
	}
	two["copy.yaml"] = m422["featureGate-4-10-SelfManagedHA-Default.yaml"]
	excl := map[string][]byte{"fg.yaml": bytes.Replace(m422["featureGate-4-10-SelfManagedHA-Default.yaml"],
		[]byte(`"release.openshift.io/major-version": "4,5,6,7,8,9,10"`), []byte(`"release.openshift.io/major-version": "-4"`), 1)}
	emptyCR := map[string][]byte{"cr.yaml": m422["0000_05_config-operator_02_featuregate.cr.yaml"]}
	for _, tc := range []struct {
		name string
		in   FeatureGateInput
		want string
	}{
		{"OKD on 4.18", in(m418, "4.18.0", smha, "OKD"), "feature sets Default, DevPreviewNoUpgrade, TechPreviewNoUpgrade"},
		{"OKD on 4.20", in(m420, "4.20.0", smha, "OKD"), "no FeatureGate for feature set OKD"},
		{"profile", in(m422, "4.22.0", "single-node-developer", "Default"), "ibm-cloud-managed, self-managed-high-availability"},
		{"4.22 version", in(m422, "banana", smha, "Default"), "problem parsing payload version"},
		{"major 11", in(m422, "11.0.0", smha, "Default"), "major version 11"},
		{"two files", in(two, "4.22.0", smha, "Default"), "copy.yaml, featureGate-4-10-SelfManagedHA-Default.yaml"},
		{"excluded major", in(excl, "4.22.0", smha, "Default"), "major version 4"},
		{"empty-resource CR alone", in(emptyCR, "4.22.0", smha, "Default"), "no FeatureGate"},
		{"custom", in(m422, "4.22.0", smha, "CustomNoUpgrade"), "CustomNoUpgrade is not supported"},
	} {
		if _, err := FeatureGateStatusOf(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// 4.20's render does not parse the version: any string is written as it is.
	st, err := FeatureGateStatusOf(in(m420, "banana", smha, "Default"))
	if err != nil || st.Version != "banana" {
		t.Errorf("4.20 with version banana: %v, %q; want it accepted, as its render does", err, st.Version)
	}
	// An exclusion-only list includes every other major.
	excl5 := map[string][]byte{"fg.yaml": bytes.Replace(excl["fg.yaml"], []byte(`"-4"`), []byte(`"-5"`), 1)}
	if _, err := FeatureGateStatusOf(in(excl5, "4.22.0", smha, "Default")); err != nil {
		t.Errorf("major-version \"-5\" with 4.22.0: %v", err)
	}
}

// TestMajorIncluded follows library-go pkg/manifest checkMajorVersion's list rules.
func TestMajorIncluded(t *testing.T) {
	for _, tc := range []struct {
		list  string
		major int
		want  bool
		err   bool
	}{
		{"4,5,6,7,8,9,10", 4, true, false}, {"4,5", 11, false, false}, {" 4 , 5 ", 5, true, false},
		{"-4", 4, false, false}, {"-4", 5, true, false}, {"4,-4", 4, false, true}, {"x", 4, false, true},
	} {
		got, err := majorIncluded(tc.list, tc.major)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("majorIncluded(%q, %d) = %v, %v; want %v, error %v", tc.list, tc.major, got, err, tc.want, tc.err)
		}
	}
}
