package targets

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/manifests"
)

// mirrorCredentialsOnly is mirror/credentials when cfg has a mirror (labs of tests that
// declare the families they need, without the registry and the copy).
func mirrorCredentialsOnly(cfg *lab.Config) []*engine.Target {
	var out []*engine.Target
	for _, m := range mirrorTargets(cfg, false) {
		if m.Name == "mirror/credentials" {
			out = append(out, m)
		}
	}
	return out
}

// TestMirrorIgnition: with mirror.enabled the bootstrap's Ignition has the registries.conf
// drop-in (the installer's template, from the release and art-dev repositories), the mirror
// CA as a trust anchor and the pull secret with the mirror's auth; the MCO bootstrap (the
// stand-in, on the work dir the real operator reads) gets the IDMS in its manifest dir and
// the user-ca-bundle, and the nodes' Ignition carries the merged pull secret.
func TestMirrorIgnition(t *testing.T) {
	l := newMCOLab(t)
	l.cfg.Mirror = &lab.MirrorConfig{Enabled: true, Storage: t.TempDir(), Port: 5000}
	l.build("ignition/bootstrap", "ignition/master-0")
	cfg := l.ignLoad("bootstrap")
	host := "192.168.126.1:5000"
	want := manifests.RegistriesConf([]manifests.MirrorSource{
		{Source: "quay.io/openshift-release-dev/ocp-release", Mirrors: []string{host + "/openshift-release-dev/ocp-release"}},
		{Source: "quay.io/openshift-release-dev/ocp-v4.0-art-dev", Mirrors: []string{host + "/openshift-release-dev/ocp-v4.0-art-dev"}},
	})
	if got := ignContents(t, cfg, "bootstrap", MirrorRegistriesDropIn); !bytes.Equal(got, want) {
		t.Errorf("bootstrap %s:\n%s\nwant\n%s", MirrorRegistriesDropIn, got, want)
	}
	if got := ignContents(t, cfg, "bootstrap", TrustBundleAnchor); !bytes.Equal(got, l.file("pki/ca/mirror-ca", "tls.crt")) {
		t.Error("the bootstrap's CA anchor is not the mirror CA")
	}
	auth := base64.StdEncoding.EncodeToString([]byte(MirrorUser + ":" + string(l.file("mirror/credentials", "password"))))
	for _, node := range []string{"bootstrap", "master-0"} {
		ps := ignContents(t, l.ignLoad(node), node, ignition.PathPullSecret)
		if !bytes.Contains(ps, []byte(`"`+host+`":{"auth":"`+auth+`"}`)) {
			t.Errorf("%s: %s lacks the mirror's auth", node, ignition.PathPullSecret)
		}
	}
	if !bytes.Contains(l.file("mco/inputs", "manifests/user-ca-bundle-config.yaml"), []byte("BEGIN CERTIFICATE")) {
		t.Error("mco/inputs has no user-ca-bundle")
	}
	// A master's registries.conf is the MCO render's (99-master-generated-registries from the
	// IDMS; byte-compared with the real 4.18 controller in internal/rig/standin/mco
	// TestRegistriesMatchRealMCO), and its trust anchor the user-ca-bundle (the MCO's
	// additional-trust-bundle template); no bootstrap drop-in.
	m := l.ignLoad("master-0")
	conf := string(ignContents(t, m, "master-0", "/etc/containers/registries.conf"))
	for _, want := range []string{
		`location = "quay.io/openshift-release-dev/ocp-v4.0-art-dev"`,
		`location = "` + host + `/openshift-release-dev/ocp-v4.0-art-dev"`,
		`location = "` + host + `/openshift-release-dev/ocp-release"`,
		`pull-from-mirror = "digest-only"`,
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("master-0 /etc/containers/registries.conf lacks %s:\n%s", want, conf)
		}
	}
	if got := ignContents(t, m, "master-0", "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"); !bytes.Contains(got, bytes.TrimSpace(l.file("pki/ca/mirror-ca", "tls.crt"))) {
		t.Errorf("master-0's user-ca-bundle anchor is not the mirror CA:\n%s", got)
	}
	for _, f := range m.Storage.Files {
		if f.Path == MirrorRegistriesDropIn {
			t.Errorf("master-0 has the bootstrap's drop-in %s", f.Path)
		}
	}
}
