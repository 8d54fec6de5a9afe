package targets

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/pki"
	"github.com/labbuild/labbuild/targets/csr"
)

// pkiLab builds pki and kubeconfig targets of a config into a temp dir with an injected clock.
type pkiLab struct {
	t        *testing.T
	cfg      *lab.Config
	out      string
	now      time.Time
	log      bytes.Buffer
	force    bool
	goals    []string
	lastExec []string
}

var pkiT0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func newPKILab(t *testing.T) *pkiLab {
	return &pkiLab{t: t, cfg: testLabConfig(), out: t.TempDir(), now: pkiT0, goals: []string{"pki", "kubeconfig"}}
}

// reparsed returns a fresh copy of c as ParseConfig reads a lab file named name: a Config
// caches its generic form on first lookup, and the tests edit their Config between builds as a
// user edits lab.yaml.
func reparsed(t testing.TB, c *lab.Config, name string) *lab.Config {
	t.Helper()
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := lab.ParseConfig(js, name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (l *pkiLab) build() *engine.Result {
	l.t.Helper()
	cfg := reparsed(l.t, l.cfg, "lab.json")
	r, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: l.out, Goals: l.goals, Jobs: 2,
		Force: l.force, Now: func() time.Time { return l.now }, Stdout: &l.log, Stderr: &l.log})
	if err != nil {
		l.t.Fatalf("build: %v", err)
	}
	l.lastExec = append([]string(nil), r.Built...)
	sort.Strings(l.lastExec)
	return r
}

func (l *pkiLab) file(target, rel string) []byte {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(l.out, filepath.FromSlash(target), rel))
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

func (l *pkiLab) cert(target string) *x509.Certificate {
	l.t.Helper()
	c, err := pki.ParseCert(l.file(target, "tls.crt"))
	if err != nil {
		l.t.Fatalf("%s: %v", target, err)
	}
	return c
}

func (l *pkiLab) path(target, rel string) string {
	return filepath.Join(l.out, filepath.FromSlash(target), rel)
}

func TestPKICertificates(t *testing.T) {
	l := newPKILab(t)
	l.build()
	server, client := x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth
	tests := []struct {
		id, issuer, cn string
		o              []string
		eku            []x509.ExtKeyUsage
		dns, ips       []string
		life           time.Duration
	}{
		{"etcd-server", "etcd-signer", "etcd-server", nil, []x509.ExtKeyUsage{server, client},
			[]string{"localhost", "etcd.ocp4.example.com"},
			[]string{"192.168.126.100", "192.168.126.101", "192.168.126.102", "192.168.126.103", "127.0.0.1"}, 365 * 24 * time.Hour},
		{"etcd-peer", "etcd-signer", "system:etcd-peer:bootstrap", []string{"system:etcd-peers"}, []x509.ExtKeyUsage{server, client},
			[]string{"bootstrap.ocp4.example.com", "localhost"}, []string{"192.168.126.100", "127.0.0.1"}, 365 * 24 * time.Hour},
		{"etcd-client", "etcd-signer", "system:etcd-client", nil, []x509.ExtKeyUsage{client}, nil, nil, 365 * 24 * time.Hour},
		{"etcd-metric-client", "etcd-metric-signer", "system:etcd-metric-client", nil, []x509.ExtKeyUsage{client}, nil, nil, 365 * 24 * time.Hour},
		{"kube-apiserver", "kubernetes", "kube-apiserver", nil, []x509.ExtKeyUsage{server, client},
			[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local",
				"api.ocp4.example.com", "api-int.ocp4.example.com", "localhost"},
			[]string{"192.168.126.10", "192.168.126.100", "192.168.126.101", "192.168.126.102", "192.168.126.103", "127.0.0.1", "172.30.0.1"},
			365 * 24 * time.Hour},
		{"kube-apiserver-kubelet-client", "kubernetes", "system:kube-apiserver", []string{"kube-master"}, []x509.ExtKeyUsage{client}, nil, nil, 365 * 24 * time.Hour},
		{"kube-controller-manager", "kubernetes", "system:kube-controller-manager", nil, []x509.ExtKeyUsage{client}, nil, nil, 365 * 24 * time.Hour},
		{"kube-scheduler", "kubernetes", "system:kube-scheduler", nil, []x509.ExtKeyUsage{client}, nil, nil, 365 * 24 * time.Hour},
		{"front-proxy-client", "front-proxy", "system:openshift-aggregator", nil, []x509.ExtKeyUsage{client}, nil, nil, 365 * 24 * time.Hour},
		{"admin", "kubernetes", "system:admin", []string{"system:masters"}, []x509.ExtKeyUsage{client}, nil, nil, 365 * 24 * time.Hour},
		{"kubelet-bootstrap", "kubelet-bootstrap-signer", "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper",
			[]string{"system:serviceaccounts", "system:serviceaccounts:openshift-machine-config-operator"}, []x509.ExtKeyUsage{client}, nil, nil, 3650 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			c := l.cert("pki/cert/" + tt.id)
			ca := l.cert("pki/ca/" + tt.issuer)
			if c.Subject.CommonName != tt.cn || !slices.Equal(c.Subject.Organization, tt.o) {
				t.Errorf("subject CN=%q O=%q, want CN=%q O=%q", c.Subject.CommonName, c.Subject.Organization, tt.cn, tt.o)
			}
			if !slices.Equal(c.ExtKeyUsage, tt.eku) {
				t.Errorf("EKU %v, want %v", c.ExtKeyUsage, tt.eku)
			}
			if !slices.Equal(c.DNSNames, tt.dns) {
				t.Errorf("DNS SANs %q, want %q", c.DNSNames, tt.dns)
			}
			var ips []string
			for _, ip := range c.IPAddresses {
				ips = append(ips, ip.String())
			}
			if !slices.Equal(ips, tt.ips) {
				t.Errorf("IP SANs %q, want %q", ips, tt.ips)
			}
			if c.IsCA || !c.BasicConstraintsValid {
				t.Errorf("leaf must carry basicConstraints CA:FALSE")
			}
			if c.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
				t.Errorf("key usage %b", c.KeyUsage)
			}
			if got := c.NotAfter.Sub(c.NotBefore); got != tt.life+pki.Backdate {
				t.Errorf("lifetime %v, want %v (+%v backdate)", got, tt.life, pki.Backdate)
			}
			if !c.NotBefore.Equal(pkiT0.Add(-pki.Backdate)) {
				t.Errorf("NotBefore %v, want the build epoch %v minus the backdate", c.NotBefore, pkiT0)
			}
			if !pki.MatchesKey(c, l.file("pki/key/"+tt.id, "tls.key")) {
				t.Errorf("certificate does not match pki/key/%s", tt.id)
			}
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: tt.eku, CurrentTime: pkiT0.Add(time.Hour)}); err != nil {
				t.Errorf("chain to pki/ca/%s: %v", tt.issuer, err)
			}
			other := x509.NewCertPool()
			other.AddCert(l.cert("pki/ca/root"))
			if _, err := c.Verify(x509.VerifyOptions{Roots: other, KeyUsages: tt.eku, CurrentTime: pkiT0.Add(time.Hour)}); err == nil {
				t.Errorf("verified against the root CA, which did not sign it")
			}
		})
	}
	for _, ca := range pkiCAs {
		c := l.cert("pki/ca/" + ca.id)
		if !c.IsCA || c.Subject.CommonName != ca.cn || c.CheckSignatureFrom(c) != nil {
			t.Errorf("pki/ca/%s: want a self-signed CA named %s", ca.id, ca.cn)
		}
		if c.KeyUsage&x509.KeyUsageCertSign == 0 {
			t.Errorf("pki/ca/%s: no keyCertSign", ca.id)
		}
	}
	// Keys are 0600 and their bytes never reach the build's output.
	for _, id := range pkiKeyIDs(l.cfg) {
		p := l.path("pki/key/"+id, "tls.key")
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("pki/key/%s: mode %v, want 0600 (%v)", id, fi.Mode().Perm(), err)
		}
		k := l.file("pki/key/"+id, "tls.key")
		body := strings.Split(string(k), "\n")[1]
		if strings.Contains(l.log.String(), body) {
			t.Errorf("key bytes of %s in the build log", id)
		}
	}
	for _, k := range kcSpecs {
		if fi, err := os.Stat(l.path("kubeconfig/"+k.name, "kubeconfig")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("kubeconfig/%s not 0600: %v", k.name, err)
		}
	}
	sa := l.file("pki/sa", "sa.pub")
	want, _ := pki.PublicKeyPEM(l.file("pki/key/service-account", "tls.key"))
	if !bytes.Equal(sa, want) {
		t.Errorf("pki/sa does not hold the service-account key's public half")
	}
}

// TestPKIMCSSANs: the machine-config-server certificate carries api-int only in the host mode
// (platform None) and, in the in-cluster mode (platform BareMetal), also the API VIP as an IP
// SAN and a DNS SAN, as the installer's mcscertkey.go writes it for platform baremetal.
func TestPKIMCSSANs(t *testing.T) {
	for _, tt := range []struct {
		mode     string
		dns, ips []string
	}{
		{lab.LoadBalancerHost, []string{"api-int.ocp4.example.com"}, nil},
		{lab.LoadBalancerInCluster, []string{"api-int.ocp4.example.com", "192.168.126.10"}, []string{"192.168.126.10"}},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			l := newPKILab(t)
			l.cfg.Network.LoadBalancer = tt.mode
			l.goals = []string{"pki/cert/machine-config-server"}
			l.build()
			c := l.cert("pki/cert/machine-config-server")
			var ips []string
			for _, ip := range c.IPAddresses {
				ips = append(ips, ip.String())
			}
			if c.Subject.CommonName != "system:machine-config-server" || !slices.Equal(c.DNSNames, tt.dns) || !slices.Equal(ips, tt.ips) {
				t.Errorf("CN %q DNS %q IP %q; want system:machine-config-server, %q, %q", c.Subject.CommonName, c.DNSNames, ips, tt.dns, tt.ips)
			}
			if tt.ips != nil {
				if err := c.VerifyHostname(tt.ips[0]); err != nil {
					t.Errorf("https://%s:22623 would not verify: %v", tt.ips[0], err)
				}
			}
		})
	}
}

func TestPKIOpenSSL(t *testing.T) {
	openssl := testenv.Require(t, "openssl")
	l := newPKILab(t)
	l.build()
	tests := []struct {
		cert, ca, purpose, check string
		ok                       bool
	}{
		{"kube-apiserver", "kubernetes", "sslserver", "-verify_hostname=api.ocp4.example.com", true},
		{"kube-apiserver", "kubernetes", "sslserver", "-verify_hostname=api-int.ocp4.example.com", true},
		{"kube-apiserver", "kubernetes", "sslserver", "-verify_hostname=localhost", true},
		{"kube-apiserver", "kubernetes", "sslserver", "-verify_ip=192.168.126.10", true},
		{"kube-apiserver", "kubernetes", "sslserver", "-verify_ip=192.168.126.100", true},
		{"kube-apiserver", "kubernetes", "sslserver", "-verify_ip=172.30.0.1", true},
		{"kube-apiserver", "kubernetes", "sslserver", "-verify_hostname=console-openshift-console.apps.ocp4.example.com", false},
		{"kube-apiserver", "kubernetes", "sslserver", "-verify_ip=192.168.126.110", false}, // a worker
		{"kube-apiserver", "root", "sslserver", "-verify_ip=192.168.126.10", false},
		{"etcd-server", "etcd-signer", "sslserver", "-verify_ip=192.168.126.101", true},
		{"etcd-server", "etcd-signer", "sslclient", "", true},
		{"etcd-peer", "etcd-signer", "sslserver", "-verify_hostname=bootstrap.ocp4.example.com", true},
		{"etcd-peer", "etcd-signer", "sslclient", "", true},
		{"etcd-client", "etcd-signer", "sslclient", "", true},
		{"etcd-client", "etcd-signer", "sslserver", "", false},
		{"etcd-client", "kubernetes", "sslclient", "", false},
		{"admin", "kubernetes", "sslclient", "", true},
		{"admin", "kubernetes", "sslserver", "", false},
		{"kubelet-bootstrap", "kubelet-bootstrap-signer", "sslclient", "", true},
		{"front-proxy-client", "front-proxy", "sslclient", "", true},
		{"front-proxy-client", "kubernetes", "sslclient", "", false},
	}
	for _, tt := range tests {
		args := []string{"verify", "-attime", "1793541600", // 2026-11-01 14:00 UTC, two hours after the epoch
			"-CAfile", l.path("pki/ca/"+tt.ca, "tls.crt"), "-purpose", tt.purpose}
		if tt.check != "" {
			args = append(args, tt.check)
		}
		args = append(args, l.path("pki/cert/"+tt.cert, "tls.crt"))
		out, err := exec.Command(openssl, args...).CombinedOutput()
		if (err == nil) != tt.ok {
			t.Errorf("openssl verify %s against %s %s %s: ok=%v, want %v\n%s", tt.cert, tt.ca, tt.purpose, tt.check, err == nil, tt.ok, out)
		}
	}
}

// TestPKIRebuilds checks what rebuilds after each edit, with early cutoff.
func TestPKIRebuilds(t *testing.T) {
	tests := []struct {
		name string
		edit func(l *pkiLab)
		want []string
	}{
		{"nothing", func(*pkiLab) {}, nil},
		{"api VIP", func(l *pkiLab) { l.cfg.Network.APIVIP = "192.168.126.9" }, []string{"pki/cert/kube-apiserver"}},
		{"worker memory", func(l *pkiLab) { l.cfg.Nodes[len(l.cfg.Nodes)-1].MemoryMiB = 32768 }, nil},
		{"master IP", func(l *pkiLab) {
			for i := range l.cfg.Nodes {
				if l.cfg.Nodes[i].Name == "master-1" {
					l.cfg.Nodes[i].IP = "192.168.126.120"
				}
			}
		}, []string{"pki/cert/etcd-server", "pki/cert/kube-apiserver"}},
		{"base domain", func(l *pkiLab) { l.cfg.Cluster.BaseDomain = "lab.test" }, []string{
			"kubeconfig/admin", "kubeconfig/kube-controller-manager", "kubeconfig/kube-proxy", "kubeconfig/kube-scheduler",
			"kubeconfig/kubelet-bootstrap", "kubeconfig/lb-ext", "kubeconfig/lb-int",
			"pki/cert/etcd-peer", "pki/cert/etcd-server", "pki/cert/kube-apiserver", "pki/cert/machine-config-server"}},
		// No certificate is short-lived since the kubelet bootstrap credential lives ten years
		// (issue 38 #10): a day later nothing renews.
		{"clock a day later", func(l *pkiLab) { l.now = l.now.Add(25 * time.Hour) }, nil},
		{"force (-B) reproduces the bytes", func(l *pkiLab) { l.force = true }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newPKILab(t)
			l.build()
			before := l.file("pki/cert/admin", "tls.crt")
			keyBefore := l.file("pki/key/admin", "tls.key")
			tt.edit(l)
			r := l.build()
			if tt.name == "force (-B) reproduces the bytes" {
				if len(r.Built) == 0 {
					t.Fatal("-B ran nothing")
				}
				if !bytes.Equal(before, l.file("pki/cert/admin", "tls.crt")) || !bytes.Equal(keyBefore, l.file("pki/key/admin", "tls.key")) {
					t.Errorf("-B changed the admin cert or key; certificates must be deterministic and keys sticky")
				}
				l.force = false
				r = l.build()
				if len(r.Built) != 0 {
					t.Errorf("build after -B ran %v", r.Built)
				}
				return
			}
			if !slices.Equal(l.lastExec, tt.want) {
				t.Errorf("rebuilt %v\nwant      %v", l.lastExec, tt.want)
			}
			if r := l.build(); len(r.Built) != 0 {
				t.Errorf("second build after the edit ran %v", r.Built)
			}
		})
	}
}

func TestPKIKeyAlgorithms(t *testing.T) {
	for _, alg := range []string{pki.RSA4096, pki.ECDSAP256} {
		t.Run(alg, func(t *testing.T) {
			if alg == pki.RSA4096 && testing.Short() {
				t.Skip("RSA-4096 key generation is slow")
			}
			l := newPKILab(t)
			l.build()
			old := l.file("pki/key/admin", "tls.key")
			l.cfg.PKI.KeyAlgorithm = alg
			l.build()
			// 42 before the hand-over signers, machine-config-server and kube-proxy (11 targets),
			// 53 before issue 24's kubelet signer (key, CA, and the client-CA bundle), 56 before
			// its kube-apiserver-to-kubelet signer (key, CA, and the kubelets' client-CA bundle),
			// 59 before issue 38's complete server CA bundle, 60 before its kubelet bootstrap
			// signer (key and CA), 62 before the handed-over csr-signer (key, cert, and the
			// kubelet serving CA bundle).
			if len(l.lastExec) != 65 {
				t.Errorf("changing the key algorithm rebuilt %d targets, want all 65", len(l.lastExec))
			}
			k, err := pki.ParseKey(l.file("pki/key/admin", "tls.key"))
			if err != nil || bytes.Equal(old, l.file("pki/key/admin", "tls.key")) {
				t.Fatalf("key not regenerated: %v", err)
			}
			c := l.cert("pki/cert/kube-apiserver")
			want := x509.RSA
			if alg == pki.ECDSAP256 {
				want = x509.ECDSA
			}
			if c.PublicKeyAlgorithm != want || !pki.MatchesKey(l.cert("pki/cert/admin"), l.file("pki/key/admin", "tls.key")) {
				t.Errorf("cert key algorithm %v, want %v", c.PublicKeyAlgorithm, want)
			}
			_ = k
			// Determinism holds for ECDSA too (RFC 6979).
			again, _, err := pki.Issue(pki.Spec{CommonName: "x", Client: true, Validity: time.Hour}, l.file("pki/key/admin", "tls.key"), nil, pkiT0)
			again2, _, _ := pki.Issue(pki.Spec{CommonName: "x", Client: true, Validity: time.Hour}, l.file("pki/key/admin", "tls.key"), nil, pkiT0)
			if err != nil || !bytes.Equal(again, again2) {
				t.Errorf("Issue is not deterministic for %s: %v", alg, err)
			}
		})
	}
}

// TestCerts: `labbuild certs` reads every built CA and certificate (and no key) with its
// usages, SANs and time left on the report's clock (cmd/labbuild-full TestCertReport prints them).
func TestCerts(t *testing.T) {
	l := newPKILab(t)
	l.build()
	infos, err := Certs(l.out, pkiT0.Add(23*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if want := len(pkiCAs) + len(pkiLeaves(l.cfg)); len(infos) != want {
		t.Fatalf("%d certificates, want %d", len(infos), want)
	}
	seen := 0
	for _, in := range infos {
		switch in.Target {
		case "pki/cert/kubelet-bootstrap":
			seen++
			if days := in.Left / (24 * 3600); days < 3649 || !slices.Contains(in.Usages, "clientAuth") {
				t.Errorf("kubelet-bootstrap: %d days left, usages %v; want ten years (pki.caDays) and clientAuth", days, in.Usages)
			}
		case "pki/cert/kube-apiserver":
			seen++
			if !slices.Contains(in.DNSNames, "api-int.ocp4.example.com") || !slices.Equal(in.Usages, []string{"serverAuth", "clientAuth"}) || in.Left/(24*3600) != 364 {
				t.Errorf("kube-apiserver: SANs %v, usages %v, %d days left; want api-int.ocp4.example.com, serverAuth,clientAuth, 364", in.DNSNames, in.Usages, in.Left/(24*3600))
			}
		}
		if strings.Contains(in.Subject+in.Issuer, "PRIVATE KEY") {
			t.Errorf("key material in the report")
		}
	}
	if seen != 2 {
		t.Errorf("the report lacks kubelet-bootstrap or kube-apiserver (%d of 2)", seen)
	}
}

// TestPKINodeBootstrapper: the nodes' bootstrap credential (/etc/kubernetes/kubeconfig) is the
// installer's (pkg/asset/tls/kubelet.go KubeletClientCertKey: CN
// system:serviceaccount:openshift-machine-config-operator:node-bootstrapper, O
// system:serviceaccounts:openshift-machine-config-operator and system:serviceaccounts,
// ValidityTenYears, signed by KubeletBootstrapCertSigner CN kubelet-bootstrap-kubeconfig-signer,
// ten years), its signer is in the bootstrap kube-apiserver's --client-ca-file, and a kubelet
// CSR made with it, as the kube-apiserver's x509 authenticator names the requestor (CN; O plus
// system:authenticated), passes the approver's node-bootstrapper predicate
// (cluster-machine-approver isReqFromNodeBootstrapper: that user name and exactly those
// groups), which a CSR from a day-2 node must pass once labbuild's approver is gone
// (issue 38 #10).
func TestPKINodeBootstrapper(t *testing.T) {
	l := newPKILab(t)
	l.build()
	c := l.cert("pki/cert/kubelet-bootstrap")
	if c.Subject.CommonName != csr.NodeBootstrapperSA {
		t.Errorf("kubelet-bootstrap CN %q, want %q", c.Subject.CommonName, csr.NodeBootstrapperSA)
	}
	if life := c.NotAfter.Sub(c.NotBefore) - pki.Backdate; life < 3650*24*time.Hour {
		t.Errorf("kubelet-bootstrap lives %v, want ten years (the installer's ValidityTenYears)", life)
	}
	signer := l.cert("pki/ca/kubelet-bootstrap-signer")
	if signer.Subject.CommonName != "kubelet-bootstrap-kubeconfig-signer" || signer.NotAfter.Sub(signer.NotBefore)-pki.Backdate < 3650*24*time.Hour {
		t.Errorf("signer %q lives %v, want kubelet-bootstrap-kubeconfig-signer for ten years", signer.Subject.CommonName, signer.NotAfter.Sub(signer.NotBefore))
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(l.file("pki/bundle/kube-apiserver-client-ca", "ca-bundle.crt")) {
		t.Fatal("pki/bundle/kube-apiserver-client-ca holds no certificate")
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, CurrentTime: pkiT0.Add(time.Hour)}); err != nil {
		t.Errorf("the bootstrap kube-apiserver's client CA does not verify kubelet-bootstrap: %v", err)
	}
	// A kubelet's client CSR, requested with this identity.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:master-0.ocp4.example.com", Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	req := &csr.CertificateSigningRequest{Spec: csr.CertificateSigningRequestSpec{
		Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		SignerName: csr.SignerClient, Usages: []csr.KeyUsage{csr.UsageDigitalSignature, csr.UsageClientAuth},
		Username: c.Subject.CommonName, Groups: append(slices.Clone(c.Subject.Organization), "system:authenticated"),
	}}
	expected := map[string]csr.NodeIdentity{"master-0.ocp4.example.com": {Name: "master-0.ocp4.example.com", Role: "master"}}
	ok, why := csr.Decide(req, expected, nil)
	if !ok || !strings.Contains(why, csr.NodeBootstrapperSA) {
		t.Errorf("a client CSR requested with kubelet-bootstrap (user %q, groups %q): approve=%v (%s), want approved as requested by %s",
			req.Spec.Username, req.Spec.Groups, ok, why, csr.NodeBootstrapperSA)
	}
}
