package targets

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Minimum memory per role in MiB, from the OpenShift 4.18 installation docs' minimum resource
// requirements (bootstrap and control plane 16 GB, compute 8 GB).
var minMemoryMiB = map[string]int{RoleBootstrap: 16384, RoleMaster: 16384, RoleWorker: 8192}

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

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Validate checks the config and returns ConfigErrors naming each bad field with a fix, or
// nil. file names the config in messages. It checks what every target relies on; the content
// of the pull secret and SSH key is checked by the targets that read them (a missing pull
// secret only matters to those).
func (c *Config) Validate(file string) error {
	var errs ConfigErrors
	bad := func(field, msg, fix string) {
		errs = append(errs, &ConfigError{File: file, Field: field, Msg: msg, Fix: fix})
	}
	if !dnsLabel.MatchString(c.Cluster.Name) {
		bad("cluster.name", fmt.Sprintf("%q is not a DNS label", c.Cluster.Name), "use lowercase letters, digits and '-', at most 63")
	}
	if c.Cluster.BaseDomain == "" || strings.HasPrefix(c.Cluster.BaseDomain, ".") || strings.HasSuffix(c.Cluster.BaseDomain, ".") {
		bad("cluster.baseDomain", fmt.Sprintf("%q is not a domain", c.Cluster.BaseDomain), "e.g. example.com")
	} else {
		for _, l := range strings.Split(c.Cluster.BaseDomain, ".") {
			if !dnsLabel.MatchString(l) {
				bad("cluster.baseDomain", fmt.Sprintf("label %q is not a DNS label", l), "use lowercase letters, digits and '-'")
				break
			}
		}
	}
	switch c.Cluster.FeatureSet {
	case "", "Default", "TechPreviewNoUpgrade", "DevPreviewNoUpgrade", "CustomNoUpgrade":
	default:
		bad("cluster.featureSet", fmt.Sprintf("unknown feature set %q", c.Cluster.FeatureSet), "Default, TechPreviewNoUpgrade, DevPreviewNoUpgrade or CustomNoUpgrade")
	}
	if c.Release.Image == "" {
		bad("release.image", "is empty", "set the release payload pull spec, e.g. quay.io/openshift-release-dev/ocp-release:4.18.0-x86_64")
	}

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
	machine, okM := prefix("network.machineNetwork", n.MachineNetwork)
	cluster, okC := prefix("network.clusterNetwork", n.ClusterNetwork)
	service, okS := prefix("network.serviceNetwork", n.ServiceNetwork)
	overlap := func(a, b netip.Prefix) bool { return a.Overlaps(b) }
	if okM && okC && overlap(machine, cluster) {
		bad("network.clusterNetwork", fmt.Sprintf("%s overlaps network.machineNetwork %s", cluster, machine), "choose disjoint networks (default 10.128.0.0/14)")
	}
	if okM && okS && overlap(machine, service) {
		bad("network.serviceNetwork", fmt.Sprintf("%s overlaps network.machineNetwork %s", service, machine), "choose disjoint networks (default 172.30.0.0/16)")
	}
	if okC && okS && overlap(cluster, service) {
		bad("network.serviceNetwork", fmt.Sprintf("%s overlaps network.clusterNetwork %s", service, cluster), "choose disjoint networks")
	}
	if okC && (n.HostPrefix < cluster.Bits() || n.HostPrefix > 30) {
		bad("network.hostPrefix", fmt.Sprintf("%d must lie between the cluster network's prefix /%d and 30", n.HostPrefix, cluster.Bits()), "the default is 23")
	}
	used := map[netip.Addr]string{}
	addr := func(field, v string, inMachine bool) {
		a, err := netip.ParseAddr(v)
		if err != nil || !a.Is4() {
			bad(field, fmt.Sprintf("%q is not an IPv4 address", v), "write it as a.b.c.d")
			return
		}
		if inMachine && okM {
			if !machine.Contains(a) {
				bad(field, fmt.Sprintf("%s is outside network.machineNetwork %s", a, machine), "use an address inside "+machine.String())
				return
			}
			if a == machine.Addr() || a == lastAddr(machine) {
				bad(field, fmt.Sprintf("%s is the network or broadcast address of %s", a, machine), "use a host address")
				return
			}
		}
		if other, dup := used[a]; dup && field != "network.dns" {
			bad(field, fmt.Sprintf("%s is also %s", a, other), "give every node and VIP its own address")
			return
		}
		if field != "network.dns" {
			used[a] = field
		}
	}
	addr("network.gateway", n.Gateway, true)
	addr("network.dns", n.DNS, false)
	addr("network.apiVIP", n.APIVIP, true)
	addr("network.ingressVIP", n.IngressVIP, true)
	var dStart, dEnd netip.Addr
	if a, err := netip.ParseAddr(n.DHCPStart); err == nil && okM && machine.Contains(a) {
		dStart = a
	} else {
		bad("network.dhcpStart", fmt.Sprintf("%q is not an address inside network.machineNetwork", n.DHCPStart), "e.g. the .200 of the machine network")
	}
	if a, err := netip.ParseAddr(n.DHCPEnd); err == nil && okM && machine.Contains(a) {
		dEnd = a
	} else {
		bad("network.dhcpEnd", fmt.Sprintf("%q is not an address inside network.machineNetwork", n.DHCPEnd), "e.g. the .254 of the machine network")
	}
	if dStart.IsValid() && dEnd.IsValid() && dEnd.Less(dStart) {
		bad("network.dhcpEnd", fmt.Sprintf("%s is before network.dhcpStart %s", dEnd, dStart), "swap them")
	}
	// A VIP inside the DHCP range could be leased to a machine (the libvirt network's dnsmasq
	// hands out that range): keepalived, or the host haproxy, would then fight it for the
	// address. openshift-install's baremetal validation asks the same of its VIPs.
	for _, f := range []struct{ field, v string }{{"network.apiVIP", n.APIVIP}, {"network.ingressVIP", n.IngressVIP}} {
		if a, err := netip.ParseAddr(f.v); err == nil && dStart.IsValid() && dEnd.IsValid() && !a.Less(dStart) && !dEnd.Less(a) {
			bad(f.field, fmt.Sprintf("%s lies in the DHCP range %s-%s", a, dStart, dEnd), "use an address outside the DHCP range")
		}
	}
	switch n.LoadBalancer {
	case LoadBalancerHost, LoadBalancerInCluster:
	default:
		bad("network.loadBalancer", fmt.Sprintf("unknown load balancer %q", n.LoadBalancer),
			"host (labbuild's haproxy on the lab bridge) or in-cluster (keepalived VIPs and haproxy/coredns static pods, platform baremetal)")
	}

	names := map[string]bool{}
	roles := map[string]int{}
	for i, nd := range c.Nodes {
		field := fmt.Sprintf("nodes[%d]", i)
		if nd.Name != "" {
			field = "nodes." + nd.Name
		}
		if !dnsLabel.MatchString(nd.Name) {
			bad(field+".name", fmt.Sprintf("%q is not a DNS label", nd.Name), "use lowercase letters, digits and '-'")
		} else if names[nd.Name] {
			bad(field+".name", "duplicate node name", "give every node its own name")
		}
		names[nd.Name] = true
		switch nd.Role {
		case RoleBootstrap, RoleMaster, RoleWorker:
			roles[nd.Role]++
		default:
			bad(field+".role", fmt.Sprintf("unknown role %q", nd.Role), "bootstrap, master or worker")
		}
		addr(field+".ip", nd.IP, true)
		if a, err := netip.ParseAddr(nd.IP); err == nil && dStart.IsValid() && dEnd.IsValid() && !a.Less(dStart) && !dEnd.Less(a) {
			bad(field+".ip", fmt.Sprintf("%s lies in the DHCP range %s-%s", a, dStart, dEnd), "use a static address outside the DHCP range")
		}
		if nd.MAC != "" && !regexp.MustCompile(`^([0-9a-f]{2}:){5}[0-9a-f]{2}$`).MatchString(nd.MAC) {
			bad(field+".mac", fmt.Sprintf("%q is not a MAC address", nd.MAC), "write it as 52:54:00:xx:xx:xx in lowercase")
		}
		sz := c.SizeOf(nd)
		if min := minMemoryMiB[nd.Role]; sz.MemoryMiB < min {
			f := "sizes." + nd.Role + ".memoryMiB"
			if nd.MemoryMiB != 0 {
				f = field + ".memoryMiB"
			}
			bad(f, fmt.Sprintf("%d MiB is below the %s minimum of %d MiB", sz.MemoryMiB, nd.Role, min), fmt.Sprintf("set at least %d", min))
		}
		if sz.VCPUs < 2 {
			bad("sizes."+nd.Role+".vcpus", fmt.Sprintf("%d vCPUs is below 2", sz.VCPUs), "set at least 2 (OpenShift asks 4 for control plane nodes)")
		}
		if sz.DiskGiB < 20 {
			bad("sizes."+nd.Role+".diskGiB", fmt.Sprintf("%d GiB is below 20", sz.DiskGiB), "OpenShift asks 100 GiB")
		}
	}
	if roles[RoleBootstrap] != 1 {
		bad("nodes", fmt.Sprintf("%d bootstrap nodes", roles[RoleBootstrap]), "declare exactly one node with role bootstrap")
	}
	if roles[RoleMaster] != 1 && roles[RoleMaster] != 3 {
		bad("nodes", fmt.Sprintf("%d masters", roles[RoleMaster]), "declare 1 or 3 nodes with role master (etcd needs an odd count)")
	}
	if c.Libvirt.Network == "" || len(c.Libvirt.Network) > 32 {
		bad("libvirt.network", fmt.Sprintf("%q", c.Libvirt.Network), "name the libvirt network (at most 32 characters)")
	}
	if c.Libvirt.Pool == "" {
		bad("libvirt.pool", "is empty", "name the libvirt storage pool")
	}
	switch c.Libvirt.DomainType {
	case "", "kvm", "qemu", "test":
	default:
		bad("libvirt.domainType", fmt.Sprintf("%q", c.Libvirt.DomainType), "use kvm, qemu (software emulation) or test (libvirt's test driver)")
	}
	if !strings.HasPrefix(c.Libvirt.PoolPath, "/") {
		bad("libvirt.poolPath", fmt.Sprintf("%q is not an absolute path", c.Libvirt.PoolPath), "e.g. /var/lib/libvirt/images/ocp4")
	}
	switch c.PKI.KeyAlgorithm {
	case "RSA-2048", "RSA-4096", "ECDSA-P256":
	default:
		bad("pki.keyAlgorithm", fmt.Sprintf("unknown algorithm %q", c.PKI.KeyAlgorithm), "RSA-2048, RSA-4096 or ECDSA-P256")
	}
	if c.PKI.CADays < 1 || c.PKI.CertDays < 1 || c.PKI.CertDays > c.PKI.CADays {
		bad("pki.certDays", fmt.Sprintf("caDays %d, certDays %d", c.PKI.CADays, c.PKI.CertDays), "both at least 1, and certificates may not outlive their CA")
	}
	if c.PKI.BootstrapHours < 1 || c.PKI.BootstrapHours > 24*c.PKI.CADays {
		bad("pki.bootstrapHours", fmt.Sprintf("%d", c.PKI.BootstrapHours), "at least 1 hour (openshift-install uses 24), and within the CA's life")
	}
	if c.PKI.RenewPercent < 1 || c.PKI.RenewPercent > 90 {
		bad("pki.renewPercent", fmt.Sprintf("%d", c.PKI.RenewPercent), "a percentage between 1 and 90 (default 25)")
	}
	switch u, err := url.Parse(c.RHCOS.ImageURL); {
	case c.RHCOS.ImageURL == "" && c.RHCOS.ImageSHA256 != "":
		bad("rhcos.imageURL", "is empty while rhcos.imageSHA256 is set", "name the image the checksum belongs to, or clear both")
	case c.RHCOS.ImageURL == "":
	case err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file"):
		bad("rhcos.imageURL", fmt.Sprintf("%q is not an http(s):// or file:// URL", c.RHCOS.ImageURL), "use the qemu qcow2.gz URL of the CoreOS stream metadata")
	case !rhcosSHA256.MatchString(c.RHCOS.ImageSHA256):
		bad("rhcos.imageSHA256", fmt.Sprintf("%q is not 64 hex digits", c.RHCOS.ImageSHA256), "copy the image's sha256 from the CoreOS stream metadata (no unverified downloads)")
	}
	if c.HAProxy.StatsPort < 1 || c.HAProxy.StatsPort > 65535 {
		bad("haproxy.statsPort", fmt.Sprintf("%d is not a port", c.HAProxy.StatsPort), "1-65535")
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

// CheckPullSecret validates a pull secret's shape — docker config JSON with an "auths" object
// whose entries carry "auth" (base64 of user:password) or username and password — without ever
// putting its content into the error. field names the config field for the message.
func CheckPullSecret(data []byte, field string) error {
	var ps struct {
		Auths map[string]struct {
			Auth     string `json:"auth"`
			Username string `json:"username"`
			Password string `json:"password"`
		} `json:"auths"`
	}
	fix := "download it again from console.redhat.com/openshift/install/pull-secret"
	if err := json.Unmarshal(data, &ps); err != nil {
		return &ConfigError{Field: field, Msg: "the pull secret is not JSON", Fix: fix}
	}
	if len(ps.Auths) == 0 {
		return &ConfigError{Field: field, Msg: `the pull secret has no "auths" entries`, Fix: fix}
	}
	for reg, a := range ps.Auths {
		if a.Auth == "" && (a.Username == "" || a.Password == "") {
			return &ConfigError{Field: field, Msg: fmt.Sprintf("auths[%q] has no credentials", reg), Fix: fix}
		}
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil || !strings.Contains(string(dec), ":") {
				return &ConfigError{Field: field, Msg: fmt.Sprintf("auths[%q].auth is not base64 of user:password", reg), Fix: fix}
			}
		}
	}
	return nil
}

// CheckSSHKey validates an SSH public key in authorized_keys format (one key).
func CheckSSHKey(data []byte, field string) error {
	if _, _, _, _, err := ssh.ParseAuthorizedKey(data); err != nil {
		return &ConfigError{Field: field, Msg: "not an SSH public key (" + err.Error() + ")", Fix: "point it at a .pub file, e.g. ~/.ssh/id_ed25519.pub"}
	}
	if strings.Contains(string(data), "PRIVATE KEY") {
		return &ConfigError{Field: field, Msg: "this is a private key", Fix: "point it at the .pub file"}
	}
	return nil
}

// rhcosSHA256 matches a hex sha256 digest.
var rhcosSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)
