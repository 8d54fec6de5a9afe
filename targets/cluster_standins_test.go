package targets

// Stand-ins for the components the cluster family waits on, run against a real apiserver:
// a kubelet's CSRs and Node, the CVO's and the etcd operator's status, and the upstream
// targets the family reads (TestClusterRealControlPlane uses them).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
)

// clusterWaitReal polls cond every 100 ms until it holds or ctx ends: stand-ins for real
// components waiting on a real apiserver.
func clusterWaitReal(ctx context.Context, cond func() (bool, error)) error {
	var last error
	for {
		ok, err := cond()
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// clusterCSR makes a PEM CSR for node name (CN=system:node:<name>, O=system:nodes) with a new
// ECDSA key, as a kubelet does; dns/ips are SANs (serving CSRs only).
func clusterCSR(name string, dns []string, ips []string) (csrPEM, keyPEM []byte, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: csr.NodeUserPrefix + name, Organization: []string{csr.NodesGroup}}, DNSNames: dns}
	for _, ip := range ips {
		tpl.IPAddresses = append(tpl.IPAddresses, net.ParseIP(ip))
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tpl, k)
	if err != nil {
		return nil, nil, err
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), nil
}

// clusterSubmitCSR creates a CSR as cs (retrying while RBAC is not applied yet) and returns
// its name.
func clusterSubmitCSR(ctx context.Context, cs kubernetes.Interface, signer string, req []byte, usages ...certificatesv1.KeyUsage) (string, error) {
	var name string
	err := clusterWaitReal(ctx, func() (bool, error) {
		got, err := cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
			Spec:       certificatesv1.CertificateSigningRequestSpec{Request: req, SignerName: signer, Usages: usages},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		name = got.Name
		return true, nil
	})
	return name, err
}

// clusterIssued waits until CSR name has a certificate (kube-controller-manager signs it once
// approved) and returns it.
func clusterIssued(ctx context.Context, cs kubernetes.Interface, name string) ([]byte, error) {
	var cert []byte
	err := clusterWaitReal(ctx, func() (bool, error) {
		c, err := cs.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == certificatesv1.CertificateFailed || cond.Type == certificatesv1.CertificateDenied {
				return false, fmt.Errorf("CSR %s: %s: %s", name, cond.Type, cond.Message)
			}
		}
		cert = c.Status.Certificate
		return len(cert) > 0, nil
	})
	return cert, err
}

// clusterKubelet is a kubelet stand-in: once its VM is started (and release is closed) it
// joins as a kubelet does with serverTLSBootstrap — client CSR with the bootstrap identity,
// then, as system:node:<name>, its Node object, a serving CSR, and status Ready.
func clusterKubelet(ctx context.Context, cp *testenv.ControlPlane, boot *rest.Config, started, release <-chan struct{}, short, fqdn, ip string) error {
	select {
	case <-started:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-release:
	case <-ctx.Done():
		return ctx.Err()
	}
	bootCS, err := kubernetes.NewForConfig(boot)
	if err != nil {
		return err
	}
	req, key, err := clusterCSR(fqdn, nil, nil)
	if err != nil {
		return err
	}
	name, err := clusterSubmitCSR(ctx, bootCS, csr.SignerClient, req, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	if err != nil {
		return fmt.Errorf("%s client CSR: %w", short, err)
	}
	cert, err := clusterIssued(ctx, bootCS, name)
	if err != nil {
		return fmt.Errorf("%s client certificate: %w", short, err)
	}
	nodeCS, err := kubernetes.NewForConfig(cp.RESTConfig(cert, key))
	if err != nil {
		return err
	}
	if _, err := nodeCS.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fqdn}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s creates its Node: %w", short, err)
	}
	sreq, _, err := clusterCSR(fqdn, []string{fqdn, short}, []string{ip})
	if err != nil {
		return err
	}
	sname, err := clusterSubmitCSR(ctx, nodeCS, csr.SignerServing, sreq, certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth)
	if err != nil {
		return fmt.Errorf("%s serving CSR: %w", short, err)
	}
	if _, err := clusterIssued(ctx, nodeCS, sname); err != nil {
		return fmt.Errorf("%s serving certificate: %w", short, err)
	}
	n, err := nodeCS.CoreV1().Nodes().Get(ctx, fqdn, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: fqdn}}
	if _, err := nodeCS.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("%s reports Ready: %w", short, err)
	}
	return nil
}

// clusterCVOStandin reports progress on the ClusterVersion once it is applied, as the CVO's
// first sync does.
func clusterCVOStandin(ctx context.Context, k *kube.Clients, available func() bool) error {
	status := func(avail string) map[string]any {
		return map[string]any{
			"desired":            map[string]any{"version": "4.18.0", "image": "quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("0", 64)},
			"observedGeneration": int64(1), "versionHash": "standin", "availableUpdates": nil,
			"conditions": []any{
				map[string]any{"type": "Progressing", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "Working towards 4.18.0"},
				map[string]any{"type": "Available", "status": avail, "lastTransitionTime": "2026-01-01T00:00:00Z"},
			},
		}
	}
	ri := k.Dynamic.Resource(kube.ClusterVersions)
	if err := clusterWaitReal(ctx, func() (bool, error) {
		_, err := kube.PatchStatus(ctx, ri, "config.openshift.io/v1", "ClusterVersion", "version", status("False"))
		return err == nil, err
	}); err != nil {
		return fmt.Errorf("CVO stand-in: %w", err)
	}
	// Operators: created once the bootstrap is complete, Available at once.
	if err := clusterWaitReal(ctx, func() (bool, error) { return kube.BootstrapComplete(ctx, k.Dynamic) }); err != nil {
		return err
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		co := &kube.Unstructured{Object: map[string]any{"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": map[string]any{"name": name}, "spec": map[string]any{}}}
		if _, err := k.Dynamic.Resource(kube.ClusterOperators).Create(ctx, co, kube.CreateOptions{}); err != nil && !kube.IsAlreadyExists(err) {
			return err
		}
		if _, err := kube.PatchStatus(ctx, k.Dynamic.Resource(kube.ClusterOperators), "config.openshift.io/v1", "ClusterOperator", name, map[string]any{"conditions": []any{
			map[string]any{"type": "Available", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
			map[string]any{"type": "Degraded", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		}}); err != nil {
			return err
		}
	}
	if err := clusterWaitReal(ctx, func() (bool, error) { return available(), nil }); err != nil {
		return err
	}
	_, err := kube.PatchStatus(ctx, ri, "config.openshift.io/v1", "ClusterVersion", "version", status("True"))
	return err
}

// clusterEtcdStandin plays the cluster-etcd-operator: once a master is Ready it runs an etcd
// pod there (bound by name, status Running and Ready).
func clusterEtcdStandin(ctx context.Context, k *kube.Clients, cs kubernetes.Interface, masters []string) error {
	for _, m := range masters {
		if err := clusterWaitReal(ctx, func() (bool, error) {
			ready, _, err := kube.NodesReady(ctx, k.Dynamic, []string{m})
			return len(ready) == 1, err
		}); err != nil {
			return err
		}
		if err := clusterWaitReal(ctx, func() (bool, error) {
			_, err := cs.CoreV1().ServiceAccounts(kube.EtcdNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
			return err == nil || apierrors.IsAlreadyExists(err), err
		}); err != nil {
			return err
		}
		p, err := cs.CoreV1().Pods(kube.EtcdNamespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "etcd-" + strings.Split(m, ".")[0], Labels: map[string]string{"app": "etcd"}},
			Spec:       corev1.PodSpec{NodeName: m, Containers: []corev1.Container{{Name: "etcd", Image: "quay.io/standin/etcd"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("etcd stand-in: %w", err)
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := cs.CoreV1().Pods(kube.EtcdNamespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("etcd stand-in status: %w", err)
		}
	}
	return nil
}

// clusterStandins are the upstream targets the cluster family reads, written as their real
// families write them: the admin kubeconfig, the CVO's ClusterOperator/ClusterVersion CRDs and
// Infrastructure CRD from the 4.18 payload fixtures, the lab's namespaces, RBAC,
// Infrastructure and ClusterVersion manifests (render/manifests), the post-pivot HAProxy
// config and the kubeadmin password.
func clusterStandins(t *testing.T, adminKC []byte, domain string) []*engine.Target {
	shared := testenv.RequireShared(t)
	crds := []string{
		"cvo/manifests/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
		"cvo/manifests/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
		"crds/0000_10_config-operator_01_infrastructures-Default.crd.yaml",
	}
	var crdData [][]byte
	for _, c := range crds {
		b, err := os.ReadFile(filepath.Join(shared, "fixtures/release", c))
		if err != nil {
			t.Fatal(err)
		}
		crdData = append(crdData, mfFor130(t, b)) // kube-apiserver 1.30 lacks 1.31's isIP/isCIDR
	}
	var files []manifests.File
	for _, f := range []func() ([]manifests.File, error){manifests.NamespaceFiles, manifests.RBACFiles,
		func() ([]manifests.File, error) {
			f, err := manifests.Infrastructure(domain, "ocp4-standin", 1, 1)
			return []manifests.File{f}, err
		},
		func() ([]manifests.File, error) {
			f, err := manifests.ClusterVersion("", "stable-4.18", "00000000-0000-4000-8000-000000000000")
			return []manifests.File{f}, err
		}} {
		fs, err := f()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	return []*engine.Target{
		clusterStandinFile("kubeconfig/admin", "kubeconfig", string(adminKC)),
		{Name: "release/crds", Doc: "stand-in: payload CRDs from ../shared/fixtures", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
			for i, c := range crds {
				if err := s.WriteFile("crds/"+filepath.Base(c), crdData[i], 0o644); err != nil {
					return err
				}
			}
			return nil
		}},
		{Name: "manifests/bootstrap", Doc: "stand-in: lab manifests from render/manifests", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
			for _, f := range files {
				if err := s.WriteFile("manifests/"+f.Name, f.Data, 0o644); err != nil {
					return err
				}
			}
			return nil
		}},
		clusterStandinFile("haproxy/config-post-pivot", "haproxy.cfg", "# post-pivot: no bootstrap backends\n"),
		clusterStandinFile("manifests/kubeadmin", "kubeadmin-password", "standin-password"),
		clusterStandinFile("pki/ca/etcd-signer", "tls.crt", "stand-in"),
		clusterStandinFile("pki/cert/etcd-client", "tls.crt", "stand-in"),
		clusterStandinFile("pki/key/etcd-client", "tls.key", "stand-in"),
	}
}
