package targets

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// TestMirrorManifestsAPIServer: with mirror.enabled, the bootstrap manifests carry the
// ImageDigestMirrorSet, the user-ca-bundle ConfigMap, the Proxy naming it, the install-config
// with imageDigestSources and the pull secret with the mirror's auth; the real kube-apiserver,
// with the payload's 4.18 CRDs, accepts them all by server-side apply, and refuses an IDMS
// whose mirrorSourcePolicy the CRD does not know (so the check can fail).
func TestMirrorManifestsAPIServer(t *testing.T) {
	l := mfRealAPILab(t)
	l.cfg.Mirror = &lab.MirrorConfig{Enabled: true, Storage: filepath.Join(t.TempDir(), "mirror"), Port: 5000}
	cfg := reparsed(t, l.cfg, "lab.json")
	ts := append(append(append(pkiTargets(cfg), kubeconfigTargets(cfg)...), manifestsTargets(cfg)...), mfStandinRelease(l.crds)...)
	for _, m := range mirrorTargets(cfg, false) {
		if m.Name == "mirror/credentials" {
			ts = append(ts, m)
		}
	}
	if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: l.out, Jobs: 2, Targets: ts,
		Goals: []string{"manifests", "pki", "kubeconfig/kubelet-bootstrap", "kubeconfig/admin"},
		Now:   func() time.Time { return l.now }, Stdout: &l.log, Stderr: &l.log}); err != nil {
		t.Fatalf("build: %v\n%s", err, l.log.String())
	}

	_, adminCfg := mfStartBootstrapAPI(t, l)
	files := map[string][]byte{}
	names, _ := filepath.Glob(l.path("manifests/bootstrap", "manifests/*"))
	for _, p := range names {
		b := l.file("manifests/bootstrap", "manifests/"+filepath.Base(p))
		if strings.HasSuffix(p, ".crd.yaml") {
			b = mfFor130(t, b)
		}
		files[filepath.Base(p)] = b
	}
	for _, f := range []string{"02-image-digest-mirror-set.yaml", "04-user-ca-bundle-config.yaml", "02-config-proxy.yaml"} {
		if _, ok := files[f]; !ok {
			t.Fatalf("manifests/bootstrap has no manifests/%s", f)
		}
	}
	if crd := mfOperatorNetworkCRD(t); crd != nil {
		files["0000_70_network_01_networks-Default.crd.yaml"] = mfFor130(t, crd)
	} else {
		delete(files, "02-operator-network.yaml")
	}
	var alog bytes.Buffer
	ap, err := clusterApplier(kubedyn.Config(adminCfg), &alog)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := ap.ApplyFiles(ctx, files); err != nil {
		t.Fatalf("apply: %v", err)
	}
	pw := string(l.file("mirror/credentials", "password"))
	if strings.Contains(alog.String(), pw) {
		t.Error("the apply log shows the mirror password")
	}
	get := func(group, resource, ns, name string) map[string]any {
		t.Helper()
		ri := ap.Dynamic().Resource(kube.GroupVersionResource{Group: group, Version: "v1", Resource: resource})
		var err error
		var o map[string]any
		if ns != "" {
			u, e := ri.Namespace(ns).Get(ctx, name, kube.GetOptions{})
			if err = e; u != nil {
				o = u.Object
			}
		} else {
			u, e := ri.Get(ctx, name, kube.GetOptions{})
			if err = e; u != nil {
				o = u.Object
			}
		}
		if err != nil {
			t.Fatalf("get %s %s/%s: %v", resource, ns, name, err)
		}
		return o
	}
	idms := get("config.openshift.io", "imagedigestmirrorsets", "", "image-digest-mirror")
	b, _ := json.Marshal(idms["spec"])
	want := `{"imageDigestMirrors":[{"mirrors":["192.168.126.1:5000/openshift-release-dev/ocp-release"],"source":"quay.io/openshift-release-dev/ocp-release"},` +
		`{"mirrors":["192.168.126.1:5000/openshift-release-dev/ocp-v4.0-art-dev"],"source":"quay.io/openshift-release-dev/ocp-v4.0-art-dev"}]}`
	if string(b) != want {
		t.Errorf("IDMS spec from the API:\n got %s\nwant %s", b, want)
	}
	px := get("config.openshift.io", "proxies", "", "cluster")
	if tc, _ := px["spec"].(map[string]any)["trustedCA"].(map[string]any); tc["name"] != "user-ca-bundle" {
		t.Errorf("Proxy spec.trustedCA = %v, want name user-ca-bundle", tc)
	}
	cm := get("", "configmaps", "openshift-config", "user-ca-bundle")
	if got := cm["data"].(map[string]any)["ca-bundle.crt"]; got != string(l.file("pki/ca/mirror-ca", "tls.crt")) {
		t.Errorf("user-ca-bundle ca-bundle.crt is not the mirror CA:\n%v", got)
	}
	sec := get("", "secrets", "openshift-config", "pull-secret")
	raw, _ := base64.StdEncoding.DecodeString(sec["data"].(map[string]any)[".dockerconfigjson"].(string))
	var ps struct {
		Auths map[string]struct{ Auth string } `json:"auths"`
	}
	if err := json.Unmarshal(raw, &ps); err != nil {
		t.Fatal(err)
	}
	if ps.Auths["192.168.126.1:5000"].Auth != base64.StdEncoding.EncodeToString([]byte(MirrorUser+":"+pw)) || ps.Auths["quay.io"].Auth == "" {
		t.Errorf("pull-secret auths: %v hosts, want quay.io and the mirror's", len(ps.Auths))
	}
	ic := get("", "configmaps", "kube-system", "cluster-config-v1")["data"].(map[string]any)["install-config"].(string)
	for _, w := range []string{"additionalTrustBundlePolicy: Always", "imageDigestSources:", "source: quay.io/openshift-release-dev/ocp-v4.0-art-dev", "additionalTrustBundle: |"} {
		if !strings.Contains(ic, w) {
			t.Errorf("install-config lacks %q", w)
		}
	}
	// The CRD's validation is real: an unknown mirrorSourcePolicy is refused.
	bad := bytes.Replace(files["02-image-digest-mirror-set.yaml"], []byte("  - mirrors:"), []byte("  - mirrorSourcePolicy: Sometimes\n    mirrors:"), 1)
	if _, err := ap.ApplyFiles(ctx, map[string][]byte{"bad-idms.yaml": bad}); err == nil {
		t.Error("the kube-apiserver accepted mirrorSourcePolicy: Sometimes")
	}
}
