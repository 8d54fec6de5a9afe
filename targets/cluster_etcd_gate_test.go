package targets

import (
	"strings"
	"testing"
)

// TestBootstrapCompleteGate is the decision table of when cluster/etcd creates
// kube-system/bootstrap: only when openshift-install's report-progress.sh would (bootkube done,
// then wait_for_ha_api).
func TestBootstrapCompleteGate(t *testing.T) {
	tests := []struct {
		name            string
		etcdOn, masters int
		topology        string
		addrs           []string
		want            bool
		status          string // a substring of the status line
	}{
		{"etcd on no master", 0, 3, "HighlyAvailable", []string{"198.18.0.10", "198.18.0.11"}, false, "etcd Ready on 0/3"},
		{"etcd on two of three", 2, 3, "HighlyAvailable", []string{"198.18.0.10", "198.18.0.11"}, false, "wait-for-ceo"},
		{"HA, only the bootstrap serves", 3, 3, "HighlyAvailable", []string{"198.18.0.10"}, false, "want at least 2"},
		{"HA, no endpoints object", 3, 3, "HighlyAvailable", nil, false, "0 address"},
		{"HA, bootstrap and a master", 3, 3, "HighlyAvailable", []string{"198.18.0.10", "198.18.0.11"}, true, "API endpoints"},
		{"HA, three masters", 3, 3, "HighlyAvailable", []string{"198.18.0.11", "198.18.0.12", "198.18.0.13"}, true, ""},
		{"topology not reported yet", 3, 3, "", []string{"198.18.0.10", "198.18.0.11"}, false, "controlPlaneTopology"},
		{"single master, one address", 1, 1, "SingleReplica", []string{"198.18.0.10"}, true, "SingleReplica"},
		{"single master, etcd not yet", 0, 1, "SingleReplica", []string{"198.18.0.10"}, false, "0/1"},
		{"external topology", 3, 3, "External", nil, true, "External"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, st := bootstrapCompleteGate(tt.etcdOn, tt.masters, tt.topology, tt.addrs)
			if got != tt.want || !strings.Contains(st, tt.status) {
				t.Errorf("bootstrapCompleteGate = %v, %q; want %v and a status with %q", got, st, tt.want, tt.status)
			}
		})
	}
}
