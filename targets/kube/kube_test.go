package kube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster:
    server: https://api.ocp4.example.com:6443
    certificate-authority-data: ""
users:
- name: admin
  user:
    token: not-a-real-token
contexts:
- name: admin
  context: {cluster: lab, user: admin}
current-context: admin
`

// TestConfigDial checks that dialling another address keeps the kubeconfig's host name for
// TLS verification, and that errors name the file but never the credentials.
func TestConfigDial(t *testing.T) {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dial, wantHost, wantSN string
	}{
		{"", "https://api.ocp4.example.com:6443", ""},
		{"192.168.126.10:6443", "https://192.168.126.10:6443", "api.ocp4.example.com"},
		{"127.0.0.1:41234", "https://127.0.0.1:41234", "api.ocp4.example.com"},
	}
	for _, tt := range tests {
		cfg, err := Config(p, tt.dial)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Host != tt.wantHost || cfg.TLSClientConfig.ServerName != tt.wantSN {
			t.Errorf("dial %q: host %q server name %q, want %q %q", tt.dial, cfg.Host, cfg.TLSClientConfig.ServerName, tt.wantHost, tt.wantSN)
		}
		if cfg.Timeout == 0 {
			t.Errorf("dial %q: no request timeout", tt.dial)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("users: [{name: x, user: {token: s3cret-token}}]\nclusters: nope\n"), 0o600)
	_, err := Config(bad, "")
	if err == nil || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "s3cret-token") {
		t.Errorf("bad kubeconfig: %v; want an error naming the file without its token", err)
	}
}

// TestConvergenceDone pins the done-condition, including OTHW's defect (zero operators counted
// as converged when the API is unreachable).
func TestConvergenceDone(t *testing.T) {
	tests := []struct {
		name string
		c    Convergence
		want bool
	}{
		{"no operators (API unreachable)", Convergence{Version: "True"}, false},
		{"all available", Convergence{Total: 2, Available: 2, Version: "True"}, true},
		{"progressing does not hold it up", Convergence{Total: 2, Available: 2, Progressing: []string{"dns"}, Version: "True"}, true},
		{"one unavailable", Convergence{Total: 2, Available: 1, Unavailable: []string{"ingress"}, Version: "True"}, false},
		{"degraded", Convergence{Total: 2, Available: 2, Degraded: []string{"etcd"}, Version: "True"}, false},
		{"version not available", Convergence{Total: 2, Available: 2, Version: "False"}, false},
		{"no clusterversion", Convergence{Total: 2, Available: 2}, false},
	}
	for _, tt := range tests {
		if got := tt.c.Done(); got != tt.want {
			t.Errorf("%s: Done() = %v, want %v (%s)", tt.name, got, tt.want, tt.c)
		}
	}
}

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
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ClusterOperators: "ClusterOperatorList", ClusterVersions: "ClusterVersionList"},
		co("etcd", "Available", "True", "Degraded", "False"),
		co("ingress", "Available", "False", "Progressing", "True"),
		co("dns", "Available", "True", "Degraded", "True"),
		cv)
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
	cs := fake.NewSimpleClientset(node("m0", corev1.ConditionTrue), node("m1", corev1.ConditionFalse))
	ctx := context.Background()
	ready, notReady, err := NodesReady(ctx, cs, []string{"m2", "m1", "m0"})
	if err != nil || strings.Join(ready, ",") != "m0" || strings.Join(notReady, ",") != "m1,m2" {
		t.Errorf("NodesReady = %v %v %v; want [m0] [m1 m2]", ready, notReady, err)
	}
	if done, err := BootstrapComplete(ctx, cs); done || err != nil {
		t.Errorf("BootstrapComplete before: %v %v", done, err)
	}
	cs.CoreV1().ConfigMaps(BootstrapNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: BootstrapConfigMap, Namespace: BootstrapNamespace},
		Data: map[string]string{"status": "in progress"}}, metav1.CreateOptions{})
	if done, _ := BootstrapComplete(ctx, cs); done {
		t.Error("status \"in progress\" counted as complete")
	}
}
