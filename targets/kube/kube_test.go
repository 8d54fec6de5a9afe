package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
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
		if cfg.Host != tt.wantHost || cfg.ServerName != tt.wantSN {
			t.Errorf("dial %q: host %q server name %q, want %q %q", tt.dial, cfg.Host, cfg.ServerName, tt.wantHost, tt.wantSN)
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

// TestMapperAndReadyz serves discovery and /readyz from a test server: the Mapper maps kinds
// to resources and scope, caches a group-version, reads it again once when a kind is missing
// (a CRD applied since), and names the kind when it is still missing.
func TestMapperAndReadyz(t *testing.T) {
	var mu sync.Mutex
	gets := map[string]int{}
	crdApplied := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		gets[r.URL.Path]++
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/readyz":
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "ok")
		case "/api/v1":
			fmt.Fprint(w, `{"kind":"APIResourceList","groupVersion":"v1","resources":[
				{"name":"nodes","namespaced":false,"kind":"Node"},{"name":"nodes/status","namespaced":false,"kind":"Node"},
				{"name":"configmaps","namespaced":true,"kind":"ConfigMap"}]}`)
		case "/apis/config.openshift.io/v1":
			res := `{"name":"clusterversions","namespaced":false,"kind":"ClusterVersion"}`
			if crdApplied {
				res += `,{"name":"infrastructures","namespaced":false,"kind":"Infrastructure"}`
			}
			fmt.Fprintf(w, `{"kind":"APIResourceList","groupVersion":"config.openshift.io/v1","resources":[%s]}`, res)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	defer srv.Close()
	k, err := NewClients(&RESTConfig{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := Readyz(ctx, k); err != nil {
		t.Errorf("Readyz: %v", err)
	}
	m := NewMapper(k.REST)
	tests := []struct {
		gvk        GroupVersionKind
		want       GroupVersionResource
		namespaced bool
		err        string
	}{
		{GroupVersionKind{Version: "v1", Kind: "Node"}, Nodes, false, ""},
		{GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, ConfigMaps, true, ""},
		{GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "ClusterVersion"}, ClusterVersions, false, ""},
		{GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "Infrastructure"}, GroupVersionResource{}, false, "no resource for kind Infrastructure in /apis/config.openshift.io/v1 (is its CRD applied first?)"},
		{GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, GroupVersionResource{}, false, "kind Widget in /apis/example.com/v1"},
	}
	for _, tt := range tests {
		gvr, ns, err := m.Resource(ctx, tt.gvk)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%v: err %v, want %q", tt.gvk, err, tt.err)
			}
			continue
		}
		if err != nil || gvr != tt.want || ns != tt.namespaced {
			t.Errorf("%v = %v %v %v, want %v %v", tt.gvk, gvr, ns, err, tt.want, tt.namespaced)
		}
	}
	mu.Lock()
	if gets["/api/v1"] != 1 || gets["/apis/config.openshift.io/v1"] != 2 {
		t.Errorf("discovery GETs %v: want /api/v1 once (cached), the config group twice (one refresh on the miss)", gets)
	}
	crdApplied = true
	mu.Unlock()
	gvr, _, err := m.Resource(ctx, GroupVersionKind{Group: "config.openshift.io", Version: "v1", Kind: "Infrastructure"})
	if err != nil || gvr.Resource != "infrastructures" {
		t.Errorf("after the CRD: %v %v", gvr, err)
	}
}

// TestDynamicRequests checks the REST requests of the Dynamic client (method, path, query,
// body) and that API errors come back as StatusErrors apierrors recognizes.
func TestDynamicRequests(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, strings.TrimSpace(fmt.Sprintf("%s %s?%s %s", r.Method, r.URL.Path, r.URL.RawQuery, b)))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/missing"):
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps \"missing\" not found","reason":"NotFound","code":404}`)
		case strings.HasSuffix(r.URL.Path, "/approval"):
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the object has been modified","reason":"Conflict","code":409}`)
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/nodes"):
			fmt.Fprint(w, `{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"m0"}}]}`)
		default:
			fmt.Fprint(w, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x","namespace":"ns"}}`)
		}
	}))
	defer srv.Close()
	k, err := NewClients(&RESTConfig{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
	if _, err := k.Dynamic.Resource(ConfigMaps).Namespace("ns").Get(ctx, "missing", GetOptions{}); !IsNotFound(err) || !strings.Contains(err.Error(), `configmaps "missing" not found`) {
		t.Errorf("get missing: %v, want the server's NotFound", err)
	}
	if _, err := k.Dynamic.Resource(CSRs).Update(ctx, cm, UpdateOptions{}, "approval"); !IsConflict(err) {
		t.Errorf("approval: %v, want Conflict", err)
	}
	if l, err := List[Node](ctx, k.Dynamic, Nodes, "", "node-role.kubernetes.io/master"); err != nil || len(l) != 1 || l[0].Name != "m0" {
		t.Errorf("list nodes: %v %v", l, err)
	}
	if _, err := k.Dynamic.Resource(ConfigMaps).Namespace("ns").Apply(ctx, "x", cm, ApplyOptions{FieldManager: FieldManager, Force: true}); err != nil {
		t.Error(err)
	}
	if _, err := k.Dynamic.Resource(ConfigMaps).Namespace("ns").Create(ctx, cm, CreateOptions{DryRun: []string{DryRunAll}}); err != nil {
		t.Error(err)
	}
	if err := k.Dynamic.Resource(Nodes).Delete(ctx, "m0", DeleteOptions{}); err != nil {
		t.Error(err)
	}
	want := []string{
		`GET /api/v1/namespaces/ns/configmaps/missing?`,
		`PUT /apis/certificates.k8s.io/v1/certificatesigningrequests/x/approval? {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
		`GET /api/v1/nodes?labelSelector=node-role.kubernetes.io%2Fmaster`,
		`PATCH /api/v1/namespaces/ns/configmaps/x?fieldManager=labbuild&force=true {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
		`POST /api/v1/namespaces/ns/configmaps?dryRun=All {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}`,
		`DELETE /api/v1/nodes/m0? {}`,
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
