package testenv

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/labbuild/labbuild/render/pki"
)

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager, + kube-scheduler)
// on 127.0.0.1, with throwaway certificates made for this test only (ECDSA P-256, valid one
// hour from the real clock, because the real programs check validity against it).
type ControlPlane struct {
	// Dir holds the PEM files and kubeconfigs (a t.TempDir()).
	Dir string
	// URL is the apiserver's base URL, https://127.0.0.1:<port>.
	URL string
	// Addr is URL without the scheme: 127.0.0.1:<port>.
	Addr string
	// CA is the kubernetes CA certificate (PEM): it signs the serving certificate, every client
	// certificate this helper issues, and (through kube-controller-manager's
	// --cluster-signing-cert-file) every approved CSR.
	CA []byte
	// Admin is a rest.Config for a system:masters identity (CN system:admin), with Host = URL.
	Admin *rest.Config
	// EtcdURL is etcd's client URL (https://127.0.0.1:<port>); EtcdCA, EtcdClientCert and
	// EtcdClientKey are the PEM files of its CA and of a system:etcd-client certificate.
	EtcdURL, EtcdCA, EtcdClientCert, EtcdClientKey string

	caKey []byte
}

// ControlPlaneOptions selects what runs besides etcd and kube-apiserver.
type ControlPlaneOptions struct {
	// ControllerManager starts kube-controller-manager with only the csrsigning controller:
	// it signs CSRs once they are approved (as the bootstrap's kcm does with the kubernetes CA
	// as --cluster-signing-cert-file), and nothing approves them but the code under test
	// (csrapproving is off, as no machine-approver runs during the lab's stage 11).
	ControllerManager bool
	// Scheduler starts kube-scheduler (pods stay Pending without it unless bound by name).
	Scheduler bool
	// ServerNames are extra DNS SANs on the apiserver's serving certificate, such as
	// "api.ocp4.example.com", so a kubeconfig naming that host verifies against loopback.
	ServerNames []string
}

// StartControlPlane starts etcd (mutual TLS, StartEtcd) and kube-apiserver with the RBAC and
// Node authorizers and the NodeRestriction admission plugin, as the bootstrap static pod runs
// it, and waits until /readyz is ok. With o.ControllerManager it also starts
// kube-controller-manager (from $LABBUILD_TOOLS). Skips (fails in CI) without the programs.
// Every process stops when the test ends.
func StartControlPlane(t testing.TB, o ControlPlaneOptions) *ControlPlane {
	t.Helper()
	Require(t, "etcd")
	Require(t, "kube-apiserver")
	if o.ControllerManager {
		Require(t, "kube-controller-manager")
	}
	if o.Scheduler {
		Require(t, "kube-scheduler")
	}
	dir := t.TempDir()
	cp := &ControlPlane{Dir: dir}
	now := time.Now()
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newCA := func(cn string) (crt, key []byte) {
		key = cpKey(t)
		crt, _, err := pki.Issue(pki.Spec{CommonName: cn, CA: true, Validity: time.Hour}, key, nil, now)
		if err != nil {
			t.Fatalf("CA %s: %v", cn, err)
		}
		return crt, key
	}
	issue := func(ca, caKey []byte, s pki.Spec) (crt, key []byte) {
		key = cpKey(t)
		s.Validity = time.Hour
		crt, _, err := pki.Issue(s, key, &pki.Issuer{CertPEM: ca, KeyPEM: caKey}, now)
		if err != nil {
			t.Fatalf("certificate %s: %v", s.CommonName, err)
		}
		return crt, key
	}
	pair := func(name string, crt, key []byte) (string, string) {
		return write(name+".crt", crt, 0o644), write(name+".key", key, 0o600)
	}

	// etcd: its own signer, as openshift-install's etcd-signer.
	eca, ecaKey := newCA("etcd-signer")
	ecaFile := write("etcd-ca.crt", eca, 0o644)
	esc, esk := issue(eca, ecaKey, pki.Spec{CommonName: "system:etcd-server:127.0.0.1", Server: true, Client: true, IPs: []string{"127.0.0.1"}, DNSNames: []string{"localhost"}})
	epc, epk := issue(eca, ecaKey, pki.Spec{CommonName: "system:etcd-peer:127.0.0.1", Server: true, Client: true, IPs: []string{"127.0.0.1"}, DNSNames: []string{"localhost"}})
	ecc, eck := issue(eca, ecaKey, pki.Spec{CommonName: "system:etcd-client", Client: true})
	escF, eskF := pair("etcd-server", esc, esk)
	epcF, epkF := pair("etcd-peer", epc, epk)
	eccF, eckF := pair("etcd-client", ecc, eck)
	etcdURL := StartEtcd(t, EtcdTLS{CA: ecaFile, ServerCert: escF, ServerKey: eskF, PeerCert: epcF, PeerKey: epkF, ClientCert: eccF, ClientKey: eckF})
	cp.EtcdURL, cp.EtcdCA, cp.EtcdClientCert, cp.EtcdClientKey = etcdURL, ecaFile, eccF, eckF

	// kubernetes CA: serving, clients, CSR signing.
	cp.CA, cp.caKey = newCA("kubernetes")
	caFile, caKeyFile := pair("kubernetes-ca", cp.CA, cp.caKey)
	names := append([]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, o.ServerNames...)
	sc, sk := issue(cp.CA, cp.caKey, pki.Spec{CommonName: "kube-apiserver", Server: true, IPs: []string{"127.0.0.1", "172.30.0.1"}, DNSNames: names})
	scF, skF := pair("kube-apiserver", sc, sk)
	kc, kk := issue(cp.CA, cp.caKey, pki.Spec{CommonName: "system:kube-apiserver", Organization: []string{"kube-master"}, Client: true})
	kcF, kkF := pair("kube-apiserver-kubelet-client", kc, kk)
	saKey := cpKey(t)
	saPub, err := pki.PublicKeyPEM(saKey)
	if err != nil {
		t.Fatal(err)
	}
	saKeyF, saPubF := write("sa.key", saKey, 0o600), write("sa.pub", saPub, 0o644)
	ac, ak := cp.ClientCert(t, "system:admin", "system:masters")
	cp.Admin = &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA, CertData: ac, KeyData: ak, ServerName: "localhost"}}
	cp.URL = StartKubeAPIServer(t, []string{
		"--etcd-servers=" + etcdURL, "--etcd-cafile=" + ecaFile, "--etcd-certfile=" + eccF, "--etcd-keyfile=" + eckF,
		"--client-ca-file=" + caFile, "--tls-cert-file=" + scF, "--tls-private-key-file=" + skF,
		"--kubelet-client-certificate=" + kcF, "--kubelet-client-key=" + kkF,
		"--service-account-key-file=" + saPubF, "--service-account-signing-key-file=" + saKeyF,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=172.30.0.0/16",
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--anonymous-auth=false",
	}, cp.Admin)
	cp.Addr = strings.TrimPrefix(cp.URL, "https://")

	if o.ControllerManager {
		// The bootstrap kcm of openshift-install runs with the admin kubeconfig
		// (/etc/kubernetes/secrets/kubeconfig, group system:masters); the plain
		// system:kube-controller-manager role may not write CSR status without
		// --use-service-account-credentials, which needs the token controller.
		c, k := cp.ClientCert(t, "system:kube-controller-manager", "system:masters")
		kcfg := cp.Kubeconfig(t, "kube-controller-manager", cp.URL, c, k)
		StartProcess(t, "kube-controller-manager", Require(t, "kube-controller-manager"),
			"--kubeconfig="+kcfg, "--authentication-kubeconfig="+kcfg, "--authorization-kubeconfig="+kcfg,
			"--controllers=csrsigning", "--leader-elect=false", "--secure-port=0",
			"--use-service-account-credentials=false",
			"--cluster-signing-cert-file="+caFile, "--cluster-signing-key-file="+caKeyFile,
			"--cluster-signing-duration=1h")
	}
	if o.Scheduler {
		c, k := cp.ClientCert(t, "system:kube-scheduler")
		kcfg := cp.Kubeconfig(t, "kube-scheduler", cp.URL, c, k)
		StartProcess(t, "kube-scheduler", Require(t, "kube-scheduler"),
			"--kubeconfig="+kcfg, "--authentication-kubeconfig="+kcfg, "--authorization-kubeconfig="+kcfg,
			"--leader-elect=false", "--secure-port=0")
	}
	return cp
}

// cpKey returns a fresh ECDSA P-256 key (PEM): fast to make, and every program here takes it.
func cpKey(t testing.TB) []byte {
	t.Helper()
	k, err := pki.GenerateKey(pki.ECDSAP256, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// ClientCert issues a client certificate CN=cn, O=orgs from the kubernetes CA (valid one
// hour): the identity kube-apiserver sees is user cn in groups orgs. It returns PEM cert and
// key; never log the key.
func (cp *ControlPlane) ClientCert(t testing.TB, cn string, orgs ...string) (crt, key []byte) {
	t.Helper()
	key = cpKey(t)
	crt, _, err := pki.Issue(pki.Spec{CommonName: cn, Organization: orgs, Client: true, Validity: time.Hour}, key, &pki.Issuer{CertPEM: cp.CA, KeyPEM: cp.caKey}, time.Now())
	if err != nil {
		t.Fatalf("client certificate %s: %v", cn, err)
	}
	return crt, key
}

// Kubeconfig writes Dir/<name>.kubeconfig (0600) for the client certificate crt/key and the
// server URL server (which may name a host such as https://api.ocp4.example.com:6443 that
// only the caller knows how to reach) and returns its path.
func (cp *ControlPlane) Kubeconfig(t testing.TB, name, server string, crt, key []byte) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cp.CA}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	p := filepath.Join(cp.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// RESTConfig returns a rest.Config reaching the apiserver on loopback as the holder of crt/key.
func (cp *ControlPlane) RESTConfig(crt, key []byte) *rest.Config {
	return &rest.Config{Host: cp.URL, TLSClientConfig: rest.TLSClientConfig{CAData: cp.CA, CertData: crt, KeyData: key, ServerName: "localhost"}}
}
