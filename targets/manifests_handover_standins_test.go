package targets

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/rig/rehearsal"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// TestHandoverStandinsOnRealAPI drives the rehearsal's operator stand-ins
// (internal/rig/rehearsal/operators.go: what the 4.18 kube-apiserver- and
// kube-controller-manager-operators read for the masters) against the real kube-apiserver
// holding everything labbuild's cluster/bootstrap applies: the release CRDs and every file of
// manifests/bootstrap's manifests/. With the whole handover they read their inputs; with each
// object of issue 24's handover (and the other objects they read) deleted in turn, they stop
// with an error naming it and the operator code, as the real operator stops there.
func TestHandoverStandinsOnRealAPI(t *testing.T) {
	l := mfRealAPILab(t)
	l.build("manifests", "pki", "kubeconfig")
	_, adminCfg := mfStartBootstrapAPI(t, l)
	ctx := context.Background()

	// cluster/bootstrap's apply: CRDs (1.30's CEL rules removed), then every manifest.
	files := map[string][]byte{}
	for name, b := range l.crds {
		files["0-crds/"+name] = mfFor130(t, b)
	}
	paths, _ := filepath.Glob(l.path("manifests/bootstrap", "manifests/*.yaml"))
	for _, p := range paths {
		if filepath.Base(p) == "02-operator-network.yaml" {
			continue // its CRD is the CVO's, from the payload (docs/rehearsal.md); no stand-in reads it
		}
		files["1-manifests/"+filepath.Base(p)] = mfFor130(t, l.file("manifests/bootstrap", "manifests/"+filepath.Base(p)))
	}
	ap, err := clusterApplier(kubedyn.Config(adminCfg), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the manifests to apply", 90*time.Second, func() error { _, err := ap.ApplyFiles(ctx, files); return err })
	kc, err := kube.NewClients(kubedyn.Config(adminCfg))
	if err != nil {
		t.Fatal(err)
	}
	dyn := kc.Dynamic
	var csrSigner string // what the kube-controller-manager-operator stand-in did with csr-signer
	readAll := func() error {
		var err error
		if csrSigner, err = rehearsal.EnsureCSRSigner(ctx, dyn); err != nil {
			return err
		}
		if err := rehearsal.EnsureKASClientSigners(ctx, dyn); err != nil {
			return err
		}
		kas, err := rehearsal.ReadKASInputs(ctx, dyn)
		if err != nil {
			return err
		}
		if _, _, _, err := kas.KASFiles(); err != nil {
			return err
		}
		_, err = rehearsal.ReadKCMInputs(ctx, dyn)
		return err
	}
	if err := readAll(); err != nil {
		t.Fatalf("with labbuild's whole handover: %v", err)
	}
	// The operator keeps the handed-over csr-signer and the masters' kube-controller-manager
	// signs with it, the one the bootstrap kube-apiserver trusts (pki/cert/csr-signer).
	if csrSigner != "kept" {
		t.Errorf("the kube-controller-manager-operator's csr-signer was %s, not kept", csrSigner)
	}
	if kcm, err := rehearsal.ReadKCMInputs(ctx, dyn); err != nil {
		t.Error(err)
	} else if !bytes.Equal(kcm.CSRSigner.Cert, l.file("pki/cert/csr-signer", "tls.crt")) {
		t.Errorf("the masters' kube-controller-manager signs with a csr-signer that is not pki/cert/csr-signer:\n%s", kcm.CSRSigner.Cert)
	}

	cm := kube.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	sec := kube.GroupVersionResource{Version: "v1", Resource: "secrets"}
	for _, o := range []struct {
		gvr      kube.GroupVersionResource
		ns, name string
	}{
		{cm, "openshift-config-managed", "sa-token-signing-certs"},
		{sec, "openshift-config", "initial-service-account-private-key"},
		{sec, "openshift-kube-apiserver-operator", "next-bound-service-account-signing-key"},
		{sec, "openshift-kube-controller-manager-operator", "csr-signer-signer"},
		{cm, "openshift-config-managed", "csr-controller-ca"},
		{cm, "openshift-config", "admin-kubeconfig-client-ca"},
		{cm, "openshift-config-managed", "kubelet-bootstrap-kubeconfig"},
		{sec, "openshift-kube-apiserver-operator", "loadbalancer-serving-signer"},
	} {
		what := strings.TrimSuffix(o.gvr.Resource, "s") + " " + o.ns + "/" + o.name
		t.Run(what, func(t *testing.T) {
			ri := dyn.Resource(o.gvr).Namespace(o.ns)
			saved, err := ri.Get(ctx, o.name, kube.GetOptions{})
			if err != nil {
				t.Fatalf("labbuild's handover has no %s: %v", what, err)
			}
			if err := ri.Delete(ctx, o.name, kube.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			defer func() {
				md, _ := saved.Object["metadata"].(map[string]any)
				delete(md, "resourceVersion")
				delete(md, "uid")
				if _, err := ri.Create(ctx, saved, kube.CreateOptions{}); err != nil {
					t.Fatalf("restore %s: %v", what, err)
				}
			}()
			err = readAll()
			var me *rehearsal.MissingObjectError
			if !errors.As(err, &me) || !strings.HasPrefix(me.Object, what) || !strings.Contains(err.Error(), "operator") {
				t.Fatalf("without %s: %v, want a refusal naming it and the operator", what, err)
			}
			t.Logf("without %s: %v", what, err)
		})
	}
}
