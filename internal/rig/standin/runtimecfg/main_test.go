package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestClusterNameAndDomain: the name and domain come from the --cluster-config install-config,
// and without one from the kubeconfig's server (api-int.<name>.<baseDomain>), as runtimecfg's
// GetClusterNameAndDomain falls back; a server that is not such a name is an error.
func TestClusterNameAndDomain(t *testing.T) {
	dir := t.TempDir()
	kc := func(server string) string {
		p := filepath.Join(dir, "kubeconfig-"+filepath.Base(server))
		os.WriteFile(p, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \""+server+"\"}}]\n"+
			"users: [{name: u, user: {token: x}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"), 0o600)
		return p
	}
	cc := filepath.Join(dir, "cluster-config.yaml")
	os.WriteFile(cc, []byte("apiVersion: v1\nkind: ConfigMap\ndata:\n  install-config: |\n    baseDomain: example.com\n    metadata:\n      name: ocp4\n"), 0o644)
	for _, tc := range []struct {
		name, clusterConfig, kubeconfig string
		wantName, wantDomain            string
		wantErr                         bool
	}{
		{"cluster-config", cc, kc("https://api-int.other.example.org:6443"), "ocp4", "ocp4.example.com", false},
		{"kubeconfig fallback", "", kc("https://api-int.rehearsal.labbuild.test:6443"), "rehearsal", "rehearsal.labbuild.test", false},
		{"missing cluster-config file", filepath.Join(dir, "none.yaml"), kc("https://api-int.lab.example.com:6443"), "lab", "lab.example.com", false},
		{"server not api-int.<name>.<domain>", "", kc("https://localhost:6443"), "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := watch{kubeconfig: tc.kubeconfig, clusterConfig: tc.clusterConfig}
			name, domain, err := w.nameAndDomain()
			if (err != nil) != tc.wantErr || name != tc.wantName || domain != tc.wantDomain {
				t.Errorf("nameAndDomain = %q, %q, %v; want %q, %q, error %v", name, domain, err, tc.wantName, tc.wantDomain, tc.wantErr)
			}
		})
	}
}
