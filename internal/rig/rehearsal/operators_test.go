package rehearsal

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynfake "k8s.io/client-go/dynamic/fake"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/render/pki"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// opCA is a test CA: certificate and key, PEM.
func opCA(t *testing.T, cn string) (crt, key []byte) {
	t.Helper()
	key, err := pki.GenerateKey(pki.ECDSAP256, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	crt, _, err = pki.Issue(pki.Spec{CommonName: cn, OrganizationalUnit: []string{"openshift"}, CA: true, Validity: 365 * 24 * time.Hour}, key, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return crt, key
}

// opHandover renders the objects labbuild hands over that the operators' stand-ins read, with
// labbuild's renderers (render/manifests), keyed by "<resource> <ns>/<name>" as the stand-ins'
// errors name them. The Infrastructure and Network config objects are labbuild's too; the
// Infrastructure's status is applied, as cluster/bootstrap applies it.
func opHandover(t *testing.T) (objs map[string]*unstructured.Unstructured, kubeletSigner []byte) {
	t.Helper()
	var files []manifests.File
	add := func(fs []manifests.File, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	one := func(f manifests.File, err error) ([]manifests.File, error) { return []manifests.File{f}, err }
	kubeCA, _ := opCA(t, "kubernetes-ca")
	saKey, err := pki.GenerateKey(pki.RSA2048, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	saPub, err := pki.PublicKeyPEM(saKey)
	if err != nil {
		t.Fatal(err)
	}
	add(manifests.ServiceAccountFiles(saKey, saPub))
	ksCrt, ksKey := opCA(t, "kubelet-signer")
	csrKey, err := pki.GenerateKey(pki.RSA2048, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csrCrt, _, err := pki.Issue(pki.Spec{CommonName: "kube-csr-signer_@1", CA: true, Validity: 30 * 24 * time.Hour}, csrKey, &pki.Issuer{CertPEM: ksCrt, KeyPEM: ksKey}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	add(manifests.KubeletSignerFiles(ksCrt, ksKey, csrCrt, csrKey))
	add(one(manifests.CAConfigMap("openshift-config", "admin-kubeconfig-client-ca", "ca-bundle.crt", "kube-apiserver", kubeCA)))
	add(one(manifests.CAConfigMap("openshift-config-managed", "kubelet-bootstrap-kubeconfig", "ca-bundle.crt", "kube-apiserver", kubeCA)))
	for _, n := range manifests.ServingSignerSecrets {
		c, k := opCA(t, n)
		add(one(manifests.TLSSecret(manifests.KubeAPIServerOperatorNamespace, n, c, k)))
	}
	// manifests/cluster/kube-apiserver-client-signers (targets/manifests_handover.go).
	for _, n := range []string{"aggregator-client-signer", "kube-apiserver-to-kubelet-signer"} {
		c, k := opCA(t, n)
		add(one(manifests.TLSSecret(manifests.KubeAPIServerOperatorNamespace, n, c, k)))
	}
	add(one(manifests.Infrastructure("lab.example.test", "lab-x1", 3, 1)))
	add(one(manifests.NetworkConfig("10.128.0.0/14", 23, "172.30.0.0/16")))
	objs = map[string]*unstructured.Unstructured{}
	for _, f := range files {
		var m map[string]any
		if err := yaml.Unmarshal(f.Data, &m); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "Namespace" {
			continue
		}
		objs[strings.ToLower(u.GetKind())+" "+u.GetNamespace()+"/"+u.GetName()] = u
	}
	return objs, ksCrt
}

// opClient is a fake cluster holding objs except those named in without.
func opClient(objs map[string]*unstructured.Unstructured, without ...string) *dynfake.FakeDynamicClient {
	var rs []runtime.Object
	for k, o := range objs {
		skip := false
		for _, w := range without {
			skip = skip || k == w
		}
		if !skip {
			rs = append(rs, o.DeepCopy())
		}
	}
	return dynfake.NewSimpleDynamicClient(runtime.NewScheme(), rs...)
}

// opReadAll runs what the masters' stand-ins read, in their order.
func opReadAll(ctx context.Context, d *dynfake.FakeDynamicClient) (KASInputs, KCMInputs, error) {
	dyn := kubedyn.Wrap(d)
	if err := ensureOperatorObjects(ctx, dyn, func(string, ...any) {}); err != nil {
		return KASInputs{}, KCMInputs{}, err
	}
	kas, err := ReadKASInputs(ctx, dyn)
	if err != nil {
		return kas, KCMInputs{}, err
	}
	kcm, err := ReadKCMInputs(ctx, dyn)
	return kas, kcm, err
}

// TestOperatorStandinsWithhold: the masters' stand-ins read the handed-over objects from the
// cluster and nothing else. With every object of the handover they start, with certificates
// that chain to the handed-over signers; with any one withheld they stop, naming it, as the
// operator that reads it would (issue 24's "each stand-in fails on today's handover").
func TestOperatorStandinsWithhold(t *testing.T) {
	ctx := context.Background()
	objs, ksCrt := opHandover(t)
	kas, kcm, err := opReadAll(ctx, opClient(objs))
	if err != nil {
		t.Fatalf("with the whole handover: %v", err)
	}
	// The serving certificates verify with the handed-over signers for the names clients use.
	sc, err := kas.ServingCerts()
	if err != nil {
		t.Fatal(err)
	}
	for sec, tc := range map[string]struct{ signer, name string }{
		"loadbalancer-serving-certkey":    {"loadbalancer-serving-signer", "api-int.lab.example.test"},
		"localhost-serving-cert-certkey":  {"localhost-serving-signer", "127.0.0.1"},
		"service-network-serving-certkey": {"service-network-serving-signer", "172.30.0.1"},
	} {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(kas.Signers[tc.signer].Cert)
		b, _ := pem.Decode(sc[sec].Cert)
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: tc.name}); err != nil {
			t.Errorf("%s for %s: %v", sec, tc.name, err)
		}
	}
	// The CSR signer chains to the handed-over kubelet signer, and the kube-apiserver's
	// client and kubelet CAs carry both (ManageCSRCABundle), so a kubelet certificate the
	// masters' controller manager signs is trusted.
	leaf, _, err := kcm.CSRSigner.issue("system:node:worker-0", []string{"system:nodes"}, nil, nil, false, true, false)
	if err != nil {
		t.Fatal(err)
	}
	for what, bundle := range map[string][]byte{"client CA": kas.ClientCA, "kubelet CA": kas.KubeletCA} {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(bundle)
		b, _ := pem.Decode(leaf)
		c, _ := x509.ParseCertificate(b.Bytes)
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("a kubelet certificate from the masters' CSR signer against the %s: %v", what, err)
		}
		if !strings.Contains(string(bundle), strings.TrimSpace(string(ksCrt))) {
			t.Errorf("the %s lacks the handed-over kubelet signer", what)
		}
	}
	if !strings.Contains(string(kas.SAPublicKeys), "PUBLIC KEY") || !strings.Contains(string(kcm.SAPrivateKey), "PRIVATE KEY") {
		t.Error("service-account keys not read")
	}
	// The client certificates come from the handed-over client signers (kept, not minted), the
	// requestheader CA is the aggregator signer's bundle, and the controller manager's root CA
	// is the serving signers' (kube-apiserver-server-ca → serviceaccount-ca).
	files, flags, _, err := kas.KASFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		flag, secret, cn string
	}{
		{"--kubelet-client-certificate", "secret openshift-kube-apiserver-operator/kube-apiserver-to-kubelet-signer", "system:kube-apiserver"},
		{"--proxy-client-cert-file", "secret openshift-kube-apiserver-operator/aggregator-client-signer", "system:openshift-aggregator"},
	} {
		signer := opSecretCert(t, objs[tc.secret])
		c := opParse(t, files[flags[tc.flag]])
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(signer)
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil || c.Subject.CommonName != tc.cn {
			t.Errorf("%s: %s (%v), want %s from the handed-over %s", tc.flag, c.Subject, err, tc.cn, tc.secret)
		}
	}
	if agg := files[flags["--requestheader-client-ca-file"]]; string(agg) != string(opSecretCert(t, objs["secret openshift-kube-apiserver-operator/aggregator-client-signer"])) {
		t.Errorf("--requestheader-client-ca-file is not the handed-over aggregator-client-signer:\n%s", agg)
	}
	kfiles, kflags := kcm.KCMFiles()
	root := string(kfiles[kflags["--root-ca-file"]])
	for _, n := range manifests.ServingSignerSecrets {
		if !strings.Contains(root, strings.TrimSpace(string(opSecretCert(t, objs["secret openshift-kube-apiserver-operator/"+n])))) {
			t.Errorf("--root-ca-file lacks %s", n)
		}
	}

	for _, w := range []string{
		"configmap openshift-config-managed/sa-token-signing-certs",
		"secret openshift-config/initial-service-account-private-key",
		"secret openshift-kube-apiserver-operator/next-bound-service-account-signing-key",
		"secret openshift-kube-controller-manager-operator/csr-signer-signer",
		"configmap openshift-config-managed/csr-controller-ca",
		"configmap openshift-config/admin-kubeconfig-client-ca",
		"configmap openshift-config-managed/kubelet-bootstrap-kubeconfig",
		"secret openshift-kube-apiserver-operator/loadbalancer-serving-signer",
		"secret openshift-kube-apiserver-operator/localhost-serving-signer",
		"secret openshift-kube-apiserver-operator/service-network-serving-signer",
	} {
		t.Run(w, func(t *testing.T) {
			if _, ok := objs[w]; !ok {
				t.Fatalf("the handover has no %s", w)
			}
			_, _, err := opReadAll(ctx, opClient(objs, w))
			var me *MissingObjectError
			if !errors.As(err, &me) || !strings.HasPrefix(me.Object, w) {
				t.Fatalf("without %s: %v, want a MissingObjectError naming it", w, err)
			}
			if !strings.Contains(err.Error(), "operator") {
				t.Errorf("the error does not name the operator code: %v", err)
			}
		})
	}

	// Without a client signer the operator mints its own (certrotation creates a missing
	// signer), and so does the stand-in: the masters then start, with a kubelet client
	// certificate the kubelets' kubelet-ca.crt does not trust.
	_, _, err = opReadAll(ctx, opClient(objs, "secret openshift-kube-apiserver-operator/kube-apiserver-to-kubelet-signer",
		"secret openshift-kube-apiserver-operator/aggregator-client-signer"))
	if err != nil {
		t.Errorf("without the client signers: %v, want them minted as the operator mints them", err)
	}

	// Main before issue 24 handed over none of the service-account objects and no kubelet
	// signer: its handover stops the first stand-in at the kubelet signer.
	_, _, err = opReadAll(ctx, opClient(objs, "configmap openshift-config-managed/sa-token-signing-certs",
		"secret openshift-config/initial-service-account-private-key", "secret openshift-kube-apiserver-operator/next-bound-service-account-signing-key",
		"secret openshift-kube-controller-manager-operator/csr-signer-signer", "configmap openshift-config-managed/csr-controller-ca"))
	if err == nil || !strings.Contains(err.Error(), "csr-signer-signer") {
		t.Errorf("the previous handover: %v, want a refusal naming csr-signer-signer", err)
	}
}

// opSecretCert is the tls.crt of a rendered Secret.
func opSecretCert(t *testing.T, u *unstructured.Unstructured) []byte {
	t.Helper()
	if u == nil {
		t.Fatal("no such object in the handover")
	}
	v, _, _ := unstructured.NestedString(u.Object, "data", "tls.crt")
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(b) == 0 {
		t.Fatalf("%s: tls.crt: %v", u.GetName(), err)
	}
	return b
}

// opParse parses a PEM certificate.
func opParse(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	p, _ := pem.Decode(b)
	if p == nil {
		t.Fatalf("not PEM: %q", b)
	}
	c, err := x509.ParseCertificate(p.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCSRSignerKept: the stand-in keeps the operator's csr-signer exactly when library-go
// certrotation target.go needNewTargetCertKeyPair would (Refresh 15 days, the CA bundle
// csr-signer-signer's certificate), and gives the operator's reasons otherwise.
func TestCSRSignerKept(t *testing.T) {
	ss, _ := opCA(t, "kubelet-signer") // NotBefore now, so a refresh waits for 1.5 days of it
	ssCert, err := pki.ParseCert(ss)
	if err != nil {
		t.Fatal(err)
	}
	nb := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ann := func(notBefore, notAfter time.Time, issuer string) map[string]string {
		return map[string]string{"auth.openshift.io/certificate-not-before": notBefore.Format(time.RFC3339),
			"auth.openshift.io/certificate-not-after": notAfter.Format(time.RFC3339), "auth.openshift.io/certificate-issuer": issuer}
	}
	later := ssCert.NotBefore.Add(30 * 24 * time.Hour) // the signer is old enough for a refresh
	tests := []struct {
		name string
		ann  map[string]string
		now  time.Time
		want string
	}{
		{"handed over, fresh", ann(nb, nb.Add(30*24*time.Hour), "kubelet-signer"), nb.Add(time.Hour), ""},
		{"no annotations", map[string]string{}, nb, "missing or malformed notBefore/notAfter"},
		{"expired", ann(nb, nb.Add(30*24*time.Hour), "kubelet-signer"), nb.Add(31 * 24 * time.Hour), "already expired"},
		{"past 80 %", ann(nb, nb.Add(30*24*time.Hour), "kubelet-signer"), nb.Add(25 * 24 * time.Hour), "past refresh time (80% of validity)"},
		{"past refresh, signer old", ann(later.Add(-16*24*time.Hour), later.Add(30*24*time.Hour), "kubelet-signer"), later, "past its refresh time"},
		{"past refresh, signer young", ann(ssCert.NotBefore.Add(-16*24*time.Hour), ssCert.NotBefore.Add(30*24*time.Hour), "kubelet-signer"), ssCert.NotBefore.Add(time.Hour), ""},
		{"other issuer", ann(nb, nb.Add(30*24*time.Hour), "kube-csr-signer-signer"), nb.Add(time.Hour), `issuer "kube-csr-signer-signer", not in ca bundle`},
		{"no issuer", ann(nb, nb.Add(30*24*time.Hour), ""), nb.Add(time.Hour), "missing issuer name"},
	}
	for _, tt := range tests {
		if got := csrSignerKept(tt.ann, ss, tt.now); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
