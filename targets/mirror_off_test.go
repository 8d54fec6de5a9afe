package targets

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/lab"
)

// mirrorOffDefs lists every target of c with everything that keys it besides the values it
// reads: name, recipe version, deps, config reads (with the canonical JSON each reads),
// files, and the sticky/gate/external marks; one line each, sorted.
func mirrorOffDefs(t *testing.T, c *lab.Config) []string {
	t.Helper()
	var out []string
	for _, tg := range (Lab{Config: c}).Declare() {
		var reads []string
		for _, r := range tg.Reads {
			v, _ := c.Lookup(r)
			reads = append(reads, r+"="+string(v))
		}
		out = append(out, fmt.Sprintf("%s v%d deps=%s reads=%s files=%s sticky=%v gate=%v external=%v doc=%q", tg.Name, tg.Version,
			strings.Join(tg.Deps, ","), strings.Join(reads, ","), strings.Join(tg.Files, ","), tg.Sticky, tg.Gate, tg.External, tg.Doc))
	}
	slices.Sort(out)
	return out
}

// TestMirrorOffUnchanged: a lab without `mirror:` (and one with mirror.enabled: false) declares
// exactly the targets labbuild declared before the mirror existed, each reading the same
// values, so every key, and so every output, is the same. The golden file was written by
// mirrorOffDefs run on the commit before the mirror (2afee2d), on the embedded default lab, and
// rewritten once when the mirror merged with issues 24 and 25's handover and MCS changes (the
// diff was checked to be exactly those: the kubelet signer, the service-account objects, the
// RBAC and install-manifests targets, the static pods' v2, the MCS doc line), and once more
// for issue 37 (the payload decides the release: the default lab's 4.22 image, release.version
// read from the payload, derived.release on the targets that follow a release row, the
// FeatureGate, CRDs and CVO pod from the payload, the MCS CA, the OKD support Secret, no
// rhel-coreos image targets); it is not regenerated from the code under test.
func TestMirrorOffUnchanged(t *testing.T) {
	golden := filepath.Join("testdata", "mirror-off-targets.golden")
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	off, err := lab.ParseConfig([]byte("mirror:\n  enabled: false\n"), "off.yaml")
	if err != nil {
		t.Fatal(err)
	}
	off.Release.Version = testLabConfig().Release.Version
	if os.Getenv("LABBUILD_WRITE_MIRROR_OFF") != "" { // a deliberate rewrite (issue 37), never in CI
		os.WriteFile(golden, []byte(strings.Join(mirrorOffDefs(t, testLabConfig()), "\n")+"\n"), 0o644)
	}
	for name, c := range map[string]*lab.Config{"no mirror:": testLabConfig(), "mirror.enabled: false": off} {
		got := mirrorOffDefs(t, c)
		for _, l := range got {
			if !slices.Contains(want, l) {
				t.Errorf("%s: target not as before the mirror: %s", name, l)
			}
		}
		for _, l := range want {
			if !slices.Contains(got, l) {
				t.Errorf("%s: target missing or changed: %s", name, l)
			}
		}
	}
	// The config as targets see it: no mirror field at all without the section.
	if _, ok := testLabConfig().Lookup("mirror"); ok {
		t.Error(`the default config has a "mirror" field`)
	}
	on, err := lab.ParseConfig([]byte("mirror:\n  enabled: true\n"), "on.yaml")
	if err != nil {
		t.Fatal(err)
	}
	on.Release.Version = off.Release.Version
	if !on.MirrorOn() || on.Mirror.Storage != lab.DefaultMirrorStorage || on.Mirror.Port != lab.DefaultMirrorPort {
		t.Errorf("mirror: {enabled: true} = %+v, want the defaults", on.Mirror)
	}
	var mirrorTargets []string
	for _, l := range mirrorOffDefs(t, on) {
		if !slices.Contains(want, l) {
			mirrorTargets = append(mirrorTargets, strings.Fields(l)[0])
		}
	}
	wantNew := []string{"ignition/bootstrap", "ignition/master-0", "ignition/master-1", "ignition/master-2", "ignition/worker-0", "ignition/worker-1", "manifests/bootstrap", "manifests/cluster/cluster-config-v1", "manifests/cluster/mirror", "manifests/cluster/proxy", "manifests/cluster/pull-secret", "manifests/cluster/user-ca-bundle",
		"mco/controller-bootstrap", "mco/inputs", "mirror/credentials", "mirror/registry", "mirror/release", "pki/ca/mirror-ca", "pki/cert/mirror", "pki/key/mirror", "pki/key/mirror-ca"}
	if !slices.Equal(mirrorTargets, wantNew) {
		t.Errorf("targets new or changed with mirror.enabled: %v, want %v", mirrorTargets, wantNew)
	}
}
