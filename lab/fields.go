package lab

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Field paths: one constant per lab.yaml field a target may read (engine Target.Reads and
// Target.Files), spelled with the JSON names, as `labbuild explain` prints them and messages
// point at them. Families and the engine name a field only by its constant (TestFieldPathsOnce
// holds the repository to it); a node's fields are NodePath's, a role's sizes SizePath's.
const (
	Cluster           = "cluster"
	ClusterName       = "cluster.name"
	ClusterBaseDomain = "cluster.baseDomain"
	ClusterFeatureSet = "cluster.featureSet"
	ClusterProfile    = "cluster.profile"

	Release        = "release"
	ReleaseImage   = "release.image"
	ReleaseVersion = "release.version"
	ReleaseMirrors = "release.mirrors"

	Network               = "network"
	NetworkMachineNetwork = "network.machineNetwork"
	NetworkGateway        = "network.gateway"
	NetworkDNS            = "network.dns"
	NetworkAPIVIP         = "network.apiVIP"
	NetworkIngressVIP     = "network.ingressVIP"
	NetworkDHCPStart      = "network.dhcpStart"
	NetworkDHCPEnd        = "network.dhcpEnd"
	NetworkClusterNetwork = "network.clusterNetwork"
	NetworkHostPrefix     = "network.hostPrefix"
	NetworkServiceNetwork = "network.serviceNetwork"
	NetworkLoadBalancer   = "network.loadBalancer"
	NetworkExternalBridge = "network.externalBridge"

	// Nodes is the whole node list; one node's fields are NodePath's.
	Nodes = "nodes"
	// Sizes is every role's size; one role's fields are SizePath's.
	Sizes = "sizes"

	Libvirt                 = "libvirt"
	LibvirtURI              = "libvirt.uri"
	LibvirtNetwork          = "libvirt.network"
	LibvirtPool             = "libvirt.pool"
	LibvirtPoolPath         = "libvirt.poolPath"
	LibvirtDomainType       = "libvirt.domainType"
	LibvirtMemoryOvercommit = "libvirt.memoryOvercommit"

	Access               = "access"
	AccessPullSecretFile = "access.pullSecretFile"
	AccessSSHKeyFile     = "access.sshKeyFile"

	PKI               = "pki"
	PKIKeyAlgorithm   = "pki.keyAlgorithm"
	PKICADays         = "pki.caDays"
	PKICertDays       = "pki.certDays"
	PKIBootstrapHours = "pki.bootstrapHours"
	PKIRenewPercent   = "pki.renewPercent"

	HAProxy          = "haproxy"
	HAProxyStatsPort = "haproxy.statsPort"

	RHCOS            = "rhcos"
	RHCOSImageURL    = "rhcos.imageURL"
	RHCOSImageSHA256 = "rhcos.imageSHA256"

	Wait                 = "wait"
	WaitBootstrapMinutes = "wait.bootstrapMinutes"
	WaitMastersMinutes   = "wait.mastersMinutes"
	WaitEtcdMinutes      = "wait.etcdMinutes"
	WaitPivotMinutes     = "wait.pivotMinutes"
	WaitWorkersMinutes   = "wait.workersMinutes"
	WaitConvergeMinutes  = "wait.convergeMinutes"

	Mirror        = "mirror"
	MirrorEnabled = "mirror.enabled"
	MirrorStorage = "mirror.storage"
	MirrorPort    = "mirror.port"

	Platform = "platform"
)

// Derived config fields: not lab.yaml fields but values computed from the node list, which
// targets read instead of every node's role when their output depends only on a count class.
// Appending worker-2 to a lab with two workers so changes neither, and reruns none of the
// bootstrap manifests (Infrastructure, Scheduler, cluster-config-v1, the MCO inputs).
// DerivedRelease comes from the release payload (SetPayload), as release.version does.
const (
	// DerivedMasters is the number of master nodes: install-config controlPlane.replicas and
	// the control-plane topology (render/manifests Topologies).
	DerivedMasters = "derived.masters"
	// DerivedWorkers is the number of worker nodes capped at 2 (0, 1, or 2 for "two or
	// more"): all that infrastructureTopology and Scheduler mastersSchedulable depend on
	// (openshift-install pkg/asset/manifests/topologies.go).
	DerivedWorkers = "derived.workersUpTo2"
	// DerivedRelease is the release line of the payload: "<major>.<minor>" of release.version,
	// "okd-" before it for an OKD payload (its image-references carries stream-coreos), as
	// render/releases names its rows (RowName). A target whose recipe follows the release
	// reads it rather than the version, so a z-stream update reruns only what reads the
	// version itself.
	DerivedRelease = "derived.release"
)

// NodeField is a field of one node (nodes.<name>.<field>) or of one role's size
// (sizes.<role>.<field>: VCPUs, MemoryMiB, DiskGiB only).
type NodeField string

// The fields of a node.
const (
	NodeName      NodeField = "name"
	NodeRole      NodeField = "role"
	NodeIP        NodeField = "ip"
	NodeMAC       NodeField = "mac"
	NodeVCPUs     NodeField = "vcpus"
	NodeMemoryMiB NodeField = "memoryMiB"
	NodeDiskGiB   NodeField = "diskGiB"
)

// nodesPrefix and sizesPrefix start the per-node and per-role paths.
const (
	nodesPrefix = Nodes + "."
	sizesPrefix = Sizes + "."
)

// NodePath returns the field path of field f of the node named node: "nodes.master-1.ip".
// A node is addressed by its name, so reordering nodes: changes no path.
func NodePath(node string, f NodeField) string { return nodesPrefix + node + "." + string(f) }

// SizePath returns the field path of field f of role's size: "sizes.worker.memoryMiB".
func SizePath(role string, f NodeField) string { return sizesPrefix + role + "." + string(f) }

// field is one row of the table Lookup reads: a field path, its typed accessor, and whether
// an unset value is absent (the JSON name's omitempty: such a field exists only when set, so
// that adding it to lab.yaml's shape changed no target that does not use it).
type field struct {
	path      string
	omitEmpty bool
	get       func(c *Config) any
}

// fields is every field path Lookup answers, but the per-node and per-role ones (nodeFields).
var fields = [...]field{
	{path: Cluster, get: func(c *Config) any { return section(c.Cluster) }},
	{path: ClusterName, get: func(c *Config) any { return c.Cluster.Name }},
	{path: ClusterBaseDomain, get: func(c *Config) any { return c.Cluster.BaseDomain }},
	{path: ClusterFeatureSet, get: func(c *Config) any { return c.Cluster.FeatureSet }},
	{path: ClusterProfile, get: func(c *Config) any { return c.Cluster.Profile }},

	{path: Release, get: func(c *Config) any { return section(c.Release) }},
	{path: ReleaseImage, get: func(c *Config) any { return c.Release.Image }},
	{path: ReleaseVersion, get: func(c *Config) any { return c.Release.Version }},
	{path: ReleaseMirrors, omitEmpty: true, get: func(c *Config) any { return c.Release.Mirrors }},

	{path: Network, get: func(c *Config) any { return section(c.Network) }},
	{path: NetworkMachineNetwork, get: func(c *Config) any { return c.Network.MachineNetwork }},
	{path: NetworkGateway, get: func(c *Config) any { return c.Network.Gateway }},
	{path: NetworkDNS, get: func(c *Config) any { return c.Network.DNS }},
	{path: NetworkAPIVIP, get: func(c *Config) any { return c.Network.APIVIP }},
	{path: NetworkIngressVIP, get: func(c *Config) any { return c.Network.IngressVIP }},
	{path: NetworkDHCPStart, get: func(c *Config) any { return c.Network.DHCPStart }},
	{path: NetworkDHCPEnd, get: func(c *Config) any { return c.Network.DHCPEnd }},
	{path: NetworkClusterNetwork, get: func(c *Config) any { return c.Network.ClusterNetwork }},
	{path: NetworkHostPrefix, get: func(c *Config) any { return c.Network.HostPrefix }},
	{path: NetworkServiceNetwork, get: func(c *Config) any { return c.Network.ServiceNetwork }},
	{path: NetworkLoadBalancer, get: func(c *Config) any { return c.Network.LoadBalancer }},
	{path: NetworkExternalBridge, omitEmpty: true, get: func(c *Config) any { return c.Network.ExternalBridge }},

	{path: Nodes, get: func(c *Config) any { return section(c.Nodes) }},
	{path: Sizes, get: func(c *Config) any { return section(c.Sizes) }},

	{path: Libvirt, get: func(c *Config) any { return section(c.Libvirt) }},
	{path: LibvirtURI, get: func(c *Config) any { return c.Libvirt.URI }},
	{path: LibvirtNetwork, get: func(c *Config) any { return c.Libvirt.Network }},
	{path: LibvirtPool, get: func(c *Config) any { return c.Libvirt.Pool }},
	{path: LibvirtPoolPath, get: func(c *Config) any { return c.Libvirt.PoolPath }},
	{path: LibvirtDomainType, get: func(c *Config) any { return c.Libvirt.DomainType }},
	{path: LibvirtMemoryOvercommit, omitEmpty: true, get: func(c *Config) any { return c.Libvirt.MemoryOvercommit }},

	{path: Access, get: func(c *Config) any { return section(c.Access) }},
	{path: AccessPullSecretFile, get: func(c *Config) any { return c.Access.PullSecretFile }},
	{path: AccessSSHKeyFile, get: func(c *Config) any { return c.Access.SSHKeyFile }},

	{path: PKI, get: func(c *Config) any { return section(c.PKI) }},
	{path: PKIKeyAlgorithm, get: func(c *Config) any { return c.PKI.KeyAlgorithm }},
	{path: PKICADays, get: func(c *Config) any { return c.PKI.CADays }},
	{path: PKICertDays, get: func(c *Config) any { return c.PKI.CertDays }},
	{path: PKIBootstrapHours, get: func(c *Config) any { return c.PKI.BootstrapHours }},
	{path: PKIRenewPercent, get: func(c *Config) any { return c.PKI.RenewPercent }},

	{path: HAProxy, get: func(c *Config) any { return section(c.HAProxy) }},
	{path: HAProxyStatsPort, get: func(c *Config) any { return c.HAProxy.StatsPort }},

	{path: RHCOS, get: func(c *Config) any { return section(c.RHCOS) }},
	{path: RHCOSImageURL, get: func(c *Config) any { return c.RHCOS.ImageURL }},
	{path: RHCOSImageSHA256, get: func(c *Config) any { return c.RHCOS.ImageSHA256 }},

	{path: Wait, get: func(c *Config) any { return section(c.Wait) }},
	{path: WaitBootstrapMinutes, get: func(c *Config) any { return c.Wait.BootstrapMinutes }},
	{path: WaitMastersMinutes, get: func(c *Config) any { return c.Wait.MastersMinutes }},
	{path: WaitEtcdMinutes, get: func(c *Config) any { return c.Wait.EtcdMinutes }},
	{path: WaitPivotMinutes, get: func(c *Config) any { return c.Wait.PivotMinutes }},
	{path: WaitWorkersMinutes, get: func(c *Config) any { return c.Wait.WorkersMinutes }},
	{path: WaitConvergeMinutes, get: func(c *Config) any { return c.Wait.ConvergeMinutes }},

	// The mirror section is a pointer: absent (nil) it has no fields at all.
	{path: Mirror, omitEmpty: true, get: func(c *Config) any { return mirrorSection(c.Mirror) }},
	{path: MirrorEnabled, get: func(c *Config) any { return mirrorField(c.Mirror, func(m *MirrorConfig) any { return m.Enabled }) }},
	{path: MirrorStorage, get: func(c *Config) any { return mirrorField(c.Mirror, func(m *MirrorConfig) any { return m.Storage }) }},
	{path: MirrorPort, get: func(c *Config) any { return mirrorField(c.Mirror, func(m *MirrorConfig) any { return m.Port }) }},

	{path: Platform, omitEmpty: true, get: func(c *Config) any { return c.Platform }},

	{path: DerivedMasters, get: func(c *Config) any { return len(c.NodesByRole(RoleMaster)) }},
	{path: DerivedWorkers, get: func(c *Config) any { return min(len(c.NodesByRole(RoleWorker)), 2) }},
	{path: DerivedRelease, get: func(c *Config) any { return c.ReleaseRow() }},
}

// nodeFields are the accessors of one node's fields (NodePath); the size fields also answer
// SizePath.
var nodeFields = [...]struct {
	f         NodeField
	omitEmpty bool
	node      func(n *Node) any
	size      func(s *Size) any
}{
	{f: NodeName, node: func(n *Node) any { return n.Name }},
	{f: NodeRole, node: func(n *Node) any { return n.Role }},
	{f: NodeIP, node: func(n *Node) any { return n.IP }},
	{f: NodeMAC, omitEmpty: true, node: func(n *Node) any { return n.MAC }},
	{f: NodeVCPUs, omitEmpty: true, node: func(n *Node) any { return n.VCPUs }, size: func(s *Size) any { return s.VCPUs }},
	{f: NodeMemoryMiB, omitEmpty: true, node: func(n *Node) any { return n.MemoryMiB }, size: func(s *Size) any { return s.MemoryMiB }},
	{f: NodeDiskGiB, omitEmpty: true, node: func(n *Node) any { return n.DiskGiB }, size: func(s *Size) any { return s.DiskGiB }},
}

// Lookup implements the engine's Values: the canonical JSON of the value at field path p
// (one of the constants above, NodePath's or SizePath's), and whether the config has it.
// Each value is read from its typed field; a section (Cluster, Nodes, Sizes, ...) encodes
// with its keys sorted, as encoding/json encodes a map. An optional field that is unset is
// absent; a node that is not declared has no fields.
func (c *Config) Lookup(p string) ([]byte, bool) {
	for i := range fields {
		if f := &fields[i]; f.path == p {
			return encode(f.get(c), f.omitEmpty)
		}
	}
	if rest, ok := strings.CutPrefix(p, nodesPrefix); ok {
		return c.lookupNode(rest)
	}
	if rest, ok := strings.CutPrefix(p, sizesPrefix); ok {
		return c.lookupSize(rest)
	}
	return nil, false
}

// lookupNode answers "<node>.<field>" and "<node>" (the whole node). A node is found by its
// name, else by its index in nodes: ("nodes.0.ip").
func (c *Config) lookupNode(p string) ([]byte, bool) {
	name, f, hasField := strings.Cut(p, ".")
	n := c.node(name)
	if n == nil {
		return nil, false
	}
	if !hasField {
		return encode(section(n), false)
	}
	for _, nf := range nodeFields {
		if string(nf.f) == f {
			return encode(nf.node(n), nf.omitEmpty)
		}
	}
	return nil, false
}

// node returns the node named name, or at index name, or nil.
func (c *Config) node(name string) *Node {
	for i := range c.Nodes {
		if c.Nodes[i].Name == name {
			return &c.Nodes[i]
		}
	}
	if i, err := strconv.Atoi(name); err == nil && i >= 0 && i < len(c.Nodes) {
		return &c.Nodes[i]
	}
	return nil
}

// lookupSize answers "<role>.<field>" and "<role>" (the role's whole size).
func (c *Config) lookupSize(p string) ([]byte, bool) {
	role, f, hasField := strings.Cut(p, ".")
	var s *Size
	switch role {
	case RoleBootstrap:
		s = &c.Sizes.Bootstrap
	case RoleMaster:
		s = &c.Sizes.Master
	case RoleWorker:
		s = &c.Sizes.Worker
	default:
		return nil, false
	}
	if !hasField {
		return encode(section(s), false)
	}
	for _, nf := range nodeFields {
		if string(nf.f) == f && nf.size != nil {
			return encode(nf.size(s), false)
		}
	}
	return nil, false
}

// sectionValue marks a struct or list whose canonical form has its object keys sorted.
type sectionValue struct{ v any }

func section(v any) any { return sectionValue{v} }

// absent is the value of a field that does not exist (a field of the absent mirror section).
type absent struct{}

func mirrorSection(m *MirrorConfig) any {
	if m == nil {
		return absent{}
	}
	return section(m)
}

func mirrorField(m *MirrorConfig, get func(*MirrorConfig) any) any {
	if m == nil {
		return absent{}
	}
	return get(m)
}

// encode returns the canonical JSON of a field's value: encoding/json's for a scalar or a
// map (whose keys it sorts); a section's JSON with every object's keys sorted.
func encode(v any, omitEmpty bool) ([]byte, bool) {
	switch x := v.(type) {
	case absent:
		return nil, false
	case string:
		if omitEmpty && x == "" {
			return nil, false
		}
	case int:
		if omitEmpty && x == 0 {
			return nil, false
		}
		return strconv.AppendInt(nil, int64(x), 10), true
	case bool:
		if omitEmpty && !x {
			return nil, false
		}
		return strconv.AppendBool(nil, x), true
	case map[string]string:
		if omitEmpty && len(x) == 0 {
			return nil, false
		}
	case sectionValue:
		b, err := json.Marshal(x.v)
		if err != nil {
			return nil, false
		}
		var tree any
		if err := json.Unmarshal(b, &tree); err != nil {
			return nil, false
		}
		v = tree // re-encoded with sorted keys below
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return b, true
}
