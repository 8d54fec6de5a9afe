package csr

import (
	"strings"
	"testing"
	"time"
)

// TestDecideMachine is the decision table for a node a Machine provisions (platform
// baremetal's workers), which registers under its DHCP short name: its CSRs are approved as
// cluster-machine-approver release-4.18 pkg/controller/csr_check.go approves them
// (authorizeNodeClientCSR: the node-bootstrapper service account, no Node yet, a Machine whose
// InternalDNS is the name, no nodeRef, created within (−10 s, +2 h) of the Machine;
// authorizeServingCertWithMachine: SANs within the addresses of the Machine whose nodeRef is the
// node), and refused otherwise. The lab identity alone (its IP) approves nothing.
func TestDecideMachine(t *testing.T) {
	const node = "worker-0"
	made := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	exp := map[string]NodeIdentity{node: {Name: node, Role: "worker", IPs: []string{"192.168.126.110"}, ByMachine: true}}
	saGroups := []string{"system:serviceaccounts:openshift-machine-config-operator", "system:serviceaccounts", "system:authenticated"}
	client := req{cn: NodeUserPrefix + node, o: NodesGroup, signer: SignerClient, user: NodeBootstrapperSA, groups: saGroups, usages: clientUsages}
	serving := req{cn: NodeUserPrefix + node, o: NodesGroup, dns: []string{node}, ips: []string{"192.168.126.110"}, signer: SignerServing,
		user: NodeUserPrefix + node, groups: nodeGroups, usages: servingUsages}
	machine := func(dns, nodeRef string, addrs ...string) Machine {
		var m Machine
		m.Name, m.CreationTimestamp = "ocp4-worker-0-abcde", made.Format(time.RFC3339)
		if dns != "" {
			m.Status.Addresses = append(m.Status.Addresses, struct {
				Type    string `json:"type"`
				Address string `json:"address"`
			}{"InternalDNS", dns})
		}
		for i := 0; i+1 < len(addrs); i += 2 {
			m.Status.Addresses = append(m.Status.Addresses, struct {
				Type    string `json:"type"`
				Address string `json:"address"`
			}{addrs[i], addrs[i+1]})
		}
		if nodeRef != "" {
			m.Status.NodeRef = &struct {
				Name string `json:"name"`
			}{nodeRef}
		}
		return m
	}
	inspected := machine(node, "", "InternalIP", "192.168.126.110", "Hostname", node)
	linked := machine(node, node, "InternalIP", "192.168.126.110", "Hostname", node)
	at := func(d time.Duration) string { return made.Add(d).Format(time.RFC3339) }
	for _, tc := range []struct {
		name    string
		r       req
		created string
		view    *MachineView
		approve bool
		reason  string
	}{
		{"client, Machine inspected", client, at(time.Minute), &MachineView{Machines: []Machine{inspected}}, true, "for Machine ocp4-worker-0-abcde"},
		{"client, InternalDNS with a trailing dot, other case", client, at(time.Minute), &MachineView{Machines: []Machine{machine("Worker-0.", "")}}, true, "authorizeNodeClientCSR"},
		{"client from system:bootstrapper", with(client, func(r *req) { r.user, r.groups = BootstrapUser, bootGroups }), at(time.Minute), &MachineView{Machines: []Machine{inspected}}, false, "must come from " + NodeBootstrapperSA},
		{"client, SA with an extra group", with(client, func(r *req) { r.groups = append(r.groups, "system:masters") }), at(time.Minute), &MachineView{Machines: []Machine{inspected}}, false, "isReqFromNodeBootstrapper"},
		{"client, no Machine", client, at(time.Minute), &MachineView{}, false, "no Machine in openshift-machine-api has InternalDNS worker-0"},
		{"client, Machine not inspected (IP only)", client, at(time.Minute), &MachineView{Machines: []Machine{machine("", "", "InternalIP", "192.168.126.110")}}, false, "has InternalDNS"},
		{"client, Machine of the FQDN", client, at(time.Minute), &MachineView{Machines: []Machine{machine("worker-0.ocp4.example.com", "")}}, false, "has InternalDNS"},
		{"client, Node exists", client, at(time.Minute), &MachineView{Machines: []Machine{inspected}, Nodes: []string{node}}, false, "already exists"},
		{"client, Machine has a node ref", client, at(time.Minute), &MachineView{Machines: []Machine{linked}}, false, "already has node ref"},
		{"client 11 s before the Machine", client, at(-11 * time.Second), &MachineView{Machines: []Machine{inspected}}, false, "not in range"},
		{"client 9 s before the Machine", client, at(-9 * time.Second), &MachineView{Machines: []Machine{inspected}}, true, "client certificate"},
		{"client 2 h after the Machine", client, at(2 * time.Hour), &MachineView{Machines: []Machine{inspected}}, false, "not in range"},
		{"client, Machines not read", client, at(time.Minute), nil, false, "Machines were not read"},
		{"client with SANs", with(client, func(r *req) { r.dns = []string{node} }), at(time.Minute), &MachineView{Machines: []Machine{inspected}}, false, "no SANs"},

		{"serving within the Machine's addresses", serving, at(time.Minute), &MachineView{Machines: []Machine{linked}}, true, "within Machine ocp4-worker-0-abcde's addresses"},
		{"serving before the node link", serving, at(time.Minute), &MachineView{Machines: []Machine{inspected}}, false, "no Machine has node ref worker-0"},
		{"serving naming the FQDN", with(serving, func(r *req) { r.dns = []string{node, "worker-0.ocp4.example.com"} }), at(time.Minute), &MachineView{Machines: []Machine{linked}},
			false, "DNS name 'worker-0.ocp4.example.com' not in machine names: worker-0 worker-0"},
		{"serving with a foreign IP", with(serving, func(r *req) { r.ips = []string{"10.0.0.1"} }), at(time.Minute), &MachineView{Machines: []Machine{linked}}, false, "IP address '10.0.0.1' not in machine addresses: 192.168.126.110"},
		{"serving for another node", with(serving, func(r *req) { r.user = NodeUserPrefix + "worker-1" }), at(time.Minute), &MachineView{Machines: []Machine{linked}}, false, "another node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := build(t, tc.r)
			c.CreationTimestamp = tc.created
			ok, why := Decide(c, exp, tc.view)
			if ok != tc.approve || !strings.Contains(why, tc.reason) {
				t.Errorf("Decide = %v, %q; want %v with %q", ok, why, tc.approve, tc.reason)
			}
		})
	}
}
