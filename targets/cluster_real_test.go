package targets

// TestClusterRealControlPlane: every cluster phase against a real etcd + kube-apiserver +
// kube-controller-manager.

import (
	"context"
	"crypto/x509"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/pki"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
	"github.com/labbuild/labbuild/targets/wait"
)

// TestClusterRealControlPlane drives every phase against a real etcd + kube-apiserver +
// kube-controller-manager on loopback with stand-ins for the VMs (fakeMachines), kubelets,
// the CVO, the cluster-etcd-operator and the masters' control-plane pods, and proves:
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
	c.Wait = lab.WaitConfig{BootstrapMinutes: 2, MastersMinutes: 2, EtcdMinutes: 2, PivotMinutes: 2, WorkersMinutes: 2, ConvergeMinutes: 2}
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
		if n.Role == lab.RoleBootstrap {
			continue
		}
		kubelets.Add(1)
		go func(n lab.Node) {
			defer kubelets.Done()
			if err := clusterKubelet(ctx, cp, boot, machines.started[n.Name], release, n.Name, n.Name+"."+domain, n.IP); err != nil {
				errs <- fmt.Errorf("kubelet stand-in %s: %w", n.Name, err)
			}
		}(n)
	}
	go func() { kubelets.Wait(); close(joined) }()
	converged.Add(3)
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
	go func() {
		defer converged.Done()
		if err := clusterControlPlaneStandin(ctx, admin, adminCS, []string{"master-0." + domain}); err != nil {
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
	if !slices.Contains(r.Built, "cluster/bootstrap") {
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
	var be *engine.BuildError
	if !errors.As(err, &be) || !slices.Contains(r.Failed, "cluster/masters") {
		t.Fatalf("masters without kubelets: err %v, result %+v; want cluster/masters failed", err, r)
	}
	if !slices.Contains(r.UpToDate, "cluster/bootstrap") {
		t.Errorf("timeout run: cluster/bootstrap not kept up to date: %+v", r)
	}
	log := clusterLog(t, out, "cluster/masters")
	for _, want := range []string{"timed out after 2m0s", "0/1 master nodes Ready", "oc get csr", "collect the nodes' logs with: labbuild gather", "rerun to continue"} {
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
	if r == nil || slices.Contains(r.Built, "cluster/masters") || !slices.Contains(r.UpToDate, "cluster/bootstrap") {
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
	if !slices.Contains(r.UpToDate, "cluster/bootstrap") || slices.Contains(r.Built, "cluster/bootstrap") {
		t.Errorf("resumed run redid cluster/bootstrap: %+v", r)
	}
	for _, p := range []string{"cluster/masters", "cluster/etcd", "cluster/pivot", "cluster/workers", "cluster/converge", "cluster/done"} {
		if !slices.Contains(r.Built, p) {
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
	sum := ClusterSummary(out, &engine.Result{UpToDate: []string{"cluster/done"}})
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
	obs, err := ObserveCluster(ctx, c, out)
	if err != nil {
		t.Fatal(err)
	}
	if obs.APIErr != nil || obs.APIVIP != "192.168.126.10" || !obs.BootstrapComplete || obs.Etcd == nil || *obs.Etcd != (ClusterEtcd{Ready: 1, Masters: 1}) ||
		obs.Operators == nil || !strings.Contains(obs.Operators.String(), "2/2 ClusterOperators Available") {
		t.Errorf("status: api %v through %s, bootstrap complete %v, etcd %+v, operators %v; want ready through 192.168.126.10, complete, 1/1, 2/2 Available",
			obs.APIErr, obs.APIVIP, obs.BootstrapComplete, obs.Etcd, obs.Operators)
	}
	wantNodes := []ClusterNodeObservation{
		{Name: "bootstrap", Role: lab.RoleBootstrap, VM: "off"},
		{Name: "master-0", Role: lab.RoleMaster, VM: "running", Kubernetes: "Ready", PendingCSRs: 1},
		{Name: "worker-0", Role: lab.RoleWorker, VM: "running", Kubernetes: "Ready"},
	}
	if !slices.Equal(obs.Nodes, wantNodes) {
		t.Errorf("status nodes:\n got %+v\nwant %+v", obs.Nodes, wantNodes)
	}

	// 5. Nothing left to do: every phase's Probe keeps it.
	r, err = build(ctx, "cluster")
	if err != nil || len(r.Built) > 0 {
		t.Errorf("rerun after convergence executed %v (err %v); want every phase kept", r.Built, err)
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
	// A kubelet posts Ready again some time after its VM runs; here master-0's does once
	// cluster/masters waits for it. cluster/bootstrap starts master-0 (the API answers only
	// then) and returns as soon as /readyz does, so a kubelet posting at once raced
	// cluster/masters' Probe: under load the Probe saw master-0 Ready already and kept the
	// phase (the flake "after the reboot executed [cluster/bootstrap cluster/workers]").
	// worker-0's VM starts only in cluster/workers, after its Probe.
	mastersWaiting := make(chan struct{})
	var waitingOnce sync.Once
	clusterEnv.onPoll = func(target string, p wait.Poll) {
		if target == "cluster/masters" {
			waitingOnce.Do(func() { close(mastersWaiting) })
		}
	}
	for _, n := range []string{"master-0", "worker-0"} {
		go func(node, name string) { // the kubelet posts Ready again once its VM runs
			clusterWaitReal(ctx, func() (bool, error) { on, _ := machines.Running(ctx, node); return on, nil })
			if node == "master-0" {
				select {
				case <-mastersWaiting:
				case <-ctx.Done():
					return
				}
			}
			clusterSetReady(t, ctx, adminCS, name, corev1.ConditionTrue)
		}(n, n+"."+domain)
	}
	r, err = build(ctx, "cluster")
	clusterEnv.onPoll = nil
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
	slices.Sort(r.Built)
	if want := []string{"cluster/bootstrap", "cluster/masters", "cluster/workers"}; !slices.Equal(r.Built, want) {
		t.Errorf("after the reboot executed %v, want %v", r.Built, want)
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
	r, err = engine.Build(ctx, engine.Options{Config: Lab{Config: c2}, OutDir: out, Goals: []string{"cluster"}, Targets: all2, Jobs: 2, Now: time.Now, Stderr: &stderr})
	checkErrs()
	if err != nil {
		t.Fatalf("adding worker-1: %v\n%s", err, stderr.String())
	}
	slices.Sort(r.Built)
	if want := []string{"cluster/converge", "cluster/csr-approver", "cluster/install/worker-1", "cluster/workers"}; !slices.Equal(r.Built, want) {
		t.Errorf("adding worker-1 executed %v, want exactly %v", r.Built, want)
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
