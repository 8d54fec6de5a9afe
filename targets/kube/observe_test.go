package kube_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"

	. "github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

func co(name string, conds ...string) *unstructured.Unstructured {
	var cs []any
	for i := 0; i+1 < len(conds); i += 2 {
		cs = append(cs, map[string]any{"type": conds[i], "status": conds[i+1]})
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
		"metadata": map[string]any{"name": name}, "status": map[string]any{"conditions": cs}}}
}

// TestConverged counts conditions the way the wait reports them.
func TestConverged(t *testing.T) {
	cv := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
		"metadata": map[string]any{"name": "version"}, "status": map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": "True"}}}}}
	dyn := kubedyn.Wrap(dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr(ClusterOperators): "ClusterOperatorList", gvr(ClusterVersions): "ClusterVersionList"},
		co("etcd", "Available", "True", "Degraded", "False"),
		co("ingress", "Available", "False", "Progressing", "True"),
		co("dns", "Available", "True", "Degraded", "True"),
		cv))
	c, err := Converged(context.Background(), dyn)
	if err != nil {
		t.Fatal(err)
	}
	if c.Total != 3 || c.Available != 2 || strings.Join(c.Unavailable, ",") != "ingress" || strings.Join(c.Degraded, ",") != "dns" ||
		strings.Join(c.Progressing, ",") != "ingress" || c.Version != "True" || c.Done() {
		t.Errorf("Converged = %+v", c)
	}
	if s := c.String(); !strings.Contains(s, "2/3 ClusterOperators Available") || !strings.Contains(s, "Degraded: dns") {
		t.Errorf("status line %q", s)
	}
}

// TestNodesReadyAndBootstrap covers the node and bootstrap-complete observations.
func TestNodesReadyAndBootstrap(t *testing.T) {
	node := func(name string, ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		t.Fatal(err)
	}
	cs := kubedyn.Wrap(dynfake.NewSimpleDynamicClient(sch, node("m0", corev1.ConditionTrue), node("m1", corev1.ConditionFalse)))
	ctx := context.Background()
	ready, notReady, err := NodesReady(ctx, cs, []string{"m2", "m1", "m0"})
	if err != nil || strings.Join(ready, ",") != "m0" || strings.Join(notReady, ",") != "m1,m2" {
		t.Errorf("NodesReady = %v %v %v; want [m0] [m1 m2]", ready, notReady, err)
	}
	if done, err := BootstrapComplete(ctx, cs); done || err != nil {
		t.Errorf("BootstrapComplete before: %v %v", done, err)
	}
	cm := &Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": BootstrapConfigMap, "namespace": BootstrapNamespace}, "data": map[string]any{"status": "in progress"}}}
	if _, err := cs.Resource(ConfigMaps).Namespace(BootstrapNamespace).Create(ctx, cm, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if done, err := BootstrapComplete(ctx, cs); done || err != nil {
		t.Errorf("status \"in progress\" counted as complete (%v)", err)
	}
	cm.Object["data"] = map[string]any{"status": "complete"}
	if _, err := cs.Resource(ConfigMaps).Namespace(BootstrapNamespace).Update(ctx, cm, UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if done, err := BootstrapComplete(ctx, cs); !done || err != nil {
		t.Errorf("BootstrapComplete after status complete: %v %v", done, err)
	}
}

func gvr(r GroupVersionResource) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}
