package ignition

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"

	"github.com/coreos/ignition/v2/config/v3_4/types"
	"sigs.k8s.io/yaml"
)

// Node paths. The MCS paths are MCO release-4.18 pkg/daemon/constants/constants.go
// (InitialNodeAnnotationsFilePath, MachineConfigEncapsulatedPath) and pkg/server/server.go
// (getAppenders); kubelet-ca.crt is what the rendered kubelet.conf names as clientCAFile
// (templates/<role>/01-<role>-kubelet/_base/files/kubelet.yaml).
const (
	PathKeyfile            = "/etc/NetworkManager/system-connections/labbuild.nmconnection"
	PathHostname           = "/etc/hostname"
	PathKubeletCA          = "/etc/kubernetes/kubelet-ca.crt"
	PathBootstrapKubecfg   = "/etc/kubernetes/kubeconfig"
	PathNodeAnnotations    = "/etc/machine-config-daemon/node-annotations.json"
	PathEncapsulatedMC     = "/etc/ignition-machine-config-encapsulated.json"
	PathMCSContent         = "/etc/mcs-machine-config-content.json"
	PathPullSecret         = "/var/lib/kubelet/config.json"
	PathKubeProxyPod       = "/etc/kubernetes/manifests/kube-proxy.yaml"
	PathStaticPodManifests = "/etc/kubernetes/manifests"
)

// StaticNetwork is one node's IPv4 setup, written as a NetworkManager keyfile.
type StaticNetwork struct {
	// MAC, when set, binds the profile to that NIC ([ethernet] mac-address); otherwise the
	// profile matches whichever ethernet device is present (q35/virtio names it enp1s0, not
	// OTHW's ens3, so no interface-name is written).
	MAC string
	// Address is the node's IPv4 address; Prefix the machine network's prefix length.
	Address string
	Prefix  int
	Gateway string
	DNS     []string
	// Search is the DNS search domain (the cluster domain), optional.
	Search string
}

// Keyfile returns the NetworkManager keyfile (INI) for n. Errors name the bad field.
func Keyfile(n StaticNetwork) ([]byte, error) {
	addr, err := netip.ParseAddr(n.Address)
	if err != nil || !addr.Is4() {
		return nil, fmt.Errorf("ignition: node address %q is not an IPv4 address", n.Address)
	}
	if n.Prefix < 1 || n.Prefix > 32 {
		return nil, fmt.Errorf("ignition: prefix length %d must be 1..32", n.Prefix)
	}
	gw, err := netip.ParseAddr(n.Gateway)
	if err != nil || !gw.Is4() {
		return nil, fmt.Errorf("ignition: gateway %q is not an IPv4 address", n.Gateway)
	}
	if !netip.PrefixFrom(addr, n.Prefix).Masked().Contains(gw) {
		return nil, fmt.Errorf("ignition: gateway %s is outside %s/%d", n.Gateway, n.Address, n.Prefix)
	}
	var dns []string
	for _, d := range n.DNS {
		a, err := netip.ParseAddr(d)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("ignition: DNS server %q is not an IPv4 address", d)
		}
		dns = append(dns, a.String()+";")
	}
	var b strings.Builder
	b.WriteString("[connection]\nid=labbuild\ntype=ethernet\nautoconnect=true\nautoconnect-priority=100\n\n")
	if n.MAC != "" {
		fmt.Fprintf(&b, "[ethernet]\nmac-address=%s\n\n", strings.ToUpper(n.MAC))
	}
	fmt.Fprintf(&b, "[ipv4]\nmethod=manual\naddress1=%s/%d\ngateway=%s\n", addr, n.Prefix, gw)
	if len(dns) > 0 {
		fmt.Fprintf(&b, "dns=%s\nignore-auto-dns=true\n", strings.Join(dns, ""))
	}
	if n.Search != "" {
		fmt.Fprintf(&b, "dns-search=%s;\n", n.Search)
	}
	b.WriteString("\n[ipv6]\nmethod=disabled\n")
	return []byte(b.String()), nil
}

// NodeBase returns the files every node gets regardless of role: the static-IP keyfile
// (0600: NetworkManager ignores world-readable keyfiles) and /etc/hostname with the FQDN
// (OTHW relied on PTR lookups; MCO's node-valid-hostname.service waits for a non-localhost
// hostname and the kubelet needs it).
func NodeBase(hostname string, n StaticNetwork) ([]File, error) {
	if hostname == "" || strings.ContainsAny(hostname, " \n/") {
		return nil, fmt.Errorf("ignition: hostname %q is not a valid host name", hostname)
	}
	kf, err := Keyfile(n)
	if err != nil {
		return nil, err
	}
	return []File{
		{Path: PathKeyfile, Mode: ModeSecret, Contents: kf},
		{Path: PathHostname, Mode: ModeFile, Contents: []byte(hostname + "\n")},
	}, nil
}

// RenderedMachineConfig is a rendered-<pool>-<hash> MachineConfig as the MCO bootstrap writes
// it to machine-configs/<name>.yaml.
type RenderedMachineConfig struct {
	// Name is metadata.name (rendered-master-<md5>).
	Name string
	// Config is spec.config, the pool's Ignition config (3.4.0, or 3.5.0 from 4.20, in the 3.4
	// types: version.go).
	Config types.Config
	// Object is the whole MachineConfig as JSON (for the MCS content files). It is shared:
	// read it, never change it.
	Object map[string]any

	mcs struct { // the MCS content files, made once (MCSFiles)
		once               sync.Once
		full, encapsulated []byte
		err                error
	}
}

// ConfigJSON returns spec.config encoded as Encode would. ParseMachineConfig validated it
// already, and the same values encode to a config that validates alike, so it is not parsed
// again.
func (mc *RenderedMachineConfig) ConfigJSON() ([]byte, error) {
	raw, err := json.Marshal(mc.Config)
	if err != nil {
		return nil, fmt.Errorf("ignition: encode: %w", err)
	}
	return raw, nil
}

// parsedMCs remembers ParseMachineConfig's results by the document's SHA-256: every node of a
// pool starts from the same rendered MachineConfig (and mco/base parsed it before them).
var parsedMCs struct {
	sync.Mutex
	m map[[sha256.Size]byte]*RenderedMachineConfig
}

// parsedMCsMax bounds parsedMCs (a lab has two pools; tests make more).
const parsedMCsMax = 16

// ParseMachineConfig decodes a MachineConfig YAML or JSON document and validates its
// spec.config with Validate.
//
// The result is shared between callers with the same document: treat it as read-only.
func ParseMachineConfig(doc []byte) (*RenderedMachineConfig, error) {
	key := sha256.Sum256(doc)
	parsedMCs.Lock()
	mc := parsedMCs.m[key]
	parsedMCs.Unlock()
	if mc != nil {
		return mc, nil
	}
	mc, err := parseMachineConfig(doc)
	if err != nil {
		return nil, err
	}
	parsedMCs.Lock()
	if parsedMCs.m == nil || len(parsedMCs.m) >= parsedMCsMax {
		parsedMCs.m = map[[sha256.Size]byte]*RenderedMachineConfig{}
	}
	parsedMCs.m[key] = mc
	parsedMCs.Unlock()
	return mc, nil
}

func parseMachineConfig(doc []byte) (*RenderedMachineConfig, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, fmt.Errorf("ignition: machine config: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(js, &obj); err != nil {
		return nil, fmt.Errorf("ignition: machine config: %w", err)
	}
	var mc struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Config json.RawMessage `json:"config"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(js, &mc); err != nil {
		return nil, fmt.Errorf("ignition: machine config: %w", err)
	}
	if mc.Kind != "MachineConfig" || mc.Metadata.Name == "" {
		return nil, fmt.Errorf("ignition: not a named MachineConfig (kind %q, name %q)", mc.Kind, mc.Metadata.Name)
	}
	if len(mc.Spec.Config) == 0 {
		return nil, fmt.Errorf("ignition: MachineConfig %s has no spec.config", mc.Metadata.Name)
	}
	cfg, err := Parse(mc.Spec.Config)
	if err != nil {
		return nil, fmt.Errorf("MachineConfig %s spec.config: %w", mc.Metadata.Name, err)
	}
	return &RenderedMachineConfig{Name: mc.Metadata.Name, Config: cfg, Object: obj}, nil
}

// MCSFiles returns what the Machine Config Server appends when it serves a node the rendered
// config mc (MCO release-4.18 pkg/server/server.go getAppenders; spec stages.md §8.5):
// kubelet-ca.crt (ControllerConfig kubeAPIServerServingCAData, kubeletCA), the kubelet
// bootstrap kubeconfig, node-annotations.json (currentConfig = desiredConfig = mc.Name, state
// Done), the encapsulated MC (spec.config emptied to a bare config of its version; its presence lets
// machine-config-daemon-firstboot rebase the OS) and the full MC content. The MCS writes them
// 0644; the kubeconfig is written 0600 here because it carries a client credential.
func MCSFiles(mc *RenderedMachineConfig, kubeletCA, bootstrapKubeconfig []byte) ([]File, error) {
	if len(kubeletCA) == 0 {
		return nil, fmt.Errorf("ignition: kubelet CA (ControllerConfig kubeAPIServerServingCAData) is empty")
	}
	if len(bootstrapKubeconfig) == 0 {
		return nil, fmt.Errorf("ignition: kubelet bootstrap kubeconfig is empty")
	}
	anno, err := json.Marshal(map[string]string{
		"machineconfiguration.openshift.io/currentConfig": mc.Name,
		"machineconfiguration.openshift.io/desiredConfig": mc.Name,
		"machineconfiguration.openshift.io/state":         "Done",
	})
	if err != nil {
		return nil, err
	}
	m := &mc.mcs
	m.once.Do(func() { m.full, m.encapsulated, m.err = mcsContent(mc) })
	if m.err != nil {
		return nil, m.err
	}
	full, encapsulated := m.full, m.encapsulated
	return []File{
		{Path: PathKubeletCA, Mode: ModeFile, Contents: kubeletCA},
		{Path: PathBootstrapKubecfg, Mode: ModeSecret, Contents: bootstrapKubeconfig},
		{Path: PathNodeAnnotations, Mode: ModeFile, Contents: anno},
		{Path: PathEncapsulatedMC, Mode: ModeFile, Contents: encapsulated},
		{Path: PathMCSContent, Mode: ModeFile, Contents: full},
	}, nil
}

// mcsContent returns the full MachineConfig JSON and the encapsulated one (spec.config
// emptied) the MCS serves for mc.
func mcsContent(mc *RenderedMachineConfig) (full, encapsulated []byte, err error) {
	full, err = json.Marshal(mc.Object)
	if err != nil {
		return nil, nil, fmt.Errorf("ignition: MachineConfig %s: %w", mc.Name, err)
	}
	// A shallow copy down to spec (mc.Object is shared), then spec.config =
	// {"ignition":{"version":<the rendered config's>}} (the MCS's ctrlcommon.NewIgnConfig: the
	// release's spec version).
	spec, _ := mc.Object["spec"].(map[string]any)
	if spec == nil {
		return nil, nil, fmt.Errorf("ignition: MachineConfig %s has no spec", mc.Name)
	}
	enc := make(map[string]any, len(mc.Object))
	for k, v := range mc.Object {
		enc[k] = v
	}
	spec2 := make(map[string]any, len(spec))
	for k, v := range spec {
		spec2[k] = v
	}
	spec2["config"] = map[string]any{"ignition": map[string]any{"version": mc.Config.Ignition.Version}}
	enc["spec"] = spec2
	encapsulated, err = json.Marshal(enc)
	if err != nil {
		return nil, nil, err
	}
	return full, encapsulated, nil
}

// KubeletCAFromControllerConfig returns spec.kubeAPIServerServingCAData of a ControllerConfig
// document (controller-config/machine-config-controller.yaml), the bundle the MCS writes to
// /etc/kubernetes/kubelet-ca.crt.
func KubeletCAFromControllerConfig(doc []byte) ([]byte, error) {
	var cc struct {
		Kind string `json:"kind"`
		Spec struct {
			CA []byte `json:"kubeAPIServerServingCAData"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &cc); err != nil {
		return nil, fmt.Errorf("ignition: controller config: %w", err)
	}
	if cc.Kind != "ControllerConfig" || len(cc.Spec.CA) == 0 {
		return nil, fmt.Errorf("ignition: ControllerConfig has no spec.kubeAPIServerServingCAData (pass --kube-ca to machine-config-operator bootstrap)")
	}
	return cc.Spec.CA, nil
}

// NodeInput is everything a master or worker config is made of.
type NodeInput struct {
	// Hostname is the node's FQDN (<node>.<cluster>.<baseDomain>).
	Hostname string
	Network  StaticNetwork
	// SSHKey is the public key for user core.
	SSHKey string
	// RenderedMachineConfig is the pool's rendered-<pool>-<hash> MachineConfig document.
	RenderedMachineConfig []byte
	// KubeletCA is ControllerConfig kubeAPIServerServingCAData (see
	// KubeletCAFromControllerConfig).
	KubeletCA []byte
	// BootstrapKubeconfig is the kubelet bootstrap kubeconfig (/etc/kubernetes/kubeconfig).
	BootstrapKubeconfig []byte
	// PullSecret, when set, replaces the rendered /var/lib/kubelet/config.json (0600).
	PullSecret []byte
	// KubeProxyPod, when set (masters), is the kube-proxy static pod manifest.
	KubeProxyPod []byte
	// Extra files, added last; each replaces a rendered file of the same path.
	Extra []File
}

// NodeResult is a built master or worker config.
type NodeResult struct {
	// JSON is the validated Ignition config.
	JSON []byte
	// Rendered is the name of the rendered MachineConfig it is based on.
	Rendered string
	// Files and Units count the config's entries.
	Files, Units int
}

// Node builds a master or worker config: the rendered pool config, plus the MCS additions,
// plus hostname, static network, SSH key, and (masters) kube-proxy; each addition replaces a
// rendered entry of the same path. The result is validated.
func Node(in NodeInput) (*NodeResult, error) {
	mc, err := ParseMachineConfig(in.RenderedMachineConfig)
	if err != nil {
		return nil, err
	}
	files, err := NodeBase(in.Hostname, in.Network)
	if err != nil {
		return nil, err
	}
	mcs, err := MCSFiles(mc, in.KubeletCA, in.BootstrapKubeconfig)
	if err != nil {
		return nil, err
	}
	files = append(files, mcs...)
	if len(in.PullSecret) > 0 {
		files = append(files, File{Path: PathPullSecret, Mode: ModeSecret, Contents: in.PullSecret})
	}
	if len(in.KubeProxyPod) > 0 {
		files = append(files, File{Path: PathKubeProxyPod, Mode: ModeFile, Contents: in.KubeProxyPod})
	}
	files = append(files, in.Extra...)
	add := Additions{Files: files}
	if in.SSHKey != "" {
		add.SSHKeys = []string{in.SSHKey}
	}
	cfg, err := Apply(mc.Config, add)
	if err != nil {
		return nil, err
	}
	raw, err := Encode(cfg)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", in.Hostname, err)
	}
	return &NodeResult{JSON: raw, Rendered: mc.Name, Files: len(cfg.Storage.Files), Units: len(cfg.Systemd.Units)}, nil
}
