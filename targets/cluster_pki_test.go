package targets

import (
	"bytes"
	"context"
	"crypto/x509"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"fmt"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/render/pki"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// TestClusterCSRsWithLabPKI runs the bootstrap control plane from what labbuild generated —
// etcd with the lab's etcd certificates, kube-apiserver and kube-controller-manager with the
// flags of the generated static pods (so kcm signs with the lab's kubelet signer), every client
// through the lab's kubeconfigs — applies the lab's RBAC manifests, and proves the node join:
// a simulated kubelet submits its client CSR with the kubelet-bootstrap kubeconfig and its own
// key, the approver (targets/csr, as cluster/csr-approver runs it) approves it, kcm signs it,
// and the certificate chains to pki/ca/kubelet-signer and authenticates as the node; a CSR for a
// node name the lab lacks and one from a foreign requestor stay pending and unsigned.
func TestClusterCSRsWithLabPKI(t *testing.T) {
	kcm := testenv.Require(t, "kube-controller-manager")
	l := newMFLab(t)
	l.crds = mfFixtureCRDs(t)
	l.now = time.Now() // real programs check validity against the real clock
	l.build("manifests", "pki", "kubeconfig")
	base, adminCfg := mfStartBootstrapAPI(t, l)

	// kube-controller-manager with the generated static pod's flags. Its kubeconfig names
	// https://api-int.<domain>:6443; the copy it gets dials the loopback apiserver and still
	// verifies the serving certificate for api-int (tls-server-name), so no name is resolved.
	labKC := l.path("kubeconfig/kube-controller-manager", "kubeconfig")
	kc, err := clientcmd.LoadFromFile(labKC)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kc.Clusters {
		c.TLSServerName = strings.TrimSuffix(strings.TrimPrefix(c.Server, "https://"), ":6443")
		c.Server = base
	}
	loopKC := filepath.Join(t.TempDir(), "kube-controller-manager.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, loopKC); err != nil {
		t.Fatal(err)
	}
	args := mfPodArgs(t, l, "manifests/bootstrap", "static-pods/"+manifests.KubeControllerManagerPodFile, "kube-controller-manager")
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "="+labKC, "="+loopKC)
	}
	args = append(args, "--secure-port="+testenv.FreePort(t), "--leader-elect=false")
	testenv.StartProcess(t, "kube-controller-manager", kcm, args...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ap, err := clusterApplier(kubedyn.Config(adminCfg), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	rbac := map[string][]byte{}
	names, _ := filepath.Glob(l.path("manifests/bootstrap", "manifests/03-*.yaml"))
	for _, p := range names {
		rbac[filepath.Base(p)] = l.file("manifests/bootstrap", "manifests/"+filepath.Base(p))
	}
	if len(rbac) == 0 {
		t.Fatal("no 03- RBAC manifests in manifests/bootstrap")
	}
	if _, err := ap.ApplyFiles(ctx, rbac); err != nil {
		t.Fatalf("apply RBAC: %v", err)
	}

	admin, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	bootCfg := mfRestConfig(t, l.path("kubeconfig/kubelet-bootstrap", "kubeconfig"))
	bootCfg.Host = base
	boot, err := kubernetes.NewForConfig(bootCfg)
	if err != nil {
		t.Fatal(err)
	}
	const domain = "ocp4.example.com"
	submit := func(cs kubernetes.Interface, node string) (name string, key []byte) {
		t.Helper()
		req, key, err := clusterCSR(node, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		name, err = clusterSubmitCSR(ctx, cs, csr.SignerClient, req, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
		if err != nil {
			t.Fatalf("CSR for %s: %v", node, err)
		}
		return name, key
	}
	good, goodKey := submit(boot, "master-0."+domain)
	unknown, _ := submit(boot, "intruder."+domain)
	// A lab node's name from a foreign requestor that may create CSRs: mallory, with a client
	// certificate from the lab's Kubernetes CA, bound to system:node-bootstrapper. (Not the
	// admin: kcm's own csrapproving controller approves system:masters' node CSRs.)
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mallory-csr"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "mallory"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, mk := pkiStranger(t, pki.Spec{CommonName: "mallory", Organization: []string{"lab-users"}, Client: true},
		&pki.Issuer{CertPEM: l.file("pki/ca/kubernetes", "tls.crt"), KeyPEM: l.file("pki/key/kubernetes", "tls.key")})
	malloryCfg := *bootCfg
	malloryCfg.TLSClientConfig.CertFile, malloryCfg.TLSClientConfig.KeyFile = "", ""
	malloryCfg.TLSClientConfig.CertData, malloryCfg.TLSClientConfig.KeyData = mc, mk
	mallory, err := kubernetes.NewForConfig(&malloryCfg)
	if err != nil {
		t.Fatal(err)
	}
	foreign, _ := submit(mallory, "worker-0."+domain)

	expected := map[string]csr.NodeIdentity{}
	for _, n := range l.cfg.Nodes {
		if n.Role != lab.RoleBootstrap {
			name := clusterNodeName(n.Name, domain)
			expected[name] = csr.NodeIdentity{Name: name, IPs: []string{n.IP}, DNSNames: []string{n.Name}}
		}
	}
	adminK, err := kube.NewClients(kubedyn.Config(adminCfg))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := csr.Approve(ctx, adminK.Dynamic, expected)
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	verdict := map[string]csr.Decision{}
	for _, d := range ds {
		verdict[d.CSR] = d
	}
	if d := verdict[good]; !d.Approved {
		t.Errorf("master-0's CSR not approved: %+v", d)
	}
	for _, n := range []string{unknown, foreign} {
		if d, ok := verdict[n]; !ok || d.Approve || d.Reason == "" {
			t.Errorf("CSR %s: decision %+v, want refused with a reason", n, d)
		}
	}

	// kcm signs the approved CSR with the lab's kubelet signer (issue 24), not the Kubernetes CA.
	certPEM, err := clusterIssued(ctx, boot, good)
	if err != nil {
		t.Fatalf("master-0's certificate: %v", err)
	}
	crt, err := pki.ParseCert(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(l.file("pki/ca/kubelet-signer", "tls.crt"))
	if _, err := crt.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("node certificate does not chain to pki/ca/kubelet-signer: %v", err)
	}
	kubeRoots := x509.NewCertPool()
	kubeRoots.AppendCertsFromPEM(l.file("pki/ca/kubernetes", "tls.crt"))
	if _, err := crt.Verify(x509.VerifyOptions{Roots: kubeRoots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Errorf("node certificate chains to pki/ca/kubernetes: the bootstrap kube-controller-manager still signs with it")
	}
	if crt.Subject.CommonName != "system:node:master-0."+domain {
		t.Errorf("node certificate CN %q", crt.Subject.CommonName)
	}
	nodeCfg := *bootCfg
	nodeCfg.TLSClientConfig.CertFile, nodeCfg.TLSClientConfig.KeyFile = "", ""
	nodeCfg.TLSClientConfig.CertData, nodeCfg.TLSClientConfig.KeyData = certPEM, goodKey
	nodeCS, err := kubernetes.NewForConfig(&nodeCfg)
	if err != nil {
		t.Fatal(err)
	}
	who, err := nodeCS.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || who.Status.UserInfo.Username != "system:node:master-0."+domain {
		t.Errorf("the signed certificate authenticates as %v (%v), want the node", who, err)
	}

	// Whatever kcm did meanwhile, the refused CSRs have no certificate.
	for _, n := range []string{unknown, foreign} {
		got, err := kube.Get[csr.CertificateSigningRequest](ctx, adminK.Dynamic, kube.CSRs, "", n)
		if err != nil {
			t.Fatal(err)
		}
		if !csr.Pending(got) || len(got.Status.Certificate) > 0 || strings.Contains(fmt.Sprintf("%+v", got.Status), "Approved") {
			t.Errorf("CSR %s (%s) left the pending state: %+v", n, got.Spec.Username, got.Status)
		}
	}
}
