package targets

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"github.com/labbuild/labbuild/targets/csr"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/pki"
)

// pkiTLSClient is an HTTPS client presenting cert/key and trusting ca.
func pkiTLSClient(t *testing.T, ca, cert, key []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	cfg := &tls.Config{RootCAs: pool}
	if cert != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

// pkiStranger issues certificates the lab did not make: from a foreign CA, or from the lab's
// own CA but without clientAuth.
func pkiStranger(t *testing.T, spec pki.Spec, issuer *pki.Issuer) (cert, key []byte) {
	t.Helper()
	key, err := pki.GenerateKey(pki.ECDSAP256, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	spec.Validity = 24 * time.Hour
	cert, _, err = pki.Issue(spec, key, issuer, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// pkiStartEtcd starts Debian's etcd with the lab's etcd-server and etcd-peer certs and mutual
// TLS on both ports, as the bootstrap etcd static pod does; it returns the client URL.
func pkiStartEtcd(t *testing.T, l *pkiLab) string {
	return testenv.StartEtcd(t, testenv.EtcdTLS{
		CA:         l.path("pki/ca/etcd-signer", "tls.crt"),
		ServerCert: l.path("pki/cert/etcd-server", "tls.crt"), ServerKey: l.path("pki/key/etcd-server", "tls.key"),
		PeerCert: l.path("pki/cert/etcd-peer", "tls.crt"), PeerKey: l.path("pki/key/etcd-peer", "tls.key"),
		ClientCert: l.path("pki/cert/etcd-client", "tls.crt"), ClientKey: l.path("pki/key/etcd-client", "tls.key"),
	})
}

func pkiGet(c *http.Client, url, want string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
		return fmt.Errorf("GET %s: %s %.200s", url, resp.Status, b)
	}
	return nil
}

// TestPKIEtcd proves the etcd certificates with a real etcd: the lab's client cert is
// accepted; a cert from another CA, and one from the etcd CA without clientAuth, are refused.
func TestPKIEtcd(t *testing.T) {
	l := newPKILab(t)
	l.now = time.Now() // real programs check validity against the real clock
	l.build()
	curl := pkiStartEtcd(t, l)
	ca := l.file("pki/ca/etcd-signer", "tls.crt")
	foreignCAKey, _ := pki.GenerateKey(pki.ECDSAP256, rand.Reader)
	foreignCA, _, err := pki.Issue(pki.Spec{CommonName: "foreign-ca", CA: true, Validity: time.Hour}, foreignCAKey, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fc, fk := pkiStranger(t, pki.Spec{CommonName: "system:etcd-client", Client: true}, &pki.Issuer{CertPEM: foreignCA, KeyPEM: foreignCAKey})
	sc, sk := pkiStranger(t, pki.Spec{CommonName: "server-only", Server: true},
		&pki.Issuer{CertPEM: ca, KeyPEM: l.file("pki/key/etcd-signer", "tls.key")})
	tests := []struct {
		name       string
		cert, key  []byte
		wantAccept bool
	}{
		{"lab etcd-client", l.file("pki/cert/etcd-client", "tls.crt"), l.file("pki/key/etcd-client", "tls.key"), true},
		{"lab etcd-server as client (probes)", l.file("pki/cert/etcd-server", "tls.crt"), l.file("pki/key/etcd-server", "tls.key"), true},
		{"foreign CA", fc, fk, false},
		{"etcd CA without clientAuth", sc, sk, false},
		{"no client cert", nil, nil, false},
	}
	for _, tt := range tests {
		err := pkiGet(pkiTLSClient(t, ca, tt.cert, tt.key), curl+"/health", `"health":"true"`)
		if (err == nil) != tt.wantAccept {
			t.Errorf("%s: accepted=%v, want %v (%v)", tt.name, err == nil, tt.wantAccept, err)
		}
	}
}

// TestPKIKubeAPIServer runs a real kube-apiserver with the lab's certificates against the real
// etcd, and checks every kubeconfig: /readyz answers, and the server authenticates the
// kubeconfig's user as the certificate says. A foreign client cert is refused, and the
// front-proxy client cert is accepted as a request-header authenticator (its CN is allowed).
func TestPKIKubeAPIServer(t *testing.T) {
	testenv.Require(t, "kube-apiserver")
	l := newPKILab(t)
	l.now = time.Now()
	l.build()
	curl := pkiStartEtcd(t, l)
	ca := l.file("pki/ca/kubernetes", "tls.crt")
	admin := &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: ca,
		CertData: l.file("pki/cert/admin", "tls.crt"), KeyData: l.file("pki/key/admin", "tls.key"), ServerName: "localhost"}}
	// The flags of the bootstrap kube-apiserver static pod that concern PKI (spec §7.1), on
	// loopback.
	base := testenv.StartKubeAPIServer(t, []string{
		"--etcd-servers=" + curl,
		"--etcd-cafile=" + l.path("pki/ca/etcd-signer", "tls.crt"),
		"--etcd-certfile=" + l.path("pki/cert/etcd-client", "tls.crt"),
		"--etcd-keyfile=" + l.path("pki/key/etcd-client", "tls.key"),
		// The bootstrap pod's client CA bundle (render/manifests pods.go): the kubernetes CA,
		// the kubelet signer and the kubelet bootstrap signer (issue 38 #10).
		"--client-ca-file=" + l.path("pki/bundle/kube-apiserver-client-ca", "ca-bundle.crt"),
		"--tls-cert-file=" + l.path("pki/cert/kube-apiserver", "tls.crt"),
		"--tls-private-key-file=" + l.path("pki/key/kube-apiserver", "tls.key"),
		"--kubelet-client-certificate=" + l.path("pki/cert/kube-apiserver-kubelet-client", "tls.crt"),
		"--kubelet-client-key=" + l.path("pki/key/kube-apiserver-kubelet-client", "tls.key"),
		// The bootstrap pod's kubelet CA (render/manifests KubeletServingCABundle).
		"--kubelet-certificate-authority=" + l.path("pki/bundle/kubelet-serving-ca", "ca-bundle.crt"),
		"--service-account-key-file=" + l.path("pki/sa", "sa.pub"),
		"--service-account-signing-key-file=" + l.path("pki/key/service-account", "tls.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=172.30.0.0/16",
		"--requestheader-client-ca-file=" + l.path("pki/ca/front-proxy", "tls.crt"),
		"--requestheader-allowed-names=kube-apiserver-proxy,system:kube-apiserver-proxy,system:openshift-aggregator",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + l.path("pki/cert/front-proxy-client", "tls.crt"),
		"--proxy-client-key-file=" + l.path("pki/key/front-proxy-client", "tls.key"),
		"--authorization-mode=Node,RBAC",
		"--anonymous-auth=false",
	}, admin)

	for _, k := range kcSpecs {
		t.Run("kubeconfig/"+k.name, func(t *testing.T) {
			cfg, err := clientcmd.BuildConfigFromFlags("", l.path("kubeconfig/"+k.name, "kubeconfig"))
			if err != nil {
				t.Fatal(err)
			}
			// The kubeconfig's server name is api/api-int/localhost: keep it for certificate
			// verification (the SAN check) and dial loopback instead of resolving it.
			if !strings.HasSuffix(cfg.Host, ":6443") {
				t.Fatalf("server %s: want port 6443", cfg.Host)
			}
			host := strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), ":6443")
			cfg.Host, cfg.TLSClientConfig.ServerName = base, host
			pkiSelf(t, cfg, pkiUser(k.user))
		})
	}
	t.Run("foreign client cert", func(t *testing.T) {
		fkey, _ := pki.GenerateKey(pki.ECDSAP256, rand.Reader)
		fca, _, _ := pki.Issue(pki.Spec{CommonName: "kubernetes-ca", CA: true, Validity: time.Hour}, fkey, nil, time.Now())
		c, k := pkiStranger(t, pki.Spec{CommonName: "system:admin", Organization: []string{"system:masters"}, Client: true}, &pki.Issuer{CertPEM: fca, KeyPEM: fkey})
		cfg := &rest.Config{Host: base, TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: c, KeyData: k, ServerName: "localhost"}}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
			t.Errorf("foreign cert: %v, want Unauthorized", err)
		}
	})
	t.Run("kubelets signed by a master's kube-controller-manager", func(t *testing.T) {
		pkiMastersCSRSigner(t, l, base, admin)
	})
	t.Run("front-proxy request header", func(t *testing.T) {
		cfg := &rest.Config{Host: base, TLSClientConfig: rest.TLSClientConfig{CAData: ca,
			CertData: l.file("pki/cert/front-proxy-client", "tls.crt"), KeyData: l.file("pki/key/front-proxy-client", "tls.key"), ServerName: "localhost"}}
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return pkiHeaders{rt, map[string]string{"X-Remote-User": "alice", "X-Remote-Group": "system:authenticated"}}
		}
		pkiSelf(t, cfg, "alice")
	})
}

// pkiUser is the user name a kubeconfig's certificate authenticates as.
func pkiUser(user string) string {
	switch user {
	case "admin":
		return "system:admin"
	case "system:bootstrapper":
		// The entry keeps its name; the certificate is the node-bootstrapper service account's
		// since issue 38 #10, as the installer's bootstrap credential authenticates.
		return csr.NodeBootstrapperSA
	}
	return user
}

// pkiSelf asks the apiserver who cfg is (SelfSubjectReview, GA in 1.28) and checks the name.
func pkiSelf(t *testing.T, cfg *rest.Config, want string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.RESTClient().Get().AbsPath("/readyz").DoRaw(context.Background())
	if err != nil || string(body) != "ok" {
		t.Fatalf("/readyz: %q %v", body, err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	if got := r.Status.UserInfo.Username; got != want {
		t.Errorf("authenticated as %q, want %q", got, want)
	}
}

type pkiHeaders struct {
	rt http.RoundTripper
	h  map[string]string
}

func (p pkiHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range p.h {
		r.Header.Set(k, v)
	}
	return p.rt.RoundTrip(r)
}

// pkiMastersCSRSigner checks, against the bootstrap kube-apiserver at base, the kubelet
// certificates a master's kube-controller-manager signs before the pivot: with the
// kube-controller-manager-operator's csr-signer (targetconfigcontroller.go ManageCSRSigner),
// leaf alone (kubernetes pkg/controller/certificates/signer/signer.go sign). With the csr-signer
// labbuild hands over (pki/cert/csr-signer) the kube-apiserver authenticates the kubelet's client
// certificate and reads a pod's log through its serving certificate; with one the operator would
// mint for itself from csr-signer-signer (what happened before labbuild handed one over), the
// kubelet is Unauthorized and the log read fails on the kubelet's certificate.
func pkiMastersCSRSigner(t *testing.T, l *pkiLab, base string, admin *rest.Config) {
	ctx := context.Background()
	ownCSRSigner := func() *pki.Issuer {
		key, _ := pki.GenerateKey(pki.RSA2048, rand.Reader)
		crt, _, err := pki.Issue(pki.Spec{CommonName: "kube-csr-signer_@1", CA: true, Validity: time.Hour}, key,
			&pki.Issuer{CertPEM: l.file("pki/ca/kubelet-signer", "tls.crt"), KeyPEM: l.file("pki/key/kubelet-signer", "tls.key")}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return &pki.Issuer{CertPEM: crt, KeyPEM: key}
	}()
	acfg := rest.CopyConfig(admin)
	acfg.Host = base
	cs, err := kubernetes.NewForConfig(acfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ca := l.file("pki/ca/kubernetes", "tls.crt")
	for i, tt := range []struct {
		name      string
		signer    *pki.Issuer
		wantTrust bool
	}{
		{"handed-over csr-signer", &pki.Issuer{CertPEM: l.file("pki/cert/csr-signer", "tls.crt"), KeyPEM: l.file("pki/key/csr-signer", "tls.key")}, true},
		{"the operator's own csr-signer", ownCSRSigner, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			node := fmt.Sprintf("master-%d", i)
			// The kubelet's client certificate: system:node:<node> in system:nodes.
			c, k := pkiStranger(t, pki.Spec{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}, Client: true}, tt.signer)
			kcs, err := kubernetes.NewForConfig(&rest.Config{Host: base, TLSClientConfig: rest.TLSClientConfig{CAData: ca, CertData: c, KeyData: k, ServerName: "localhost"}})
			if err != nil {
				t.Fatal(err)
			}
			r, err := kcs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
			switch {
			case tt.wantTrust && (err != nil || r.Status.UserInfo.Username != "system:node:"+node):
				t.Errorf("kubelet client certificate: %v (user %v), want system:node:%s", err, r, node)
			case !tt.wantTrust && (err == nil || !strings.Contains(err.Error(), "Unauthorized")):
				t.Errorf("kubelet client certificate: %v, want Unauthorized", err)
			}

			// The kubelet's serving certificate on a stand-in kubelet (its /containerLogs
			// endpoint only), reached through pods/log as `oc logs` and cluster/etcd read it.
			sc, sk := pkiStranger(t, pki.Spec{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}, Server: true, IPs: []string{"127.0.0.1"}}, tt.signer)
			pair, err := tls.X509KeyPair(sc, sk)
			if err != nil {
				t.Fatal(err)
			}
			kubelet := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "log of "+r.URL.Path+"\n")
			}))
			kubelet.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
			kubelet.StartTLS()
			defer kubelet.Close()
			port, _ := strconv.Atoi(kubelet.URL[strings.LastIndex(kubelet.URL, ":")+1:])
			n, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}
			n.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
			if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "keepalived-" + node, Namespace: "default"},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "keepalived", Image: "keepalived"}}}}
			if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			b, err := cs.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{Container: "keepalived"}).DoRaw(ctx)
			switch want := "log of /containerLogs/default/" + pod.Name + "/keepalived\n"; {
			case tt.wantTrust && (err != nil || string(b) != want):
				t.Errorf("pods/log through the kubelet: %q %v, want %q", b, err, want)
			case !tt.wantTrust && (err == nil || !strings.Contains(string(b), "x509: certificate signed by unknown authority")):
				t.Errorf("pods/log through the kubelet: %q %v, want the kubelet's certificate refused", b, err)
			}
		})
	}
}
