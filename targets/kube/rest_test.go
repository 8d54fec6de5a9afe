package kube

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadKubeconfig covers the kubeconfig forms LoadKubeconfig reads (embedded data, files
// relative to the kubeconfig, tokenFile) and refuses (exec plugins, dangling names), with
// errors that name the entry and never a credential.
func TestLoadKubeconfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("certs/ca.crt", "CA-PEM")
	write("certs/c.crt", "CERT-PEM")
	write("certs/c.key", "KEY-PEM")
	write("token", "s3cret-token\n")
	const head = "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
	tests := []struct {
		name, body string
		want       RESTConfig
		err        string
	}{
		{"embedded", head + "clusters:\n- name: c\n  cluster: {server: 'https://h:6443', certificate-authority-data: Q0E=, tls-server-name: api.x}\nusers:\n- name: u\n  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}\n",
			RESTConfig{Host: "https://h:6443", ServerName: "api.x", CAData: []byte("CA"), CertData: []byte("CERT"), KeyData: []byte("KEY")}, ""},
		{"files relative to the kubeconfig", head + "clusters:\n- name: c\n  cluster: {server: 'https://h:6443', certificate-authority: certs/ca.crt}\nusers:\n- name: u\n  user: {client-certificate: certs/c.crt, client-key: " + filepath.Join(dir, "certs/c.key") + "}\n",
			RESTConfig{Host: "https://h:6443", CAData: []byte("CA-PEM"), CertData: []byte("CERT-PEM"), KeyData: []byte("KEY-PEM")}, ""},
		{"tokenFile", head + "clusters:\n- name: c\n  cluster: {server: 'https://h:6443', insecure-skip-tls-verify: true}\nusers:\n- name: u\n  user: {tokenFile: token}\n",
			RESTConfig{Host: "https://h:6443", Insecure: true, BearerToken: "s3cret-token"}, ""},
		{"exec plugin", head + "clusters:\n- name: c\n  cluster: {server: 'https://h:6443'}\nusers:\n- name: u\n  user: {exec: {command: get-token, apiVersion: client.authentication.k8s.io/v1}}\n",
			RESTConfig{}, `user "u" uses an exec or auth-provider credential plugin`},
		{"no such cluster", head + "clusters:\n- name: other\n  cluster: {server: 'https://h:6443'}\nusers:\n- name: u\n  user: {token: s3cret-token}\n",
			RESTConfig{}, `cluster "c" (of context "x") is not in clusters`},
		{"no such user", head + "clusters:\n- name: c\n  cluster: {server: 'https://h:6443'}\nusers:\n- name: v\n  user: {token: s3cret-token}\n",
			RESTConfig{}, `user "u" (of context "x") is not in users`},
		{"no current context", "users:\n- name: u\n  user: {token: s3cret-token}\n", RESTConfig{}, "no current-context"},
		{"missing file", head + "clusters:\n- name: c\n  cluster: {server: 'https://h:6443', certificate-authority: nope.crt}\nusers: []\n",
			RESTConfig{}, "certificate-authority: open " + filepath.Join(dir, "nope.crt")},
	}
	for _, tt := range tests {
		cfg, err := LoadKubeconfig(write(strings.ReplaceAll(tt.name, " ", "-"), tt.body))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: error %v, want %q without the token", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if cfg.Host != tt.want.Host || cfg.ServerName != tt.want.ServerName || string(cfg.CAData) != string(tt.want.CAData) ||
			string(cfg.CertData) != string(tt.want.CertData) || string(cfg.KeyData) != string(tt.want.KeyData) ||
			cfg.BearerToken != tt.want.BearerToken || cfg.Insecure != tt.want.Insecure {
			t.Errorf("%s: got %+v, want %+v", tt.name, *cfg, tt.want)
		}
	}
}

// TestStatusErrors: an answer without a Status body still classifies by HTTP code (as
// apimachinery's errors.Is* do for an unknown reason), carries the body's first line, and the
// bearer token goes in the Authorization header.
func TestStatusErrors(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/readyz":
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("[-]etcd failed: reason withheld\nreadyz check failed\n"))
		case "/api/v1/nodes/gone":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("404 page not found\n"))
		case "/api/v1/nodes/noreason":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"kind":"Status","status":"Failure","message":"no reason given","code":404}`))
		case "/api/v1/namespaces/ns/pods/p/eviction":
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write([]byte(`{"kind":"Status","status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","code":429}`))
		default:
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"kind":"Status","status":"Failure","message":"x already exists","reason":"AlreadyExists","code":409}`))
		}
	}))
	defer srv.Close()
	k, err := NewClients(&RESTConfig{Host: srv.URL, BearerToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	err = Readyz(ctx, k)
	if err == nil || !strings.Contains(err.Error(), "HTTP 503") || !strings.Contains(err.Error(), "[-]etcd failed") || IsNotFound(err) {
		t.Errorf("readyz: %v", err)
	}
	if auth != "Bearer tok" {
		t.Errorf("Authorization %q", auth)
	}
	_, err = k.Dynamic.Resource(Nodes).Get(ctx, "gone", GetOptions{})
	if !IsNotFound(err) || IsConflict(err) {
		t.Errorf("plain 404: %v (IsNotFound %v)", err, IsNotFound(err))
	}
	_, err = k.Dynamic.Resource(Nodes).Get(ctx, "noreason", GetOptions{})
	if !IsNotFound(err) || err.Error() != "no reason given" {
		t.Errorf("Status without a reason, code 404: %v (IsNotFound %v)", err, IsNotFound(err))
	}
	ev := &Unstructured{Object: map[string]any{"apiVersion": "policy/v1", "kind": "Eviction", "metadata": map[string]any{"name": "p", "namespace": "ns"}}}
	_, err = k.Dynamic.Resource(Pods).Namespace("ns").Create(ctx, ev, CreateOptions{}, "eviction")
	if !IsTooManyRequests(err) || Message(err) != "Cannot evict pod as it would violate the pod's disruption budget." {
		t.Errorf("eviction: %v", err)
	}
	_, err = k.Dynamic.Resource(ConfigMaps).Namespace("ns").Create(ctx, &Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}}}, CreateOptions{})
	if !IsAlreadyExists(err) || IsConflict(err) {
		t.Errorf("already exists: %v (IsConflict %v)", err, IsConflict(err))
	}
}
