package targets

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/manifests"
)

// ignLoad reads out/ignition/<node>.ign, validates it with Ignition's parser (any report
// entry fails) and checks it has no duplicate path or unit and is 0600.
func (l *mcoLab) ignLoad(node string) types.Config {
	l.t.Helper()
	p := filepath.Join(l.out, "ignition", node+".ign")
	raw, err := os.ReadFile(p)
	if err != nil {
		l.t.Fatal(err)
	}
	cfg, err := ignition.Parse(raw)
	if err != nil {
		l.t.Fatalf("%s.ign: %v", node, err)
	}
	if d := ignition.Duplicates(cfg); len(d) > 0 {
		l.t.Errorf("%s.ign: duplicate entries %v", node, d)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		l.t.Errorf("%s.ign: mode %v (err %v), want 0600", node, st.Mode(), err)
	}
	return cfg
}

func ignContents(t *testing.T, cfg types.Config, node, path string) []byte {
	t.Helper()
	b, err := ignition.FileContents(cfg, path)
	if err != nil {
		t.Fatalf("%s: %v", node, err)
	}
	return b
}

// TestIgnitionMaster0 is `labbuild ignition/master-0`: it builds out/ignition/master-0.ign,
// valid, with master-0's hostname and IP, every file the MCS would add, the kube-proxy pod,
// the kubelet bootstrap kubeconfig and the rendered pull secret (not replaced: issue 38 #1);
// it builds nothing master-0 does not need (no other node's config, not the bootstrap's
// manifest tree); and the second run does nothing.
func TestIgnitionMaster0(t *testing.T) {
	l := newMCOLab(t)
	r := l.build("ignition/master-0")
	if got := mcoFamily(r, "ignition/"); !slices.Equal(got, []string{"ignition/master-0"}) {
		t.Errorf("executed ignition targets %v, want only ignition/master-0", got)
	}
	for _, unneeded := range []string{"manifests/bootstrap", "pki/cert/etcd-server", "pki/cert/kube-apiserver", "kubeconfig/admin"} {
		if slices.Contains(r.Built, unneeded) {
			t.Errorf("ignition/master-0 built %s, which it does not need", unneeded)
		}
	}
	cfg := l.ignLoad("master-0")
	if h := ignContents(t, cfg, "master-0", ignition.PathHostname); string(h) != "master-0.ocp4.example.com\n" {
		t.Errorf("hostname %q", h)
	}
	if kf := ignContents(t, cfg, "master-0", ignition.PathKeyfile); !bytes.Contains(kf, []byte("192.168.126.101/24")) {
		t.Errorf("keyfile does not carry master-0's address:\n%s", kf)
	}
	for _, p := range []string{ignition.PathKubeletCA, ignition.PathBootstrapKubecfg, ignition.PathNodeAnnotations,
		ignition.PathEncapsulatedMC, ignition.PathMCSContent, ignition.PathKubeProxyPod, ignPathKubernetesCA,
		"/etc/kubernetes/apiserver-url.env"} {
		ignContents(t, cfg, "master-0", p)
	}
	if kc := ignContents(t, cfg, "master-0", ignition.PathBootstrapKubecfg); !bytes.Equal(kc, l.file("kubeconfig/kubelet-bootstrap", "kubeconfig")) {
		t.Error("/etc/kubernetes/kubeconfig is not kubeconfig/kubelet-bootstrap")
	}
	// kube-proxy's own identity (docs/past-the-pivot.md): its kubeconfig, 0600, which the
	// static pod names; the kubelet bootstrap kubeconfig is no longer its identity.
	if kc := ignContents(t, cfg, "master-0", manifests.KubeProxyKubeconfigPath); !bytes.Equal(kc, l.file("kubeconfig/kube-proxy", "kubeconfig")) {
		t.Errorf("%s is not kubeconfig/kube-proxy", manifests.KubeProxyKubeconfigPath)
	}
	for _, f := range cfg.Storage.Files {
		if f.Path == manifests.KubeProxyKubeconfigPath && (f.Mode == nil || *f.Mode != 0o600) {
			t.Errorf("%s: mode %v, want 0600", f.Path, f.Mode)
		}
	}
	if pod := ignContents(t, cfg, "master-0", ignition.PathKubeProxyPod); !bytes.Contains(pod, []byte("--kubeconfig="+manifests.KubeProxyKubeconfigPath)) {
		t.Errorf("the kube-proxy pod does not use %s", manifests.KubeProxyKubeconfigPath)
	}
	// The rendered config's file, untouched (as the machine-config-server serves it): the
	// MCO template's json.Compact of the pull secret plus a newline.
	if ps := ignContents(t, cfg, "master-0", ignition.PathPullSecret); string(ps) != mcoTestPullSecret+"\n" {
		t.Errorf("/var/lib/kubelet/config.json is %q, want the rendered pull secret", ps)
	}
	if len(cfg.Passwd.Users) != 1 || cfg.Passwd.Users[0].Name != "core" || len(cfg.Passwd.Users[0].SSHAuthorizedKeys) != 1 {
		t.Errorf("users %+v, want core with one SSH key", cfg.Passwd.Users)
	}
	anno := ignContents(t, cfg, "master-0", ignition.PathNodeAnnotations)
	if !bytes.Contains(anno, []byte(`"rendered-master-`)) || !bytes.Contains(anno, []byte(`"Done"`)) {
		t.Errorf("node annotations %s", anno)
	}
	if r := l.build("ignition/master-0"); len(r.Built) != 0 {
		t.Errorf("second run executed %v, want nothing", r.Built)
	}
}

// TestIgnitionAll is `labbuild ignition`: every node's config is valid with no duplicate
// path; each master and worker carries its own IP and hostname and its pool's rendered
// config; the bootstrap carries the static pods, the CRDs and manifests, every TLS file and
// kubeconfig of manifests.BootstrapTLSPaths/BootstrapKubeconfigPaths with private files 0600,
// and its kube-apiserver serving cert verifies, for api-int and localhost, against the CA of
// the kubeconfigs it carries.
func TestIgnitionAll(t *testing.T) {
	l := newMCOLab(t)
	l.build("ignition")
	for _, n := range l.cfg.Nodes {
		cfg := l.ignLoad(n.Name)
		if h := ignContents(t, cfg, n.Name, ignition.PathHostname); string(h) != n.Name+".ocp4.example.com\n" {
			t.Errorf("%s: hostname %q", n.Name, h)
		}
		if kf := ignContents(t, cfg, n.Name, ignition.PathKeyfile); !bytes.Contains(kf, []byte("address1="+n.IP+"/24")) {
			t.Errorf("%s: keyfile does not carry %s:\n%s", n.Name, n.IP, kf)
		}
		switch n.Role {
		case lab.RoleMaster, lab.RoleWorker:
			anno := ignContents(t, cfg, n.Name, ignition.PathNodeAnnotations)
			if !bytes.Contains(anno, []byte(`"rendered-`+n.Role+`-`)) {
				t.Errorf("%s: node annotations %s do not name the %s pool", n.Name, anno, n.Role)
			}
			_, err := ignition.FileContents(cfg, ignition.PathKubeProxyPod)
			if (err == nil) != (n.Role == lab.RoleMaster) {
				t.Errorf("%s: kube-proxy present = %v, want %v", n.Name, err == nil, n.Role == lab.RoleMaster)
			}
		}
	}

	boot := l.ignLoad("bootstrap")
	for _, n := range l.cfg.Nodes {
		st, _ := os.Stat(filepath.Join(l.out, "ignition", n.Name+".ign"))
		t.Logf("%s.ign: %d bytes", n.Name, st.Size())
	}
	modes := map[string]int{}
	for _, f := range boot.Storage.Files {
		modes[f.Path] = *f.Mode
	}
	for _, nf := range append(append([]manifests.NodeFile{}, manifests.BootstrapTLSPaths...), manifests.BootstrapKubeconfigPaths...) {
		got := ignContents(t, boot, "bootstrap", nf.Path)
		if !bytes.Equal(got, l.file(nf.Target, nf.File)) {
			t.Errorf("bootstrap %s is not %s/%s", nf.Path, nf.Target, nf.File)
		}
		if modes[nf.Path] != int(nf.Mode) {
			t.Errorf("bootstrap %s: mode %o, want %o", nf.Path, modes[nf.Path], nf.Mode)
		}
	}
	var pods, mfs, crds int
	for _, f := range boot.Storage.Files {
		switch {
		case strings.HasPrefix(f.Path, manifests.StaticPodDir+"/") && strings.HasSuffix(f.Path, ".yaml"):
			pods++
		case strings.HasPrefix(f.Path, manifests.ManifestsDir+"/0000_"):
			crds++
		case strings.HasPrefix(f.Path, manifests.ManifestsDir+"/"):
			mfs++
		}
	}
	fixtureCRDs, _ := os.ReadDir(filepath.Join(l.shared, "fixtures/release/crds"))
	if pods != 5 || crds != len(fixtureCRDs) || mfs < 15 {
		t.Errorf("bootstrap has %d static pods, %d CRDs, %d manifests; want 5, %d, >= 15", pods, crds, mfs, len(fixtureCRDs))
	}
	ignContents(t, boot, "bootstrap", manifests.CRIOPausePath)

	block, _ := pem.Decode(ignContents(t, boot, "bootstrap", manifests.BootstrapSecretsDir+"/kube-apiserver.crt"))
	if block == nil {
		t.Fatal("bootstrap kube-apiserver.crt is not PEM")
	}
	serving, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, kc := range manifests.BootstrapKubeconfigPaths {
		c, err := clientcmd.Load(ignContents(t, boot, "bootstrap", kc.Path))
		if err != nil {
			t.Fatalf("%s: %v", kc.Path, err)
		}
		for _, cl := range c.Clusters {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(cl.CertificateAuthorityData) {
				t.Fatalf("%s: no CA data", kc.Path)
			}
			host := strings.TrimSuffix(strings.TrimPrefix(cl.Server, "https://"), ":6443")
			if _, err := serving.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, CurrentTime: pkiT0}); err != nil {
				t.Errorf("%s: kube-apiserver serving cert does not verify for %s: %v", kc.Path, host, err)
			}
		}
	}
}

// TestIgnitionIncremental edits the lab config one field at a time and checks, as set
// equality, which mco/* and ignition/* targets run: only what reads the field, with early
// cutoff where the MCO render does not change.
func TestIgnitionIncremental(t *testing.T) {
	l := newMCOLab(t)
	l.build("ignition")
	node := func(name string) *lab.Node {
		for i := range l.cfg.Nodes {
			if l.cfg.Nodes[i].Name == name {
				return &l.cfg.Nodes[i]
			}
		}
		t.Fatalf("no node %s", name)
		return nil
	}
	for _, tc := range []struct {
		edit         string
		apply        func()
		mco, ignited []string
	}{
		{"nothing", func() {}, nil, nil},
		{"master-1 IP", func() { node("master-1").IP = "192.168.126.105" },
			nil, []string{"ignition/bootstrap", "ignition/master-1"}},
		{"worker-0 IP", func() { node("worker-0").IP = "192.168.126.115" },
			nil, []string{"ignition/worker-0"}},
		// A new release digest changes the ControllerConfig (spec.releaseImage) but not the
		// rendered configs: mco/base/* rerun and write the same bytes, so no master or worker
		// config is rebuilt; the bootstrap's CVO pod names the release, so it is.
		{"release digest", func() { l.digest++ },
			[]string{"mco/base/master", "mco/base/worker", "mco/controller-bootstrap", "mco/operator-bootstrap"},
			[]string{"ignition/bootstrap"}},
		{"service network", func() { l.cfg.Network.ServiceNetwork = "172.31.0.0/16" },
			[]string{"mco/base/master", "mco/base/worker", "mco/controller-bootstrap", "mco/inputs", "mco/operator-bootstrap"},
			[]string{"ignition/bootstrap", "ignition/master-0", "ignition/master-1", "ignition/master-2", "ignition/worker-0", "ignition/worker-1"}},
	} {
		tc.apply()
		r := l.build("ignition")
		t.Logf("%s: executed %v", tc.edit, r.Built)
		if got := mcoFamily(r, "mco/"); !slices.Equal(got, tc.mco) {
			t.Errorf("%s: executed mco targets %v, want %v", tc.edit, got, tc.mco)
		}
		if got := mcoFamily(r, "ignition/"); !slices.Equal(got, tc.ignited) {
			t.Errorf("%s: executed ignition targets %v, want %v", tc.edit, got, tc.ignited)
		}
	}
	cfg := l.ignLoad("master-1")
	if kf := ignContents(t, cfg, "master-1", ignition.PathKeyfile); !bytes.Contains(kf, []byte("192.168.126.105/24")) {
		t.Errorf("master-1 keyfile does not carry the new address:\n%s", kf)
	}
}

// BenchmarkIgnition measures `labbuild ignition` with the stand-in release already built:
// cold (-B: every target but the sticky keys runs: PKI, kubeconfigs, manifests, both MCO
// stages, every node config) and warm (nothing to do). peak-RSS-MiB is the test process's
// peak resident set (getrusage ru_maxrss), which includes the stand-in MCO children only as
// RUSAGE_CHILDREN, reported separately.
func BenchmarkIgnition(b *testing.B) {
	l := newMCOLab(b)
	if _, err := l.tryBuild("ignition"); err != nil {
		b.Fatalf("%v\n%s", err, l.log.String())
	}
	for _, bc := range []struct {
		name  string
		force bool
	}{{"cold", true}, {"warm", false}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r, err := l.tryBuildForce(bc.force, "ignition")
				if err != nil {
					b.Fatalf("%v\n%s", err, l.log.String())
				}
				if !bc.force && len(r.Built) != 0 {
					b.Fatalf("warm build executed %v", r.Built)
				}
			}
			var self, kids syscall.Rusage
			syscall.Getrusage(syscall.RUSAGE_SELF, &self)
			syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
			b.ReportMetric(float64(self.Maxrss)/1024, "peak-RSS-MiB")
			b.ReportMetric(float64(kids.Maxrss)/1024, "child-peak-RSS-MiB")
		})
	}
}

// TestIgnitionFirstBoot is the first boot of every master and worker as the machine-config
// daemon sees it (render/ignition.FirstBoot: MCO release-4.18 pkg/daemon/daemon.go
// checkStateOnFirstRun → on_disk_validation.go validateOnDiskState): each node's
// out/ignition/<node>.ign, laid as Ignition lays it, against its pool's rendered MachineConfig
// out/mco/base/<pool>/machineconfig.yaml, for every topology (3+2, 3+0, 1+1), both
// network.loadBalancer modes and platform baremetal. It reads only those two files, as the
// daemon reads only the node's disk and the MachineConfig its currentConfig names.
func TestIgnitionFirstBoot(t *testing.T) {
	for _, tc := range []struct {
		name             string
		masters, workers int
		lb, platform     string
	}{
		{"3+2 host", 3, 2, lab.LoadBalancerHost, ""},
		{"3+2 in-cluster", 3, 2, lab.LoadBalancerInCluster, ""},
		{"3+0 host", 3, 0, lab.LoadBalancerHost, ""},
		{"3+0 in-cluster", 3, 0, lab.LoadBalancerInCluster, ""},
		{"1+1 host", 1, 1, lab.LoadBalancerHost, ""},
		{"1+1 in-cluster", 1, 1, lab.LoadBalancerInCluster, ""},
		{"3+2 baremetal", 3, 2, lab.LoadBalancerInCluster, lab.PlatformBaremetal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newMCOLab(t)
			l.cfg.Nodes = clusterConfig(tc.masters, tc.workers).Nodes
			l.cfg.Network.LoadBalancer, l.cfg.Platform = tc.lb, tc.platform
			var goals []string
			for _, n := range l.cfg.Nodes {
				if n.Role != lab.RoleBootstrap {
					goals = append(goals, "ignition/"+n.Name)
				}
			}
			l.build(goals...)
			for _, n := range l.cfg.Nodes {
				if n.Role == lab.RoleBootstrap {
					continue // no machine-config daemon runs there
				}
				mc, err := ignition.ParseMachineConfig(l.file("mco/base/"+n.Role, "machineconfig.yaml"))
				if err != nil {
					t.Fatal(err)
				}
				node, err := ignition.Parse(l.file("ignition", n.Name+".ign"))
				if err != nil {
					t.Fatal(err)
				}
				if err := ignition.FirstBoot(node, mc); err != nil {
					t.Errorf("%s: the machine-config daemon goes Degraded on first boot: %v", n.Name, err)
				}
			}
		})
	}
}
