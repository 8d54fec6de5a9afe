package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/targets"
	"github.com/labbuild/labbuild/targets/kube"
)

// TestWriteClusterStatus: `labbuild status` prints each stage the observation holds and one
// row per node; an API that is not ready hides the stages (targets.ObserveCluster asks them
// only of a ready API) and shows why.
func TestWriteClusterStatus(t *testing.T) {
	nodes := []targets.ClusterNodeObservation{
		{Name: "bootstrap", Role: targets.RoleBootstrap, VM: "off"},
		{Name: "master-0", Role: targets.RoleMaster, VM: "running", Kubernetes: "Ready", PendingCSRs: 1},
		{Name: "worker-0", Role: targets.RoleWorker, VM: "unknown"},
	}
	tests := []struct {
		name      string
		obs       targets.ClusterObservation
		want, not []string
	}{
		{"converged", targets.ClusterObservation{APIVIP: "192.168.126.10", BootstrapComplete: true, Etcd: &targets.ClusterEtcd{Ready: 1, Masters: 1},
			Operators: &kube.Convergence{Total: 2, Available: 2, Version: "True"}, Nodes: nodes},
			[]string{"api ready through 192.168.126.10:6443", "bootstrap complete (kube-system/bootstrap)", "etcd Ready on 1/1 masters",
				"operators 2/2 ClusterOperators Available", "NODE ROLE VM KUBERNETES PENDING CSRS", "bootstrap bootstrap off - 0",
				"master-0 master running Ready 1", "worker-0 worker unknown - 0"}, nil},
		{"bootstrapping", targets.ClusterObservation{APIVIP: "198.18.0.10", CVO: &targets.ClusterCVO{Status: "no ClusterVersion version yet"}, Nodes: nodes},
			[]string{"api ready through 198.18.0.10:6443", "bootstrap in progress; CVO reporting: false (no ClusterVersion version yet)"},
			[]string{"etcd", "operators"}},
		{"api down", targets.ClusterObservation{APIVIP: "198.18.0.10", APIErr: errors.New("connection refused"), Nodes: nodes},
			[]string{"api not ready through 198.18.0.10:6443: connection refused", "master-0 master running Ready 1"},
			[]string{"bootstrap complete", "etcd", "operators"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := writeClusterStatus(&b, &tc.obs); err != nil {
				t.Fatal(err)
			}
			norm := strings.Join(strings.Fields(strings.ReplaceAll(b.String(), "\n", " | ")), " ")
			for _, w := range tc.want {
				if !strings.Contains(norm, w) {
					t.Errorf("lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tc.not {
				if strings.Contains(norm, w) {
					t.Errorf("shows %q:\n%s", w, b.String())
				}
			}
		})
	}
}
