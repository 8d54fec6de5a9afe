package lab

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Minimum memory per role in MiB, from the OpenShift 4.18 installation docs' minimum resource
// requirements (bootstrap and control plane 16 GB, compute 8 GB).
var minMemoryMiB = map[string]int{RoleBootstrap: 16384, RoleMaster: 16384, RoleWorker: 8192}

// ifNameRE matches a Linux network interface name (IFNAMSIZ 16 with the NUL; no '/', ':' or space).
var ifNameRE = lazyRegexp(`^[A-Za-z0-9_.-]{1,15}$`)

// ConfigErrors is every problem Validate found, in field order.
type ConfigErrors []*ConfigError

func (es ConfigErrors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

var (
	dnsLabel = lazyRegexp(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	macRE    = lazyRegexp(`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`)
	netName  = lazyRegexp(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)
	// versionRE is x.y.z with an optional pre-release ("4.18.0", "4.18.0-rc.1",
	// "4.18.0-0.nightly-2025-01-01-000000"), the shape of release-metadata's "version".
	versionRE = lazyRegexp(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
)

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// Validate checks the config and returns ConfigErrors naming each bad field with a fix, or
// nil. file names the config in messages. It checks what every target relies on; the content
// of the pull secret and SSH key is checked by the targets that read them (a missing pull
// secret only matters to those).
func (c *Config) Validate(file string) error {
	var errs ConfigErrors
	bad := func(field, msg, fix string) {
		errs = append(errs, &ConfigError{File: file, Line: c.Line(field), Field: field, Msg: msg, Fix: fix})
	}
	if !dnsLabel.MatchString(c.Cluster.Name) {
		bad(ClusterName, fmt.Sprintf("%q is not a DNS label", c.Cluster.Name), "use lowercase letters, digits and '-', at most 63")
	}
	if c.Cluster.BaseDomain == "" || strings.HasPrefix(c.Cluster.BaseDomain, ".") || strings.HasSuffix(c.Cluster.BaseDomain, ".") {
		bad(ClusterBaseDomain, fmt.Sprintf("%q is not a domain", c.Cluster.BaseDomain), "e.g. example.com")
	} else {
		for _, l := range strings.Split(c.Cluster.BaseDomain, ".") {
			if !dnsLabel.MatchString(l) {
				bad(ClusterBaseDomain, fmt.Sprintf("label %q is not a DNS label", l), "use lowercase letters, digits and '-'")
				break
			}
		}
	}
	switch c.Cluster.FeatureSet {
	case "", "Default", "TechPreviewNoUpgrade", "DevPreviewNoUpgrade", "CustomNoUpgrade", "OKD":
	default:
		bad(ClusterFeatureSet, fmt.Sprintf("unknown feature set %q", c.Cluster.FeatureSet), "Default, TechPreviewNoUpgrade, DevPreviewNoUpgrade, CustomNoUpgrade, or OKD (OKD payloads only)")
	}
	switch c.Cluster.Profile {
	case "", "self-managed-high-availability", "single-node-developer", "ibm-cloud-managed", "hypershift":
	default:
		bad(ClusterProfile, fmt.Sprintf("%q is not a cluster profile a release payload knows", c.Cluster.Profile),
			"self-managed-high-availability (the payload's include.release.openshift.io/<profile> annotations also know single-node-developer, ibm-cloud-managed, hypershift)")
	}
	c.validateRelease(bad)

	prefix := func(field, v string) (netip.Prefix, bool) {
		p, err := netip.ParsePrefix(v)
		if err != nil || !p.Addr().Is4() {
			bad(field, fmt.Sprintf("%q is not an IPv4 CIDR", v), "write it as a.b.c.d/n")
			return netip.Prefix{}, false
		}
		if p.Masked() != p {
			bad(field, fmt.Sprintf("%q has host bits set", v), "use "+p.Masked().String())
			return netip.Prefix{}, false
		}
		return p, true
	}
	n := c.Network
	machine, okM := prefix(NetworkMachineNetwork, n.MachineNetwork)
	cluster, okC := prefix(NetworkClusterNetwork, n.ClusterNetwork)
	service, okS := prefix(NetworkServiceNetwork, n.ServiceNetwork)
	overlap := func(a, b netip.Prefix) bool { return a.Overlaps(b) }
	if okM && okC && overlap(machine, cluster) {
		bad(NetworkClusterNetwork, fmt.Sprintf("%s overlaps network.machineNetwork %s", cluster, machine), "choose disjoint networks (default 10.128.0.0/14)")
	}
	if okM && okS && overlap(machine, service) {
		bad(NetworkServiceNetwork, fmt.Sprintf("%s overlaps network.machineNetwork %s", service, machine), "choose disjoint networks (default 172.30.0.0/16)")
	}
	if okC && okS && overlap(cluster, service) {
		bad(NetworkServiceNetwork, fmt.Sprintf("%s overlaps network.clusterNetwork %s", service, cluster), "choose disjoint networks")
	}
	if okC && (n.HostPrefix < cluster.Bits() || n.HostPrefix > 30) {
		bad(NetworkHostPrefix, fmt.Sprintf("%d must lie between the cluster network's prefix /%d and 30", n.HostPrefix, cluster.Bits()), "the default is 23")
	}
	// addr checks the address field holds (an IPv4 address; inMachine: a host of the machine
	// network; not another node's or VIP's) and returns it, parsed once, for the DHCP range
	// check below: invalid (the zero Addr) when it is not an IPv4 address.
	used := map[netip.Addr]string{}
	addr := func(field, v string, inMachine bool) netip.Addr {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			bad(field, fmt.Sprintf("%q is not an IPv4 address", v), "write it as a.b.c.d")
			return netip.Addr{}
		}
		if inMachine && okM {
			if !machine.Contains(a) {
				bad(field, fmt.Sprintf("%s is outside network.machineNetwork %s", a, machine), "use an address inside "+machine.String())
				return a
			}
			if a == machine.Addr() || a == lastAddr(machine) {
				bad(field, fmt.Sprintf("%s is the network or broadcast address of %s", a, machine), "use a host address")
				return a
			}
		}
		if other, dup := used[a]; dup && field != NetworkDNS {
			bad(field, fmt.Sprintf("%s is also %s", a, other), "give every node and VIP its own address")
			return a
		}
		if field != NetworkDNS {
			used[a] = field
		}
		return a
	}
	gateway := addr(NetworkGateway, n.Gateway, true)
	dns := addr(NetworkDNS, n.DNS, false)
	apiVIP := addr(NetworkAPIVIP, n.APIVIP, true)
	ingressVIP := addr(NetworkIngressVIP, n.IngressVIP, true)
	var dStart, dEnd netip.Addr
	if a, err := netip.ParseAddr(n.DHCPStart); err == nil && okM && machine.Contains(a) {
		dStart = a
	} else {
		bad(NetworkDHCPStart, fmt.Sprintf("%q is not an address inside network.machineNetwork", n.DHCPStart), "e.g. the .200 of the machine network")
	}
	if a, err := netip.ParseAddr(n.DHCPEnd); err == nil && okM && machine.Contains(a) {
		dEnd = a
	} else {
		bad(NetworkDHCPEnd, fmt.Sprintf("%q is not an address inside network.machineNetwork", n.DHCPEnd), "e.g. the .254 of the machine network")
	}
	if dStart.IsValid() && dEnd.IsValid() && dEnd.Less(dStart) {
		bad(NetworkDHCPEnd, fmt.Sprintf("%s is before network.dhcpStart %s", dEnd, dStart), "swap them")
	}
	// inDHCP reports whether a (from addr) lies in the DHCP range.
	inDHCP := func(a netip.Addr) bool {
		return a.IsValid() && dStart.IsValid() && dEnd.IsValid() && !dEnd.Less(dStart) && !a.Less(dStart) && !dEnd.Less(a)
	}
	// A VIP (or the gateway) inside the DHCP range could be leased to a machine (the libvirt
	// network's dnsmasq hands out that range): keepalived, or the host haproxy, would then
	// fight it for the address. openshift-install's baremetal validation asks the same of its VIPs.
	for _, f := range []struct {
		field string
		a     netip.Addr
	}{{NetworkGateway, gateway}, {NetworkAPIVIP, apiVIP}, {NetworkIngressVIP, ingressVIP}} {
		if inDHCP(f.a) {
			bad(f.field, fmt.Sprintf("%s lies in the DHCP range %s-%s, so dnsmasq may lease it to a node", f.a, dStart, dEnd),
				"use a static address outside network.dhcpStart-network.dhcpEnd")
		}
	}
	switch n.LoadBalancer {
	case LoadBalancerHost:
		// The lab's records (api, api-int, *.apps, the nodes) live in libvirt's dnsmasq,
		// which listens on the network's address: a resolver elsewhere does not have them.
		if dns.IsValid() && okM && !machine.Contains(dns) {
			bad(NetworkDNS, fmt.Sprintf("%s is outside network.machineNetwork %s, but the lab's records (api, api-int, *.apps) live in libvirt's dnsmasq", dns, machine),
				"use the libvirt network's address, network.gateway ("+n.Gateway+")")
		}
		// With a remote daemon the lab bridge, its dnsmasq and the VMs are on another machine;
		// the host-side parts run here. Said now rather than by `ip addr` failing mid-build.
		if h := LibvirtRemoteHost(c.Libvirt.URI); h != "" {
			bad(NetworkLoadBalancer, fmt.Sprintf("host (the default) cannot work with the remote libvirt.uri %q: the lab bridge %s and its DNS are on %s, "+
				"while labbuild's haproxy (the VIPs on that bridge), host/dns (this machine's resolver to the lab's dnsmasq) and host/firewall (this machine's rules for that bridge) act on this machine", c.Libvirt.URI, "virbr-"+c.Libvirt.Network, h),
				"set network.loadBalancer: in-cluster (keepalived on the nodes holds the VIPs; host/dns and host/firewall are left out, so point your resolver at "+n.DNS+" through "+h+" yourself), or run labbuild on "+h+" with libvirt.uri: qemu:///system")
		}
	case LoadBalancerInCluster:
	default:
		bad(NetworkLoadBalancer, fmt.Sprintf("unknown load balancer %q", n.LoadBalancer),
			"host (labbuild's haproxy on the lab bridge) or in-cluster (keepalived VIPs and haproxy/coredns static pods, platform baremetal)")
	}

	if b := n.ExternalBridge; b != "" {
		if !ifNameRE.MatchString(b) {
			bad(NetworkExternalBridge, fmt.Sprintf("%q is not a Linux interface name", b), "use at most 15 letters, digits, '-', '_' or '.', such as baremetal")
		} else if b == "virbr-"+c.Libvirt.Network {
			bad(NetworkExternalBridge, fmt.Sprintf("%q is the lab network's own bridge", b), "name another bridge (baremetal), or leave it unset")
		}
	}
	switch c.Platform {
	case "", PlatformNone:
	case PlatformBaremetal:
		// Metal3 provisions workers on the machine network, where only keepalived can move
		// the VIPs between nodes; the installer's baremetal platform has no external load
		// balancer either (pkg/types/baremetal/validation: apiVIPs, ingressVIPs required).
		if n.LoadBalancer != LoadBalancerInCluster {
			bad(NetworkLoadBalancer, fmt.Sprintf("platform: baremetal needs network.loadBalancer: in-cluster, not %q", n.LoadBalancer),
				"set network.loadBalancer: in-cluster (keepalived VIPs on the nodes), or drop platform: baremetal")
		}
	default:
		bad(Platform, fmt.Sprintf("unknown platform %q", c.Platform),
			"none (labbuild provisions every VM) or baremetal (VMs behind labbuild's virtual Redfish BMC, workers as BareMetalHosts)")
	}

	names := map[string]bool{}
	roles := map[string]int{}
	macs := map[string]string{}
	for i, nd := range c.Nodes {
		// path names the node's field f by name (NodePath), or by index while it has none.
		path := func(f NodeField) string {
			if nd.Name == "" {
				return fmt.Sprintf("nodes[%d].%s", i, f)
			}
			return NodePath(nd.Name, f)
		}
		if !dnsLabel.MatchString(nd.Name) {
			bad(path(NodeName), fmt.Sprintf("%q is not a DNS label", nd.Name), "use lowercase letters, digits and '-'")
		} else if names[nd.Name] {
			bad(path(NodeName), "duplicate node name", "give every node its own name")
		}
		names[nd.Name] = true
		switch nd.Role {
		case RoleBootstrap, RoleMaster, RoleWorker:
			roles[nd.Role]++
		default:
			bad(path(NodeRole), fmt.Sprintf("unknown role %q", nd.Role), "bootstrap, master or worker")
		}
		if a := addr(path(NodeIP), nd.IP, true); inDHCP(a) {
			bad(path(NodeIP), fmt.Sprintf("%s lies in the DHCP range %s-%s", a, dStart, dEnd), "use a static address outside the DHCP range")
		}
		if nd.MAC != "" {
			switch hw, err := net.ParseMAC(nd.MAC); {
			case !macRE.MatchString(nd.MAC) || err != nil:
				bad(path(NodeMAC), fmt.Sprintf("%q is not a MAC address", nd.MAC), "write it as 52:54:00:xx:xx:xx in lowercase")
			case hw[0]&1 == 1:
				bad(path(NodeMAC), fmt.Sprintf("%s is a multicast address (the first octet is odd)", nd.MAC), "use a unicast address such as 52:54:00:xx:xx:xx (QEMU's prefix)")
			case nd.MAC == "00:00:00:00:00:00":
				bad(path(NodeMAC), "the all-zero address", "use 52:54:00:xx:xx:xx, or remove it to derive one")
			case macs[nd.MAC] != "":
				bad(path(NodeMAC), fmt.Sprintf("%s is also %s", nd.MAC, macs[nd.MAC]), "give every node its own MAC, or remove it to derive one")
			default:
				macs[nd.MAC] = path(NodeMAC)
			}
		}
		sz := c.SizeOf(nd)
		min := minMemoryMiB[nd.Role]
		if c.Baremetal() && nd.Role == RoleMaster {
			// Seed 001's floor for platform baremetal (12 GiB, its default), below the docs'
			// 16 GiB: its author's measured minimum for an IPI bare-metal control plane.
			min = baremetalSizes[RoleMaster].MemoryMiB
		}
		// own names the field that sets f: the node's own, or its role's size.
		own := func(f NodeField, set bool) string {
			if set {
				return path(f)
			}
			return SizePath(nd.Role, f)
		}
		if sz.MemoryMiB < min {
			bad(own(NodeMemoryMiB, nd.MemoryMiB != 0), fmt.Sprintf("%d MiB is below the %s minimum of %d MiB", sz.MemoryMiB, nd.Role, min), fmt.Sprintf("set at least %d", min))
		}
		if sz.VCPUs < 2 {
			bad(own(NodeVCPUs, nd.VCPUs != 0), fmt.Sprintf("%d vCPUs is below 2", sz.VCPUs), "set at least 2 (OpenShift asks 4 for control plane nodes)")
		}
		if sz.DiskGiB < 20 {
			bad(own(NodeDiskGiB, nd.DiskGiB != 0), fmt.Sprintf("%d GiB is below 20", sz.DiskGiB), "OpenShift asks 100 GiB")
		}
	}
	if roles[RoleBootstrap] != 1 {
		bad(Nodes, fmt.Sprintf("%d bootstrap nodes", roles[RoleBootstrap]), "declare exactly one node with role bootstrap")
	}
	if roles[RoleMaster] != 1 && roles[RoleMaster] != 3 {
		bad(Nodes, fmt.Sprintf("%d masters", roles[RoleMaster]), "declare 1 or 3 nodes with role master (etcd needs an odd count)")
	}
	switch br := "virbr-" + c.Libvirt.Network; {
	case c.Libvirt.Network == "":
		bad(LibvirtNetwork, "is empty", "name the libvirt network, e.g. the cluster name")
	case !netName.MatchString(c.Libvirt.Network):
		bad(LibvirtNetwork, fmt.Sprintf("%q has characters a bridge name cannot carry", c.Libvirt.Network), "use letters, digits, '-' and '_'")
	case len(br) > 15:
		// Linux interface names are at most 15 bytes (IFNAMSIZ 16 with the NUL).
		bad(LibvirtNetwork, fmt.Sprintf("bridge %q is %d bytes; Linux allows 15", br, len(br)), fmt.Sprintf("use a network name of at most 9 bytes (e.g. %q)", trunc(c.Libvirt.Network, 9)))
	}
	if msg := checkLibvirtURI(c.Libvirt.URI); msg != "" {
		bad(LibvirtURI, msg, "e.g. qemu:///system, qemu+ssh://user@host/system, qemu+unix:///system?socket=/path or test:///default")
	}
	if c.Libvirt.Pool == "" {
		bad(LibvirtPool, "is empty", "name the libvirt storage pool")
	}
	switch c.Libvirt.DomainType {
	case "", "kvm", "qemu", "test":
	default:
		bad(LibvirtDomainType, fmt.Sprintf("%q", c.Libvirt.DomainType), "use kvm, qemu (software emulation) or test (libvirt's test driver)")
	}
	if !strings.HasPrefix(c.Libvirt.PoolPath, "/") {
		bad(LibvirtPoolPath, fmt.Sprintf("%q is not an absolute path", c.Libvirt.PoolPath), "e.g. /var/lib/libvirt/images/ocp4")
	}
	switch c.PKI.KeyAlgorithm {
	case "RSA-2048", "RSA-4096", "ECDSA-P256":
	default:
		bad(PKIKeyAlgorithm, fmt.Sprintf("unknown algorithm %q", c.PKI.KeyAlgorithm), "RSA-2048, RSA-4096 or ECDSA-P256")
	}
	switch {
	case c.PKI.CADays < 1 || c.PKI.CADays > 36500:
		bad(PKICADays, fmt.Sprintf("%d days", c.PKI.CADays), "between 1 and 36500 (default 3650)")
	case c.PKI.CertDays < 1:
		bad(PKICertDays, fmt.Sprintf("%d days", c.PKI.CertDays), "at least 1 (default 365)")
	case c.PKI.CertDays > c.PKI.CADays:
		bad(PKICertDays, fmt.Sprintf("%d days outlives pki.caDays %d", c.PKI.CertDays, c.PKI.CADays), "certificates may not outlive their CA: lower it or raise pki.caDays")
	}
	if c.PKI.BootstrapHours < 1 || (c.PKI.CADays >= 1 && c.PKI.CADays <= 36500 && c.PKI.BootstrapHours > 24*c.PKI.CADays) {
		bad(PKIBootstrapHours, fmt.Sprintf("%d", c.PKI.BootstrapHours), "at least 1 hour (openshift-install uses 24), and within the CA's life")
	}
	if c.PKI.RenewPercent < 1 || c.PKI.RenewPercent > 90 {
		bad(PKIRenewPercent, fmt.Sprintf("%d", c.PKI.RenewPercent), "a percentage between 1 and 90 (default 25)")
	}
	switch u, err := url.Parse(c.RHCOS.ImageURL); {
	case c.RHCOS.ImageURL == "" && c.RHCOS.ImageSHA256 != "":
		bad(RHCOSImageURL, "is empty while rhcos.imageSHA256 is set", "name the image the checksum belongs to, or clear both")
	case c.RHCOS.ImageURL == "":
	case err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file"):
		bad(RHCOSImageURL, fmt.Sprintf("%q is not an http(s):// or file:// URL", c.RHCOS.ImageURL), "use the qemu qcow2.gz URL of the CoreOS stream metadata")
	case !rhcosSHA256.MatchString(c.RHCOS.ImageSHA256):
		bad(RHCOSImageSHA256, fmt.Sprintf("%q is not 64 hex digits", c.RHCOS.ImageSHA256), "copy the image's sha256 from the CoreOS stream metadata (no unverified downloads)")
	}
	switch sp := c.HAProxy.StatsPort; {
	case sp < 1 || sp > 65535:
		bad(HAProxyStatsPort, fmt.Sprintf("%d is not a port", sp), "1-65535")
	case sp == 6443 || sp == 22623 || sp == 80 || sp == 443:
		// The stats page binds network.apiVIP, where the api (6443), machine-config-server
		// (22623) frontends bind; 80 and 443 are the ingress frontends' ports.
		bad(HAProxyStatsPort, fmt.Sprintf("%d is a port a load-balancer frontend binds (api 6443, machine-config 22623, ingress 80/443)", sp), "use another port, e.g. 9000")
	}
	c.validateMirror(bad)
	for _, w := range []struct {
		field string
		v     int
	}{{WaitBootstrapMinutes, c.Wait.BootstrapMinutes}, {WaitMastersMinutes, c.Wait.MastersMinutes}, {WaitEtcdMinutes, c.Wait.EtcdMinutes},
		{WaitPivotMinutes, c.Wait.PivotMinutes}, {WaitWorkersMinutes, c.Wait.WorkersMinutes}, {WaitConvergeMinutes, c.Wait.ConvergeMinutes}} {
		if w.v < 1 || w.v > 7*24*60 {
			bad(w.field, fmt.Sprintf("%d minutes", w.v), "a positive number of minutes, at most a week (the defaults are 10-60)")
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// Warnings returns what Validate accepts but the user should know, one sentence each, for the
// CLI to print on stderr. A config that fails Validate may warn too.
func (c *Config) Warnings() []string {
	var w []string
	if c.InCluster() && len(c.NodesByRole(RoleMaster)) == 1 {
		w = append(w, "network.loadBalancer: in-cluster with 1 master: keepalived has no VRRP peer once the bootstrap is off, "+
			"so the API and ingress VIPs cannot fail over (they stay on master "+c.NodesByRole(RoleMaster)[0].Name+")")
	}
	return w
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	host := 32 - p.Bits()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v |= (1 << host) - 1
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// rhcosSHA256 matches a hex sha256 digest.
var rhcosSHA256 = lazyRegexp(`^[0-9a-f]{64}$`)

// validateRelease checks release.image, release.version and release.mirrors (their shape; an
// oci: mirror's directory is checked with the files, CheckFiles).
func (c *Config) validateRelease(bad func(field, msg, fix string)) {
	r := c.Release
	switch {
	case r.Image == "":
		bad(ReleaseImage, "is empty", "set the release payload pull spec, e.g. quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64")
	case strings.Contains(r.Image, "://"):
		bad(ReleaseImage, fmt.Sprintf("%q is a URL, not an image reference", r.Image), "drop the scheme: registry/repository:tag or registry/repository@sha256:<digest>")
	default:
		if _, err := name.ParseReference(r.Image, name.StrictValidation); err != nil {
			bad(ReleaseImage, fmt.Sprintf("%q is not an image reference (%v)", r.Image, err),
				"registry/repository:tag or registry/repository@sha256:<64 hex digits>, e.g. quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64")
		}
	}
	if r.Version != "" && !versionRE.MatchString(r.Version) {
		bad(ReleaseVersion, fmt.Sprintf("%q is not a version x.y.z", r.Version), "remove it (labbuild reads the version from the payload), or write the payload's, e.g. 4.22.0 (release-metadata \"version\")")
	}
	keys := make([]string, 0, len(r.Mirrors))
	for k := range r.Mirrors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		m := r.Mirrors[k]
		field := fmt.Sprintf("%s[%q]", ReleaseMirrors, k)
		if strings.Contains(k, "://") || strings.ContainsAny(k, "@") || k == "" {
			bad(field, fmt.Sprintf("key %q is not a repository", k), "name the source repository without scheme, tag or digest, e.g. quay.io/openshift-release-dev/ocp-release")
		} else if _, err := name.NewRepository(strings.TrimSuffix(k, "/"), name.StrictValidation); err != nil {
			bad(field, fmt.Sprintf("key %q is not a repository (%v)", k, err), "name the source repository without scheme, tag or digest, e.g. quay.io/openshift-release-dev/ocp-release")
		}
		switch dir, isOCI := strings.CutPrefix(m, "oci:"); {
		case strings.TrimSpace(m) == "":
			bad(field, "is empty", "name a mirror repository (registry.lab:5000/ocp/release) or an OCI layout (oci:/srv/mirror)")
		case isOCI && !filepath.IsAbs(dir):
			bad(field, fmt.Sprintf("%q: an OCI layout mirror needs an absolute path", m), "write oci:/absolute/path/to/layout")
		case isOCI:
		case strings.Contains(m, "://"):
			bad(field, fmt.Sprintf("%q is a URL, not a repository", redactMirror(m)), "drop the scheme: registry.lab:5000/ocp/release")
		default:
			if _, err := name.NewRepository(strings.TrimSuffix(m, "/"), name.StrictValidation); err != nil {
				msg := err.Error()
				if i := strings.LastIndexByte(m, '@'); i > 0 {
					msg = strings.ReplaceAll(msg, m[:i], "<redacted>") // the library echoes the authority
				}
				bad(field, fmt.Sprintf("%q is not a repository (%s)", redactMirror(m), msg), "name a mirror repository (registry.lab:5000/ocp/release) or an OCI layout (oci:/srv/mirror)")
			}
		}
	}
}

// checkLibvirtURI returns what is wrong with a libvirt connection URI, or "". The drivers are
// those labbuild drives (qemu, test); the transports those go-libvirt dials (connect_uri.go).
func checkLibvirtURI(s string) string {
	u, err := url.Parse(s)
	if s == "" || err != nil {
		return fmt.Sprintf("%q is not a URI", s)
	}
	driver, transport, _ := strings.Cut(u.Scheme, "+")
	switch driver {
	case "qemu", "test":
	default:
		return fmt.Sprintf("%q: driver %q is not qemu or test", s, driver)
	}
	switch transport {
	case "", "unix":
		if transport == "unix" && u.Host != "" {
			return fmt.Sprintf("%q: the unix transport takes no host", s)
		}
	case "ssh", "libssh", "libssh2", "tcp", "tls":
		if u.Host == "" {
			return fmt.Sprintf("%q: the %s transport needs a host", s, transport)
		}
	default:
		return fmt.Sprintf("%q: unknown transport %q", s, transport)
	}
	switch {
	case driver == "qemu" && u.Path != "/system" && u.Path != "/session":
		return fmt.Sprintf("%q: a qemu URI ends in /system or /session", s)
	case driver == "test" && !strings.HasPrefix(u.Path, "/"):
		return fmt.Sprintf("%q: a test URI is test:///default", s)
	}
	return ""
}

// redactMirror hides credentials a mirror value may carry (https://user:password@host/repo, or
// user:password@host/repo), so that an error about it never prints them.
func redactMirror(m string) string {
	i := strings.LastIndexByte(m, '@')
	if i < 0 {
		return m
	}
	start := 0
	if j := strings.Index(m, "://"); j >= 0 && j < i {
		start = j + 3
	}
	return m[:start] + "<redacted>" + m[i:]
}

// LibvirtRemoteHost returns the host a libvirt URI names ("lab1" for qemu+ssh://root@lab1/system),
// or "" for a local daemon (qemu:///system, qemu+unix:///system?socket=…): as virt.Conn.Remote
// decides, the daemon is then on another machine, with the lab bridge and the VMs.
func LibvirtRemoteHost(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
