package rehearsal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/targets/kube"
)

// errEarlySignal stops master-0's stand-ins after the early-signal check: the bootstrap's etcd
// member is gone, so nothing after it would be the flow's.
var errEarlySignal = errors.New("stopped after the early bootstrap-complete signal")

// TestRehearsalWithholdFlow is issue 24's "each stand-in fails on today's handover" and "the
// early signal is caught" in a flow, at a cost two shared cores afford: one `labbuild cluster`
// from an empty directory (a lab of three masters, of which the bootstrap and master-0 boot),
// run until master-0's kubelet has joined through cluster/masters (labbuild's CSR approval) and
// every object cluster/bootstrap applies is in the cluster. Then, against that cluster:
//
//   - each object of issue 24's handover that a masters' stand-in reads (the service-account
//     objects, the kubelet signer and csr-controller-ca) is deleted in turn, the stand-ins'
//     input step (MasterStandins.operatorInputs, where the real operators stop) is rerun and
//     must fail naming that object and the operator code, and the object is restored;
//   - master-0's stand-ins then run up to the control plane: its etcd member joins and its etcd
//     pod runs. With ClusterRoleBinding kube-apiserver withheld, `oc logs` of that pod is
//     refused by master-0's real kubelet for nodes/proxy as system:kube-apiserver (the identity
//     the post-pivot kube-apiserver presents); restored, the logs answer;
//   - at that moment — etcd pods on the masters, no master kube-apiserver — labbuild has not
//     written kube-system/bootstrap (cluster/etcd's gate: wait-for-ha-api.sh would wait for a
//     second API address), and the test writes it, as labbuild before issue 24 did. The
//     teardown stand-in removes the bootstrap's etcd member, and the API through the VIP stops
//     taking writes: the bootstrap's kube-apiserver lost its storage and no master serves.
//
// openshift-config/openshift-install-manifests is not withheld: no stand-in reads it, and the
// real CVO does not stop without it (docs/past-the-pivot.md, row 28).
func TestRehearsalWithholdFlow(t *testing.T) {
	requireRehearsal(t)
	start := time.Now()
	pool, r := flowRig(t, "")
	topo := flowTopology{masters: 3, workers: 0}
	rehearsalLab(t, r.lab, pool, topo)
	h := startFlowHost(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	fl := &flowLog{}
	defer func() { t.Logf("stand-ins:\n%s", fl) }()
	bootRoot := filepath.Join(r.work, "nodes", "bootstrap", "root")
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	master0 := make(chan *Node, 1)
	masters, _ := topo.names()
	w := &Watch{URI: r.lv.URI("qemu:///system"), Cluster: "rehearsal", Nodes: append([]string{"bootstrap"}, masters...),
		Up: func(node string) {
			if node != "bootstrap" && node != "master-0" {
				fl.logf("domain %s running: not booted (this flow needs one master)", node)
				return
			}
			fl.logf("domain %s running: node starts", node)
			nd, err := r.boot(node)
			if err != nil {
				fl.fail("%s: boot: %v", node, err)
				return
			}
			if node == "bootstrap" {
				flowBootstrapUp(wctx, r, nd, fl)
				return
			}
			if err := r.kubelet(wctx, nd, "10.128.0.0/23"); err != nil {
				fl.fail("%s: kubelet: %v", node, err)
				return
			}
			master0 <- nd
		},
		Down: func(node string) { r.stop(node) },
	}
	go w.Run(wctx)
	// The CVO stand-in's first report: cluster/bootstrap waits for the CVO to report.
	go func() {
		for wctx.Err() == nil {
			if k, err := r.clients(); err == nil && ReportClusterVersion(wctx, k, "4.18.0", false, "the operators are not at level") == nil {
				return
			}
			time.Sleep(2 * time.Second)
		}
	}()
	lbCtx, lbStop := context.WithCancel(ctx)
	lbDone := make(chan lbRun, 1)
	go func() { lbDone <- h.labbuildUntil(lbCtx, nil, "cluster") }()
	ended := false
	defer func() {
		lbStop()
		if !ended {
			run := <-lbDone
			t.Logf("labbuild cluster (stopped by the test in cluster/masters, %s): %v\n%s", run.wall.Round(time.Second), run.err, tail(run.out, 2500))
		}
	}()

	var nd *Node
	select {
	case nd = <-master0:
	case run := <-lbDone:
		ended = true
		t.Fatalf("labbuild cluster ended before master-0 booted: %v\n%s", run.err, tail(run.out, 3000))
	case <-ctx.Done():
		t.Fatal("master-0 never booted")
	}
	nodeName := "master-0." + labDomain
	k := flowWaitFor(ctx, t, "master-0's Node Ready (cluster/masters approved its CSRs) and the handover applied", 12*time.Minute, r.clients, func(k *kube.Clients) error {
		if ok, err := nodeReady(ctx, k, nodeName); err != nil || !ok {
			return fmt.Errorf("node %s Ready: %v %v", nodeName, ok, err)
		}
		_, err := k.Dynamic.Resource(configMaps).Namespace("openshift-config").Get(ctx, "openshift-install-manifests", kube.GetOptions{})
		return err
	})
	t.Logf("%s: master-0 joined, the handover is applied", time.Since(start).Round(time.Second))
	k0, err := ReadKeyfile(nd.Root)
	if err != nil {
		t.Fatal(err)
	}
	m := &MasterStandins{Node: nd, NodeName: nodeName, IP: k0.IP, BootstrapIP: bootstrapIP, BootstrapRoot: bootRoot,
		Bins: r.bins, Clients: r.clients, Logf: fl.logf}

	// 1. The stand-ins' input step with each object withheld.
	saved := OperatorInputsTimeout
	OperatorInputsTimeout = 3 * time.Second
	if _, _, _, _, _, err := m.operatorInputs(ctx); err != nil {
		t.Fatalf("with labbuild's whole handover the stand-ins' inputs: %v", err)
	}
	for _, o := range []struct {
		gvr      kube.GroupVersionResource
		ns, name string
	}{
		{configMaps, "openshift-config-managed", "sa-token-signing-certs"},
		{secrets, "openshift-config", "initial-service-account-private-key"},
		{secrets, "openshift-kube-apiserver-operator", "next-bound-service-account-signing-key"},
		{secrets, "openshift-kube-controller-manager-operator", "csr-signer-signer"},
		{configMaps, "openshift-config-managed", "csr-controller-ca"},
	} {
		what := strings.TrimSuffix(o.gvr.Resource, "s") + " " + o.ns + "/" + o.name
		withheld(ctx, t, k, o.gvr, o.ns, o.name, func() {
			_, _, _, _, _, err := m.operatorInputs(ctx)
			var me *MissingObjectError
			if !errors.As(err, &me) || !strings.HasPrefix(me.Object, what) || !strings.Contains(err.Error(), "operator") {
				t.Errorf("without %s the stand-ins' input step: %v, want a refusal naming it and the operator code", what, err)
			} else {
				t.Logf("without %s: %v", what, err)
			}
		})
	}
	OperatorInputsTimeout = saved

	// 2 and 3 run where master-0's control plane would start.
	m.BeforeAPIServer = func(ctx context.Context) error {
		pod := "etcd-" + nodeName
		flowWaitFor(ctx, t, "master-0's etcd pod running", 5*time.Minute, r.clients, func(k *kube.Clients) error {
			p, err := k.Dynamic.Resource(kube.GroupVersionResource{Version: "v1", Resource: "pods"}).Namespace("openshift-etcd").Get(ctx, pod, kube.GetOptions{})
			if err != nil {
				return err
			}
			if ph, _, _ := kube.NestedString(p.Object, "status", "phase"); ph != "Running" {
				return fmt.Errorf("phase %q", ph)
			}
			return nil
		})
		crb := kube.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
		withheld(ctx, t, k, crb, "", "kube-apiserver", func() {
			_, err := podLogs(ctx, k, "openshift-etcd", pod, "etcd")
			if err == nil || !strings.Contains(err.Error(), "system:kube-apiserver") || !strings.Contains(err.Error(), "proxy") {
				t.Errorf("oc logs %s without ClusterRoleBinding kube-apiserver: %v, want the kubelet's refusal of nodes/proxy for system:kube-apiserver", pod, err)
			} else {
				t.Logf("without ClusterRoleBinding kube-apiserver, oc logs: %v", err)
			}
		})
		// The kubelet caches a refusal for 30 s (cacheUnauthorizedTTL).
		flowWaitFor(ctx, t, "oc logs with ClusterRoleBinding kube-apiserver restored", 2*time.Minute, r.clients, func(k *kube.Clients) error {
			_, err := podLogs(ctx, k, "openshift-etcd", pod, "etcd")
			return err
		})

		// The early signal.
		if _, err := k.Dynamic.Resource(configMaps).Namespace(kube.BootstrapNamespace).Get(ctx, kube.BootstrapConfigMap, kube.GetOptions{}); !kube.IsNotFound(err) {
			t.Errorf("labbuild wrote kube-system/bootstrap before any master kube-apiserver served (get: %v)", err)
		}
		if ep, err := k.Dynamic.Resource(kube.Endpoints).Namespace("default").Get(ctx, "kubernetes", kube.GetOptions{}); err == nil {
			subsets, _, _ := kube.NestedSlice(ep.Object, "subsets")
			t.Logf("default/kubernetes endpoints when the early signal is written: %v", subsets)
		}
		if err := kube.MarkBootstrapComplete(ctx, k.Dynamic); err != nil {
			t.Fatalf("the early signal: %v", err)
		}
		t.Logf("%s: wrote kube-system/bootstrap early (etcd pod on master-0, no master kube-apiserver)", time.Since(start).Round(time.Second))
		// The teardown stand-in removes the member, then would wait to read the ConfigMap again to
		// see it gone — through the API it has just taken down. So the test watches etcd's member
		// list on master-0 instead, and ends the stand-in.
		tctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
		defer tcancel()
		go EtcdTeardownStandin(tctx, nd, r.bins["etcdctl"], r.clients, fl.logf)
		for {
			if m := etcdMembers(t, r, "master-0"); len(m) > 0 && !slices.Contains(m, "etcd-bootstrap") {
				t.Logf("%s: etcd members after the teardown stand-in: %v", time.Since(start).Round(time.Second), m)
				break
			}
			if tctx.Err() != nil {
				t.Fatalf("the teardown stand-in did not remove etcd-bootstrap after the early signal")
			}
			time.Sleep(3 * time.Second)
		}
		tcancel()
		lost := false
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && !lost; time.Sleep(3 * time.Second) {
			lost = apiWritesFail(ctx, r.clients, 3)
		}
		if !lost {
			t.Errorf("after the early signal and the bootstrap member's removal the API through the VIP still takes writes")
		} else {
			t.Logf("%s: after the early signal the API through the VIP takes no writes (bootstrap member removed, no master kube-apiserver)", time.Since(start).Round(time.Second))
		}
		return errEarlySignal
	}
	if err := m.Run(ctx); !errors.Is(err, errEarlySignal) {
		t.Errorf("master-0's stand-ins: %v, want them stopped after the early signal", err)
	}
	fmt.Fprintf(os.Stderr, "rehearsal withhold flow: %s\n", time.Since(start).Round(time.Second))
}

// withheld deletes gvr ns/name, runs check, and restores the object as it was.
func withheld(ctx context.Context, t *testing.T, k *kube.Clients, gvr kube.GroupVersionResource, ns, name string, check func()) {
	t.Helper()
	var ri kube.ResourceInterface = k.Dynamic.Resource(gvr)
	if ns != "" {
		ri = k.Dynamic.Resource(gvr).Namespace(ns)
	}
	o, err := ri.Get(ctx, name, kube.GetOptions{})
	if err != nil {
		t.Fatalf("labbuild's handover has no %s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	if err := ri.Delete(ctx, name, kube.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		md, _ := o.Object["metadata"].(map[string]any)
		for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields"} {
			delete(md, f)
		}
		if _, err := ri.Create(ctx, o, kube.CreateOptions{}); err != nil {
			t.Fatalf("restore %s %s/%s: %v", gvr.Resource, ns, name, err)
		}
	}()
	check()
}

// flowWaitFor polls check with fresh clients every 3 s until it passes, failing the test after
// limit; it returns the clients of the passing check.
func flowWaitFor(ctx context.Context, t *testing.T, what string, limit time.Duration, clients func() (*kube.Clients, error), check func(*kube.Clients) error) *kube.Clients {
	t.Helper()
	deadline := time.Now().Add(limit)
	var err error
	for {
		var k *kube.Clients
		if k, err = clients(); err == nil {
			if err = check(k); err == nil {
				return k
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(3 * time.Second)
	}
}

// nodeReady reports whether Node name has condition Ready=True.
func nodeReady(ctx context.Context, k *kube.Clients, name string) (bool, error) {
	n, err := k.Dynamic.Resource(kube.GroupVersionResource{Version: "v1", Resource: "nodes"}).Get(ctx, name, kube.GetOptions{})
	if err != nil {
		return false, err
	}
	conds, _, _ := kube.NestedSlice(n.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			return m["status"] == "True", nil
		}
	}
	return false, nil
}

// apiWritesFail reports whether n writes in a row (a ConfigMap create, 10 s each) fail through
// the API VIP.
func apiWritesFail(ctx context.Context, clients func() (*kube.Clients, error), n int) bool {
	for i := 0; i < n; i++ {
		k, err := clients()
		if err != nil {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		cm := &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"generateName": "early-signal-probe-", "namespace": "default"}}}
		_, err = k.Dynamic.Resource(configMaps).Namespace("default").Create(wctx, cm, kube.CreateOptions{})
		cancel()
		if err == nil {
			return false
		}
	}
	return true
}
