package targets

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
	"github.com/labbuild/labbuild/targets/wait"
)

// snoConfig is the default lab as a single node: master-0 alone, at the single-node minimums.
func snoConfig(t *testing.T) *lab.Config {
	t.Helper()
	c, err := lab.ParseConfig(lab.DefaultSNOLabYAML(), "lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate("lab.yaml"); err != nil || !c.SNO() {
		t.Fatalf("init --sno's lab: SNO %v, %v", c.SNO(), err)
	}
	return c
}

// TestClusterSNODeclarations: a single node's cluster family is the bootstrap-in-place phases,
// in order, each External and after host/preflight; none of the bootstrap node's phases; the
// live ISO, the bootstrap-in-place Ignition and the empty disk are upstream of the first.
func TestClusterSNODeclarations(t *testing.T) {
	c := snoConfig(t)
	all := flowGraph(t, c)
	var phases []string
	for name, x := range all {
		if strings.HasPrefix(name, "cluster/") {
			phases = append(phases, name)
			if !x.External {
				t.Errorf("%s is not External", name)
			}
			if !flowUpstream(all, name)["host/preflight"] {
				t.Errorf("%s does not come after host/preflight", name)
			}
		}
	}
	slices.Sort(phases)
	want := []string{"cluster/bootkube", "cluster/converge", "cluster/done", "cluster/install-to-disk", "cluster/post-reboot/approve",
		"cluster/post-reboot/cleanup", "cluster/post-reboot/complete", "cluster/reboot"}
	if !slices.Equal(phases, want) {
		t.Errorf("cluster phases %v, want %v", phases, want)
	}
	order := []string{"cluster/bootkube", "cluster/install-to-disk", "cluster/reboot", "cluster/post-reboot/approve",
		"cluster/post-reboot/complete", "cluster/post-reboot/cleanup", "cluster/converge", "cluster/done"}
	for i := 1; i < len(order); i++ {
		if !flowUpstream(all, order[i])[order[i-1]] {
			t.Errorf("%s is not upstream of %s", order[i-1], order[i])
		}
	}
	up := flowUpstream(all, "cluster/bootkube")
	for _, w := range []string{"libvirt/vm/master-0", "libvirt/volume/master-0", "rhcos/live-iso", IgnBootstrapInPlace, "ignition/master-0",
		"haproxy/service", "host/firewall", "host/dns", "release/crds", "manifests/bootstrap"} {
		if !up[w] {
			t.Errorf("cluster/bootkube does not come after %s", w)
		}
	}
	for _, no := range []string{"rhcos/image", "ignition/bootstrap", "cluster/bootstrap", "cluster/pivot"} {
		if all[no] != nil {
			t.Errorf("a single node declares %s", no)
		}
	}
	if flowUpstream(all, "libvirt/volume/master-0")["rhcos/image"] {
		t.Error("the single node's disk overlays the QEMU image")
	}
}

// TestClusterSNOPhases drives a single node's phases against a real etcd + kube-apiserver +
// kube-controller-manager on loopback, with a stand-in for the node: its "live system" answers
// through the VIP once the VM starts, waits for cluster/bootkube's ConfigMap, stops answering
// while it installs to disk, answers again from the installed system, whose kubelet joins; its
// post-reboot unit removes the ConfigMap once the bootstrap is complete. labbuild is killed while
// cluster/reboot waits (the API down): the rerun keeps cluster/bootkube and
// cluster/install-to-disk (their records hold while the node is between phases), does not
// start the VM again, approves the node's CSRs, marks the bootstrap complete, releases the
// bootstrap's leases, waits for the cleanup and convergence; a third run does nothing.
func TestClusterSNOPhases(t *testing.T) {
	const domain = "ocp4.example.com"
	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{ControllerManager: true, ServerNames: []string{"api." + domain}})
	ac, ak := cp.ClientCert(t, "system:admin", "system:masters")
	adminKC, err := os.ReadFile(cp.Kubeconfig(t, "admin", "https://api."+domain+":6443", ac, ak))
	if err != nil {
		t.Fatal(err)
	}
	c := snoConfig(t)
	c.Wait = lab.WaitConfig{BootstrapMinutes: 2, MastersMinutes: 2, EtcdMinutes: 2, PivotMinutes: 2, WorkersMinutes: 2, ConvergeMinutes: 2}
	machines := newFakeMachines(c)
	var apiDown atomic.Bool // the node between its live control plane and the installed one
	old := clusterEnv
	t.Cleanup(func() { clusterEnv = old })
	clusterEnv = clusterWorld{
		clock:    wait.RealClock{},
		interval: func(d time.Duration) time.Duration { return d / 50 },
		restConfig: func(kc, vip string) (*kube.RESTConfig, error) {
			cfg, err := kube.Config(kc, cp.Addr)
			if err != nil {
				return nil, err
			}
			cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if on, _ := machines.Running(ctx, "master-0"); !on || apiDown.Load() {
					return nil, errors.New("connect: connection refused (no control plane on master-0)")
				}
				var d net.Dialer
				conn, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &snoConn{Conn: conn, down: &apiDown}, nil
			}
			return cfg, nil
		},
		machines: func(uri, cluster string) ClusterMachines { return machines },
	}
	standins := clusterStandins(t, adminKC, domain)
	have := map[string]bool{}
	for _, s := range standins {
		have[s.Name] = true
	}
	all := append(standins, clusterTargets(c, func(n string) bool { return have[n] })...)
	out := t.TempDir()
	var stderr strings.Builder
	build := func(ctx context.Context, goals ...string) (*engine.Result, error) {
		stderr.Reset()
		r, err := engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: goals, Targets: all, Jobs: 2, Now: time.Now, Stderr: &stderr})
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
	adminCS, err := kubernetes.NewForConfig(cp.RESTConfig(ac, ak))
	if err != nil {
		t.Fatal(err)
	}
	// The bootstrap's leases, as the live system's CVO and cluster-policy-controller left them.
	for _, l := range snoBootstrapLeases {
		if _, err := adminCS.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: l.ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, err := adminCS.CoordinationV1().Leases(l.ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := adminCS.CoreV1().ConfigMaps(l.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: l.name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The node stand-in.
	bootDisk := make(chan struct{}) // the test lets the installed system boot
	errs := make(chan error, 4)
	var cleaned atomic.Bool
	bootCrt, bootKey := cp.ClientCert(t, csr.BootstrapUser, csr.BootstrappersGroup)
	go func() {
		err := func() error {
			select {
			case <-machines.started["master-0"]:
			case <-ctx.Done():
				return ctx.Err()
			}
			// The live system: bootkube.sh done, install-to-disk.sh waits for labbuild's word.
			if err := clusterWaitReal(ctx, func() (bool, error) {
				_, err := adminCS.CoreV1().ConfigMaps("kube-system").Get(ctx, ignition.BootstrapInPlaceConfigMap, metav1.GetOptions{})
				return err == nil, nil
			}); err != nil {
				return err
			}
			apiDown.Store(true) // etcd stopped, master.ign written, coreos-installer, reboot
			select {
			case <-bootDisk:
			case <-ctx.Done():
				return ctx.Err()
			}
			apiDown.Store(false) // the installed master's carried control plane
			closed := make(chan struct{})
			close(closed)
			if err := clusterKubelet(ctx, cp, cp.RESTConfig(bootCrt, bootKey), closed, closed, "master-0", "master-0."+domain, "192.168.126.101"); err != nil {
				return err
			}
			// The post-reboot unit: the operators replaced the carried pods; the node removes
			// the bootstrap's leftovers and then labbuild's ConfigMap.
			if err := clusterWaitReal(ctx, func() (bool, error) { return kube.BootstrapComplete(ctx, admin.Dynamic) }); err != nil {
				return err
			}
			cleaned.Store(true)
			return adminCS.CoreV1().ConfigMaps("kube-system").Delete(ctx, ignition.BootstrapInPlaceConfigMap, metav1.DeleteOptions{})
		}()
		if err != nil {
			errs <- fmt.Errorf("node stand-in: %w", err)
		}
	}()
	var converged sync.WaitGroup
	converged.Add(1)
	go func() {
		defer converged.Done()
		if err := clusterCVOStandin(ctx, admin, cleaned.Load); err != nil {
			errs <- err
		}
	}()

	// 1. Killed while cluster/reboot waits, the node installing (the API down).
	kctx, kill := context.WithCancel(ctx)
	clusterEnv.onPoll = func(target string, p wait.Poll) {
		if target == "cluster/reboot" && p.N == 2 {
			kill()
		}
	}
	r, _ := build(kctx, "cluster")
	kill()
	clusterEnv.onPoll = nil
	for _, p := range []string{"cluster/bootkube", "cluster/install-to-disk"} {
		if r == nil || !slices.Contains(r.Built, p) {
			t.Fatalf("first run did not finish %s: %+v\nbootkube log:\n%s", p, r, clusterLog(t, out, "cluster/bootkube"))
		}
	}
	if slices.Contains(r.Built, "cluster/reboot") {
		t.Fatalf("cluster/reboot finished while the node was installing: %+v", r)
	}
	if !apiDown.Load() {
		t.Fatal("the kill did not land while the node was installing")
	}
	if log := clusterLog(t, out, "cluster/bootkube"); !strings.Contains(log, "created ConfigMap kube-system/"+ignition.BootstrapInPlaceConfigMap) {
		t.Errorf("cluster/bootkube's log does not say it told the node to go on:\n%s", log)
	}
	infra, err := admin.Dynamic.Resource(configGVR("infrastructures")).Get(ctx, "cluster", kube.GetOptions{})
	if err != nil {
		t.Fatalf("Infrastructure not applied: %v", err)
	}
	if name, _, _ := kube.NestedString(infra.Object, "status", "infrastructureName"); name != "ocp4-standin" {
		t.Errorf("Infrastructure status not applied (infrastructureName %q)", name)
	}

	if obs, err := ObserveCluster(ctx, c, out); err != nil || obs.SNOPhase != "reboot" {
		t.Errorf("labbuild status while the node is down after its install: phase %q (%v), want reboot", obs.SNOPhase, err)
	}
	// While the node installs, a plan keeps the first two phases.
	r, err = build(ctx, "cluster/install-to-disk")
	if err != nil || len(r.Built) > 0 || !slices.Contains(r.UpToDate, "cluster/bootkube") {
		t.Errorf("with the API down, cluster/install-to-disk's closure ran %v (up to date %v, %v); want both phases kept", r.Built, r.UpToDate, err)
	}

	// 2. The installed system boots; the rerun continues at cluster/reboot.
	close(bootDisk)
	r, err = build(ctx, "cluster")
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if err != nil {
		t.Fatalf("rerun: %v", err)
	}
	for _, p := range []string{"cluster/bootkube", "cluster/install-to-disk"} {
		if !slices.Contains(r.UpToDate, p) {
			t.Errorf("the rerun redid %s: %+v", p, r)
		}
	}
	for _, p := range []string{"cluster/reboot", "cluster/post-reboot/approve", "cluster/post-reboot/complete", "cluster/post-reboot/cleanup", "cluster/converge", "cluster/done"} {
		if !slices.Contains(r.Built, p) {
			t.Errorf("the rerun did not run %s: %+v", p, r)
		}
	}
	if starts, _ := machines.count("master-0"); starts != 1 {
		t.Errorf("master-0 started %d times, want 1", starts)
	}
	if done, err := kube.BootstrapComplete(ctx, admin.Dynamic); !done || err != nil {
		t.Errorf("kube-system/bootstrap not complete: %v", err)
	}
	for _, l := range snoBootstrapLeases {
		if _, err := adminCS.CoordinationV1().Leases(l.ns).Get(ctx, l.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("lease %s/%s not released: %v", l.ns, l.name, err)
		}
		if _, err := adminCS.CoreV1().ConfigMaps(l.ns).Get(ctx, l.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("configmap %s/%s not released: %v", l.ns, l.name, err)
		}
	}
	if ready, _, err := kube.NodesReady(ctx, admin.Dynamic, []string{"master-0." + domain}); len(ready) != 1 || err != nil {
		t.Errorf("master-0 not Ready: %v", err)
	}
	converged.Wait()
	if obs, err := ObserveCluster(ctx, c, out); err != nil || obs.SNOPhase != "converge" || len(obs.Nodes) != 1 || obs.Nodes[0].Kubernetes != "Ready" {
		t.Errorf("labbuild status after cluster/done: %+v (%v); want phase converge and master-0 Ready", obs, err)
	}

	// 3. Nothing left to do.
	r, err = build(ctx, "cluster")
	if err != nil || len(r.Built) > 0 {
		t.Errorf("third run executed %v (%v); want every phase kept", r.Built, err)
	}
}

// TestSNOPhaseName: `labbuild status` names a single node's phase from the cluster's state and
// the phases' records.
func TestSNOPhaseName(t *testing.T) {
	for _, tc := range []struct {
		st                snoState
		bootkube, install bool
		want              string
	}{
		{snoState{}, false, false, "bootkube"},
		{snoState{apiUp: true}, false, false, "bootkube"},
		{snoState{apiUp: true, handshake: true}, false, false, "install to disk"},
		{snoState{apiUp: true, handshake: true}, true, false, "install to disk"},
		{snoState{}, true, false, "install to disk"},
		{snoState{}, true, true, "reboot"},
		{snoState{apiUp: true, handshake: true}, true, true, "reboot"},
		{snoState{apiUp: true, handshake: true, installed: true}, true, true, "post-reboot"},
		{snoState{apiUp: true, handshake: true, installed: true, ready: true, complete: true}, true, true, "post-reboot"},
		{snoState{apiUp: true, installed: true, ready: true, complete: true}, true, true, "converge"},
	} {
		if got := snoPhaseName(tc.st, tc.bootkube, tc.install); got != tc.want {
			t.Errorf("snoPhaseName(%+v, bootkube %v, install %v) = %q, want %q", tc.st, tc.bootkube, tc.install, got, tc.want)
		}
	}
}

// snoConn is a connection to the test's API that breaks, as a connection to a node whose
// control plane stopped does, once down is set: a kept-alive connection must not outlive it.
type snoConn struct {
	net.Conn
	down *atomic.Bool
}

func (c *snoConn) Read(b []byte) (int, error) {
	if c.down.Load() {
		c.Conn.Close()
		return 0, errors.New("read: connection reset by peer (the node's control plane stopped)")
	}
	return c.Conn.Read(b)
}

func (c *snoConn) Write(b []byte) (int, error) {
	if c.down.Load() {
		c.Conn.Close()
		return 0, errors.New("write: broken pipe (the node's control plane stopped)")
	}
	return c.Conn.Write(b)
}
