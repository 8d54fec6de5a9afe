package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// Host is one libvirt host of a lab spread over several (lab.yaml's `hosts:`). The first host
// is the lab's home: the libvirt network with DNS and DHCP, the host load balancer, host/dns and
// host/firewall live there, and its URI is libvirt.uri. Every other host gets an isolated bridge
// of the same name, joined to the first host's by VXLAN (targets/vxlan.go, docs/multi-host.md).
type Host struct {
	// Name names the host in nodes[].host and in target names (libvirt/pool/<host>, vxlan/<host>).
	Name string `json:"name"`
	// URI is the host's libvirt connection URI. The first host's is libvirt.uri (empty means
	// that); another host's needs a way in for the VXLAN device, which libvirt cannot make:
	// qemu+ssh:// (or libssh, libssh2), whose user labbuild also runs ip(8) as over ssh.
	URI string `json:"uri,omitempty"`
	// Underlay is the host's address on the network that joins the hosts (an IPv4 address of
	// one of its interfaces): the VXLAN tunnel's endpoint. labbuild never touches that
	// interface; the tunnel rides its address.
	Underlay string `json:"underlay"`
}

// VXLANConfig is lab.yaml's `vxlan:` section: the tunnel that joins the hosts' bridges into
// one L2 for the machine network. Absent on a one-host lab.
type VXLANConfig struct {
	// VNI is the VXLAN network identifier (1-16777215): labs whose hosts share an underlay need
	// distinct VNIs, or their machine networks become one L2.
	VNI int `json:"vni"`
	// Port is the UDP destination port (DefaultVXLANPort, the IANA port of RFC 7348).
	Port int `json:"port"`
	// UnderlayMTU is the MTU of the hosts' underlay interfaces, in bytes (DefaultUnderlayMTU):
	// the machine network's MTU is this minus VXLANOverhead. host/preflight checks every host's
	// underlay interface against it.
	UnderlayMTU int `json:"underlayMTU"`
}

// Defaults of the vxlan section.
const (
	DefaultVXLANPort   = 4789
	DefaultUnderlayMTU = 1500
)

// VXLANOverhead is what VXLAN over IPv4 adds to a frame of the machine network, in bytes:
// outer IPv4 20 + UDP 8 + VXLAN 8 + the inner Ethernet header 14 (RFC 7348 §5). The machine
// network's MTU is the underlay's minus this.
const VXLANOverhead = 50

// GeneveOverhead is what OVN-Kubernetes' Geneve tunnel takes from the machine network's MTU
// for the pod network, in bytes: the cluster-network-operator's figure (release-4.18
// pkg/network/ovn_kubernetes.go getOVNEncapOverhead, geneveOverhead = 100, no IPsec).
const GeneveOverhead = 100

// MinOVNMTU is the least pod-network MTU labbuild accepts: IPv6's minimum link MTU (RFC 8200
// §5), which OVN-Kubernetes' dual-stack pods need; an underlay below MinOVNMTU + GeneveOverhead
// + VXLANOverhead (1430) is refused.
const MinOVNMTU = 1280

// UnmarshalJSON decodes the section over its defaults, rejecting unknown fields.
func (v *VXLANConfig) UnmarshalJSON(b []byte) error {
	type plain VXLANConfig
	p := plain{Port: DefaultVXLANPort, UnderlayMTU: DefaultUnderlayMTU}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return fmt.Errorf("vxlan: %w", err)
	}
	*v = VXLANConfig(p)
	return nil
}

// MultiHost reports whether the lab spreads its nodes over two or more libvirt hosts. A lab
// with no `hosts:` (or one) is a one-host lab, built exactly as before the field existed.
func (c *Config) MultiHost() bool { return len(c.Hosts) > 1 }

// HostByName returns the host named name, or false.
func (c *Config) HostByName(name string) (Host, bool) {
	for _, h := range c.Hosts {
		if h.Name == name {
			return c.withURI(h), true
		}
	}
	return Host{}, false
}

// withURI fills the first host's empty URI with libvirt.uri.
func (c *Config) withURI(h Host) Host {
	if h.URI == "" && len(c.Hosts) > 0 && h.Name == c.Hosts[0].Name {
		h.URI = c.Libvirt.URI
	}
	return h
}

// FirstHost is the lab's home host (hosts[0]); on a one-host lab, a host named "" at libvirt.uri.
func (c *Config) FirstHost() Host {
	if len(c.Hosts) == 0 {
		return Host{URI: c.Libvirt.URI}
	}
	return c.withURI(c.Hosts[0])
}

// HostOf returns the host node n is placed on: nodes[].host, else the first host.
func (c *Config) HostOf(n Node) Host {
	if n.Host != "" {
		if h, ok := c.HostByName(n.Host); ok {
			return h
		}
	}
	return c.FirstHost()
}

// NodeURI returns the libvirt URI of the host node name is placed on (libvirt.uri on a
// one-host lab, and for a node that is not declared).
func (c *Config) NodeURI(name string) string { return c.HostOf(c.Node(name)).URI }

// IsFirstHost reports whether h is the lab's home host.
func (c *Config) IsFirstHost(h Host) bool { return h.Name == c.FirstHost().Name }

// NodesOn returns the nodes placed on host h, in config order.
func (c *Config) NodesOn(h Host) []Node {
	var out []Node
	for _, n := range c.Nodes {
		if c.HostOf(n).Name == h.Name {
			out = append(out, n)
		}
	}
	return out
}

// MachineMTU is the machine network's MTU on a multi-host lab: the underlay's minus
// VXLANOverhead (1450 on a 1500-byte underlay); 0 on a one-host lab, whose nodes keep their
// interfaces' own MTU.
func (c *Config) MachineMTU() int {
	if !c.MultiHost() || c.VXLAN == nil {
		return 0
	}
	return c.VXLAN.UnderlayMTU - VXLANOverhead
}

// OVNMTU is OVN-Kubernetes' pod-network MTU on a multi-host lab: MachineMTU minus
// GeneveOverhead (1350 on a 1500-byte underlay); 0 on a one-host lab (the network operator
// then derives it from the node's interface, as always).
func (c *Config) OVNMTU() int {
	if m := c.MachineMTU(); m > 0 {
		return m - GeneveOverhead
	}
	return 0
}

// SSHTransport reports whether a libvirt URI reaches its daemon over ssh (qemu+ssh, libssh,
// libssh2): then its user and host are also a way in for the commands libvirt cannot run
// (ip link add … type vxlan).
func SSHTransport(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil {
		return false
	}
	_, tr, _ := strings.Cut(u.Scheme, "+")
	return tr == "ssh" || tr == "libssh" || tr == "libssh2"
}

// validateHosts checks hosts:, nodes[].host and vxlan: (machine is the machine network when
// it parsed; used are the addresses of the nodes, VIPs and gateway).
func (c *Config) validateHosts(bad func(field, msg, fix string), machine netip.Prefix, okM bool) {
	if len(c.Hosts) == 0 {
		for _, n := range c.Nodes {
			if n.Host != "" {
				bad(NodePath(n.Name, NodeHost), fmt.Sprintf("names host %q, but the lab has no hosts: list", n.Host),
					"list the libvirt hosts under hosts: (name, uri, underlay), or remove the node's host: field")
			}
		}
		if c.VXLAN != nil {
			bad(VXLAN, "is set, but the lab has no hosts: list", "remove vxlan:, or list two or more hosts under hosts:")
		}
		return
	}
	names := map[string]bool{}
	underlays := map[netip.Addr]string{}
	uris := map[string]string{}
	for i, h := range c.Hosts {
		path := func(f HostField) string {
			if h.Name == "" {
				return fmt.Sprintf("hosts[%d].%s", i, f)
			}
			return HostPath(h.Name, f)
		}
		switch {
		case !dnsLabel.MatchString(h.Name) || len(h.Name) > 12:
			bad(path(HostName), fmt.Sprintf("%q is not a DNS label of at most 12 bytes", h.Name), "use lowercase letters, digits and '-' (it names targets: vxlan/<host>)")
		case names[h.Name]:
			bad(path(HostName), "duplicate host name", "give every host its own name")
		}
		names[h.Name] = true
		uri := c.withURI(h).URI
		if i == 0 && h.URI != "" && h.URI != c.Libvirt.URI {
			bad(path(HostURI), fmt.Sprintf("%q differs from libvirt.uri %q: the first host is where libvirt.uri points (the lab network, its DNS and the load balancer live there)", h.URI, c.Libvirt.URI),
				"leave the first host's uri out (it is libvirt.uri), or set libvirt.uri to it")
		}
		if i > 0 {
			if msg := checkLibvirtURI(uri); msg != "" {
				bad(path(HostURI), msg, "e.g. qemu+ssh://root@host2/system")
			} else if !SSHTransport(uri) {
				bad(path(HostURI), fmt.Sprintf("%q reaches libvirtd without ssh; libvirt cannot create the VXLAN device, so labbuild runs ip(8) on the host as the URI's ssh user", uri),
					"use qemu+ssh://user@host/system (or qemu+libssh2://), whose user may run ip link and bridge fdb (root, or CAP_NET_ADMIN)")
			}
		}
		if other, dup := uris[uri]; dup && uri != "" {
			bad(path(HostURI), fmt.Sprintf("%q is also %s", uri, other), "give every host its own libvirt URI")
		} else {
			uris[uri] = path(HostURI)
		}
		a, err := netip.ParseAddr(h.Underlay)
		switch {
		case err != nil || !a.Is4():
			bad(path(HostUnderlay), fmt.Sprintf("%q is not an IPv4 address", h.Underlay), "the host's address on the network that joins the hosts, e.g. 10.0.0.11")
		case okM && machine.Contains(a):
			bad(path(HostUnderlay), fmt.Sprintf("%s is inside network.machineNetwork %s, which the tunnel carries", a, machine), "use the host's own address on the network between the hosts")
		case underlays[a] != "":
			bad(path(HostUnderlay), fmt.Sprintf("%s is also %s", a, underlays[a]), "give every host its own underlay address")
		default:
			underlays[a] = path(HostUnderlay)
		}
	}
	for _, n := range c.Nodes {
		if n.Host != "" && !names[n.Host] {
			bad(NodePath(n.Name, NodeHost), fmt.Sprintf("names host %q, which hosts: does not list", n.Host), "use one of the names under hosts:")
		}
	}
	if !c.MultiHost() {
		if c.VXLAN != nil {
			bad(VXLAN, "is set, but hosts: lists one host", "remove vxlan:, or list a second host")
		}
		return
	}
	if c.Platform == PlatformBaremetal {
		bad(Platform, "baremetal with several hosts: the BMC drives the domains at libvirt.uri only", "place every node on one host, or use platform: none")
	}
	if c.Network.ExternalBridge != "" {
		bad(NetworkExternalBridge, "with several hosts: the external bridge would join the first host's bridge only", "remove network.externalBridge, or place every node on one host")
	}
	v := c.VXLAN
	if v == nil {
		bad(VXLAN, "is missing: a lab on several hosts joins their bridges with VXLAN", "add vxlan: {vni: N} with a VNI (1-16777215) no other lab on these hosts uses")
		return
	}
	if v.VNI < 1 || v.VNI > 1<<24-1 {
		bad(VXLANVNI, fmt.Sprintf("%d is not a VNI", v.VNI), "1-16777215, distinct from every other lab whose hosts share this underlay")
	}
	if v.Port < 1 || v.Port > 65535 {
		bad(VXLANPort, fmt.Sprintf("%d is not a port", v.Port), fmt.Sprintf("1-65535 (default %d)", DefaultVXLANPort))
	}
	if min := MinOVNMTU + GeneveOverhead + VXLANOverhead; v.UnderlayMTU < min || v.UnderlayMTU > 9216 {
		bad(VXLANUnderlayMTU, fmt.Sprintf("%d: the machine network would get %d (−%d for VXLAN) and OVN-Kubernetes %d (−%d for Geneve)",
			v.UnderlayMTU, v.UnderlayMTU-VXLANOverhead, VXLANOverhead, v.UnderlayMTU-VXLANOverhead-GeneveOverhead, GeneveOverhead),
			fmt.Sprintf("set the underlay interfaces' MTU, between %d (so OVN gets %d) and 9216", min, MinOVNMTU))
	}
}
