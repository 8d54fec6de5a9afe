package kube

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// TestNodeDrainDeleteReal runs Cordon, Drain and DeleteNode against a real etcd +
// kube-apiserver (no controllers: the test plays the kubelet, confirming terminations). On a
// node carrying a plain pod, a running pod under a PodDisruptionBudget, a DaemonSet's pod and a static
// pod's mirror: the node becomes unschedulable; the plain pod is evicted and gone; the
// budgeted pod is refused (HTTP 429) and reported; the DaemonSet and static pods are left and
// reported; another node's pod is untouched. DeleteNode removes the Node (existed) and then
// finds none.
func TestNodeDrainDeleteReal(t *testing.T) {
	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{})
	k, err := NewClients(testConfig(cp.Admin))
	if err != nil {
		t.Fatal(err)
	}
	dyn := k.Dynamic
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	create := func(gvr GroupVersionResource, ns string, obj map[string]any) {
		t.Helper()
		var ri ResourceInterface = dyn.Resource(gvr)
		if ns != "" {
			ri = dyn.Resource(gvr).Namespace(ns)
		}
		if _, err := ri.Create(ctx, &Unstructured{Object: obj}, CreateOptions{}); err != nil {
			t.Fatalf("create %v: %v", obj["metadata"], err)
		}
	}
	const node, other = "worker-2.lab.example.test", "worker-0.lab.example.test"
	for _, n := range []string{node, other} {
		create(nodesGVR, "", map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": n}})
	}
	create(GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "apps"}})
	// No controllers run: the service accounts the ServiceAccount admission plugin wants are
	// made by hand.
	for _, ns := range []string{"apps", "kube-system"} {
		create(GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, ns, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": map[string]any{"name": "default", "namespace": ns}})
	}
	pod := func(ns, name, on string, meta map[string]any) {
		m := map[string]any{"name": name, "namespace": ns}
		for k, v := range meta {
			m[k] = v
		}
		create(podsGVR, ns, map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": m,
			"spec": map[string]any{"nodeName": on, "automountServiceAccountToken": false, "containers": []any{map[string]any{"name": "c", "image": "registry.example.test/app:1"}}}})
	}
	pod("apps", "web-1", node, nil)
	pod("apps", "db-0", node, map[string]any{"labels": map[string]any{"app": "db"}})
	pod("apps", "ds-x", node, map[string]any{"ownerReferences": []any{map[string]any{"apiVersion": "apps/v1", "kind": "DaemonSet",
		"name": "node-agent", "uid": "00000000-0000-4000-8000-000000000001", "controller": true}}})
	pod("kube-system", "static-x", node, map[string]any{"annotations": map[string]any{mirrorAnnotation: "abc"}})
	pod("apps", "web-0", other, nil)
	// db-0 runs (a Pending pod may be evicted whatever its budget says).
	db, err := dyn.Resource(podsGVR).Namespace("apps").Get(ctx, "db-0", GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db.Object["status"] = map[string]any{"phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	if _, err := dyn.Resource(podsGVR).Namespace("apps").UpdateStatus(ctx, db, UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, "apps", map[string]any{
		"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": map[string]any{"name": "db", "namespace": "apps"},
		"spec": map[string]any{"minAvailable": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "db"}}}})
	// The disruption controller's part (no kube-controller-manager runs): it has seen the
	// budget and allows no disruption.
	pdbGVR := GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
	pdb, err := dyn.Resource(pdbGVR).Namespace("apps").Get(ctx, "db", GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Object["status"] = map[string]any{"observedGeneration": pdb.Object["metadata"].(map[string]any)["generation"], "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
	if _, err := dyn.Resource(pdbGVR).Namespace("apps").UpdateStatus(ctx, pdb, UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The kubelet's part: a pod being deleted is confirmed gone (grace period 0).
	kctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for kctx.Err() == nil {
			l, _ := dyn.Resource(podsGVR).List(kctx, ListOptions{})
			if l != nil {
				for _, p := range l.Items {
					if ts, _, _ := NestedString(p.Object, "metadata", "deletionTimestamp"); ts != "" {
						zero := int64(0)
						dyn.Resource(podsGVR).Namespace(p.GetNamespace()).Delete(kctx, p.GetName(), DeleteOptions{GracePeriodSeconds: &zero})
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	if found, err := Cordon(ctx, dyn, node); !found || err != nil {
		t.Fatalf("cordon: found %v, %v", found, err)
	}
	n, err := dyn.Resource(nodesGVR).Get(ctx, node, GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u, _, _ := NestedBool(n.Object, "spec", "unschedulable"); !u {
		t.Error("cordon left the node schedulable")
	}
	r, err := Drain(ctx, dyn, node, 20*time.Second, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Evicted, []string{"apps/web-1"}) || len(r.Terminating) != 0 {
		t.Errorf("evicted %v, terminating %v; want apps/web-1 gone", r.Evicted, r.Terminating)
	}
	if !slices.Equal(r.Skipped, []string{"apps/ds-x (DaemonSet node-agent)", "kube-system/static-x (static pod)"}) {
		t.Errorf("skipped %v", r.Skipped)
	}
	if len(r.Refused) != 1 || !strings.HasPrefix(r.Refused[0], "apps/db-0 (PodDisruptionBudget: ") || r.Drained() {
		t.Errorf("refused %v (drained %v); want apps/db-0 under its PodDisruptionBudget", r.Refused, r.Drained())
	}
	if !strings.Contains(r.String(), "could not drain: apps/db-0") {
		t.Errorf("report %q does not say what could not be drained", r)
	}
	left, err := podsOn(ctx, dyn, node)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range left {
		names = append(names, p.GetName())
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"db-0", "ds-x", "static-x"}) {
		t.Errorf("pods left on %s: %v", node, names)
	}
	if _, err := dyn.Resource(podsGVR).Namespace("apps").Get(ctx, "web-0", GetOptions{}); err != nil {
		t.Errorf("the other node's pod: %v", err)
	}

	if existed, err := DeleteNode(ctx, dyn, node); !existed || err != nil {
		t.Fatalf("delete node: existed %v, %v", existed, err)
	}
	if _, err := dyn.Resource(nodesGVR).Get(ctx, node, GetOptions{}); !IsNotFound(err) {
		t.Errorf("node after DeleteNode: %v", err)
	}
	if existed, err := DeleteNode(ctx, dyn, node); existed || err != nil {
		t.Errorf("second delete: existed %v, %v", existed, err)
	}
	if found, err := Cordon(ctx, dyn, node); found || err != nil {
		t.Errorf("cordon of a deleted node: found %v, %v", found, err)
	}
	if _, err := dyn.Resource(nodesGVR).Get(ctx, other, GetOptions{}); err != nil {
		t.Errorf("the other node: %v", err)
	}
}
