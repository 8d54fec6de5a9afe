package targets

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

var (
	cnNodes = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	cnPods  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// cnWorkload puts, on a real kube-apiserver without controllers, Node fqdn with pods
// apps/web (plain) and, when budget, apps/db (running, under a PodDisruptionBudget
// minAvailable 1), and plays the kubelet: a pod being deleted is confirmed gone.
func cnWorkload(t *testing.T, ctx context.Context, dyn dynamic.Interface, fqdn string, budget bool) {
	t.Helper()
	create := func(gvr schema.GroupVersionResource, ns string, obj map[string]any) {
		t.Helper()
		ri := dynamic.ResourceInterface(dyn.Resource(gvr))
		if ns != "" {
			ri = dyn.Resource(gvr).Namespace(ns)
		}
		if _, err := ri.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create %v: %v", obj["metadata"], err)
		}
	}
	create(cnNodes, "", map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": fqdn}})
	create(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "apps"}})
	create(schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, "apps", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default", "namespace": "apps"}})
	pod := func(name string, labels map[string]any) {
		create(cnPods, "apps", map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name, "namespace": "apps", "labels": labels},
			"spec": map[string]any{"nodeName": fqdn, "automountServiceAccountToken": false, "containers": []any{map[string]any{"name": "c", "image": "registry.example.test/app:1"}}}})
	}
	pod("web", map[string]any{"app": "web"})
	if budget {
		pod("db", map[string]any{"app": "db"})
		db, err := dyn.Resource(cnPods).Namespace("apps").Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		db.Object["status"] = map[string]any{"phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
		if _, err := dyn.Resource(cnPods).Namespace("apps").UpdateStatus(ctx, db, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		create(schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, "apps", map[string]any{
			"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": map[string]any{"name": "db", "namespace": "apps"},
			"spec": map[string]any{"minAvailable": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "db"}}}})
		// The disruption controller's part (no kube-controller-manager runs): it has seen the
		// budget and allows no disruption.
		pdbGVR := schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}
		pdb, err := dyn.Resource(pdbGVR).Namespace("apps").Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pdb.Object["status"] = map[string]any{"observedGeneration": pdb.GetGeneration(), "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
		if _, err := dyn.Resource(pdbGVR).Namespace("apps").UpdateStatus(ctx, pdb, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kctx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go func() {
		zero := int64(0)
		for kctx.Err() == nil {
			if l, _ := dyn.Resource(cnPods).List(kctx, metav1.ListOptions{}); l != nil {
				for _, p := range l.Items {
					if p.GetDeletionTimestamp() != nil {
						dyn.Resource(cnPods).Namespace(p.GetNamespace()).Delete(kctx, p.GetName(), metav1.DeleteOptions{GracePeriodSeconds: &zero})
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
}

// TestClusterRemoveNodeReal removes a node as `labbuild cluster` does after worker-2 left
// nodes:, against a real etcd + kube-apiserver: the Node is cordoned, its plain pod evicted,
// the pod a PodDisruptionBudget protects reported as not drained, and the Node deleted
// (Destroyed); a second removal finds none (AlreadyAbsent); an API that does not answer, or no
// kubeconfig, is said with the commands to run later (RecordOnly). The orphans come in the
// order that works: the Node, then the VM, then its disk; the Node's orphan reads the admin
// kubeconfig.
func TestClusterRemoveNodeReal(t *testing.T) {
	c := testLabConfig()
	got := Lab{Config: c}.Orphans([]string{"cluster/install/worker-2", "haproxy/x", "libvirt/volume/worker-2", "libvirt/vm/worker-2"})
	var names []string
	for _, o := range got {
		names = append(names, o.Name)
	}
	if !slices.Equal(names, []string{"cluster/install/worker-2", "libvirt/vm/worker-2", "libvirt/volume/worker-2"}) || !slices.Equal(got[0].Deps, []string{adminKubeconfig}) {
		t.Errorf("orphans %v (node deps %v)", names, got[0].Deps)
	}

	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{})
	dyn, err := dynamic.NewForConfig(cp.Admin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	oldWait, oldPoll := clusterDrainWait, clusterDrainPoll
	clusterDrainWait, clusterDrainPoll = 20*time.Second, 100*time.Millisecond
	t.Cleanup(func() { clusterDrainWait, clusterDrainPoll = oldWait, oldPoll })
	const fqdn = "worker-2.ocp4.example.com"
	cnWorkload(t, ctx, dyn, fqdn, true)

	var log strings.Builder
	logf := func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }
	// labbuild's own client against the real API (the set-up above uses client-go's).
	kc, err := kube.NewClients(kubedyn.Config(cp.Admin))
	if err != nil {
		t.Fatal(err)
	}
	k := kc.Dynamic
	out, err := clusterRemoveNodeWith(ctx, logf, k, "", fqdn)
	if err != nil || out != engine.Destroyed {
		t.Fatalf("remove: %v, %v\n%s", out, err, log.String())
	}
	for _, want := range []string{"cordoned and drained " + fqdn + ": evicted 1 pods; could not drain: apps/db (PodDisruptionBudget", "deleted Node " + fqdn} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	if _, err := dyn.Resource(cnNodes).Get(ctx, fqdn, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node after removal: %v", err)
	}
	if _, err := dyn.Resource(cnPods).Namespace("apps").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("apps/web after the drain: %v", err)
	}
	if out, err := clusterRemoveNodeWith(ctx, logf, k, "", fqdn); out != engine.AlreadyAbsent || err != nil {
		t.Errorf("second removal: %v, %v", out, err)
	}

	log.Reset()
	down, err := kube.NewClients(&kube.RESTConfig{Host: "https://127.0.0.1:" + testenv.FreePort(t), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := clusterRemoveNodeWith(ctx, logf, down.Dynamic, "", fqdn); out != engine.RecordOnly || err != nil ||
		!strings.Contains(log.String(), "cannot reach the cluster API") || !strings.Contains(log.String(), "oc delete node "+fqdn) {
		t.Errorf("API down: %v, %v\n%s", out, err, log.String())
	}
	log.Reset()
	if out, err := clusterRemoveNodeWith(ctx, logf, nil, "no admin kubeconfig is recorded", fqdn); out != engine.RecordOnly || err != nil ||
		!strings.Contains(log.String(), "no admin kubeconfig is recorded") {
		t.Errorf("no kubeconfig: %v, %v\n%s", out, err, log.String())
	}
}

// TestCSRVerdict: a lab node's CSR seen in an earlier phase is left pending for the phase where
// that node joins, not logged as a stranger's refusal; strangers are still refused with why.
func TestCSRVerdict(t *testing.T) {
	later := map[string]string{"worker-0.ocp4.example.com": "cluster/workers"}
	refused := csr.Decision{CSR: "csr-a", Signer: csr.SignerServing, Node: "worker-0.ocp4.example.com", Reason: `node "worker-0.ocp4.example.com" is not one of the lab's nodes (master-0.ocp4.example.com)`}
	stranger := csr.Decision{CSR: "csr-b", Signer: csr.SignerClient, Node: "intruder.example.com", Reason: `node "intruder.example.com" is not one of the lab's nodes (master-0.ocp4.example.com)`}
	approved := csr.Decision{CSR: "csr-c", Signer: csr.SignerClient, Node: "master-0.ocp4.example.com", Approve: true, Approved: true, Reason: "client certificate for node master-0.ocp4.example.com requested by system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"}
	for _, tc := range []struct {
		name  string
		d     csr.Decision
		later map[string]string
		want  string
	}{
		{"later phase's node", refused, later, `CSR csr-a (kubernetes.io/kubelet-serving, node "worker-0.ocp4.example.com"): left pending for cluster/workers, where that node joins`},
		{"same node, no later phase", refused, nil, `CSR csr-a (kubernetes.io/kubelet-serving, node "worker-0.ocp4.example.com"): refused (left pending): node "worker-0.ocp4.example.com" is not one of the lab's nodes (master-0.ocp4.example.com)`},
		{"stranger", stranger, later, `CSR csr-b (kubernetes.io/kube-apiserver-client-kubelet, node "intruder.example.com"): refused (left pending): node "intruder.example.com" is not one of the lab's nodes (master-0.ocp4.example.com)`},
		{"approved", approved, later, `CSR csr-c (kubernetes.io/kube-apiserver-client-kubelet, node "master-0.ocp4.example.com"): approved: ` + approved.Reason},
	} {
		if got := csrVerdict(tc.d, tc.later); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
