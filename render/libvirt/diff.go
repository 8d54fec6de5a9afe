package libvirt

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// Libvirt rewrites what it is given: net-dumpxml reorders <host> and <srv>, turns a prefix into
// a netmask or back, adds a UUID, a MAC, default attributes and live state (ports, aliases,
// PCI addresses). Comparing bytes would report drift on every probe, so these functions
// compare only the fields labbuild sets, as sets where order carries no meaning
// (../shared/notes/real-tools.md, "Round trips").

// DiffOptions tunes a comparison to what a driver can report.
type DiffOptions struct {
	// IgnoreDnsmasqOptions skips <dnsmasq:options>, which libvirt's test driver drops.
	IgnoreDnsmasqOptions bool
}

// NetworkDiff returns one line per difference between the desired network want and got (as
// libvirt reports it), "field: want X, got Y"; empty when they match.
// The fixed fields come first, then the records NetworkChanges edits in place.
func NetworkDiff(want, got *libvirtxml.Network, o DiffOptions) []string {
	d := networkFixedDiff(want, got, o)
	d.set("dhcp host", dhcpHosts(want), dhcpHosts(got))
	d.set("dns host", dnsHosts(want), dnsHosts(got))
	d.set("dns srv", dnsSRVs(want), dnsSRVs(got))
	return d
}

// networkFixedDiff compares the fields only a new network can change (virNetworkUpdate has no
// section for them): name, forward mode, bridge, MTU, domain, address, DHCP ranges, dnsmasq
// options.
func networkFixedDiff(want, got *libvirtxml.Network, o DiffOptions) diffs {
	var d diffs
	d.eq("name", want.Name, got.Name)
	d.eq("forward mode", fwdMode(want), fwdMode(got))
	d.eq("bridge", bridgeName(want), bridgeName(got))
	d.eq("mtu", mtuOf(want), mtuOf(got))
	d.eq("domain", domainOf(want), domainOf(got))
	d.eq("ip", ipOf(want), ipOf(got))
	d.set("dhcp range", dhcpRanges(want), dhcpRanges(got))
	if !o.IgnoreDnsmasqOptions {
		d.set("dnsmasq option", dnsmasqOpts(want), dnsmasqOpts(got))
	}
	return d
}

// PoolDiff compares the fields Pool sets.
func PoolDiff(want, got *libvirtxml.StoragePool) []string {
	var d diffs
	d.eq("name", want.Name, got.Name)
	d.eq("type", want.Type, got.Type)
	var wp, gp string
	if want.Target != nil {
		wp = want.Target.Path
	}
	if got.Target != nil {
		gp = got.Target.Path
	}
	d.eq("path", wp, gp)
	return d
}

// VolumeDiff compares the fields Volume sets: capacity in bytes, format, backing file.
func VolumeDiff(want, got *libvirtxml.StorageVolume) []string {
	var d diffs
	d.eq("name", want.Name, got.Name)
	d.eq("capacity", bytesOf(want.Capacity), bytesOf(got.Capacity))
	d.eq("format", volFormat(want), volFormat(got))
	d.eq("backing file", backing(want), backing(got))
	return d
}

// DomainDiff compares the fields Domain sets. Fields libvirt fills in (machine type, UUID,
// controllers, addresses) are not compared.
func DomainDiff(want, got *libvirtxml.Domain) []string {
	var d diffs
	d.eq("name", want.Name, got.Name)
	d.eq("type", want.Type, got.Type)
	d.eq("vcpus", vcpus(want), vcpus(got))
	d.eq("memory", memKiB(want.Memory), memKiB(got.Memory))
	d.eq("kernel", osField(want, func(o *libvirtxml.DomainOS) string { return o.Kernel }), osField(got, func(o *libvirtxml.DomainOS) string { return o.Kernel }))
	d.eq("initrd", osField(want, func(o *libvirtxml.DomainOS) string { return o.Initrd }), osField(got, func(o *libvirtxml.DomainOS) string { return o.Initrd }))
	d.eq("boot", bootOrder(want), bootOrder(got))
	d.set("disk", disks(want), disks(got))
	d.set("nic", nics(want), nics(got))
	d.set("fw_cfg", fwcfg(want), fwcfg(got))
	return d
}

// DomainNeedsReplace reports whether the differences are in what a domain is made of (its
// disks, NICs or type) rather than in its size: a size change is an Update (redefine; takes
// effect at the next boot), the rest a Replace.
func DomainNeedsReplace(diff []string) bool {
	for _, l := range diff {
		if !strings.HasPrefix(l, "vcpus:") && !strings.HasPrefix(l, "memory:") {
			return true
		}
	}
	return false
}

type diffs []string

func (d *diffs) eq(field, want, got string) {
	if want != got {
		*d = append(*d, fmt.Sprintf("%s: want %q, got %q", field, want, got))
	}
}

func (d *diffs) set(field string, want, got []string) {
	sort.Strings(want)
	sort.Strings(got)
	for _, w := range want {
		if _, ok := slices.BinarySearch(got, w); !ok {
			*d = append(*d, fmt.Sprintf("%s: missing %s", field, w))
		}
	}
	for _, g := range got {
		if _, ok := slices.BinarySearch(want, g); !ok {
			*d = append(*d, fmt.Sprintf("%s: unexpected %s", field, g))
		}
	}
}

func fwdMode(n *libvirtxml.Network) string {
	if n.Forward == nil {
		return ""
	}
	return n.Forward.Mode
}

func bridgeName(n *libvirtxml.Network) string {
	if n.Bridge == nil {
		return ""
	}
	return n.Bridge.Name
}

// mtuOf is the network's <mtu size>, "" when it sets none (libvirt's default).
func mtuOf(n *libvirtxml.Network) string {
	if n.MTU == nil || n.MTU.Size == 0 {
		return ""
	}
	return strconv.FormatUint(uint64(n.MTU.Size), 10)
}

func domainOf(n *libvirtxml.Network) string {
	if n.Domain == nil {
		return ""
	}
	return n.Domain.Name + " localOnly=" + n.Domain.LocalOnly
}

// ipOf returns "address/prefix" whether libvirt stored a prefix or a netmask.
func ipOf(n *libvirtxml.Network) string {
	var out []string
	for _, ip := range n.IPs {
		bits := int(ip.Prefix)
		if ip.Netmask != "" {
			if m, err := netip.ParseAddr(ip.Netmask); err == nil {
				b := m.As4()
				bits = 0
				for _, x := range b {
					for ; x&0x80 != 0; x <<= 1 {
						bits++
					}
				}
			}
		}
		out = append(out, ip.Address+"/"+strconv.Itoa(bits))
	}
	return strings.Join(out, ",")
}

func dhcpRanges(n *libvirtxml.Network) []string {
	var out []string
	for _, ip := range n.IPs {
		if ip.DHCP != nil {
			for _, r := range ip.DHCP.Ranges {
				out = append(out, r.Start+"-"+r.End)
			}
		}
	}
	return out
}

func dhcpHosts(n *libvirtxml.Network) []string {
	var out []string
	for _, ip := range n.IPs {
		if ip.DHCP != nil {
			for _, h := range ip.DHCP.Hosts {
				out = append(out, strings.ToLower(h.MAC)+" "+h.Name+" "+h.IP)
			}
		}
	}
	return out
}

func dnsHosts(n *libvirtxml.Network) []string {
	if n.DNS == nil {
		return nil
	}
	var out []string
	for _, h := range n.DNS.Host {
		for _, hn := range h.Hostnames {
			out = append(out, h.IP+" "+hn.Hostname)
		}
	}
	return out
}

func dnsSRVs(n *libvirtxml.Network) []string {
	if n.DNS == nil {
		return nil
	}
	var out []string
	for _, s := range n.DNS.SRVs {
		out = append(out, fmt.Sprintf("_%s._%s.%s %s:%d priority=%d weight=%d", s.Service, s.Protocol, s.Domain, s.Target, s.Port, s.Priority, s.Weight))
	}
	return out
}

func dnsmasqOpts(n *libvirtxml.Network) []string {
	if n.DnsmasqOptions == nil {
		return nil
	}
	var out []string
	for _, o := range n.DnsmasqOptions.Option {
		out = append(out, o.Value)
	}
	return out
}

func bytesOf(s *libvirtxml.StorageVolumeSize) string {
	if s == nil {
		return ""
	}
	mult := map[string]uint64{"": 1, "b": 1, "bytes": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}[strings.ToLower(s.Unit)]
	if mult == 0 {
		return strconv.FormatUint(s.Value, 10) + " " + s.Unit
	}
	return strconv.FormatUint(s.Value*mult, 10)
}

func volFormat(v *libvirtxml.StorageVolume) string {
	if v.Target == nil || v.Target.Format == nil {
		return ""
	}
	return v.Target.Format.Type
}

func backing(v *libvirtxml.StorageVolume) string {
	if v.BackingStore == nil {
		return ""
	}
	return v.BackingStore.Path
}

func vcpus(d *libvirtxml.Domain) string {
	if d.VCPU == nil {
		return ""
	}
	return strconv.FormatUint(uint64(d.VCPU.Value), 10)
}

// memKiB normalizes a domain memory size to KiB, the unit libvirt reports.
func memKiB(m *libvirtxml.DomainMemory) string {
	if m == nil {
		return ""
	}
	mult := map[string]uint64{"": 1, "k": 1, "kib": 1, "m": 1 << 10, "mib": 1 << 10, "g": 1 << 20, "gib": 1 << 20, "b": 0, "bytes": 0}
	u, ok := mult[strings.ToLower(m.Unit)]
	if !ok {
		return fmt.Sprintf("%d %s", m.Value, m.Unit)
	}
	if u == 0 {
		return strconv.FormatUint(uint64(m.Value)/1024, 10) + " KiB"
	}
	return strconv.FormatUint(uint64(m.Value)*u, 10) + " KiB"
}

func osField(d *libvirtxml.Domain, f func(*libvirtxml.DomainOS) string) string {
	if d.OS == nil {
		return ""
	}
	return f(d.OS)
}

func bootOrder(d *libvirtxml.Domain) string {
	if d.OS == nil {
		return ""
	}
	var out []string
	for _, b := range d.OS.BootDevices {
		out = append(out, b.Dev)
	}
	return strings.Join(out, ",")
}

func disks(d *libvirtxml.Domain) []string {
	if d.Devices == nil {
		return nil
	}
	var out []string
	for _, k := range d.Devices.Disks {
		var src, dev string
		if k.Source != nil && k.Source.File != nil {
			src = k.Source.File.File
		}
		if k.Target != nil {
			dev = k.Target.Dev + "/" + k.Target.Bus
		}
		out = append(out, k.Device+" "+dev+" "+src)
	}
	return out
}

func nics(d *libvirtxml.Domain) []string {
	if d.Devices == nil {
		return nil
	}
	var out []string
	for _, i := range d.Devices.Interfaces {
		var mac, net, model string
		if i.MAC != nil {
			mac = strings.ToLower(i.MAC.Address)
		}
		if i.Source != nil && i.Source.Network != nil {
			net = i.Source.Network.Network
		}
		if i.Model != nil {
			model = i.Model.Type
		}
		out = append(out, "network="+net+" mac="+mac+" model="+model)
	}
	return out
}

func fwcfg(d *libvirtxml.Domain) []string {
	var out []string
	for _, s := range d.SysInfo {
		if s.FWCfg != nil {
			for _, e := range s.FWCfg.Entry {
				out = append(out, e.Name+"="+e.File+e.Value)
			}
		}
	}
	return out
}
