package libvirt

import (
	"slices"
	"strings"
	"testing"
)

// TestNetworkChanges: which edits go in place (as virNetworkUpdate elements, deletes first)
// and which force a new network.
func TestNetworkChanges(t *testing.T) {
	base := NetworkSpec{Name: "lbt", Domain: "lbt.example.test", MachineNetwork: "198.18.0.0/24", Gateway: "198.18.0.1",
		APIVIP: "198.18.0.10", IngressVIP: "198.18.0.11", DHCPStart: "198.18.0.200", DHCPEnd: "198.18.0.254",
		Nodes: []Node{{Name: "master-0", Role: RoleMaster, IP: "198.18.0.101", MAC: MAC("lbt", "master-0")},
			{Name: "worker-0", Role: RoleWorker, IP: "198.18.0.21", MAC: MAC("lbt", "worker-0")}}}
	edit := func(f func(*NetworkSpec)) NetworkSpec {
		s := base
		s.Nodes = slices.Clone(base.Nodes)
		f(&s)
		return s
	}
	for _, tc := range []struct {
		name  string
		spec  NetworkSpec
		edits []string
		fixed []string // field prefixes
	}{
		{"same", base, nil, nil},
		{"add worker-1", edit(func(s *NetworkSpec) {
			s.Nodes = append(s.Nodes, Node{Name: "worker-1", Role: RoleWorker, IP: "198.18.0.22", MAC: "52:54:00:aa:bb:cc"})
		}), []string{"add dns-host 198.18.0.22 worker-1.lbt.example.test", "add ip-dhcp-host 52:54:00:aa:bb:cc worker-1 198.18.0.22"}, nil},
		{"worker IP", edit(func(s *NetworkSpec) { s.Nodes[1].IP = "198.18.0.31" }), []string{
			"delete dns-host 198.18.0.21 worker-0.lbt.example.test", "delete ip-dhcp-host " + MAC("lbt", "worker-0") + " worker-0 198.18.0.21",
			"add dns-host 198.18.0.31 worker-0.lbt.example.test", "add ip-dhcp-host " + MAC("lbt", "worker-0") + " worker-0 198.18.0.31"}, nil},
		{"api VIP", edit(func(s *NetworkSpec) { s.APIVIP = "198.18.0.12" }), []string{
			"delete dns-host 198.18.0.10 api-int.lbt.example.test,api.lbt.example.test", "add dns-host 198.18.0.12 api-int.lbt.example.test,api.lbt.example.test"}, nil},
		{"subnet", edit(func(s *NetworkSpec) { s.MachineNetwork = "198.18.0.0/23" }), nil, []string{"ip:"}},
		{"ingress VIP", edit(func(s *NetworkSpec) { s.IngressVIP = "198.18.0.12" }), nil, []string{"dnsmasq option:", "dnsmasq option:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := Network(base)
			want, err := Network(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			edits, fixed := NetworkChanges(want, got, DiffOptions{})
			var es []string
			for _, e := range edits {
				es = append(es, e.String())
				if !strings.HasPrefix(e.XML, "<host ") && !strings.HasPrefix(e.XML, "<srv ") {
					t.Errorf("edit %s: element %s", e, e.XML)
				}
			}
			if !slices.Equal(es, tc.edits) {
				t.Errorf("edits:\n got %q\nwant %q", es, tc.edits)
			}
			if len(fixed) != len(tc.fixed) {
				t.Fatalf("fixed %q, want %q", fixed, tc.fixed)
			}
			for i, f := range fixed {
				if !strings.HasPrefix(f, tc.fixed[i]) {
					t.Errorf("fixed %q, want prefix %q", f, tc.fixed[i])
				}
			}
		})
	}
}
