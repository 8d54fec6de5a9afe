package csr

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/labbuild/labbuild/targets/kube"
)

// The Machine-based approval of OpenShift's cluster-machine-approver (release-4.18
// pkg/controller/csr_check.go), for the lab's nodes that a Machine provisions (NodeIdentity
// ByMachine: platform baremetal's workers). Such a node boots the MCO's pointer config, gets
// no /etc/hostname and registers under the short name DHCP gives it, and its kubelet
// bootstraps with the node-bootstrapper service account's token (the in-cluster
// machine-config-server's kubeconfig). The approver then knows the node only through its
// Machine, whose status.addresses the baremetal actuator fills from the host's inspection (an
// InternalIP per NIC, the host name as Hostname and InternalDNS).

// Machines are machine.openshift.io/v1beta1 Machines; MachineNamespace is where the
// machine-api keeps them.
var Machines = kube.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machines"}

// MachineNamespace is the namespace of the cluster's Machines.
const MachineNamespace = "openshift-machine-api"

// The approver's time window for a node client CSR around its Machine's creation
// (csr_check.go maxMachineClockSkew, maxMachineDelta).
const (
	maxMachineClockSkew = 10 * time.Second
	maxMachineDelta     = 2 * time.Hour
)

// Machine is what the approver reads of a Machine: its creation time, status.addresses and
// status.nodeRef.
type Machine struct {
	kube.ObjectMeta `json:"metadata"`
	Status          struct {
		Addresses []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"addresses,omitempty"`
		NodeRef *struct {
			Name string `json:"name"`
		} `json:"nodeRef,omitempty"`
	} `json:"status"`
}

// MachineView is what the machine approver reads besides a CSR: the Machines, and the names of
// the Nodes that exist.
type MachineView struct {
	Machines []Machine
	Nodes    []string
}

// ReadMachines lists the Machines and Nodes when expected has a node ByMachine, and returns
// nil otherwise (no read: a lab without Machines has no machine-api).
func ReadMachines(ctx context.Context, dyn kube.Interface, expected map[string]NodeIdentity) (*MachineView, error) {
	need := false
	for _, id := range expected {
		need = need || id.ByMachine
	}
	if !need {
		return nil, nil
	}
	ms, err := kube.List[Machine](ctx, dyn, Machines, MachineNamespace, "")
	if err != nil && !kube.IsNotFound(err) { // no Machine CRD yet: no Machine
		return nil, err
	}
	nodes, err := kube.List[kube.Node](ctx, dyn, kube.Nodes, "", "")
	if err != nil {
		return nil, err
	}
	v := &MachineView{Machines: ms}
	for _, n := range nodes {
		v.Nodes = append(v.Nodes, n.Name)
	}
	return v, nil
}

// machineByInternalDNS is machinehandler FindMatchingMachineFromInternalDNS: the first Machine
// with an InternalDNS address equal to node (case-insensitive, a trailing dot dropped).
func (v *MachineView) machineByInternalDNS(node string) *Machine {
	for i, m := range v.Machines {
		for _, a := range m.Status.Addresses {
			if a.Type == "InternalDNS" && strings.EqualFold(strings.TrimSuffix(a.Address, "."), node) {
				return &v.Machines[i]
			}
		}
	}
	return nil
}

// machineByNodeRef is machinehandler FindMatchingMachineFromNodeRef.
func (v *MachineView) machineByNodeRef(node string) *Machine {
	for i, m := range v.Machines {
		if m.Status.NodeRef != nil && m.Status.NodeRef.Name == node {
			return &v.Machines[i]
		}
	}
	return nil
}

// decideMachineClient is csr_check.go authorizeNodeClientCSR, for node id: the requestor is
// the node-bootstrapper service account with exactly its groups (isReqFromNodeBootstrapper),
// no Node of the name exists yet, a Machine has it as an InternalDNS address and no nodeRef,
// and the CSR was created within (machine creation − 10 s, machine creation + 2 h); with the
// subject, SAN and usage checks every client CSR gets.
func decideMachineClient(csr *CertificateSigningRequest, req *x509.CertificateRequest, id NodeIdentity, v *MachineView) (bool, string) {
	got := slices.Clone(csr.Spec.Groups)
	slices.Sort(got)
	if csr.Spec.Username != NodeBootstrapperSA || !slices.Equal(slices.Compact(got), nodeBootstrapperSAGroups) {
		return false, fmt.Sprintf("node %s is a Machine's: its client CSR must come from %s with groups %v (isReqFromNodeBootstrapper), not %q %v",
			id.Name, NodeBootstrapperSA, nodeBootstrapperSAGroups, csr.Spec.Username, csr.Spec.Groups)
	}
	name, why := nodeFromSubject(req)
	if why != "" {
		return false, why
	}
	if len(req.DNSNames)+len(req.IPAddresses)+len(req.EmailAddresses)+len(req.URIs) > 0 {
		return false, "a kubelet client certificate request must carry no SANs"
	}
	if why := checkUsages(csr.Spec.Usages, UsageDigitalSignature, UsageClientAuth); why != "" {
		return false, why
	}
	if v == nil {
		return false, fmt.Sprintf("node %s is a Machine's: its Machines were not read", name)
	}
	if slices.Contains(v.Nodes, name) {
		return false, fmt.Sprintf("node %s already exists, cannot approve (authorizeNodeClientCSR)", name)
	}
	m := v.machineByInternalDNS(name)
	if m == nil {
		return false, fmt.Sprintf("no Machine in %s has InternalDNS %s (the machine approver finds none either)", MachineNamespace, name)
	}
	if m.Status.NodeRef != nil {
		return false, fmt.Sprintf("Machine %s for node %s already has node ref %s, cannot approve", m.Name, name, m.Status.NodeRef.Name)
	}
	made, err1 := time.Parse(time.RFC3339, m.CreationTimestamp)
	asked, err2 := time.Parse(time.RFC3339, csr.CreationTimestamp)
	if err1 != nil || err2 != nil {
		return false, fmt.Sprintf("Machine %s or the CSR has no creation time (%q, %q)", m.Name, m.CreationTimestamp, csr.CreationTimestamp)
	}
	if start, end := made.Add(-maxMachineClockSkew), made.Add(maxMachineDelta); !asked.After(start) || !asked.Before(end) {
		return false, fmt.Sprintf("CSR creation time %s not in range (%s, %s) of Machine %s", asked.Format(time.RFC3339), start.Format(time.RFC3339), end.Format(time.RFC3339), m.Name)
	}
	return true, fmt.Sprintf("client certificate for node %s requested by %s, for Machine %s (as cluster-machine-approver authorizeNodeClientCSR)", name, csr.Spec.Username, m.Name)
}

// decideMachineServing is csr_check.go validateCSRContents and authorizeServingCertWithMachine
// for node id: the node itself asks, and every DNS SAN is an InternalDNS, ExternalDNS or
// Hostname address and every IP SAN an InternalIP or ExternalIP of the Machine whose
// status.nodeRef is the node.
func decideMachineServing(csr *CertificateSigningRequest, req *x509.CertificateRequest, id NodeIdentity, v *MachineView) (bool, string) {
	user := csr.Spec.Username
	if !strings.HasPrefix(user, NodeUserPrefix) || !slices.Contains(csr.Spec.Groups, NodesGroup) || !slices.Contains(csr.Spec.Groups, "system:authenticated") {
		return false, fmt.Sprintf("requestor %q is not a node (%s<name> in groups %s and system:authenticated)", user, NodeUserPrefix, NodesGroup)
	}
	name, why := nodeFromSubject(req)
	if why != "" {
		return false, why
	}
	if user != NodeUserPrefix+name {
		return false, fmt.Sprintf("requestor %q asks for a certificate of another node, %q", user, name)
	}
	if len(req.EmailAddresses)+len(req.URIs) > 0 {
		return false, "a kubelet serving certificate request must carry no e-mail or URI SANs"
	}
	if why := checkUsages(csr.Spec.Usages, UsageDigitalSignature, UsageServerAuth); why != "" {
		return false, why
	}
	if v == nil {
		return false, fmt.Sprintf("node %s is a Machine's: its Machines were not read", name)
	}
	m := v.machineByNodeRef(name)
	if m == nil {
		return false, fmt.Sprintf("no Machine has node ref %s yet (the node link sets it once the Node exists)", name)
	}
	addrs := func(types ...string) []string {
		var out []string
		for _, a := range m.Status.Addresses {
			if slices.Contains(types, a.Type) {
				out = append(out, a.Address)
			}
		}
		return out
	}
	dns, ips := addrs("InternalDNS", "ExternalDNS", "Hostname"), addrs("InternalIP", "ExternalIP")
	for _, d := range req.DNSNames {
		if d != "" && !slices.ContainsFunc(dns, func(a string) bool { return strings.EqualFold(d, strings.TrimSuffix(a, ".")) }) {
			return false, fmt.Sprintf("DNS name '%s' not in machine names: %s", d, strings.Join(dns, " "))
		}
	}
	for _, ip := range req.IPAddresses {
		if !slices.Contains(ips, ip.String()) {
			return false, fmt.Sprintf("IP address '%s' not in machine addresses: %s", ip, strings.Join(ips, " "))
		}
	}
	return true, fmt.Sprintf("serving certificate for node %s requested by the node, within Machine %s's addresses (as cluster-machine-approver authorizeServingCertWithMachine)", name, m.Name)
}
