package manifests

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// testMirrorSources are a lab's imageDigestSources: the release and art-dev repositories at
// the mirror on the lab bridge (198.18.0.1:5000).
var testMirrorSources = []MirrorSource{
	{Source: "quay.io/openshift-release-dev/ocp-release", Mirrors: []string{"198.18.0.1:5000/openshift-release-dev/ocp-release"}},
	{Source: "quay.io/openshift-release-dev/ocp-v4.0-art-dev", Mirrors: []string{"198.18.0.1:5000/openshift-release-dev/ocp-v4.0-art-dev"}},
}

// TestMirrorGolden: the mirror's objects as openshift-install writes them for
// imageDigestSources and additionalTrustBundle (IDMS, user-ca-bundle, Proxy trustedCA, the
// install-config, the bootstrap registries.conf), byte for byte against golden files.
func TestMirrorGolden(t *testing.T) {
	ca, err := os.ReadFile(filepath.Join("testdata", "mirror-ca.crt")) // a test CA whose key was not kept
	if err != nil {
		t.Fatal(err)
	}
	idms, err := ImageDigestMirrorSet(testMirrorSources)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "mirror-"+idms.Name, idms.Data)
	cm, err := UserCABundle(append(append([]byte("\n"), ca...), '\n'))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "mirror-"+cm.Name, cm.Data)
	px, err := ProxyTrustedCA()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "mirror-"+px.Name, px.Data)
	golden(t, "mirror-registries.conf", RegistriesConf(testMirrorSources))
	cc, err := ClusterConfigV1(InstallConfig{Name: "ocp4", BaseDomain: "example.com", ClusterNetwork: "10.128.0.0/14", HostPrefix: 23,
		ServiceNetwork: "172.30.0.0/16", MachineNetwork: "198.18.0.0/24", Masters: 3,
		ImageDigestSources: testMirrorSources, AdditionalTrustBundle: string(ca)})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "mirror-"+cc.Name, cc.Data)
}

// TestClusterConfigTrustBundle: a trust bundle without a mirror (platform baremetal's BMC CA)
// is the install-config's additionalTrustBundle with policy Always and no imageDigestSources;
// without a bundle both are absent and the policy is the installer's default, Proxyonly.
func TestClusterConfigTrustBundle(t *testing.T) {
	ca, err := os.ReadFile(filepath.Join("testdata", "mirror-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		bundle, policy string
	}{{string(ca), "Always"}, {"", "Proxyonly"}} {
		cc, err := ClusterConfigV1(InstallConfig{Name: "ocp4", BaseDomain: "example.com", ClusterNetwork: "10.128.0.0/14", HostPrefix: 23,
			ServiceNetwork: "172.30.0.0/16", MachineNetwork: "198.18.0.0/24", Masters: 3, AdditionalTrustBundle: tc.bundle})
		if err != nil {
			t.Fatal(err)
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(cc.Data, &cm); err != nil {
			t.Fatal(err)
		}
		var ic map[string]any
		if err := yaml.Unmarshal([]byte(cm.Data["install-config"]), &ic); err != nil {
			t.Fatal(err)
		}
		got, _ := ic["additionalTrustBundle"].(string)
		if got != tc.bundle || ic["additionalTrustBundlePolicy"] != tc.policy || ic["imageDigestSources"] != nil {
			t.Errorf("bundle %d bytes: additionalTrustBundle %d bytes, policy %v, imageDigestSources %v; want policy %s and no sources",
				len(tc.bundle), len(got), ic["additionalTrustBundlePolicy"], ic["imageDigestSources"], tc.policy)
		}
	}
}

func TestMirrorBadInput(t *testing.T) {
	for name, f := range map[string]func() error{
		"no sources":    func() error { _, err := ImageDigestMirrorSet(nil); return err },
		"no mirrors":    func() error { _, err := ImageDigestMirrorSet([]MirrorSource{{Source: "quay.io/x"}}); return err },
		"not PEM":       func() error { _, err := UserCABundle([]byte("not a certificate")); return err },
		"empty bundle":  func() error { _, err := UserCABundle(nil); return err },
		"bad secret":    func() error { _, err := MergePullSecret([]byte("[1]"), "h:1", "u", "p"); return err },
		"auths not map": func() error { _, err := MergePullSecret([]byte(`{"auths":[]}`), "h:1", "u", "p"); return err },
	} {
		if f() == nil {
			t.Errorf("%s: no error", name)
		}
	}
	_, err := MergePullSecret([]byte(`{"auths":[]}`), "h:1", "u", "secret-password")
	if err != nil && strings.Contains(err.Error(), "secret-password") {
		t.Error("an error shows the password")
	}
}

// TestMergePullSecret: the mirror's entry is added (or replaces one for the same host) and
// every other entry and field is kept as it was.
func TestMergePullSecret(t *testing.T) {
	in := `{"auths":{"quay.io":{"auth":"cXVheTpw","email":"a@b"},"198.18.0.1:5000":{"auth":"b2xk"}},"credHelpers":{"x":"y"}}`
	out, err := MergePullSecret([]byte(in), "198.18.0.1:5000", "labbuild", "pw")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Auths       map[string]map[string]string `json:"auths"`
		CredHelpers map[string]string            `json:"credHelpers"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Auths["quay.io"]["auth"] != "cXVheTpw" || got.Auths["quay.io"]["email"] != "a@b" || got.CredHelpers["x"] != "y" {
		t.Errorf("other entries changed: %s", out)
	}
	if want := base64.StdEncoding.EncodeToString([]byte("labbuild:pw")); got.Auths["198.18.0.1:5000"]["auth"] != want || len(got.Auths) != 2 {
		t.Errorf("mirror entry: %s", out)
	}
}
