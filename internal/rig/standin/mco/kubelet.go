package main

// The kubelet part of the MCO bootstrap render: 98-<pool>-generated-kubelet (the feature gates in
// kubelet.conf) and 97-<pool>-generated-kubelet (the same kubelet.conf plus the cgroup kernel
// arguments), as machine-config-operator pkg/controller/kubelet-config RunFeatureGateBootstrap
// and RunNodeConfigBootstrap write them, and the 4.20 z-stream's 50-<pool>-auto-sizing-disabled
// (kubelet_config_autosizing.go RunAutoSizingBootstrap) and
// 00-override-<pool>-generated-crio-default-ulimits (container-runtime-config
// RunDefaultUlimitsBootstrap).
//
// kubelet.conf is the role's kubelet.yaml template decoded into k8s.io/kubelet's
// KubeletConfiguration, the FeatureGate's gates merged in, and encoded again
// (generateOriginalKubeletConfigWithFeatureGates, EncodeKubeletConfig). The stand-in does not
// link the three k8s.io/kubelet versions; it reproduces that decode/encode with the release's
// kubeletZero (what the release's type writes for an empty configuration: every field without
// omitempty, with zero durations as "0s") overlaid with the template's values, durations
// normalised as metav1.Duration does. That is exact for what templates set (non-zero values and
// pointer fields); a template setting a non-pointer omitempty field to its zero value would keep
// it where the real encoder drops it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	configv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"github.com/vincent-petithory/dataurl"
	"sigs.k8s.io/yaml"
)

const kubeletConfPath = "/etc/kubernetes/kubelet.conf"

// kubeletConfigs returns the generated kubelet MachineConfigs in the order the bootstrap appends
// them (pkg/controller/bootstrap Run): 98-<pool>-generated-kubelet for every pool, then (4.20)
// 50-<pool>-auto-sizing-disabled, then 97-<pool>-generated-kubelet.
func kubeletConfigs(b behaviour, templates string, cc *mcfgv1.ControllerConfig, pools []*mcfgv1.MachineConfigPool, gates map[string]bool, tls tlsProfile) ([]*mcfgv1.MachineConfig, error) {
	var features, nodes []*mcfgv1.MachineConfig
	for _, p := range pools {
		conf, err := originalKubeletConfig(b, templates, p.Name, cc, gates, tls)
		if err != nil {
			return nil, err
		}
		// 98: RunFeatureGateBootstrap (getManagedFeaturesKey without a client).
		mc, err := kubeletMachineConfig(b, p.Name, "98-"+p.Name+"-generated-kubelet", conf)
		if err != nil {
			return nil, err
		}
		features = append(features, mc)
		// 97: RunNodeConfigBootstrap with the default Node config (cgroup mode "", no worker
		// latency profile): the same kubelet.conf, and updateMachineConfigwithCgroup's v2
		// kernel arguments.
		mc, err = kubeletMachineConfig(b, p.Name, "97-"+p.Name+"-generated-kubelet", conf)
		if err != nil {
			return nil, err
		}
		mc.Spec.KernelArguments = append([]string{}, b.cgroupV2KernelArgs...)
		nodes = append(nodes, mc)
	}
	out := features
	if b.autoSizing {
		for _, p := range pools {
			if p.Name != "master" && p.Name != "worker" {
				continue
			}
			cfg := newIgnConfig(b)
			cfg.Storage.Files = append(cfg.Storage.Files, ignFileBytes("/etc/node-sizing-enabled.env",
				[]byte("NODE_SIZING_ENABLED=false\nSYSTEM_RESERVED_MEMORY=1Gi\nSYSTEM_RESERVED_CPU=500m\nSYSTEM_RESERVED_ES=1Gi\n")))
			mc, err := machineConfigFromIgn(b, p.Name, "50-"+p.Name+"-auto-sizing-disabled", cfg)
			if err != nil {
				return nil, err
			}
			mc.Annotations = map[string]string{"openshift-patch-reference": "machineConfig-to-set-the-default-behavior-of-NODE_SIZING_ENABLED"}
			out = append(out, mc)
		}
	}
	return append(out, nodes...), nil
}

// kubeletMachineConfig wraps kubelet.conf as the generated MachineConfig name
// (NewIgnFileBytesOverwriting in an empty config, MachineConfigFromIgnConfig, the controller
// version annotation).
func kubeletMachineConfig(b behaviour, role, name string, conf []byte) (*mcfgv1.MachineConfig, error) {
	cfg := newIgnConfig(b)
	cfg.Storage.Files = append(cfg.Storage.Files, ignFileBytesOverwriting(kubeletConfPath, conf))
	mc, err := machineConfigFromIgn(b, role, name, cfg)
	if err != nil {
		return nil, err
	}
	mc.Annotations = map[string]string{"machineconfiguration.openshift.io/generated-by-controller-version": versionHash}
	return mc, nil
}

// defaultUlimitsConfigs are the 4.20 00-override-<pool>-generated-crio-default-ulimits
// MachineConfigs (RunDefaultUlimitsBootstrap: createDefaultUlimitsFile's TOML drop-in, encoded
// with BurntSushi/toml, in createNewIgnition; no annotations).
func defaultUlimitsConfigs(b behaviour, pools []*mcfgv1.MachineConfigPool) ([]*mcfgv1.MachineConfig, error) {
	var conf struct {
		Crio struct {
			Runtime struct {
				DefaultUlimits []string `toml:"default_ulimits,omitempty"`
			} `toml:"runtime"`
		} `toml:"crio"`
	}
	conf.Crio.Runtime.DefaultUlimits = []string{"nofile=1048576"}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(conf); err != nil {
		return nil, err
	}
	var out []*mcfgv1.MachineConfig
	for _, p := range pools {
		if p.Name != "master" && p.Name != "worker" {
			continue
		}
		cfg := newIgnConfig(b)
		cfg.Storage.Files = append(cfg.Storage.Files, ignFileBytesOverwriting("/etc/crio/crio.conf.d/01-ctrcfg-defaultUlimits", buf.Bytes()))
		mc, err := machineConfigFromIgn(b, p.Name, "00-override-"+p.Name+"-generated-crio-default-ulimits", cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, mc)
	}
	return out, nil
}

// originalKubeletConfig is generateOriginalKubeletConfigWithFeatureGates followed by
// kubeletConfigToIgnFile's encoding: the role's templates rendered again (without the pull
// secret, with the TLS profile), the first kubelet.conf among them, decoded, every known
// feature gate merged in, encoded as the release's KubeletConfiguration YAML.
func originalKubeletConfig(b behaviour, templates, role string, cc *mcfgv1.ControllerConfig, gates map[string]bool, tls tlsProfile) ([]byte, error) {
	rc := &renderConfig{ControllerConfigSpec: &cc.Spec, TLSMinVersion: tls.minVersion, TLSCipherSuites: tls.ciphers}
	mcs, err := generateMachineConfigsForRole(b, rc, role, templates)
	if err != nil {
		return nil, fmt.Errorf("could not generate the original Kubelet config ignition: GenerateMachineConfigsforRole failed with error: %w", err)
	}
	var tmpl []byte
	for _, mc := range mcs {
		cfg, err := parseIgn(b, mc.Spec.Config.Raw)
		if err != nil {
			continue
		}
		for _, f := range cfg.Storage.Files {
			if f.Path == kubeletConfPath && f.Contents.Source != nil {
				u, err := dataurl.DecodeString(*f.Contents.Source)
				if err != nil {
					return nil, fmt.Errorf("could not decode the original Kubelet source string: %w", err)
				}
				tmpl = u.Data
				break
			}
		}
		if tmpl != nil {
			break
		}
	}
	if tmpl == nil {
		return nil, fmt.Errorf("could not generate the original Kubelet config ignition: could not generate old kubelet config")
	}
	var decoded map[string]any
	if err := yaml.Unmarshal(tmpl, &decoded); err != nil {
		return nil, fmt.Errorf("could not deserialize the Kubelet source: %w", err)
	}
	var zero map[string]any
	if err := json.Unmarshal([]byte(b.kubeletZero), &zero); err != nil {
		return nil, err
	}
	if err := overlayKubeletConfig(zero, decoded, ""); err != nil {
		return nil, fmt.Errorf("could not deserialize the Kubelet source: %w", err)
	}
	fg, _ := zero["featureGates"].(map[string]any)
	if fg == nil {
		fg = map[string]any{}
	}
	for name, on := range gates { // mergo.Merge(&FeatureGates, generateFeatureMap, WithOverride)
		fg[name] = on
	}
	if len(fg) > 0 {
		zero["featureGates"] = fg
	}
	j, err := json.Marshal(zero)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// overlayKubeletConfig writes the decoded template's values over the release's zero
// configuration: nested objects field by field, durations (the fields whose zero is "0s", all
// metav1.Duration) re-formatted as time.Duration.String, everything else as given.
func overlayKubeletConfig(zero, decoded map[string]any, path string) error {
	for k, v := range decoded {
		z, known := zero[k]
		switch zt := z.(type) {
		case map[string]any:
			if dv, ok := v.(map[string]any); ok {
				if err := overlayKubeletConfig(zt, dv, path+k+"."); err != nil {
					return err
				}
				continue
			}
		case string:
			if known && zt == "0s" {
				s, ok := v.(string)
				if !ok {
					return fmt.Errorf("%s%s: %v is not a duration", path, k, v)
				}
				d, err := time.ParseDuration(s)
				if err != nil {
					return fmt.Errorf("%s%s: %w", path, k, err)
				}
				zero[k] = d.String()
				continue
			}
		}
		zero[k] = v
	}
	return nil
}

// gatesFor returns every gate the FeatureGate's status lists for version, by name, enabled or
// not (generateFeatureMap over the feature gate access's KnownFeatures). The caller has checked
// the status entry exists (checkFeatureGate).
func gatesFor(fg *configv1.FeatureGate, version string) map[string]bool {
	out := map[string]bool{}
	for _, d := range fg.Status.FeatureGates {
		if d.Version != version {
			continue
		}
		for _, g := range d.Disabled {
			out[string(g.Name)] = false
		}
		for _, g := range d.Enabled {
			out[string(g.Name)] = true
		}
	}
	return out
}

// tlsProfile is the minimum TLS version and IANA cipher names the templates get
// (ctrlcommon.GetSecurityProfileCiphersFromAPIServer).
type tlsProfile struct {
	minVersion string
	ciphers    []string
}

// tlsProfileOf returns the Intermediate profile (what the MCO uses without an APIServer or
// without a profile in it); an APIServer naming another profile is refused, since the stand-in
// carries only Intermediate's cipher names.
func tlsProfileOf(apiServer []byte) (tlsProfile, error) {
	if apiServer != nil {
		var a configv1.APIServer
		if err := yaml.Unmarshal(apiServer, &a); err != nil {
			return tlsProfile{}, err
		}
		if p := a.Spec.TLSSecurityProfile; p != nil && p.Type != "" && p.Type != configv1.TLSProfileIntermediateType {
			return tlsProfile{}, fmt.Errorf("stand-in: APIServer cluster spec.tlsSecurityProfile.type %s: the stand-in renders only the Intermediate profile", p.Type)
		}
	}
	return tlsProfile{minVersion: "VersionTLS12", ciphers: intermediateCiphers}, nil
}

// intermediateCiphers is the Intermediate TLS profile's cipher list in IANA names (openshift/api
// config/v1 TLSProfiles[Intermediate] through library-go crypto.OpenSSLToIANACipherSuites).
var intermediateCiphers = []string{
	"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}

// ignFileBytes is ctrlcommon.NewIgnFileBytes: mode 0644, contents as vincent-petithory/dataurl
// EncodeBytes, compression "" (no overwrite; MergeMachineConfigs defaults it on).
func ignFileBytes(path string, contents []byte) types.File {
	mode, src, comp := 0o644, dataurl.EncodeBytes(contents), ""
	return types.File{
		Node:          types.Node{Path: path},
		FileEmbedded1: types.FileEmbedded1{Mode: &mode, Contents: types.Resource{Source: &src, Compression: &comp}},
	}
}

// ignFileBytesOverwriting is ctrlcommon.NewIgnFileBytesOverwriting: ignFileBytes with overwrite.
func ignFileBytesOverwriting(path string, contents []byte) types.File {
	f := ignFileBytes(path, contents)
	yes := true
	f.Overwrite = &yes
	return f
}

// refusedKinds are bootstrap inputs the real controller renders into MachineConfigs and the
// stand-in does not: it fails naming them rather than render something else.
var refusedKinds = map[string]string{
	"KubeletConfig":          "99-<pool>-generated-kubelet (RunKubeletBootstrap)",
	"ContainerRuntimeConfig": "99-<pool>-generated-containerruntime (RunContainerRuntimeBootstrap)",
}

// nodeConfigRefused explains a config.openshift.io Node the stand-in cannot render (the
// default, empty one it can).
func nodeConfigRefused(doc []byte) error {
	var n configv1.Node
	if err := yaml.Unmarshal(doc, &n); err != nil {
		return err
	}
	if n.Name != "cluster" || (n.Spec.CgroupMode == "" && n.Spec.WorkerLatencyProfile == "") {
		return nil
	}
	return fmt.Errorf("stand-in: Node cluster sets %s: the stand-in renders 97-<pool>-generated-kubelet for the default node config only",
		strings.TrimSpace(fmt.Sprintf("cgroupMode=%q workerLatencyProfile=%q", n.Spec.CgroupMode, n.Spec.WorkerLatencyProfile)))
}
