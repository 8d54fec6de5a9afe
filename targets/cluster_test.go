package targets

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/labbuild/labbuild/internal/testenv"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/render/pki"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
	"github.com/labbuild/labbuild/targets/wait"
)

// clusterConfig returns the default lab with the given numbers of masters and workers.
func clusterConfig(masters, workers int) *Config {
	c := DefaultConfig()
	nodes := []Node{c.Bootstrap()}
	for i := 0; i < masters; i++ {
		nodes = append(nodes, Node{Name: fmt.Sprintf("master-%d", i), Role: RoleMaster, IP: fmt.Sprintf("192.168.126.%d", 101+i)})
	}
	for i := 0; i < workers; i++ {
		nodes = append(nodes, Node{Name: fmt.Sprintf("worker-%d", i), Role: RoleWorker, IP: fmt.Sprintf("192.168.126.%d", 110+i)})
	}
	c.Nodes = nodes
	return c
}

// TestClusterDeclarations checks the phases each topology gets, that install targets exist
// per node, that dependencies on families not yet registered are left out, and that a dry run
// of `labbuild cluster` plans every phase in the order that works.
func TestClusterDeclarations(t *testing.T) {
	tests := []struct {
		name             string
		masters, workers int
		have             []string
		wantDeps         map[string][]string
	}{
		{"3+2 without libvirt/haproxy families", 3, 2, []string{"kubeconfig/admin"},
			map[string][]string{
				"cluster/masters":          {"kubeconfig/admin", "cluster/bootstrap", "cluster/install/master-0", "cluster/install/master-1", "cluster/install/master-2"},
				"cluster/pivot":            {"kubeconfig/admin", "cluster/etcd"},
				"cluster/install/worker-1": nil,
				"cluster/bootstrap":        {"kubeconfig/admin", "cluster/install/bootstrap"},
			}},
		{"compact 3+0 with every upstream", 3, 0, []string{"kubeconfig/admin", "libvirt/vm/master-0", "ignition/master-0", "haproxy/config-post-pivot", "release/crds", "manifests/bootstrap"},
			map[string][]string{
				"cluster/install/master-0": {"libvirt/vm/master-0", "ignition/master-0"},
				"cluster/masters":          {"kubeconfig/admin", "cluster/bootstrap", "cluster/install/master-0", "cluster/install/master-1", "cluster/install/master-2"},
				"cluster/workers":          {"kubeconfig/admin", "cluster/pivot"},
				"cluster/pivot":            {"kubeconfig/admin", "cluster/etcd", "haproxy/config-post-pivot"},
				"cluster/bootstrap":        {"kubeconfig/admin", "cluster/install/bootstrap", "release/crds", "manifests/bootstrap"},
			}},
		{"1+1", 1, 1, []string{"kubeconfig/admin"},
			map[string][]string{"cluster/workers": {"kubeconfig/admin", "cluster/pivot", "cluster/install/worker-0"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clusterConfig(tt.masters, tt.workers)
			ts := clusterTargets(c, func(n string) bool { return slices.Contains(tt.have, n) })
			byName := map[string]*Target{}
			for _, x := range ts {
				if !x.External {
					t.Errorf("%s is not External", x.Name)
				}
				byName[x.Name] = x
			}
			for _, n := range c.Nodes {
				if byName["cluster/install/"+n.Name] == nil {
					t.Errorf("no cluster/install/%s", n.Name)
				}
			}
			for name, want := range tt.wantDeps {
				x := byName[name]
				if x == nil {
					t.Fatalf("no target %s", name)
				}
				got := slices.Clone(x.Deps)
				slices.Sort(got)
				w := slices.Clone(want)
				slices.Sort(w)
				if !slices.Equal(got, w) {
					t.Errorf("%s deps = %v, want %v", name, got, w)
				}
			}
			// Every worker's IP is read by the approver, so a changed address reruns it.
			for _, n := range c.NodesByRole(RoleWorker) {
				if !slices.Contains(byName["cluster/csr-approver"].Reads, "nodes."+n.Name+".ip") {
					t.Errorf("csr-approver does not read nodes.%s.ip", n.Name)
				}
			}
			// A dry run plans every phase, in dependency order.
			var stand []*Target
			for _, h := range tt.have {
				stand = append(stand, clusterStandinFile(h, "standin", "x"))
			}
			res, err := Build(context.Background(), Options{Config: c, OutDir: t.TempDir(), Goals: []string{"cluster"}, DryRun: true,
				Targets: append(stand, ts...), Now: func() time.Time { return time.Unix(1e9, 0) }})
			if err != nil {
				t.Fatal(err)
			}
			var order []string
			for _, p := range res.Plan {
				if strings.HasPrefix(p.Target, "cluster/") && !strings.HasPrefix(p.Target, "cluster/install/") {
					order = append(order, p.Target)
				}
			}
			phases := []string{"cluster/bootstrap", "cluster/masters", "cluster/etcd", "cluster/pivot", "cluster/workers", "cluster/converge", "cluster/done"}
			for i := 1; i < len(phases); i++ {
				a, b := slices.Index(order, phases[i-1]), slices.Index(order, phases[i])
				if a < 0 || b < 0 || a > b {
					t.Errorf("plan order %v: want %s before %s", order, phases[i-1], phases[i])
				}
			}
		})
	}
}

// TestClusterRegisteredGraph checks the registered family against the other registered
// families: every dependency of a cluster/* target names an existing target (families still
// being written are left out rather than named), and cluster/pivot depends on the post-pivot
// HAProxy config exactly when the haproxy family declares it.
func TestClusterRegisteredGraph(t *testing.T) {
	for _, c := range []*Config{DefaultConfig(), clusterConfig(3, 0), clusterConfig(1, 1)} {
		names := map[string]bool{}
		var cluster []*Target
		for _, f := range families {
			for _, x := range f.Targets(c) {
				names[x.Name] = true
				if f.Name == "cluster" {
					cluster = append(cluster, x)
				}
			}
		}
		if len(cluster) == 0 {
			t.Fatal("cluster family not registered")
		}
		for _, x := range cluster {
			for _, d := range x.Deps {
				if !names[d] {
					t.Errorf("%s depends on %s, which no registered family declares", x.Name, d)
				}
			}
			if x.Name == "cluster/pivot" && slices.Contains(x.Deps, clusterPostPivot) != names[clusterPostPivot] {
				t.Errorf("cluster/pivot deps %v, haproxy/config-post-pivot registered: %v", x.Deps, names[clusterPostPivot])
			}
		}
	}
}

// clusterStandinFile is a stand-in upstream target writing one file.
func clusterStandinFile(name, rel, content string) *Target {
	return &Target{Name: name, Doc: "stand-in", Version: 1, Run: func(ctx context.Context, s *Step) error {
		return s.WriteFile(rel, []byte(content), 0o600)
	}}
}

// fakeMachines records VM power actions; started[node] closes on the first Start, so kubelet
// stand-ins begin only once their "VM" is on.
type fakeMachines struct {
	mu      sync.Mutex
	running map[string]bool
	starts  map[string]int
	stops   map[string]int
	started map[string]chan struct{}
}

func newFakeMachines(c *Config) *fakeMachines {
	f := &fakeMachines{running: map[string]bool{}, starts: map[string]int{}, stops: map[string]int{}, started: map[string]chan struct{}{}}
	for _, n := range c.Nodes {
		f.started[n.Name] = make(chan struct{})
	}
	return f
}

func (f *fakeMachines) Install(ctx context.Context, node string) error { return f.Start(ctx, node) }
func (f *fakeMachines) Installed(ctx context.Context, node string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts[node] > 0, nil
}
func (f *fakeMachines) Start(ctx context.Context, node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.running[node] {
		f.starts[node]++
		f.running[node] = true
	}
	select {
	case <-f.started[node]:
	default:
		close(f.started[node])
	}
	return nil
}
func (f *fakeMachines) Stop(ctx context.Context, node string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.running[node] {
		f.stops[node]++
	}
	f.running[node] = false
	return nil
}
func (f *fakeMachines) Running(ctx context.Context, node string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running[node], nil
}

// powerOff turns every VM off, as a host reboot does.
func (f *fakeMachines) powerOff() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for n := range f.running {
		f.running[n] = false
	}
}

func (f *fakeMachines) count(node string) (starts, stops int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts[node], f.stops[node]
}

type fakeBalancer struct {
	mu  sync.Mutex
	cfg []string
}

func (b *fakeBalancer) switched() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.cfg) > 0
}

func (b *fakeBalancer) Switch(ctx context.Context, cfgFile string) error {
	data, err := os.ReadFile(cfgFile)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg = append(b.cfg, string(data))
	return nil
}

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
func clusterStandins(t *testing.T, adminKC []byte, domain string) []*Target {
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
			f, err := manifests.ClusterVersion("4.18.0", "00000000-0000-4000-8000-000000000000")
			return []manifests.File{f}, err
		}} {
		fs, err := f()
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, fs...)
	}
	return []*Target{
		clusterStandinFile("kubeconfig/admin", "kubeconfig", string(adminKC)),
		{Name: "release/crds", Doc: "stand-in: payload CRDs from ../shared/fixtures", Version: 1, Run: func(ctx context.Context, s *Step) error {
			for i, c := range crds {
				if err := s.WriteFile("crds/"+filepath.Base(c), crdData[i], 0o644); err != nil {
					return err
				}
			}
			return nil
		}},
		{Name: "manifests/bootstrap", Doc: "stand-in: lab manifests from render/manifests", Version: 1, Run: func(ctx context.Context, s *Step) error {
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

// TestClusterRealControlPlane drives every phase against a real etcd + kube-apiserver +
// kube-controller-manager on loopback with stand-ins for the VMs (fakeMachines), kubelets,
// the CVO and the cluster-etcd-operator, and proves:
//   - cluster/bootstrap applies the CRDs and manifests (Infrastructure status through its
//     subresource) and waits for the CVO;
//   - a timeout in cluster/masters fails only that phase, with what it waited for, the last
//     status and the command to look closer; a kill (cancel) during cluster/masters likewise;
//     the rerun does not redo cluster/bootstrap (no second VM start, no second apply);
//   - the approver approves the lab nodes' client and serving CSRs, which kcm signs, and
//     leaves a CSR for an unknown node and one from a foreign requestor pending;
//   - Node Ready detection, bootstrap-complete, the HAProxy switch and bootstrap stop,
//     ClusterOperator convergence, and a final rerun that keeps every phase.
func TestClusterRealControlPlane(t *testing.T) {
	const domain = "ocp4.example.com"
	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{ControllerManager: true, ServerNames: []string{"api." + domain}})
	ac, ak := cp.ClientCert(t, "system:admin", "system:masters")
	adminKCPath := cp.Kubeconfig(t, "admin", "https://api."+domain+":6443", ac, ak)
	adminKC, err := os.ReadFile(adminKCPath)
	if err != nil {
		t.Fatal(err)
	}
	c := clusterConfig(1, 1)
	c.Wait = WaitConfig{BootstrapMinutes: 2, MastersMinutes: 2, EtcdMinutes: 2, PivotMinutes: 2, WorkersMinutes: 2, ConvergeMinutes: 2}
	machines := newFakeMachines(c)
	lb := &fakeBalancer{}
	var rebooted atomic.Bool
	var etcdPolls atomic.Int64
	old := clusterEnv
	t.Cleanup(func() { clusterEnv = old })
	clusterEnv = clusterWorld{
		clock:    wait.RealClock{},
		interval: func(d time.Duration) time.Duration { return d / 50 },
		restConfig: func(kc, vip string) (*kube.RESTConfig, error) {
			if vip != c.Network.APIVIP {
				return nil, fmt.Errorf("dialled VIP %q, want %q", vip, c.Network.APIVIP)
			}
			cfg, err := kube.Config(kc, cp.Addr) // the VIP of this lab is the loopback apiserver
			if err != nil {
				return nil, err
			}
			// After a simulated host reboot the API answers only once a master runs again.
			cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if on, _ := machines.Running(ctx, "master-0"); rebooted.Load() && !on {
					return nil, errors.New("connect: connection refused (host rebooted, masters off)")
				}
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
			return cfg, nil
		},
		machines: func(uri, cluster string) ClusterMachines { return machines },
		balancer: func() ClusterBalancer { return lb },
		// The cluster-etcd-operator stand-in: the bootstrap stays an etcd member for the
		// first polls after kube-system/bootstrap is complete, then its teardown removes it.
		etcdMembers: func(ctx context.Context, endpoints []string, tf EtcdTLSFiles) ([]EtcdMember, error) {
			if !slices.Equal(endpoints, []string{"https://192.168.126.101:2379"}) || !strings.HasSuffix(tf.Key, "pki/key/etcd-client/tls.key") {
				return nil, fmt.Errorf("asked %v with %+v, want master-0's client URL and the etcd-client key", endpoints, tf)
			}
			ms := []EtcdMember{{Name: "master-0.ocp4.example.com", PeerURLs: []string{"https://192.168.126.101:2380"}}}
			if etcdPolls.Add(1) <= 2 {
				ms = append(ms, EtcdMember{Name: "etcd-bootstrap", PeerURLs: []string{"https://192.168.126.100:2380"}})
			}
			if lb.switched() {
				return nil, errors.New("the pivot ran before the bootstrap left etcd")
			}
			return ms, nil
		},
	}
	standins := clusterStandins(t, adminKC, domain)
	have := map[string]bool{}
	for _, s := range standins {
		have[s.Name] = true
	}
	all := append(standins, clusterTargets(c, func(n string) bool { return have[n] })...)
	out := t.TempDir()
	var stderr strings.Builder // the build's failure messages, shown when a step fails
	build := func(ctx context.Context, goals ...string) (*Result, error) {
		stderr.Reset()
		r, err := Build(ctx, Options{Config: c, OutDir: out, Goals: goals, Targets: all, Jobs: 2, Now: time.Now, Stderr: &stderr})
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, stderr.String())
		}
		return r, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := kube.NewClients(kubedyn.Config(cp.RESTConfig(ac, ak)))
	if err != nil {
		t.Fatal(err)
	}
	adminCS, err := kubernetes.NewForConfig(cp.RESTConfig(ac, ak)) // the test's own typed client (the binary has none)
	if err != nil {
		t.Fatal(err)
	}

	// Stand-ins for the cluster's own components, in the background.
	release := make(chan struct{}) // kubelets wait for it: the test decides when nodes join
	var converged sync.WaitGroup
	errs := make(chan error, 8)
	bootCrt, bootKey := cp.ClientCert(t, csr.BootstrapUser, csr.BootstrappersGroup)
	boot := cp.RESTConfig(bootCrt, bootKey)
	joined := make(chan struct{})
	var kubelets sync.WaitGroup
	for _, n := range c.Nodes {
		if n.Role == RoleBootstrap {
			continue
		}
		kubelets.Add(1)
		go func(n Node) {
			defer kubelets.Done()
			if err := clusterKubelet(ctx, cp, boot, machines.started[n.Name], release, n.Name, n.Name+"."+domain, n.IP); err != nil {
				errs <- fmt.Errorf("kubelet stand-in %s: %w", n.Name, err)
			}
		}(n)
	}
	go func() { kubelets.Wait(); close(joined) }()
	converged.Add(2)
	go func() {
		defer converged.Done()
		if err := clusterCVOStandin(ctx, admin, func() bool { r, _ := machines.Running(ctx, "bootstrap"); return !r }); err != nil {
			errs <- err
		}
	}()
	go func() {
		defer converged.Done()
		if err := clusterEtcdStandin(ctx, admin, adminCS, []string{"master-0." + domain}); err != nil {
			errs <- err
		}
	}()
	checkErrs := func() {
		t.Helper()
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	}

	// CSRs that must stay pending: an unknown node from the bootstrap identity, and a lab
	// node's name from a foreign requestor allowed to create CSRs.
	bootCS, _ := kubernetes.NewForConfig(boot)
	req, _, _ := clusterCSR("intruder."+domain, nil, nil)
	if _, err := adminCS.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "mallory-csr"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node-bootstrapper"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "mallory"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, mk := cp.ClientCert(t, "mallory", "lab-users")
	malloryCS, _ := kubernetes.NewForConfig(cp.RESTConfig(mc, mk))

	// 1. The bootstrap phase alone.
	start := time.Now()
	r, err := build(ctx, "cluster/bootstrap")
	t.Logf("cluster/bootstrap took %v", time.Since(start))
	if err != nil {
		t.Fatalf("cluster/bootstrap: %v", err)
	}
	if !slices.Contains(r.Executed, "cluster/bootstrap") {
		t.Fatalf("cluster/bootstrap not executed: %+v", r)
	}
	infra, err := admin.Dynamic.Resource(configGVR("infrastructures")).Get(ctx, "cluster", kube.GetOptions{})
	if err != nil {
		t.Fatalf("Infrastructure cluster not applied: %v", err)
	}
	if name, _, _ := kube.NestedString(infra.Object, "status", "infrastructureName"); name != "ocp4-standin" {
		t.Errorf("Infrastructure status.infrastructureName = %q, want ocp4-standin (status subresource not applied)", name)
	}
	if _, err := adminCS.RbacV1().ClusterRoleBindings().Get(ctx, "system:bootstrapper", metav1.GetOptions{}); err != nil {
		t.Errorf("RBAC manifest not applied: %v", err)
	}
	intruder, err := clusterSubmitCSR(ctx, bootCS, csr.SignerClient, req, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}
	mreq, _, _ := clusterCSR("master-0."+domain, nil, nil)
	foreign, err := clusterSubmitCSR(ctx, malloryCS, csr.SignerClient, mreq, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)
	if err != nil {
		t.Fatal(err)
	}

	// 2. cluster/masters times out (the kubelets are held back): injected clock, no sleeping.
	clusterEnv.clock = wait.NewFakeClock(time.Unix(1e9, 0))
	clusterEnv.interval = func(d time.Duration) time.Duration { return d }
	r, err = build(ctx, "cluster/masters")
	var be *BuildError
	if !errors.As(err, &be) || !slices.Contains(r.Failed, "cluster/masters") {
		t.Fatalf("masters without kubelets: err %v, result %+v; want cluster/masters failed", err, r)
	}
	if !slices.Contains(r.UpToDate, "cluster/bootstrap") {
		t.Errorf("timeout run: cluster/bootstrap not kept up to date: %+v", r)
	}
	log := clusterLog(t, out, "cluster/masters")
	for _, want := range []string{"timed out after 2m0s", "0/1 master nodes Ready", "oc get csr", "rerun to continue"} {
		if !strings.Contains(log+err.Error(), want) {
			t.Errorf("timeout report lacks %q:\n%s\n%v", want, log, err)
		}
	}

	// 3. A kill (cancel) in the middle of cluster/masters.
	clusterEnv.clock = wait.RealClock{}
	clusterEnv.interval = func(d time.Duration) time.Duration { return d / 50 }
	kctx, kill := context.WithCancel(ctx)
	clusterEnv.onPoll = func(target string, p wait.Poll) {
		if target == "cluster/masters" && p.N == 2 {
			kill()
		}
	}
	r, _ = build(kctx, "cluster/masters")
	kill()
	clusterEnv.onPoll = nil
	if r == nil || slices.Contains(r.Executed, "cluster/masters") || !slices.Contains(r.UpToDate, "cluster/bootstrap") {
		t.Errorf("killed run: %+v; want masters unfinished and bootstrap kept", r)
	}
	if starts, _ := machines.count("bootstrap"); starts != 1 {
		t.Errorf("bootstrap VM started %d times after the kill, want 1", starts)
	}
	checkErrs()

	// 4. Resume: the nodes join; every remaining phase runs, the bootstrap is not redone.
	close(release)
	start = time.Now()
	r, err = build(ctx, "cluster")
	t.Logf("resumed cluster run took %v", time.Since(start))
	checkErrs()
	if err != nil {
		t.Fatalf("full run: %v (%+v)\nmasters log:\n%s", err, r, clusterLog(t, out, "cluster/masters"))
	}
	if !slices.Contains(r.UpToDate, "cluster/bootstrap") || slices.Contains(r.Executed, "cluster/bootstrap") {
		t.Errorf("resumed run redid cluster/bootstrap: %+v", r)
	}
	for _, p := range []string{"cluster/masters", "cluster/etcd", "cluster/pivot", "cluster/workers", "cluster/converge", "cluster/done"} {
		if !slices.Contains(r.Executed, p) {
			t.Errorf("resumed run did not execute %s: %+v", p, r)
		}
	}
	if starts, stops := machines.count("bootstrap"); starts != 1 || stops != 1 {
		t.Errorf("bootstrap VM started %d times and stopped %d times, want 1 and 1", starts, stops)
	}
	select {
	case <-joined:
	case <-ctx.Done():
		t.Fatal("kubelet stand-ins did not finish")
	}

	// CSR verdicts: lab nodes approved and signed by kcm; the two strangers left pending.
	list, err := csr.List(ctx, admin.Dynamic)
	if err != nil {
		t.Fatal(err)
	}
	signed := map[string]int{}
	for _, x := range list {
		switch x.Name {
		case intruder, foreign:
			if !csr.Pending(&x) {
				t.Errorf("CSR %s (%s) is not pending: %+v", x.Name, csr.NodeOf(&x), x.Status.Conditions)
			}
			continue
		}
		if csr.Pending(&x) || len(x.Status.Certificate) == 0 {
			t.Errorf("lab CSR %s (%s, %s) not approved and signed: %+v", x.Name, csr.NodeOf(&x), x.Spec.SignerName, x.Status.Conditions)
			continue
		}
		crt, err := pki.ParseCert(x.Status.Certificate)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(cp.CA)
		if _, err := crt.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("certificate of %s does not chain to the kubernetes CA: %v", x.Name, err)
		}
		if crt.Subject.CommonName != csr.NodeUserPrefix+csr.NodeOf(&x) {
			t.Errorf("certificate of %s has CN %q", x.Name, crt.Subject.CommonName)
		}
		signed[x.Spec.SignerName]++
	}
	if signed[csr.SignerClient] != 2 || signed[csr.SignerServing] != 2 {
		t.Errorf("signed CSRs by signer = %v, want 2 client and 2 serving (master-0, worker-0)", signed)
	}
	// The verdicts, with reasons, are in the phase's log (one line per CSR).
	mlog := clusterLog(t, out, "cluster/masters")
	verdict := func(name string) string {
		for _, l := range strings.Split(mlog, "\n") {
			if strings.HasPrefix(l, "CSR "+name+" ") {
				return l
			}
		}
		return ""
	}
	if v := verdict(intruder); !strings.Contains(v, "refused (left pending)") || !strings.Contains(v, "not one of the lab's nodes") {
		t.Errorf("intruder CSR verdict %q; want refused as an unknown node", v)
	}
	if v := verdict(foreign); !strings.Contains(v, "refused (left pending)") || !strings.Contains(v, "not the node bootstrapper") {
		t.Errorf("mallory's CSR verdict %q; want refused as a foreign requestor", v)
	}
	// No CSR of the lab's masters was refused. (cluster/csr-approver runs alongside and may
	// approve one first; the masters' pass then logs that it changed meanwhile.)
	for _, l := range strings.Split(mlog, "\n") {
		if strings.Contains(l, `node "master-0.`+domain+`"): refused`) && !strings.Contains(l, "mallory") {
			t.Errorf("a master-0 CSR was refused: %s", l)
		}
	}

	if done, err := kube.BootstrapComplete(ctx, admin.Dynamic); !done || err != nil {
		t.Errorf("kube-system/bootstrap not complete: %v", err)
	}
	if len(lb.cfg) != 1 || !strings.Contains(lb.cfg[0], "post-pivot") {
		t.Errorf("HAProxy switched to %q, want the post-pivot config once", lb.cfg)
	}
	if n := etcdPolls.Load(); n < 3 {
		t.Errorf("cluster/etcd listed etcd's members %d times; want it to wait until the bootstrap left (3rd poll)", n)
	}
	sum := ClusterSummary(out, &Result{UpToDate: []string{"cluster/done"}})
	kcAbs := filepath.Join(out, "kubeconfig/admin/kubeconfig")
	if !strings.Contains(string(sum), "export KUBECONFIG="+kcAbs+"\n") || strings.Contains(string(sum), "standin-password") {
		t.Errorf("summary does not export KUBECONFIG=%s, or shows the password:\n%s", kcAbs, sum)
	}
	if !strings.Contains(string(sum), "https://console-openshift-console.apps."+domain) || !strings.Contains(string(sum), "kubeadmin-password") {
		t.Errorf("summary:\n%s", sum)
	}
	if strings.Contains(string(sum), "standin-password") {
		t.Error("summary prints the kubeadmin password itself")
	}
	converged.Wait()

	// `labbuild status`: stages and nodes as the cluster reports them. Mallory's CSR names
	// master-0, so master-0 shows one pending CSR.
	var st strings.Builder
	if err := ClusterStatus(ctx, c, out, &st); err != nil {
		t.Fatal(err)
	}
	norm := strings.Join(strings.Fields(strings.ReplaceAll(st.String(), "\n", " | ")), " ")
	for _, want := range []string{"api ready through 192.168.126.10:6443", "bootstrap complete", "etcd Ready on 1/1 masters",
		"2/2 ClusterOperators Available", "bootstrap bootstrap off - 0", "master-0 master running Ready 1", "worker-0 worker running Ready 0"} {
		if !strings.Contains(norm, want) {
			t.Errorf("status lacks %q:\n%s", want, st.String())
		}
	}

	// 5. Nothing left to do: every phase's Probe keeps it.
	r, err = build(ctx, "cluster")
	if err != nil || len(r.Executed) > 0 {
		t.Errorf("rerun after convergence executed %v (err %v); want every phase kept", r.Executed, err)
	}
	if starts, _ := machines.count("master-0"); starts != 1 {
		t.Errorf("master-0 started %d times, want 1", starts)
	}

	// 6. A host reboot after the pivot: every VM is off, the API does not answer, the nodes
	// went NotReady. The rerun must bring the masters and workers back and must not power the
	// bootstrap on again (a second etcd cluster).
	for _, n := range []string{"master-0." + domain, "worker-0." + domain} {
		clusterSetReady(t, ctx, adminCS, n, corev1.ConditionUnknown)
	}
	machines.powerOff()
	rebooted.Store(true)
	for _, n := range []string{"master-0", "worker-0"} {
		go func(node, name string) { // the kubelet posts Ready again once its VM runs
			clusterWaitReal(ctx, func() (bool, error) { on, _ := machines.Running(ctx, node); return on, nil })
			clusterSetReady(t, ctx, adminCS, name, corev1.ConditionTrue)
		}(n, n+"."+domain)
	}
	r, err = build(ctx, "cluster")
	if err != nil {
		t.Fatalf("rerun after reboot: %v\nbootstrap log:\n%s", err, clusterLog(t, out, "cluster/bootstrap"))
	}
	if starts, _ := machines.count("bootstrap"); starts != 1 {
		t.Errorf("after the reboot the bootstrap VM was started again (%d starts)", starts)
	}
	for _, n := range []string{"master-0", "worker-0"} {
		if starts, _ := machines.count(n); starts != 2 {
			t.Errorf("after the reboot %s started %d times in all, want 2", n, starts)
		}
	}
	// Only the phases whose done-condition the reboot broke run; the records they write are
	// the same bytes, so the others stay at their Probe.
	slices.Sort(r.Executed)
	if want := []string{"cluster/bootstrap", "cluster/masters", "cluster/workers"}; !slices.Equal(r.Executed, want) {
		t.Errorf("after the reboot executed %v, want %v", r.Executed, want)
	}

	// 7. worker-1 appended to nodes: of the running cluster. `labbuild cluster` boots it
	// (cluster/install/worker-1), approves its CSRs (the approver's pass and cluster/workers,
	// which waits for it Ready), and checks convergence again (cluster/converge follows
	// cluster/workers' new record; its own record is the same bytes, so cluster/done does not
	// run); no other phase runs, the masters and the bootstrap are not touched.
	c2 := clusterConfig(1, 2)
	c2.Wait = c.Wait
	machines.mu.Lock()
	machines.started["worker-1"] = make(chan struct{})
	w1 := machines.started["worker-1"]
	machines.mu.Unlock()
	go func() {
		if err := clusterKubelet(ctx, cp, boot, w1, release, "worker-1", "worker-1."+domain, "192.168.126.111"); err != nil {
			errs <- fmt.Errorf("kubelet stand-in worker-1: %w", err)
		}
	}()
	all2 := append(slices.Clone(standins), clusterTargets(c2, func(n string) bool { return have[n] })...)
	stderr.Reset()
	r, err = Build(ctx, Options{Config: c2, OutDir: out, Goals: []string{"cluster"}, Targets: all2, Jobs: 2, Now: time.Now, Stderr: &stderr})
	checkErrs()
	if err != nil {
		t.Fatalf("adding worker-1: %v\n%s", err, stderr.String())
	}
	slices.Sort(r.Executed)
	if want := []string{"cluster/converge", "cluster/csr-approver", "cluster/install/worker-1", "cluster/workers"}; !slices.Equal(r.Executed, want) {
		t.Errorf("adding worker-1 executed %v, want exactly %v", r.Executed, want)
	}
	if starts, _ := machines.count("master-0"); starts != 2 {
		t.Errorf("adding a worker started master-0 again (%d starts in all)", starts)
	}
	if ready, notReady, err := kube.NodesReady(ctx, admin.Dynamic, []string{"worker-1." + domain}); err != nil || len(ready) != 1 {
		t.Errorf("worker-1 Ready: %v, not ready %v, %v", ready, notReady, err)
	}
}

// clusterSetReady sets node name's Ready condition, as its kubelet (True) or the node
// lifecycle controller (Unknown) would.
func clusterSetReady(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string, st corev1.ConditionStatus) {
	err := clusterWaitReal(ctx, func() (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		now := metav1.Now()
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st, LastHeartbeatTime: now, LastTransitionTime: now}}
		_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Errorf("set node %s Ready=%s: %v", name, st, err)
	}
}

func configGVR(resource string) kube.GroupVersionResource {
	return kube.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: resource}
}

// clusterLog returns a target's build log.
func clusterLog(t *testing.T, out, target string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, ".labbuild", "log", target+".log"))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(b)
}

// TestClusterMachinesReal powers a VM that the libvirt family defined, on a real libvirtd in
// the test's network namespace, through the production driver (virtMachines): a defined but
// never started domain is installed and off; Start runs it (twice is fine); Stop powers it off
// (twice is fine); a node without a domain is not installed, Running names the missing domain
// and the fix, and Stop on it is not an error.
func TestClusterMachinesReal(t *testing.T) {
	d := testenv.StartLibvirtd(t)
	useNetnsHost(t, d)
	sr := testenv.StartSampleRelease(t, true)
	c := lvLab(d, sr)
	out := t.TempDir()
	ctx := context.Background()
	var log strings.Builder
	if _, err := Build(ctx, Options{Config: c, OutDir: out, Goals: []string{"libvirt/vm/worker-0"}, Jobs: 2, Stdout: &log, Stderr: &log}); err != nil {
		t.Fatalf("build libvirt/vm/worker-0: %v\n%s", err, log.String())
	}
	t.Cleanup(func() { Destroy(ctx, Options{Config: c, OutDir: out}) })

	m := virtMachines{uri: c.Libvirt.URI, cluster: c.Cluster.Name}
	running := func(want bool) {
		t.Helper()
		on, err := m.Running(ctx, "worker-0")
		if err != nil || on != want {
			t.Fatalf("Running(worker-0) = %v, %v; want %v", on, err, want)
		}
	}
	if ok, err := m.Installed(ctx, "worker-0"); !ok || err != nil {
		t.Fatalf("Installed(worker-0) = %v, %v; want true", ok, err)
	}
	running(false)
	for i := 0; i < 2; i++ {
		if err := m.Start(ctx, "worker-0"); err != nil {
			t.Fatalf("Start #%d: %v", i+1, err)
		}
		running(true)
	}
	for i := 0; i < 2; i++ {
		if err := m.Stop(ctx, "worker-0"); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
		running(false)
	}
	if ok, err := m.Installed(ctx, "worker-1"); ok || err != nil {
		t.Errorf("Installed(worker-1, never defined) = %v, %v; want false, nil", ok, err)
	}
	if _, err := m.Running(ctx, "worker-1"); err == nil || !strings.Contains(err.Error(), "lbt-worker-1") || !strings.Contains(err.Error(), "labbuild libvirt/vm/worker-1") {
		t.Errorf("Running(undefined) = %v; want an error naming lbt-worker-1 and the fix", err)
	}
	if err := m.Stop(ctx, "worker-1"); err != nil {
		t.Errorf("Stop(undefined) = %v; want nil", err)
	}
}

// TestEtcdMemberListReal lists a real etcd's members through its JSON gateway over mutual TLS,
// after an endpoint that refuses connections (a master still down).
func TestEtcdMemberListReal(t *testing.T) {
	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://" + closed.Addr().String()
	closed.Close()
	ms, err := etcdMemberList(context.Background(), []string{dead, cp.EtcdURL}, EtcdTLSFiles{CA: cp.EtcdCA, Cert: cp.EtcdClientCert, Key: cp.EtcdClientKey})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].ID == "" || len(ms[0].PeerURLs) == 0 {
		t.Errorf("members = %+v, want the one member with its ID and peer URL", ms)
	}
	if _, err := etcdMemberList(context.Background(), []string{dead}, EtcdTLSFiles{CA: cp.EtcdCA, Cert: cp.EtcdClientCert, Key: cp.EtcdClientKey}); err == nil {
		t.Error("no endpoint answering: no error")
	}
}
