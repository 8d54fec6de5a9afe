package targets

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
)

// TestTrustDeps: the lab's trust bundle is the mirror CA with a mirror and the BMC CA on
// platform baremetal, in that order; a lab with neither has no bundle and no user-ca-bundle
// target, and its Proxy depends on nothing (TestMirrorOffUnchanged holds every other key).
func TestTrustDeps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		want    []string
		hasUser bool
	}{
		{"default", "", nil, false},
		{"mirror", "mirror:\n  enabled: true\n", []string{"pki/ca/mirror-ca"}, true},
		{"baremetal", "platform: baremetal\nnetwork:\n  loadBalancer: in-cluster\n", []string{"pki/ca/bmc"}, true},
		{"both", "platform: baremetal\nnetwork:\n  loadBalancer: in-cluster\nmirror:\n  enabled: true\n", []string{"pki/ca/mirror-ca", "pki/ca/bmc"}, true},
	} {
		c, err := lab.ParseConfig([]byte(tc.yaml), "lab.yaml")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := trustDeps(c); !slices.Equal(got, tc.want) {
			t.Errorf("%s: trustDeps %v, want %v", tc.name, got, tc.want)
		}
		var user, proxy, ipi []string
		found := false
		for _, tg := range (Lab{Config: c}).Declare() {
			switch tg.Name {
			case userCABundleTarget:
				found, user = true, tg.Deps
			case "manifests/cluster/proxy":
				proxy = tg.Deps
			case "ipi/install-config":
				ipi = tg.Deps
			}
		}
		if found != tc.hasUser || !slices.Equal(user, tc.want) {
			t.Errorf("%s: %s declared %v with deps %v, want %v with %v", tc.name, userCABundleTarget, found, user, tc.hasUser, tc.want)
		}
		if wantProxy := userCABundleDeps(c); !slices.Equal(proxy, wantProxy) || (len(wantProxy) > 0) != tc.hasUser {
			t.Errorf("%s: the Proxy's deps %v", tc.name, proxy)
		}
		if c.Baremetal() && !slices.Equal(ipi, append([]string{"bmc/credentials"}, tc.want...)) {
			t.Errorf("%s: ipi/install-config deps %v", tc.name, ipi)
		}
	}
}

// TestBaremetalTrustBundle builds the default lab as platform baremetal (no mirror): the
// BMC CA, byte for byte pki/ca/bmc's, is ConfigMap openshift-config/user-ca-bundle's
// ca-bundle.crt, the Proxy names that ConfigMap, cluster-config-v1's install-config carries it
// as additionalTrustBundle with policy Always (and no imageDigestSources), and ipi/install-config
// carries it the same way; no BareMetalHost disables certificate verification.
func TestBaremetalTrustBundle(t *testing.T) {
	out, files := bmcManifestsLab(t, "bmc/manifests", userCABundleTarget, "manifests/cluster/proxy",
		"manifests/cluster/cluster-config-v1", "ipi/install-config")
	read := func(target, rel string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(target), filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ca := read("pki/ca/bmc", "tls.crt")
	if !bytes.Contains(ca, []byte("BEGIN CERTIFICATE")) {
		t.Fatalf("pki/ca/bmc tls.crt is no certificate")
	}
	var cm struct {
		Metadata struct{ Name, Namespace string }
		Data     map[string]string
	}
	if err := yaml.Unmarshal(read(userCABundleTarget, manifests.UserCABundleFile), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Metadata.Namespace != "openshift-config" || cm.Metadata.Name != manifests.UserCABundleName || cm.Data["ca-bundle.crt"] != string(ca) {
		t.Errorf("user-ca-bundle %s/%s ca-bundle.crt:\n%s\nwant the BMC CA:\n%s", cm.Metadata.Namespace, cm.Metadata.Name, cm.Data["ca-bundle.crt"], ca)
	}
	var px struct {
		Spec struct {
			TrustedCA struct{ Name string } `json:"trustedCA"`
		}
	}
	if err := yaml.Unmarshal(read("manifests/cluster/proxy", manifests.OrderConfig+"-config-proxy.yaml"), &px); err != nil {
		t.Fatal(err)
	}
	if px.Spec.TrustedCA.Name != manifests.UserCABundleName {
		t.Errorf("Proxy spec.trustedCA.name %q, want %s", px.Spec.TrustedCA.Name, manifests.UserCABundleName)
	}
	ccFiles, _ := filepath.Glob(filepath.Join(out, "manifests", "cluster", "cluster-config-v1", "*.yaml"))
	if len(ccFiles) != 1 {
		t.Fatalf("cluster-config-v1 wrote %v", ccFiles)
	}
	b, _ := os.ReadFile(ccFiles[0])
	var ccm struct{ Data map[string]string }
	if err := yaml.Unmarshal(b, &ccm); err != nil {
		t.Fatal(err)
	}
	var ic map[string]any
	if err := yaml.Unmarshal([]byte(ccm.Data["install-config"]), &ic); err != nil {
		t.Fatal(err)
	}
	if ic["additionalTrustBundle"] != string(ca) || ic["additionalTrustBundlePolicy"] != "Always" || ic["imageDigestSources"] != nil {
		t.Errorf("cluster-config-v1: additionalTrustBundle %v, policy %v, imageDigestSources %v; want the BMC CA, Always, none",
			ic["additionalTrustBundle"], ic["additionalTrustBundlePolicy"], ic["imageDigestSources"])
	}
	var ipi manifests.IPIInstallConfigDoc
	if err := yaml.Unmarshal(read("ipi/install-config", "install-config.yaml"), &ipi); err != nil {
		t.Fatal(err)
	}
	if ipi.AdditionalTrustBundle != string(ca) || ipi.AdditionalTrustBundlePolicy != "Always" {
		t.Errorf("ipi/install-config: additionalTrustBundle %q, policy %q; want the BMC CA, Always", ipi.AdditionalTrustBundle, ipi.AdditionalTrustBundlePolicy)
	}
	if bytes.Contains(read("ipi/install-config", "install-config.yaml"), []byte("disableCertificateVerification")) {
		t.Error("ipi/install-config disables the BMC's certificate verification")
	}
	for name, f := range files {
		if strings.Contains(string(f), "disableCertificateVerification") {
			t.Errorf("bmc/manifests %s disables the BMC's certificate verification", name)
		}
	}
}
