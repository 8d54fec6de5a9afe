// Package libvirt renders the lab's libvirt objects — the NAT network with its DNS and DHCP,
// the dir storage pool, the per-node qcow2 volumes and the domains — as libvirt XML through
// libvirt.org/go/libvirtxml, and compares desired objects with what libvirt reports.
//
// It is pure: values in, XML bytes out; no connection, no clock, no randomness. The facts come
// from openshift-the-hard-way stage 02 (create-network.sh, create-pool.sh, create-vms.sh; see
// ../shared/spec/stages.md §2.1–2.5) with two corrections: the wildcard *.apps record, which
// libvirt's <host> cannot express, is a dnsmasq option; and the DHCP reservations pin each
// node's address to a deterministic MAC.
package libvirt

import (
	"crypto/sha256"
	"encoding/xml"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// Node roles, as lab.Config spells them.
const (
	RoleBootstrap = "bootstrap"
	RoleMaster    = "master"
	RoleWorker    = "worker"
)

// Node is one lab machine as the network sees it: its DNS name (without the domain), role,
// IPv4 address and MAC ("52:54:00:xx:xx:xx"; see MAC).
type Node struct {
	Name string
	Role string
	IP   string
	MAC  string
}

// NetworkSpec is everything the lab network is made of.
type NetworkSpec struct {
	// Name is the libvirt network name (libvirt.network, "ocp4").
	Name string
	// Domain is the cluster domain, <cluster.name>.<cluster.baseDomain>; dnsmasq is
	// authoritative for it (localOnly) so unknown names get NXDOMAIN, not a forwarded query.
	Domain string
	// MachineNetwork is the CIDR of the lab network ("192.168.126.0/24"); its prefix is the
	// bridge's netmask.
	MachineNetwork string
	// Gateway is the bridge's address, also the DNS server the nodes use.
	Gateway string
	// APIVIP answers api.<domain> and api-int.<domain>; IngressVIP answers *.apps.<domain>.
	APIVIP, IngressVIP string
	// DHCPStart and DHCPEnd bound the dynamic range (the live ISO uses it before its
	// reservation applies); both must lie inside MachineNetwork.
	DHCPStart, DHCPEnd string
	// Nodes in config order. Masters, in that order, also get etcd-<i> aliases and SRV records.
	Nodes []Node
	// MTU, when not 0, is the bridge's and every tap's MTU (<mtu size>): on a lab spread over
	// several hosts, the VXLAN tunnel's capacity (lab.Config.MachineMTU); 0 leaves libvirt's
	// default, so a one-host lab's network is as before.
	MTU int
}

// Bridge returns the Linux bridge name, "virbr-<network>" as create-network.sh names it. Linux
// limits interface names to 15 bytes (IFNAMSIZ-1), which bounds the network name to 9.
func Bridge(network string) string { return "virbr-" + network }

// MAC returns the deterministic MAC of node in cluster: QEMU's locally administered OUI
// 52:54:00 followed by the first three bytes of SHA-256("<cluster>/<node>"). The same cluster
// and node always get the same address (so DHCP reservations survive rebuilds), and two
// clusters side by side get different ones.
func MAC(cluster, node string) string {
	h := sha256.Sum256([]byte(cluster + "/" + node))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", h[0], h[1], h[2])
}

// UUID returns a node's libvirt domain UUID derived from the cluster and node names (an RFC
// 9562 version 8, name-based UUID over SHA-256), so that platform: baremetal's BMC addresses
// (…/redfish/v1/Systems/<uuid>) are known before the domain exists and stay across rebuilds.
func UUID(cluster, node string) string {
	h := sha256.Sum256([]byte("labbuild-domain/" + cluster + "/" + node))
	h[6] = h[6]&0x0f | 0x80 // version 8
	h[8] = h[8]&0x3f | 0x80 // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// EtcdSRVService and EtcdSRVPort are the legacy etcd discovery record
// _etcd-server-ssl._tcp.<domain> → etcd-<i>.<domain>:2380 that create-network.sh adds (4.18's
// etcd no longer reads it; kept because the stage-02 verify script checks it).
const (
	EtcdSRVService = "etcd-server-ssl"
	EtcdSRVPort    = 2380
)

func parseMAC(s string) ([6]byte, error) {
	var m [6]byte
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return m, fmt.Errorf("want six colon-separated hex bytes")
	}
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 16, 8)
		if err != nil || len(p) != 2 {
			return m, fmt.Errorf("want six colon-separated hex bytes")
		}
		m[i] = byte(v)
	}
	if m[0]&1 != 0 {
		return m, fmt.Errorf("multicast MAC")
	}
	return m, nil
}

// Network returns the libvirt network object of s: NAT forward, bridge virbr-<name> (STP on,
// delay 0), local domain, DNS hosts for api/api-int (APIVIP), every node (masters also
// etcd-<i>), the etcd SRV records, the wildcard address=/apps.<domain>/<IngressVIP> as a
// dnsmasq option, and DHCP with one reservation per node.
//
// The values come from the validated lab config (package lab checks the addresses, the DHCP
// range, the bridge name, the MACs) and are trusted; only a machine network that does not
// parse, which would leave no netmask, is an error.
func Network(s NetworkSpec) (*libvirtxml.Network, error) {
	pfx, err := netip.ParsePrefix(s.MachineNetwork)
	if err != nil {
		return nil, fmt.Errorf("machine network %q: %v", s.MachineNetwork, err)
	}
	pfx = pfx.Masked()
	d := s.Domain
	n := &libvirtxml.Network{
		Name: s.Name,
		Forward: &libvirtxml.NetworkForward{
			Mode: "nat",
			NAT:  &libvirtxml.NetworkForwardNAT{Ports: []libvirtxml.NetworkForwardNATPort{{Start: 1024, End: 65535}}},
		},
		Bridge: &libvirtxml.NetworkBridge{Name: Bridge(s.Name), STP: "on", Delay: "0"},
		MTU:    mtu(s.MTU),
		Domain: &libvirtxml.NetworkDomain{Name: d, LocalOnly: "yes"},
		DNS: &libvirtxml.NetworkDNS{
			Host: []libvirtxml.NetworkDNSHost{{IP: s.APIVIP, Hostnames: hostnames("api."+d, "api-int."+d)}},
		},
		IPs: []libvirtxml.NetworkIP{{
			Address: s.Gateway,
			Prefix:  uint(pfx.Bits()),
			DHCP: &libvirtxml.NetworkDHCP{
				Ranges: []libvirtxml.NetworkDHCPRange{{Start: s.DHCPStart, End: s.DHCPEnd}},
			},
		}},
		// dnsmasq's address=/apps.<dom>/IP answers apps.<dom> and every name under it: the
		// *.apps wildcard the router's routes need (stage 02 had no wildcard, so test.apps
		// failed to resolve).
		DnsmasqOptions: &libvirtxml.NetworkDnsmasqOptions{Option: []libvirtxml.NetworkDnsmasqOption{
			{Value: "address=/apps." + d + "/" + s.IngressVIP},
		}},
	}
	etcd := 0
	for _, node := range s.Nodes {
		names := []string{node.Name + "." + d}
		if node.Role == RoleMaster {
			names = append(names, "etcd-"+strconv.Itoa(etcd)+"."+d)
			n.DNS.SRVs = append(n.DNS.SRVs, libvirtxml.NetworkDNSSRV{
				Service: EtcdSRVService, Protocol: "tcp", Domain: d,
				Target: "etcd-" + strconv.Itoa(etcd) + "." + d, Port: EtcdSRVPort, Weight: 10,
			})
			etcd++
		}
		n.DNS.Host = append(n.DNS.Host, libvirtxml.NetworkDNSHost{IP: node.IP, Hostnames: hostnames(names...)})
		n.IPs[0].DHCP.Hosts = append(n.IPs[0].DHCP.Hosts, libvirtxml.NetworkDHCPHost{
			MAC: strings.ToLower(node.MAC), Name: node.Name, IP: node.IP,
		})
	}
	return n, nil
}

// mtu is a network's <mtu size> element, nil for 0.
func mtu(size int) *libvirtxml.NetworkMTU {
	if size == 0 {
		return nil
	}
	return &libvirtxml.NetworkMTU{Size: uint(size)}
}

// IsolatedNetwork returns the network a lab's other host gets (a lab on several hosts): a
// bridge virbr-<name> of the same name as the first host's network, with no forward, no
// address, no DNS and no DHCP — libvirt makes the bridge and runs no dnsmasq. The first host's
// network serves DNS and DHCP to every node through the VXLAN device labbuild puts on this
// bridge. The domains name the network as on the first host, so their XML is the same.
func IsolatedNetwork(name string, mtuSize int) *libvirtxml.Network {
	return &libvirtxml.Network{Name: name, Bridge: &libvirtxml.NetworkBridge{Name: Bridge(name), STP: "on", Delay: "0"}, MTU: mtu(mtuSize)}
}

// IsolatedNetworkXML returns IsolatedNetwork as indented XML with a trailing newline.
func IsolatedNetworkXML(name string, mtuSize int) ([]byte, error) {
	return marshal(IsolatedNetwork(name, mtuSize))
}

func hostnames(names ...string) []libvirtxml.NetworkDNSHostHostname {
	out := make([]libvirtxml.NetworkDNSHostHostname, len(names))
	for i, h := range names {
		out[i] = libvirtxml.NetworkDNSHostHostname{Hostname: h}
	}
	return out
}

// NetworkXML returns Network(s) as indented XML with a trailing newline.
func NetworkXML(s NetworkSpec) ([]byte, error) {
	n, err := Network(s)
	if err != nil {
		return nil, err
	}
	return marshal(n)
}

// marshal renders any libvirtxml object as two-space indented XML ending in a newline.
func marshal(v any) ([]byte, error) {
	b, err := xml.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render libvirt XML: %w", err)
	}
	return append(b, '\n'), nil
}
