// Package lab is the lab config (lab.yaml): its types, parsing, validation, the embedded
// default lab, and one constant per field path (fields.go) with the typed reads the engine
// keys targets by (Config.Lookup). It imports only libraries: the CLI, the families
// (package targets) and the test rig read it; it knows none of them.
package lab

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// Config is the lab config (lab.yaml). The field paths targets read (Target.Reads) follow the
// JSON names and are the constants of fields.go: ClusterName is "cluster.name",
// NodePath("master-1", NodeIP) "nodes.master-1.ip" (a node is addressed by its name),
// SizePath(RoleWorker, NodeMemoryMiB) "sizes.worker.memoryMiB".
type Config struct {
	Cluster ClusterConfig `json:"cluster"`
	Release ReleaseConfig `json:"release"`
	Network NetworkConfig `json:"network"`
	// Nodes lists every machine; the role decides what it runs. 1 master + 1 worker, 3 + 0
	// (compact: masters schedulable) and 3 + 2 all work; there is exactly one bootstrap.
	Nodes   []Node        `json:"nodes"`
	Sizes   RoleSizes     `json:"sizes"`
	Libvirt LibvirtConfig `json:"libvirt"`
	Access  AccessConfig  `json:"access"`
	PKI     PKIConfig     `json:"pki"`
	HAProxy HAProxyConfig `json:"haproxy"`
	// RHCOS names the boot image the node disks overlay.
	RHCOS RHCOSConfig `json:"rhcos"`
	// Wait bounds the cluster/* waits (labbuild cluster).
	Wait WaitConfig `json:"wait"`
	// Mirror is the local release mirror (targets/mirror.go); nil (absent) is off, and the
	// config then reads exactly as before the field existed.
	Mirror *MirrorConfig `json:"mirror,omitempty"`
	// Platform is the cluster's platform: PlatformNone (default; the VMs are provisioned by
	// labbuild, the hard way) or PlatformBaremetal (seed 001: every VM is a bare-metal host
	// behind labbuild's virtual Redfish BMC, the workers are handed to the cluster's Metal3 as
	// BareMetalHosts; needs network.loadBalancer: in-cluster). docs/baremetal.md.
	Platform string `json:"platform,omitempty"`

	pos  map[string]int // field path → line in the file it was read from (messages)
	name string         // the file as the user named it (-f bad.yaml), for messages (Where)

	payloadOKD bool // SetPayload: the payload is OKD (derived.release)
}

// ClusterConfig names the cluster. The cluster domain is <name>.<baseDomain>.
type ClusterConfig struct {
	Name       string `json:"name"`
	BaseDomain string `json:"baseDomain"`
	// FeatureSet is the OpenShift feature set: "Default" (empty means Default),
	// "TechPreviewNoUpgrade", "DevPreviewNoUpgrade" or "CustomNoUpgrade".
	FeatureSet string `json:"featureSet"`
	// Profile is the cluster profile whose include.release.openshift.io/<profile> annotation
	// selects payload manifests; "self-managed-high-availability" for a lab.
	Profile string `json:"profile"`
}

// Domain returns "<name>.<baseDomain>", the cluster's DNS domain.
func (c ClusterConfig) Domain() string { return c.Name + "." + c.BaseDomain }

// ReleaseConfig names the OpenShift release payload.
type ReleaseConfig struct {
	// Image is the release payload pull spec, by tag or by digest.
	Image string `json:"image"`
	// Version is the payload's release-metadata "version". labbuild reads it from the payload
	// (SetPayload); a lab that sets it asserts it.
	Version string `json:"version"`
	// Mirrors maps a source repository ("quay.io/openshift-release-dev/ocp-release") to a
	// mirror: another repository, or an OCI image layout on disk ("oci:/path").
	Mirrors map[string]string `json:"mirrors,omitempty"`
}

// NetworkConfig is the lab's IPv4 addressing. Addresses are dotted quads; networks are CIDRs.
type NetworkConfig struct {
	MachineNetwork string `json:"machineNetwork"`
	Gateway        string `json:"gateway"`
	DNS            string `json:"dns"`
	APIVIP         string `json:"apiVIP"`
	IngressVIP     string `json:"ingressVIP"`
	DHCPStart      string `json:"dhcpStart"`
	DHCPEnd        string `json:"dhcpEnd"`
	ClusterNetwork string `json:"clusterNetwork"`
	HostPrefix     int    `json:"hostPrefix"`
	ServiceNetwork string `json:"serviceNetwork"`
	// LoadBalancer says who holds the API and ingress VIPs: LoadBalancerHost (default; seed
	// 000, openshift-the-hard-way stage 02: labbuild's haproxy on the host, the VIPs on the lab
	// bridge, platform None) or LoadBalancerInCluster (seed 002, the bare-metal networking of
	// the agent-based and assisted installers: keepalived moves the VIPs between the nodes,
	// haproxy and coredns run as static pods, platform BareMetal). See docs/in-cluster-vips.md.
	LoadBalancer string `json:"loadBalancer"`
	// ExternalBridge, when set, names a host bridge that bridge/external creates and joins to
	// the lab network's bridge with a veth pair (seed 001's "baremetal" bridge, for tools
	// that attach to a bridge by name, as openshift-install's bare-metal IPI does with
	// platform.baremetal.externalBridge). It carries no address of its own.
	ExternalBridge string `json:"externalBridge,omitempty"`
}

// Values of network.loadBalancer.
const (
	LoadBalancerHost      = "host"
	LoadBalancerInCluster = "in-cluster"
)

// InCluster reports whether the lab runs the in-cluster VIP mode (network.loadBalancer:
// in-cluster): no host haproxy, platform BareMetal.
func (c *Config) InCluster() bool { return c.Network.LoadBalancer == LoadBalancerInCluster }

// Values of platform.
const (
	PlatformNone      = "none"
	PlatformBaremetal = "baremetal"
)

// Baremetal reports whether the lab is platform: baremetal.
func (c *Config) Baremetal() bool { return c.Platform == PlatformBaremetal }

// baremetalSizes are seed 001's sizes ("OCP will not install if your control plane nodes don't
// have 12GB of RAM ... and 4 CPU cores. Workers need as much as 8GB and 2 Cores"): the
// defaults of platform: baremetal for the sizes a lab.yaml does not set.
var baremetalSizes = map[string]Size{RoleMaster: {VCPUs: 4, MemoryMiB: 12288}, RoleWorker: {VCPUs: 2, MemoryMiB: 8192}}

// applyPlatformDefaults sets the platform's size defaults where the file (whose field lines are
// pos) does not set the field.
func (c *Config) applyPlatformDefaults(pos map[string]int) {
	if !c.Baremetal() {
		return
	}
	for role, sz := range baremetalSizes {
		dst := &c.Sizes.Master
		if role == RoleWorker {
			dst = &c.Sizes.Worker
		}
		if _, set := pos[SizePath(role, NodeVCPUs)]; !set {
			dst.VCPUs = sz.VCPUs
		}
		if _, set := pos[SizePath(role, NodeMemoryMiB)]; !set {
			dst.MemoryMiB = sz.MemoryMiB
		}
	}
}

// Node roles.
const (
	RoleBootstrap = "bootstrap"
	RoleMaster    = "master"
	RoleWorker    = "worker"
)

// Node is one machine of the lab. Zero sizes mean the role's size from Sizes.
type Node struct {
	Name string `json:"name"`
	Role string `json:"role"`
	IP   string `json:"ip"`
	// MAC, when empty, is derived from the cluster and node names (stable across rebuilds).
	MAC       string `json:"mac,omitempty"`
	VCPUs     int    `json:"vcpus,omitempty"`
	MemoryMiB int    `json:"memoryMiB,omitempty"`
	DiskGiB   int    `json:"diskGiB,omitempty"`
}

// Size is a VM's shape: vCPUs, memory in MiB, disk in GiB.
type Size struct {
	VCPUs     int `json:"vcpus"`
	MemoryMiB int `json:"memoryMiB"`
	DiskGiB   int `json:"diskGiB"`
}

// RoleSizes gives each role's default VM size (lab.yaml's sizes:).
type RoleSizes struct {
	Bootstrap Size `json:"bootstrap"`
	Master    Size `json:"master"`
	Worker    Size `json:"worker"`
}

// LibvirtConfig says where the lab's VMs live.
type LibvirtConfig struct {
	// URI is the libvirt connection URI: qemu:///system, qemu+ssh://host/system, test:///default.
	URI      string `json:"uri"`
	Network  string `json:"network"`
	Pool     string `json:"pool"`
	PoolPath string `json:"poolPath"`
	// DomainType is the libvirt domain type of the VMs: "kvm" (hardware virtualization),
	// "qemu" (software emulation, where KVM cannot run guests, such as nested in a microVM) or
	// "test" (libvirt's test driver, test:///default).
	DomainType string `json:"domainType"`
	// MemoryOvercommit lets host/preflight pass, with a printed warning, when the VMs still
	// to define need more memory than the host has available (/proc/meminfo MemAvailable):
	// QEMU allocates guest RAM as the guest touches it, so a lab whose nodes never use their
	// full size (a rehearsal, a small test lab) fits; a real cluster under memory pressure
	// swaps or has QEMU OOM-killed. The VMs keep OpenShift's minimum sizes either way. Off by
	// default (kcli and virt-install allow overcommit silently; labbuild asks for the opt-in).
	MemoryOvercommit bool `json:"memoryOvercommit,omitempty"`
}

// AccessConfig names the secret and key files. Paths may start with "~/" and are otherwise
// relative to the lab config's directory.
type AccessConfig struct {
	// PullSecretFile is a docker config JSON ({"auths": {...}}) from console.redhat.com.
	PullSecretFile string `json:"pullSecretFile"`
	// SSHKeyFile is the SSH public key installed for user core.
	SSHKeyFile string `json:"sshKeyFile"`
}

// PKIConfig shapes the lab's keys and certificates.
type PKIConfig struct {
	// KeyAlgorithm is "RSA-2048" (default), "RSA-4096" or "ECDSA-P256".
	KeyAlgorithm string `json:"keyAlgorithm"`
	// CADays and CertDays are the validity of CAs and of leaf certificates, in days.
	CADays   int `json:"caDays"`
	CertDays int `json:"certDays"`
	// BootstrapHours is the validity, in hours, of the short-lived bootstrap credentials (the
	// kubelet-bootstrap client certificate), as openshift-install's ValidityOneDay (24 h).
	// labbuild renews them on the next build once they near expiry, instead of failing the join.
	BootstrapHours int `json:"bootstrapHours"`
	// RenewPercent is the renewal margin: a certificate with less than this share of its
	// lifetime left is stale and is re-issued, with its dependents, on the next build.
	RenewPercent int `json:"renewPercent"`
}

// WaitConfig holds the timeouts, in minutes, of the cluster/* phases (targets/cluster.go). A
// timeout fails only that phase; everything built before it is kept and a rerun continues.
// Defaults follow openshift-the-hard-way's wait scripts (spec stages 10-13) where they exist.
type WaitConfig struct {
	// BootstrapMinutes bounds cluster/bootstrap: the API answering through the VIP
	// (wait-bootstrap.sh: 600 s) and then the CVO reporting progress.
	BootstrapMinutes int `json:"bootstrapMinutes"`
	// MastersMinutes bounds cluster/masters: every master Ready (wait-masters.sh: 1800 s).
	MastersMinutes int `json:"mastersMinutes"`
	// EtcdMinutes bounds cluster/etcd: the cluster-etcd-operator's etcd running on every master.
	EtcdMinutes int `json:"etcdMinutes"`
	// PivotMinutes bounds cluster/pivot: the API answering through the VIP without bootstrap.
	PivotMinutes int `json:"pivotMinutes"`
	// WorkersMinutes bounds cluster/workers: every worker Ready.
	WorkersMinutes int `json:"workersMinutes"`
	// ConvergeMinutes bounds cluster/converge: every ClusterOperator Available
	// (wait-convergence.sh: 3600 s).
	ConvergeMinutes int `json:"convergeMinutes"`
}

// RHCOSConfig names the RHCOS QEMU image (qcow2, or qcow2.gz as published) that every node
// disk overlays as its backing file, so a VM boots RHCOS and reads its Ignition from fw_cfg
// with no console step. The URL and sha256 are those of the CoreOS stream metadata of the
// release (coreos-bootimages ConfigMap / `openshift-install coreos print-stream-json`:
// .architectures.x86_64.artifacts.qemu.formats["qcow2.gz"].disk). Both empty: blank disks.
type RHCOSConfig struct {
	// ImageURL is an http(s):// or file:// URL.
	ImageURL string `json:"imageURL"`
	// ImageSHA256 is the hex sha256 of the file at ImageURL (compressed, when it is .gz).
	ImageSHA256 string `json:"imageSHA256"`
}

// HAProxyConfig configures the host load balancer.
type HAProxyConfig struct {
	StatsPort int `json:"statsPort"`
}

//go:embed default-lab.yaml
var defaultLab []byte

// DefaultLabYAML returns the embedded default lab config, commented, as `labbuild init` writes
// it: the lab of openshift-the-hard-way stage 02 (cluster ocp4.example.com on 192.168.126.0/24).
func DefaultLabYAML() []byte { return bytes.Clone(defaultLab) }

// DefaultConfig returns the embedded default lab config.
func DefaultConfig() *Config {
	c, err := ParseConfig(defaultLab, "default lab.yaml")
	if err != nil {
		panic(err) // the embedded file is tested
	}
	return c
}

// ParseConfig decodes a lab config (YAML or JSON) over the defaults, strictly: an unknown
// field, or a value of the wrong kind, is a ConfigErrors naming each by its path and line (with
// the closest known field name). name is the file name used in errors. When the only problems
// are unknown fields, the rest of the file is decoded and returned with the error, so that the
// caller can validate it and report every problem at once (LoadAndValidate).
func ParseConfig(data []byte, name string) (*Config, error) {
	c := &Config{}
	if name != "default lab.yaml" {
		pos, errs := checkYAML(data, name)
		onlyUnknown := true
		for _, e := range errs {
			onlyUnknown = onlyUnknown && strings.HasPrefix(e.Msg, "unknown field")
		}
		if len(errs) > 0 && !onlyUnknown {
			return nil, errs
		}
		c = DefaultConfig()
		c.pos = pos
		// A nodes list replaces the default one as a whole. (Decoding into the default slice
		// would keep default fields, such as a mac, in elements the file does not set.)
		if _, ok := pos["nodes"]; ok {
			c.Nodes = nil
		}
		if len(errs) > 0 {
			// Unknown fields only: decode the rest, so that Validate can report its
			// problems in the same pass (ValidateParsed).
			if yaml.Unmarshal(data, c) != nil {
				return nil, errs
			}
			c.name = name
			c.applyPlatformDefaults(c.pos)
			return c, errs
		}
	}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, &ConfigError{File: name, Msg: strings.TrimPrefix(err.Error(), "error unmarshaling JSON: while decoding JSON: "), Fix: "see `labbuild init` for every field"}
	}
	c.name = name
	c.applyPlatformDefaults(c.pos)
	return c, nil
}

// Where implements engine.FieldSource: where the lab config sets field path p, for messages
// that name a field — "bad.yaml:3", "the default; bad.yaml does not set it", or the embedded
// default when no file was given.
func (c *Config) Where(p string) string {
	switch {
	case c.name == "" || c.name == "default lab.yaml":
		return "the embedded default lab.yaml; no -f given and no ./lab.yaml"
	case c.pos[p] > 0:
		return fmt.Sprintf("%s:%d", c.name, c.pos[p])
	}
	return "the default; " + c.name + " does not set it"
}

// Source returns the lab config file as the user named it (-f), or "default lab.yaml".
func (c *Config) Source() string {
	if c.name == "" {
		return "default lab.yaml"
	}
	return c.name
}

// Line returns the line of the lab config that sets field path p (NodePath(...)), or 0
// when the file does not set it (a default).
func (c *Config) Line(p string) int { return c.pos[p] }

// LoadAndValidate reads the lab config at path (the embedded default when path is "") and
// validates it, in one pass: the returned ConfigErrors lists unknown fields and invalid values
// together. name is how messages name the file (the path as the user wrote it).
func LoadAndValidate(path, name string) (*Config, error) {
	var c *Config
	var err error
	if path == "" {
		c = DefaultConfig()
	} else if data, rerr := os.ReadFile(path); rerr != nil {
		return nil, &ConfigError{File: name, Msg: rerr.Error(), Fix: "run `labbuild init` to write one, or pass -f"}
	} else {
		c, err = ParseConfig(data, name)
	}
	if c == nil {
		return nil, err
	}
	var errs ConfigErrors
	errors.As(err, &errs)
	var verrs ConfigErrors
	if errors.As(c.Validate(name), &verrs) {
		errs = append(errs, verrs...)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// ConfigError is a bad lab config: the file, the field path, what is wrong and how to fix it.
// The CLI exits with status 2 on it.
type ConfigError struct {
	File  string
	Line  int // 1-based line in File; 0 when unknown or when the field is a default
	Field string
	Msg   string
	Fix   string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString(" (fix: " + e.Fix + ")")
	}
	return b.String()
}

// NodesByRole returns the nodes of role in config order.
func (c *Config) NodesByRole(role string) []Node {
	var out []Node
	for _, n := range c.Nodes {
		if n.Role == role {
			out = append(out, n)
		}
	}
	return out
}

// NodeNames returns the names of ns, in order: the nodes a per-node read list covers
// (NodePath), which a target captures when it is declared rather than parse its Reads.
func NodeNames(ns []Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}

// Node returns the node named name (the zero Node when there is none).
func (c *Config) Node(name string) Node {
	if n := c.node(name); n != nil && n.Name == name {
		return *n
	}
	return Node{}
}

// Bootstrap returns the bootstrap node (Validate ensures there is exactly one).
func (c *Config) Bootstrap() Node {
	for _, n := range c.Nodes {
		if n.Role == RoleBootstrap {
			return n
		}
	}
	return Node{}
}

// SizeOf returns node n's effective VM size: its own fields over its role's.
func (c *Config) SizeOf(n Node) Size { return c.Sizes.Of(n) }

// Of returns node n's effective VM size: its own fields over its role's (an unknown role
// sizes as a worker).
func (rs RoleSizes) Of(n Node) Size {
	var s Size
	switch n.Role {
	case RoleBootstrap:
		s = rs.Bootstrap
	case RoleMaster:
		s = rs.Master
	default:
		s = rs.Worker
	}
	if n.VCPUs != 0 {
		s.VCPUs = n.VCPUs
	}
	if n.MemoryMiB != 0 {
		s.MemoryMiB = n.MemoryMiB
	}
	if n.DiskGiB != 0 {
		s.DiskGiB = n.DiskGiB
	}
	return s
}

// Redacted returns the effective config as YAML for `labbuild config`. The config holds only
// paths to secrets, never their content, so nothing needs masking beyond the mirror
// credentials that a URL might carry.
func (c *Config) Redacted() ([]byte, error) {
	cp := *c
	if len(c.Release.Mirrors) > 0 {
		cp.Release.Mirrors = map[string]string{}
		for k, v := range c.Release.Mirrors {
			cp.Release.Mirrors[k] = redactURL(v)
		}
	}
	return yaml.Marshal(&cp)
}

// RedactedJSON is Redacted as indented JSON (`labbuild config --json`).
func (c *Config) RedactedJSON() ([]byte, error) {
	y, err := c.Redacted()
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, j, "", "  "); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func redactURL(s string) string {
	if i := strings.Index(s, "@"); i >= 0 && strings.Contains(s[:i], ":") && strings.Contains(s, "://") {
		return s[:strings.Index(s, "://")+3] + "REDACTED@" + s[i+1:]
	}
	return s
}
