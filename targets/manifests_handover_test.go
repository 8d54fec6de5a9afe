package targets

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/pki"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// hoServingNames are the names the kube-apiserver-operator's serving certificates carry after
// the pivot, per signer (cluster-kube-apiserver-operator certrotationcontroller: the load
// balancer hostnames from the Infrastructure API URLs, localhost, and the service network's
// kubernetes Service names and ClusterIP), for the default lab.
var hoServingNames = map[string][]string{
	"lb-signer":        {"api.ocp4.example.com", "api-int.ocp4.example.com"},
	"localhost-signer": {"localhost", "127.0.0.1"},
	"service-network-signer": {"kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", "openshift.default.svc", "172.30.0.1"},
}

// hoIssue issues a serving certificate for names from the issuer, with a fresh key, as the
// operator's certrotation would.
func hoIssue(t *testing.T, names []string, iss *pki.Issuer) (cert, key []byte) {
	t.Helper()
	spec := pki.Spec{CommonName: names[0], Server: true}
	for _, n := range names {
		if strings.Trim(n, "0123456789.") == "" {
			spec.IPs = append(spec.IPs, n)
		} else {
			spec.DNSNames = append(spec.DNSNames, n)
		}
	}
	return pkiStranger(t, spec, iss)
}

// hoClient issues a client certificate for cn in groups from the issuer, with a fresh key.
func hoClient(t *testing.T, cn string, groups []string, iss *pki.Issuer) (cert, key []byte) {
	t.Helper()
	key, err := pki.GenerateKey(pki.ECDSAP256, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cert, _, err = pki.Issue(pki.Spec{CommonName: cn, Organization: groups, Client: true, Validity: 24 * time.Hour}, key, iss, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// hoKubeconfigCA returns the CA bundle of a built kubeconfig.
func hoKubeconfigCA(t *testing.T, path string) []byte {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Clusters) != 1 {
		t.Fatalf("%s: %d clusters", path, len(cfg.Clusters))
	}
	for _, c := range cfg.Clusters {
		return c.CertificateAuthorityData
	}
	return nil
}

// TestHandoverChain: a serving certificate from each handed-over serving signer, for the names
// the operator uses after the pivot, verifies with the admin, lb-ext, lb-int and localhost
// kubeconfigs' CA bundles (and the bootstrap's kube-apiserver certificate still does); one from
// a foreign CA, with the same names and even the same subject as the lab's signer, does not.
func TestHandoverChain(t *testing.T) {
	l := newPKILab(t)
	l.cfg.PKI.KeyAlgorithm = pki.ECDSAP256 // the chain, not the key size, is under test
	l.build()
	fkey, _ := pki.GenerateKey(pki.ECDSAP256, rand.Reader)
	fca, _, err := pki.Issue(pki.Spec{CommonName: "kube-apiserver-lb-signer", OrganizationalUnit: []string{"openshift"}, CA: true, Validity: time.Hour}, fkey, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	foreign := &pki.Issuer{CertPEM: fca, KeyPEM: fkey}
	verify := func(bundle, cert []byte, name string) error {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			t.Fatal("empty CA bundle")
		}
		c, err := pki.ParseCert(cert)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: time.Now(),
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err
	}
	checked := 0
	for _, kc := range []string{"admin", "lb-ext", "lb-int", "localhost"} {
		bundle := hoKubeconfigCA(t, l.path("kubeconfig/"+kc, "kubeconfig"))
		if n := bytes.Count(bundle, []byte("BEGIN CERTIFICATE")); n != 1+len(pkiServingSigners) {
			t.Errorf("kubeconfig/%s: %d CAs in the bundle, want %d", kc, n, 1+len(pkiServingSigners))
		}
		for _, name := range []string{"api.ocp4.example.com", "localhost"} {
			if err := verify(bundle, l.file("pki/cert/kube-apiserver", "tls.crt"), name); err != nil {
				t.Errorf("kubeconfig/%s: the bootstrap kube-apiserver cert for %s: %v", kc, name, err)
			}
		}
		for _, signer := range pkiServingSigners {
			names := hoServingNames[signer]
			iss := &pki.Issuer{CertPEM: l.file("pki/ca/"+signer, "tls.crt"), KeyPEM: l.file("pki/key/"+signer, "tls.key")}
			good, _ := hoIssue(t, names, iss)
			bad, _ := hoIssue(t, names, foreign)
			for _, name := range names {
				if err := verify(bundle, good, name); err != nil {
					t.Errorf("kubeconfig/%s, %s cert for %s: %v", kc, signer, name, err)
				}
				if err := verify(bundle, bad, name); err == nil {
					t.Errorf("kubeconfig/%s accepts a foreign CA's cert for %s", kc, name)
				}
				checked++
			}
		}
	}
	if checked != 4*10 {
		t.Errorf("checked %d (kubeconfig, name) pairs, want 40", checked)
	}
	// The signers are what the installer's are: self-signed CAs with OU openshift.
	for _, signer := range pkiServingSigners {
		c := l.cert("pki/ca/" + signer)
		if !c.IsCA || c.Subject.CommonName != "kube-apiserver-"+signer || !slices.Equal(c.Subject.OrganizationalUnit, []string{"openshift"}) || c.Issuer.String() != c.Subject.String() {
			t.Errorf("pki/ca/%s: %s issued by %s, CA %v", signer, c.Subject, c.Issuer, c.IsCA)
		}
	}
}

// hoNewTargets are the targets this change adds.
var hoNewTargets = []string{
	// Issue 24.
	"pki/key/kubelet-signer", "pki/ca/kubelet-signer", "pki/bundle/kube-apiserver-client-ca",
	"manifests/cluster/service-account", "manifests/cluster/kubelet-signer", "manifests/cluster/kube-apiserver-rbac",
	"manifests/cluster/install-manifests",
	"pki/key/kube-apiserver-to-kubelet-signer", "pki/ca/kube-apiserver-to-kubelet-signer", "pki/bundle/kubelet-client-ca",
	"manifests/cluster/kube-apiserver-client-signers",
	// Issue 13.
	"pki/key/lb-signer", "pki/key/localhost-signer", "pki/key/service-network-signer",
	"pki/ca/lb-signer", "pki/ca/localhost-signer", "pki/ca/service-network-signer",
	"pki/key/machine-config-server", "pki/cert/machine-config-server", "pki/key/kube-proxy", "pki/cert/kube-proxy",
	"kubeconfig/kube-proxy", "manifests/cluster/kube-apiserver-signers", "manifests/cluster/client-cas",
	"manifests/cluster/mco-cas", "manifests/cluster/machine-config-server-tls", "manifests/cluster/ssh",
	// Issue 38: the bootstrap KCM's root CA bundle (#2); the nodes' bootstrap credential and its
	// signer (#10: pki/cert/kubelet-bootstrap is a new certificate under its old name).
	"pki/bundle/kube-apiserver-server-ca", "pki/key/kubelet-bootstrap-signer", "pki/ca/kubelet-bootstrap-signer", "pki/cert/kubelet-bootstrap",
	// Issue 38: the kube-controller-manager-operator's csr-signer, handed over, and the bootstrap
	// kube-apiserver's kubelet CA bundle that trusts it.
	"pki/key/csr-signer", "pki/cert/csr-signer", "pki/bundle/kubelet-serving-ca"}

// TestHandoverIncremental: the new targets exist, an edit that does not touch them rebuilds none
// of them (set equality, as TestPKIRebuilds), and one that does rebuilds exactly those that read
// it. Adding them to a lab built without them changes no existing key or certificate.
func TestHandoverIncremental(t *testing.T) {
	l := newMFLab(t)
	// An existing lab: every key and certificate the previous labbuild made (the pki targets
	// that are not new), built alone first.
	var old []string
	for _, tg := range pkiTargets(testLabConfig()) {
		if !slices.Contains(hoNewTargets, tg.Name) {
			old = append(old, tg.Name)
		}
	}
	l.build(old...)
	before := map[string][]byte{}
	for _, n := range old {
		files, _ := filepath.Glob(filepath.Join(l.out, filepath.FromSlash(n), "*"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			before[f] = b
		}
	}
	r := l.build("manifests", "kubeconfig", "pki")
	for _, n := range r.Built {
		if slices.Contains(old, n) {
			t.Errorf("%s ran again when the new targets were added", n)
		}
	}
	for f, b := range before {
		if now, _ := os.ReadFile(f); !bytes.Equal(now, b) {
			t.Errorf("%s changed when the new targets were added", f)
		}
	}
	if len(before) != len(old) {
		t.Errorf("%d files recorded for %d old targets, want one each", len(before), len(old))
	}
	for _, n := range hoNewTargets {
		if !slices.Contains(r.Built, n) {
			t.Errorf("%s was not built", n)
		}
	}

	newOnly := func(exec []string) []string {
		var got []string
		for _, n := range exec {
			if slices.Contains(hoNewTargets, n) {
				got = append(got, n)
			}
		}
		sort.Strings(got)
		return got
	}
	tests := []struct {
		name string
		edit func(*mfLab)
		want []string // the new targets that must rebuild; no other new target may
	}{
		{"worker memory", func(l *mfLab) { l.cfg.Nodes[len(l.cfg.Nodes)-1].MemoryMiB = 32768 }, nil},
		{"cluster network", func(l *mfLab) { l.cfg.Network.ClusterNetwork = "10.132.0.0/14" }, nil},
		{"api VIP", func(l *mfLab) { l.cfg.Network.APIVIP = "192.168.126.9" }, nil},
		{"master IP", func(l *mfLab) {
			for i := range l.cfg.Nodes {
				if l.cfg.Nodes[i].Name == "master-1" {
					l.cfg.Nodes[i].IP = "192.168.126.120"
				}
			}
		}, nil},
		{"release version", func(l *mfLab) { l.cfg.Release.Version = "4.18.1" }, []string{"manifests/cluster/install-manifests"}},
		{"SSH key", func(l *mfLab) {
			os.WriteFile(l.cfg.Access.SSHKeyFile, []byte(strings.Replace(mfTestSSHKey, "lab@example", "other@example", 1)+"\n"), 0o644)
		}, []string{"manifests/cluster/ssh"}},
		{"base domain", func(l *mfLab) { l.cfg.Cluster.BaseDomain = "lab.test" },
			[]string{"kubeconfig/kube-proxy", "manifests/cluster/machine-config-server-tls", "pki/cert/machine-config-server"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newMFLab(t)
			l.build("manifests", "kubeconfig", "pki")
			tt.edit(l)
			r := l.build("manifests", "kubeconfig", "pki")
			if got := newOnly(r.Built); !slices.Equal(got, tt.want) {
				t.Errorf("new targets rebuilt %v\nwant                %v", got, tt.want)
			}
			if r := l.build("manifests", "kubeconfig", "pki"); len(r.Built) != 0 {
				t.Errorf("second build after the edit ran %v", r.Built)
			}
		})
	}
}

// hoObject is one applied object: the resource it names and a data key it must hold.
type hoObject struct {
	gvr                  kube.GroupVersionResource
	ns, name             string
	wantKey, wantContent string // a data key (Secret, ConfigMap) and the value it must hold
}

// TestHandoverPivot runs the pivot as a client sees it on real programs: Debian's etcd, and the
// kube-apiserver first with the bootstrap static pod's flags (serving the kubernetes CA's
// certificate), where every handed-over manifest is server-side applied; then that apiserver is
// stopped and a new one started on the same etcd as the operator's would be: serving a
// certificate from the handed-over lb signer and trusting the client CAs of the handed-over
// admin-kubeconfig-client-ca ConfigMap. The admin kubeconfig built before the pivot reads the
// objects back through it (the `oc whoami` of the pivot: system:admin); the kube-proxy and
// kubelet bootstrap kubeconfigs authenticate too; a kubeconfig trusting the kubernetes CA alone,
// as labbuild's did before, is refused.
func TestHandoverPivot(t *testing.T) {
	l := mfRealAPILab(t)
	l.build("manifests", "pki", "kubeconfig")

	_, args := mfBootstrapAPIArgs(t, l)
	ctx := context.Background()

	// The handed-over manifests, as the collector lays them out, and the CRD their
	// MachineConfigs need.
	files := map[string][]byte{}
	for _, n := range hoClusterNames {
		paths, _ := filepath.Glob(l.path("manifests/cluster/"+n, "*.yaml"))
		if len(paths) == 0 {
			if n == "machine-config-server-ca" {
				continue // handed over from 4.19 only (render/releases MCSCA); this lab is 4.18
			}
			t.Fatalf("manifests/cluster/%s wrote nothing", n)
		}
		for _, p := range paths {
			files[filepath.Base(p)] = l.file("manifests/bootstrap", "manifests/"+filepath.Base(p))
		}
	}
	if len(files) != 23 {
		t.Errorf("%d handed-over manifests, want 23 (2 namespaces, 10 Secrets, 7 ConfigMaps, 2 MachineConfigs, a ClusterRole and its binding)", len(files))
	}
	crd := "0000_80_machine-config_01_machineconfigs.crd.yaml"
	files[crd] = mfFor130(t, l.crds[crd])

	kubeCA := l.file("pki/ca/kubernetes", "tls.crt")
	lbCA := l.file("pki/ca/lb-signer", "tls.crt")
	rootCA := l.file("pki/ca/root", "tls.crt")
	cm := kube.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	sec := kube.GroupVersionResource{Version: "v1", Resource: "secrets"}
	want := []hoObject{
		{sec, "openshift-kube-apiserver-operator", "loadbalancer-serving-signer", "tls.crt", string(lbCA)},
		{sec, "openshift-kube-apiserver-operator", "localhost-serving-signer", "tls.crt", string(l.file("pki/ca/localhost-signer", "tls.crt"))},
		{sec, "openshift-kube-apiserver-operator", "service-network-serving-signer", "tls.key", string(l.file("pki/key/service-network-signer", "tls.key"))},
		{cm, "openshift-config", "admin-kubeconfig-client-ca", "ca-bundle.crt", string(kubeCA)},
		{cm, "openshift-config-managed", "kubelet-bootstrap-kubeconfig", "ca-bundle.crt", string(kubeCA) + string(l.file("pki/ca/kubelet-bootstrap-signer", "tls.crt"))},
		{cm, "kube-system", "root-ca", "ca.crt", string(rootCA)},
		{cm, "openshift-config", "initial-kube-apiserver-server-ca", "ca-bundle.crt", string(kubeCA)},
		{sec, "openshift-machine-config-operator", "machine-config-server-tls", "tls.crt", string(l.file("pki/cert/machine-config-server", "tls.crt"))},
		// Issue 24.
		{cm, "openshift-config-managed", "sa-token-signing-certs", "service-account-001.pub", string(l.file("pki/sa", "sa.pub"))},
		{sec, "openshift-config", "initial-service-account-private-key", "service-account.key", string(l.file("pki/key/service-account", "tls.key"))},
		{sec, "openshift-kube-apiserver-operator", "next-bound-service-account-signing-key", "service-account.key", string(l.file("pki/key/service-account", "tls.key"))},
		{sec, "openshift-kube-controller-manager-operator", "csr-signer-signer", "tls.key", string(l.file("pki/key/kubelet-signer", "tls.key"))},
		{sec, "openshift-kube-controller-manager-operator", "csr-signer", "tls.crt", string(l.file("pki/cert/csr-signer", "tls.crt"))},
		{sec, "openshift-kube-controller-manager-operator", "csr-signer", "tls.key", string(l.file("pki/key/csr-signer", "tls.key"))},
		{cm, "openshift-config-managed", "csr-controller-ca", "ca-bundle.crt", string(l.file("pki/ca/kubelet-signer", "tls.crt")) + string(l.file("pki/cert/csr-signer", "tls.crt"))},
		{cm, "openshift-config", "openshift-install-manifests", "invoker", "labbuild"},
		{sec, "openshift-kube-apiserver-operator", "aggregator-client-signer", "tls.crt", string(l.file("pki/ca/front-proxy", "tls.crt"))},
		{sec, "openshift-kube-apiserver-operator", "kube-apiserver-to-kubelet-signer", "tls.key", string(l.file("pki/key/kube-apiserver-to-kubelet-signer", "tls.key"))},
	}
	// A ServiceAccount token the bootstrap kube-apiserver issues, presented after the pivot.
	var saToken string
	mc := kube.GroupVersionResource{Group: "machineconfiguration.openshift.io", Version: "v1", Resource: "machineconfigs"}

	t.Run("bootstrap", func(t *testing.T) {
		adminCfg := mfRestConfig(t, l.path("kubeconfig/admin", "kubeconfig"))
		testenv.StartKubeAPIServer(t, args, adminCfg) // stopped when this subtest ends
		cs, err := kubernetes.NewForConfig(adminCfg)
		if err != nil {
			t.Fatal(err)
		}
		// The bootstrap's namespaces that the handed-over objects live in.
		for _, ns := range []string{"openshift-config", "openshift-config-managed", "openshift-machine-config-operator"} {
			if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var alog bytes.Buffer
		ap, err := clusterApplier(kubedyn.Config(adminCfg), &alog)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ap.ApplyFiles(ctx, files); err != nil {
			t.Fatalf("server-side apply of the handed-over manifests: %v", err)
		}
		if strings.Contains(alog.String(), "PRIVATE KEY") {
			t.Error("the apply log shows key material")
		}
		// A bound ServiceAccount token from the bootstrap (TokenRequest: signed with
		// --service-account-signing-key-file, labbuild's sticky key).
		if _, err := cs.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "pivot"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "pivot", &authnv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest on the bootstrap kube-apiserver: %v", err)
		}
		saToken = tr.Status.Token
	})

	t.Run("after the pivot", func(t *testing.T) {
		dir := t.TempDir()
		// The operator's load-balancer serving certificate: api and api-int, from the
		// handed-over signer, with a key the lab never saw.
		crt, key := hoIssue(t, hoServingNames["lb-signer"], &pki.Issuer{CertPEM: lbCA, KeyPEM: l.file("pki/key/lb-signer", "tls.key")})
		// The post-pivot client CA: what the operator combines, of which the lab hands over
		// admin-kubeconfig-client-ca (read back from the applied manifest).
		cmData := func(file, key string) []byte {
			var c corev1.ConfigMap
			if err := yaml.Unmarshal(files[file], &c); err != nil || c.Data[key] == "" {
				t.Fatalf("%s: no %s (%v)", file, key, err)
			}
			return []byte(c.Data[key])
		}
		secData := func(file, key string) []byte {
			var c corev1.Secret
			if err := yaml.Unmarshal(files[file], &c); err != nil || len(c.Data[key]) == 0 {
				t.Fatalf("%s: no %s (%v)", file, key, err)
			}
			return c.Data[key]
		}
		// manageClientCABundle's inputs that labbuild hands over (kube-apiserver-operator
		// release-4.18 pkg/operator/targetconfigcontroller/targetconfigcontroller.go):
		// admin-kubeconfig-client-ca, csr-controller-ca (the kubelet signer) and
		// kubelet-bootstrap-kubeconfig ("what validates the master kubelet bootstrap
		// credential": the kubelet bootstrap signer since issue 38 #10).
		csrCA := cmData("04-openshift-config-managed-configmap-csr-controller-ca.yaml", "ca-bundle.crt")
		clientCA := append(append(cmData("04-openshift-config-configmap-admin-kubeconfig-client-ca.yaml", "ca-bundle.crt"), csrCA...),
			cmData("04-openshift-config-managed-configmap-kubelet-bootstrap-kubeconfig.yaml", "ca-bundle.crt")...)
		// The operator's service-account flags (bootstrap-config-overrides.yaml and
		// config-overrides.yaml): verify with sa-token-signing-certs and
		// bound-sa-token-signing-certs (the next-bound key's public half), sign with the
		// next-bound key.
		nextBound := "04-openshift-kube-apiserver-operator-secret-next-bound-service-account-signing-key.yaml"
		saPubs := append(cmData("04-openshift-config-managed-configmap-sa-token-signing-certs.yaml", "service-account-001.pub"),
			secData(nextBound, "service-account.pub")...)
		write := func(name string, b []byte) string {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}
		post := append([]string{}, args...)
		for i, a := range post {
			switch {
			case strings.HasPrefix(a, "--tls-cert-file="):
				post[i] = "--tls-cert-file=" + write("lb-serving.crt", crt)
			case strings.HasPrefix(a, "--tls-private-key-file="):
				post[i] = "--tls-private-key-file=" + write("lb-serving.key", key)
			case strings.HasPrefix(a, "--client-ca-file="):
				post[i] = "--client-ca-file=" + write("client-ca.crt", clientCA)
			case strings.HasPrefix(a, "--kubelet-certificate-authority="):
				post[i] = "--kubelet-certificate-authority=" + write("kubelet-serving-ca.crt", csrCA)
			case strings.HasPrefix(a, "--service-account-key-file="):
				post[i] = "--service-account-key-file=" + write("sa.pub", saPubs)
			case strings.HasPrefix(a, "--service-account-signing-key-file="):
				post[i] = "--service-account-signing-key-file=" + write("sa.key", secData(nextBound, "service-account.key"))
			}
		}
		adminCfg := mfRestConfig(t, l.path("kubeconfig/admin", "kubeconfig"))
		base := testenv.StartKubeAPIServer(t, post, adminCfg)
		pkiSelf(t, adminCfg, "system:admin") // readyz + SelfSubjectReview through the admin kubeconfig

		// Every handed-over object is there, as applied before the restart.
		ap, err := clusterApplier(kubedyn.Config(adminCfg), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		dyn := ap.Dynamic()
		for _, o := range want {
			u, err := dyn.Resource(o.gvr).Namespace(o.ns).Get(ctx, o.name, kube.GetOptions{})
			if err != nil {
				t.Errorf("%s %s/%s: %v", o.gvr.Resource, o.ns, o.name, err)
				continue
			}
			data, _ := u.Object["data"].(map[string]any)
			got, _ := data[o.wantKey].(string)
			if o.gvr.Resource == "secrets" {
				b, err := base64.StdEncoding.DecodeString(got)
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
			if got != o.wantContent {
				t.Errorf("%s/%s %s: not the lab's", o.ns, o.name, o.wantKey)
			}
		}
		for _, role := range []string{"master", "worker"} {
			u, err := dyn.Resource(mc).Get(ctx, "99-"+role+"-ssh", kube.GetOptions{})
			if err != nil {
				t.Errorf("MachineConfig 99-%s-ssh: %v", role, err)
				continue
			}
			if lbl := u.GetLabels()["machineconfiguration.openshift.io/role"]; lbl != role {
				t.Errorf("99-%s-ssh role label %q", role, lbl)
			}
		}

		// The node identities after the pivot: kube-proxy (long-lived) and the kubelet
		// bootstrap kubeconfig, through api-int.
		for _, kc := range []struct{ name, user string }{{"kube-proxy", "system:kube-proxy"}, {"kubelet-bootstrap", csr.NodeBootstrapperSA}, {"lb-int", "system:admin"}} {
			cfg, err := clientcmd.BuildConfigFromFlags("", l.path("kubeconfig/"+kc.name, "kubeconfig"))
			if err != nil {
				t.Fatal(err)
			}
			host := strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), ":6443")
			cfg.Host, cfg.TLSClientConfig.ServerName = base, host
			pkiSelf(t, cfg, kc.user)
		}
		// kube-proxy's identity may do its job: watch Services and EndpointSlices
		// (system:node-proxier, bound to system:kube-proxy by the bootstrap RBAC policy).
		kp, err := clientcmd.BuildConfigFromFlags("", l.path("kubeconfig/kube-proxy", "kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		kp.Host, kp.TLSClientConfig.ServerName = base, "api-int.ocp4.example.com"
		kcs, err := kubernetes.NewForConfig(kp)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kcs.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("kube-proxy lists EndpointSlices: %v", err)
		}
		if _, err := kcs.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{}); err == nil {
			t.Error("kube-proxy may list Secrets; its identity must be narrow")
		}

		// The token the bootstrap issued is accepted after the pivot.
		tokCfg := rest.AnonymousClientConfig(adminCfg)
		tokCfg.BearerToken = saToken
		pkiSelf(t, tokCfg, "system:serviceaccount:default:pivot")
		// A kubelet client certificate from the kubelet signer (what the bootstrap
		// kube-controller-manager issues) authenticates after the pivot through
		// csr-controller-ca.
		nodeCrt, nodeKey := hoClient(t, "system:node:master-0", []string{"system:nodes"},
			&pki.Issuer{CertPEM: l.file("pki/ca/kubelet-signer", "tls.crt"), KeyPEM: l.file("pki/key/kubelet-signer", "tls.key")})
		nodeCfg := rest.AnonymousClientConfig(adminCfg)
		nodeCfg.TLSClientConfig.CAData = adminCfg.TLSClientConfig.CAData
		nodeCfg.TLSClientConfig.CertData, nodeCfg.TLSClientConfig.KeyData = nodeCrt, nodeKey
		pkiSelf(t, nodeCfg, "system:node:master-0")
		// `oc auth can-i get nodes/proxy --as system:kube-apiserver`: yes, through the
		// handed-over ClusterRoleBinding.
		acs, err := kubernetes.NewForConfig(adminCfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, verb := range []string{"get", "create"} {
			sar, err := acs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: "system:kube-apiserver", ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: "proxy", Name: "master-0"}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !sar.Status.Allowed {
				t.Errorf("system:kube-apiserver may not %s nodes/proxy: %s", verb, sar.Status.Reason)
			}
		}
		// Withheld, the binding is what a kubelet's SubjectAccessReview misses: logs and exec
		// would be Forbidden.
		if err := acs.RbacV1().ClusterRoleBindings().Delete(ctx, "kube-apiserver", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// The RBAC authorizer reads bindings through an informer: the deletion reaches it a
		// moment later (a make check at load 24 saw a SubjectAccessReview answered from before it). Asked until
		// it says no, for up to 30 s.
		allowed := true
		for end := time.Now().Add(30 * time.Second); allowed && time.Now().Before(end); {
			sar, err := acs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: "system:kube-apiserver", ResourceAttributes: &authzv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "proxy", Name: "master-0"}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if allowed = sar.Status.Allowed; allowed {
				time.Sleep(200 * time.Millisecond)
			}
		}
		if allowed {
			t.Error("without ClusterRoleBinding kube-apiserver, system:kube-apiserver may still get nodes/proxy: the handed-over RBAC proves nothing")
		}

		// labbuild's kubeconfigs before this change trusted the kubernetes CA alone: refused.
		oldCfg := rest.CopyConfig(adminCfg)
		oldCfg.TLSClientConfig.CAData = kubeCA
		cs, err := kubernetes.NewForConfig(oldCfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.Discovery().ServerVersion(); err == nil || !strings.Contains(err.Error(), "x509") {
			t.Errorf("a kubernetes-CA-only kubeconfig after the pivot: %v, want an x509 error", err)
		}
	})
}
