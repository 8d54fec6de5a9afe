package targets

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
)

// clusterConfig returns the default lab with the given numbers of masters and workers.
func clusterConfig(masters, workers int) *lab.Config {
	c := testLabConfig()
	nodes := []lab.Node{c.Bootstrap()}
	for i := 0; i < masters; i++ {
		nodes = append(nodes, lab.Node{Name: fmt.Sprintf("master-%d", i), Role: lab.RoleMaster, IP: fmt.Sprintf("192.168.126.%d", 101+i)})
	}
	for i := 0; i < workers; i++ {
		nodes = append(nodes, lab.Node{Name: fmt.Sprintf("worker-%d", i), Role: lab.RoleWorker, IP: fmt.Sprintf("192.168.126.%d", 110+i)})
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
			byName := map[string]*engine.Target{}
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
			for _, n := range c.NodesByRole(lab.RoleWorker) {
				if !slices.Contains(byName["cluster/csr-approver"].Reads, "nodes."+n.Name+".ip") {
					t.Errorf("csr-approver does not read nodes.%s.ip", n.Name)
				}
			}
			// A dry run plans every phase, in dependency order.
			var stand []*engine.Target
			for _, h := range tt.have {
				stand = append(stand, clusterStandinFile(h, "standin", "x"))
			}
			res, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: t.TempDir(), Goals: []string{"cluster"}, DryRun: true,
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
	for _, c := range []*lab.Config{testLabConfig(), clusterConfig(3, 0), clusterConfig(1, 1)} {
		names := map[string]bool{}
		var cluster []*engine.Target
		for _, f := range families {
			for _, x := range f.Targets(Lab{Config: c}) {
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
func clusterStandinFile(name, rel, content string) *engine.Target {
	return &engine.Target{Name: name, Doc: "stand-in", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
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

func newFakeMachines(c *lab.Config) *fakeMachines {
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
	if _, err := engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"libvirt/vm/worker-0"}, Jobs: 2, Stdout: &log, Stderr: &log}); err != nil {
		t.Fatalf("build libvirt/vm/worker-0: %v\n%s", err, log.String())
	}
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}) })

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
