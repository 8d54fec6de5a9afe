package libvirt

import (
	"encoding/xml"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// Network sections libvirt can change on a running network (virNetworkUpdate's
// VIR_NETWORK_SECTION_*; virsh net-update's section names). Everything else in the network —
// name, bridge, forward mode, domain, address and prefix, DHCP range, dnsmasq options — is
// fixed while it runs: changing it means a new network, and a new bridge under every VM.
const (
	SectionDNSHost  = "dns-host"
	SectionDNSSRV   = "dns-srv"
	SectionDHCPHost = "ip-dhcp-host"
)

// Network edit commands (VIR_NETWORK_UPDATE_COMMAND_DELETE and _ADD_LAST). libvirt 9.0 refuses
// "modify" for dns-host and dns-srv (network_conf.c: "DNS HOST records cannot be modified, only
// added or deleted"), so a changed record is a delete and an add; deletes come first so the
// add never meets the record it replaces (libvirt refuses an add that matches an existing
// IP, name or MAC).
const (
	EditDelete = "delete"
	EditAdd    = "add-last"
)

// NetworkEdit is one in-place change of a network through virNetworkUpdate: a command on one
// element of one section, given as the element's XML.
type NetworkEdit struct {
	Command string // EditDelete | EditAdd
	Section string // SectionDNSHost | SectionDNSSRV | SectionDHCPHost
	XML     string // the element: <host ip=…><hostname>…</host>, <srv …/>, <host mac=… name=… ip=…/>
	Key     string // the element in words, for plans and logs ("198.18.0.23 worker-2.lbt.example.test")
}

// String is the edit as a plan line shows it: "add dns-host 198.18.0.23 worker-2.lbt.example.test".
func (e NetworkEdit) String() string {
	verb := "add"
	if e.Command == EditDelete {
		verb = "delete"
	}
	return verb + " " + e.Section + " " + e.Key
}

// NetworkChanges compares the desired network want with got (as libvirt reports it) and splits
// the differences: edits libvirt applies to the running network (DNS hosts, SRV records, DHCP
// reservations) in the order to apply them, and fixed, one line per field that differs
// ("ip: want …, got …") which only a new network can change. Both empty: nothing to do.
func NetworkChanges(want, got *libvirtxml.Network, o DiffOptions) (edits []NetworkEdit, fixed []string) {
	fixed = networkFixedDiff(want, got, o)

	var dels, adds []NetworkEdit
	sec := func(section string, w, g map[string]string) {
		for _, k := range sortedKeys(g) {
			if _, ok := w[k]; !ok {
				dels = append(dels, NetworkEdit{Command: EditDelete, Section: section, XML: g[k], Key: k})
			}
		}
		for _, k := range sortedKeys(w) {
			if _, ok := g[k]; !ok {
				adds = append(adds, NetworkEdit{Command: EditAdd, Section: section, XML: w[k], Key: k})
			}
		}
	}
	sec(SectionDNSHost, dnsHostElems(want), dnsHostElems(got))
	sec(SectionDNSSRV, srvElems(want), srvElems(got))
	sec(SectionDHCPHost, dhcpHostElems(want), dhcpHostElems(got))
	return append(dels, adds...), fixed
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func elemXML(v any) string {
	b, err := xml.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err)) // libvirtxml types always marshal
	}
	return string(b)
}

// dnsHostElems keys each <host> by its IP and hostnames (sorted: libvirt keeps its own order).
func dnsHostElems(n *libvirtxml.Network) map[string]string {
	out := map[string]string{}
	if n.DNS == nil {
		return out
	}
	for _, h := range n.DNS.Host {
		var names []string
		for _, hn := range h.Hostnames {
			names = append(names, hn.Hostname)
		}
		sort.Strings(names)
		e := libvirtxml.NetworkDNSHost{IP: h.IP, Hostnames: h.Hostnames}
		out[h.IP+" "+strings.Join(names, ",")] = wrap("host", elemXML(e))
	}
	return out
}

func srvElems(n *libvirtxml.Network) map[string]string {
	out := map[string]string{}
	if n.DNS == nil {
		return out
	}
	for _, s := range n.DNS.SRVs {
		k := fmt.Sprintf("_%s._%s.%s %s:%d priority=%d weight=%d", s.Service, s.Protocol, s.Domain, s.Target, s.Port, s.Priority, s.Weight)
		out[k] = wrap("srv", elemXML(s))
	}
	return out
}

func dhcpHostElems(n *libvirtxml.Network) map[string]string {
	out := map[string]string{}
	for _, ip := range n.IPs {
		if ip.DHCP == nil {
			continue
		}
		for _, h := range ip.DHCP.Hosts {
			e := libvirtxml.NetworkDHCPHost{MAC: strings.ToLower(h.MAC), Name: h.Name, IP: h.IP}
			out[e.MAC+" "+e.Name+" "+e.IP] = wrap("host", elemXML(e))
		}
	}
	return out
}

// wrap renames the marshalled element: libvirtxml's section types carry the Go type name, not
// the element name libvirt parses.
func wrap(elem, x string) string {
	open, rest, ok := strings.Cut(x, " ")
	if !ok {
		open, rest, _ = strings.Cut(x, ">")
		rest = ">" + rest
	} else {
		rest = " " + rest
	}
	name := strings.TrimPrefix(open, "<")
	name = strings.TrimSuffix(name, ">")
	if name == elem {
		return x
	}
	rest = strings.TrimSuffix(rest, "</"+name+">")
	if strings.HasSuffix(x, "</"+name+">") {
		rest += "</" + elem + ">"
	}
	return "<" + elem + rest
}

// NetworkBase returns Network(s) without its records — DNS hosts, SRV records and DHCP
// reservations — which change while the network runs (NetworkChanges' edits): the part of
// the network a new bridge is needed to change. s.APIVIP and s.Nodes may be empty.
func NetworkBase(s NetworkSpec) (*libvirtxml.Network, error) {
	s.Nodes = nil
	n, err := Network(s)
	if err != nil {
		return nil, err
	}
	n.DNS = nil
	for i := range n.IPs {
		if n.IPs[i].DHCP != nil {
			n.IPs[i].DHCP.Hosts = nil
		}
	}
	return n, nil
}

// NetworkCollision returns why want cannot live next to other, another network on the same
// libvirt host (another lab): the same bridge, or address ranges that overlap (then the
// gateways, VIPs and DHCP ranges may collide too); "" when they can. The reason names the
// lab.yaml field to change.
func NetworkCollision(want, other *libvirtxml.Network) string {
	if b := bridgeName(want); b != "" && b == bridgeName(other) {
		return fmt.Sprintf("libvirt.network: bridge %s is already network %s's (choose another network name)", b, other.Name)
	}
	for _, w := range want.IPs {
		wp, err := prefixOf(w)
		if err != nil {
			continue
		}
		for _, o := range other.IPs {
			if op, err := prefixOf(o); err == nil && wp.Overlaps(op) {
				return fmt.Sprintf("network.machineNetwork %s overlaps %s of libvirt network %s (another lab on this host? choose a disjoint subnet)", wp, op, other.Name)
			}
		}
	}
	return ""
}

func prefixOf(ip libvirtxml.NetworkIP) (netip.Prefix, error) {
	n := &libvirtxml.Network{IPs: []libvirtxml.NetworkIP{ip}}
	p, err := netip.ParsePrefix(ipOf(n))
	if err != nil {
		return p, err
	}
	return p.Masked(), nil
}
