package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAlarmStabilization: the API health flips to healthy after 3 good readings in a row and to
// unhealthy after 11 bad ones, as pkg/utils AlarmStabilization with the monitor's thresholds.
func TestAlarmStabilization(t *testing.T) {
	for _, tc := range []struct {
		name     string
		start    bool
		readings []bool
		want     bool
	}{
		{"two good readings are not enough", false, []bool{true, true}, false},
		{"three good readings", false, []bool{true, true, true}, true},
		{"a bad reading restarts the count", false, []bool{true, true, false, true, true}, false},
		{"ten bad readings keep it healthy", true, slices.Repeat([]bool{false}, 10), true},
		{"eleven bad readings", true, slices.Repeat([]bool{false}, 11), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur, ctr := tc.start, uint8(0)
			for _, r := range tc.readings {
				cur, ctr = alarmStabilization(cur, r, ctr, k8sHealthThresholdOn, k8sHealthThresholdOff)
			}
			if cur != tc.want {
				t.Errorf("after %v from %v: %v, want %v", tc.readings, tc.start, cur, tc.want)
			}
		})
	}
}

// TestHAProxyRuleSpec: the nat rules are getHAProxyRuleSpec's, word for word.
func TestHAProxyRuleSpec(t *testing.T) {
	pre := strings.Join(haproxyRuleSpec("198.18.0.10", 6443, 9445, false), " ")
	if want := "--dst 198.18.0.10 -p tcp --dport 6443 -j DNAT --to-destination 198.18.0.10:9445 -m comment --comment OCP_API_LB_REDIRECT"; pre != want {
		t.Errorf("PREROUTING spec %q, want %q", pre, want)
	}
	out := strings.Join(haproxyRuleSpec("198.18.0.10", 6443, 9445, true), " ")
	if want := "--dst 198.18.0.10 -p tcp --dport 6443 -o lo -j REDIRECT --to-ports 9445 -m comment --comment OCP_API_LB_REDIRECT"; out != want {
		t.Errorf("OUTPUT spec %q, want %q", out, want)
	}
}

// TestRender: `runtimecfg render <kubeconfig> <dir> --out-dir` renders every *.tmpl of the
// directory (nothing else) with the node's configuration and the template's mode; without a
// usable nameserver in resolv.conf it fails, as getNodeConfig does.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://api-int.lab.example.com:6443\"}}]\n"+
		"users: [{name: u, user: {token: x}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600)
	tmpls := filepath.Join(dir, "scripts")
	os.MkdirAll(tmpls, 0o755)
	os.WriteFile(filepath.Join(tmpls, "chk.sh.tmpl"), []byte("#!/bin/bash\ncurl -kLfs https://localhost:{{ .LBConfig.ApiPort }}/readyz # {{ .Cluster.Name }} {{ .NonVirtualIP }} {{ .VRRPInterface }}\n"), 0o755)
	os.WriteFile(filepath.Join(tmpls, "README"), []byte("not a template"), 0o644)
	resolv := filepath.Join(dir, "resolv.conf")
	out := filepath.Join(dir, "out")
	// The VIP in loopback's 127.0.0.0/8: the VRRP interface is lo, the node's address 127.0.0.1.
	args := []string{kc, tmpls, "--api-vips", "127.0.0.10", "--ingress-vips", "127.0.0.11", "--out-dir", out, "--resolvconf-path", resolv}
	os.WriteFile(resolv, []byte("nameserver 127.0.0.1\n"), 0o644)
	if err := runRender(args); err == nil || !strings.Contains(err.Error(), "No upstream DNS servers found") {
		t.Errorf("render with only a loopback nameserver: %v, want No upstream DNS servers found", err)
	}
	os.WriteFile(resolv, []byte("search lab.example.com\nnameserver 198.18.0.1\n"), 0o644)
	if err := runRender(args); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "chk.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "#!/bin/bash\ncurl -kLfs https://localhost:6443/readyz # lab 127.0.0.1 lo\n"; string(b) != want {
		t.Errorf("chk.sh = %q, want %q", b, want)
	}
	if st, _ := os.Stat(filepath.Join(out, "chk.sh")); st.Mode().Perm() != 0o755 {
		t.Errorf("chk.sh mode %v, want the template's 0755", st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Errorf("out dir holds %d files, want only chk.sh", len(ents))
	}
}

// TestRenderHAProxy: the monitor's render of a haproxy.cfg template with runtimeConfig: one
// server line per backend (the master Node's name and address, the API port), the LB port.
func TestRenderHAProxy(t *testing.T) {
	dir := t.TempDir()
	tmpl := filepath.Join(dir, "haproxy.cfg.tmpl")
	os.WriteFile(tmpl, []byte("frontend main\n  bind :::{{ .LBConfig.LbPort }} v4v6\nbackend masters\n{{- range .LBConfig.Backends }}\n   server {{ .Host }} {{ .Address }}:{{ .Port }} check\n{{- end }}\n"), 0o644)
	cfg := filepath.Join(dir, "haproxy.cfg")
	c := lbConfig{ApiPort: 6443, LbPort: 9445, StatPort: 29445, Backends: []backend{{"master-0.lab", "198.18.0.101", 6443}, {"master-1.lab", "198.18.0.102", 6443}}}
	if err := renderFile(cfg, tmpl, runtimeConfig{LBConfig: &c}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(cfg)
	want := "frontend main\n  bind :::9445 v4v6\nbackend masters\n   server master-0.lab 198.18.0.101:6443 check\n   server master-1.lab 198.18.0.102:6443 check\n"
	if string(b) != want {
		t.Errorf("haproxy.cfg:\n%s\nwant:\n%s", b, want)
	}
}
