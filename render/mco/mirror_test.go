package mco

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/render/manifests"
)

// TestWorkDirMirror: with the release mirror, the operator's work dir holds the user-ca-bundle
// ConfigMap at the path its --additional-trust-bundle-config-file names, the Proxy names it,
// and cluster-config-v1 carries imageDigestSources; without, none of that is there.
func TestWorkDirMirror(t *testing.T) {
	ca, err := os.ReadFile(filepath.Join("..", "manifests", "testdata", "mirror-ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	in := testInputs()
	in.ImageDigestSources = []manifests.MirrorSource{{Source: "quay.io/openshift-release-dev/ocp-release", Mirrors: []string{"198.18.0.1:5000/openshift-release-dev/ocp-release"}}}
	in.AdditionalTrustBundle = ca
	files, err := WorkDir(in)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range files {
		got[f.Path] = string(f.Data)
	}
	if !strings.Contains(got[UserCABundleFile], "name: user-ca-bundle") || !strings.Contains(got[UserCABundleFile], "BEGIN CERTIFICATE") {
		t.Errorf("%s:\n%s", UserCABundleFile, got[UserCABundleFile])
	}
	if !strings.Contains(got[ProxyFile], "name: user-ca-bundle") {
		t.Errorf("%s has no trustedCA:\n%s", ProxyFile, got[ProxyFile])
	}
	if !strings.Contains(got[ClusterConfigFile], "imageDigestSources:") {
		t.Errorf("%s has no imageDigestSources", ClusterConfigFile)
	}
	if !strings.Contains(strings.Join(OperatorArgs("/w", "/d", "r", "4.18.0"), " "), "--additional-trust-bundle-config-file=/w/"+UserCABundleFile) {
		t.Error("the operator's --additional-trust-bundle-config-file is not the work dir's user-ca-bundle")
	}
	plain, err := WorkDir(testInputs())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range plain {
		if f.Path == UserCABundleFile || strings.Contains(string(f.Data), "trustedCA") {
			t.Errorf("without a mirror the work dir has %s / a trustedCA", f.Path)
		}
	}
}
