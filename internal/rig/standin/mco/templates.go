package main

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	v35 "github.com/coreos/ignition/v2/config/v3_5"
	v35translate "github.com/coreos/ignition/v2/config/v3_5/translate"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	configv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"github.com/vincent-petithory/dataurl"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// renderConfig is what MCO's templates see (pkg/controller/template/render.go RenderConfig):
// the ControllerConfig spec plus the pull secret, TLS settings and constants.
type renderConfig struct {
	*mcfgv1.ControllerConfigSpec
	PullSecret      string
	TLSMinVersion   string
	TLSCipherSuites []string
	Constants       map[string]string
}

// constantsByName is pkg/constants ConstantsByName, the .Constants the templates read.
var constantsByName = map[string]string{"APIServerURLFile": "/etc/kubernetes/apiserver-url.env"}

// onPremPlatforms use templates/*/on-prem (pkg/controller/template/render.go onPremPlatform).
var onPremPlatforms = map[configv1.PlatformType]bool{
	configv1.BareMetalPlatformType: true, configv1.OpenStackPlatformType: true, configv1.OvirtPlatformType: true,
	configv1.VSpherePlatformType: true, configv1.NutanixPlatformType: true,
}

func platformType(rc *renderConfig) configv1.PlatformType {
	if rc.Infra != nil && rc.Infra.Status.PlatformStatus != nil {
		return rc.Infra.Status.PlatformStatus.Type
	}
	return ""
}

// platformString is render.go platformStringFromControllerConfigSpec: the platform directory
// name, an error without a platform type, none for a type the MCO does not know.
func platformString(rc *renderConfig) (string, error) {
	switch pt := platformType(rc); pt {
	case "":
		return "", fmt.Errorf("cannot generate MachineConfigs when no platformStatus.type is set")
	case "_base":
		return "", fmt.Errorf("platform _base unsupported")
	case configv1.AWSPlatformType, configv1.AzurePlatformType, configv1.BareMetalPlatformType, configv1.GCPPlatformType,
		configv1.OpenStackPlatformType, configv1.LibvirtPlatformType, configv1.OvirtPlatformType, configv1.VSpherePlatformType,
		configv1.KubevirtPlatformType, configv1.PowerVSPlatformType, configv1.NonePlatformType, configv1.ExternalPlatformType,
		configv1.NutanixPlatformType:
		return strings.ToLower(string(pt)), nil
	}
	return "none", nil
}

// platformDirs is render.go getPaths: _base, on-prem for on-prem platforms, the platform, sno
// for SingleReplica and (4.20+) two-node-with-fencing for DualReplica, each overriding the ones
// before. The 4.20+ cloud-platform-alt-dns directory is for cloud platforms with cluster-hosted
// DNS, which labbuild never renders.
func platformDirs(b behaviour, rc *renderConfig, platform string) []string {
	dirs := []string{"_base"}
	if onPremPlatforms[platformType(rc)] {
		dirs = append(dirs, "on-prem")
	}
	dirs = append(dirs, platform)
	if rc.Infra.Status.ControlPlaneTopology == configv1.SingleReplicaTopologyMode {
		dirs = append(dirs, "sno")
	}
	if b.name != "4.18" && rc.Infra.Status.ControlPlaneTopology == "DualReplica" {
		dirs = append(dirs, "two-node-with-fencing")
	}
	return dirs
}

var skipKeyValidate = regexp.MustCompile(`^[_a-z]\w*$`)

// funcMap is renderTemplate's function map for the release b plays.
func funcMap(b behaviour) template.FuncMap {
	m := template.FuncMap{
		// {{skip "key"}} leaves {{.key}} for the MCS to fill per request (render.go skipMissing).
		"skip": func(key string) (any, error) {
			if !skipKeyValidate.MatchString(key) {
				return nil, fmt.Errorf("invalid key for skipKey")
			}
			return fmt.Sprintf("{{.%s}}", key), nil
		},
		"cloudProvider": func(rc *renderConfig) (string, error) {
			switch platformType(rc) {
			case configv1.AWSPlatformType, configv1.AzurePlatformType, configv1.GCPPlatformType, configv1.OpenStackPlatformType,
				configv1.VSpherePlatformType, configv1.ExternalPlatformType, configv1.IBMCloudPlatformType,
				configv1.PowerVSPlatformType, configv1.NutanixPlatformType, configv1.AlibabaCloudPlatformType:
				return "external", nil
			}
			return "", nil
		},
		"credentialProviderConfigFlag": func(rc *renderConfig) (string, error) { return "", nil },
		"onPremPlatformAPIServerInternalIP": func(rc *renderConfig) (string, error) {
			ips, err := onPremIPs(rc, true)
			if len(ips) == 0 || err != nil {
				return "", err
			}
			return ips[0], nil
		},
		"onPremPlatformAPIServerInternalIPs": func(rc *renderConfig) ([]string, error) { return onPremIPs(rc, true) },
		"onPremPlatformIngressIP": func(rc *renderConfig) (string, error) {
			ips, err := onPremIPs(rc, false)
			if len(ips) == 0 || err != nil {
				return "", err
			}
			return ips[0], nil
		},
		"onPremPlatformIngressIPs": func(rc *renderConfig) ([]string, error) { return onPremIPs(rc, false) },
		// The namespace word of the on-prem static pods (openshift-<short>-infra): "kni" for
		// BareMetal, the lower-cased type otherwise (render.go onPremPlatformShortName).
		"onPremPlatformShortName": func(rc *renderConfig) string {
			switch pt := platformType(rc); {
			case pt == configv1.BareMetalPlatformType:
				return "kni"
			case onPremPlatforms[pt] || pt == configv1.KubevirtPlatformType:
				return strings.ToLower(string(pt))
			}
			return ""
		},
		// keepalived runs unicast VRRP on BareMetal and KubeVirt, multicast elsewhere
		// (render.go onPremPlatformKeepalivedEnableUnicast).
		"onPremPlatformKeepalivedEnableUnicast": func(rc *renderConfig) (string, error) {
			switch platformType(rc) {
			case configv1.BareMetalPlatformType, configv1.KubevirtPlatformType:
				return "yes", nil
			}
			return "no", nil
		},
		"urlHost": func(u string) (string, error) {
			p, err := parseAPIURL(u)
			if err != nil {
				return "", err
			}
			return p.Hostname(), nil
		},
		"urlPort": func(u string) (string, error) {
			p, err := parseAPIURL(u)
			if err != nil {
				return "", err
			}
			if port := p.Port(); port != "" {
				return port, nil
			}
			if p.Scheme == "http" {
				return "80", nil
			}
			return "443", nil
		},
		"isOpenShiftManagedDefaultLB":         func(rc *renderConfig) bool { return onPremPlatforms[platformType(rc)] },
		"cloudPlatformAPIIntLoadBalancerIPs":  func(rc ...*renderConfig) ([]string, error) { return nil, nil },
		"cloudPlatformAPILoadBalancerIPs":     func(rc ...*renderConfig) ([]string, error) { return nil, nil },
		"cloudPlatformIngressLoadBalancerIPs": func(rc ...*renderConfig) ([]string, error) { return nil, nil },
		"join":                                strings.Join,
		// ctrlcommon.GetTemplateFuncMap: sprig's toString and indent, copied into the MCO.
		"toString": func(v any) string {
			switch t := v.(type) {
			case string:
				return t
			case []byte:
				return string(t)
			case error:
				return t.Error()
			case fmt.Stringer:
				return t.String()
			}
			return fmt.Sprintf("%v", v)
		},
		"indent": indent,
	}
	if b.platformTypeFunc {
		// 4.20+ render.go platformType.
		m["platformType"] = func(rc *renderConfig) (any, error) {
			if rc.Infra.Status.PlatformStatus != nil {
				return rc.Infra.Status.PlatformStatus.Type, nil
			}
			return "", fmt.Errorf("could not determine platform type")
		}
	}
	if b.dnsRecordsTypeFunc {
		// 4.22 render.go dnsRecordsType: the on-prem platform status's dnsRecordsType, else
		// "Internal". This module's openshift/api (4.18) has no dnsRecordsType field, so a
		// platform status is always the empty type; the operator refuses an Infrastructure
		// that sets fields its types do not know (strictDecode), so "" is what the real one
		// reads too.
		m["dnsRecordsType"] = func(rc *renderConfig) string {
			if ps := rc.Infra.Status.PlatformStatus; ps != nil {
				switch {
				case ps.Type == configv1.BareMetalPlatformType && ps.BareMetal != nil,
					ps.Type == configv1.NutanixPlatformType && ps.Nutanix != nil,
					ps.Type == configv1.OpenStackPlatformType && ps.OpenStack != nil,
					ps.Type == configv1.VSpherePlatformType && ps.VSphere != nil:
					return ""
				}
			}
			return "Internal"
		}
	}
	return m
}

// parseAPIURL fails like MCO on an Infrastructure without status.apiServerInternalURI.
func parseAPIURL(u string) (*url.URL, error) {
	p, err := url.Parse(u)
	if err != nil {
		return nil, err
	}
	if p.Scheme != "https" && p.Scheme != "http" {
		return nil, fmt.Errorf("unknown scheme in %q (Infrastructure status.apiServerInternalURI must be an https URL)", u)
	}
	return p, nil
}

func onPremIPs(rc *renderConfig, api bool) ([]string, error) {
	if rc.Infra == nil || rc.Infra.Status.PlatformStatus == nil {
		return nil, nil
	}
	ps := rc.Infra.Status.PlatformStatus
	switch ps.Type {
	case configv1.BareMetalPlatformType:
		if ps.BareMetal != nil {
			if api {
				return ps.BareMetal.APIServerInternalIPs, nil
			}
			return ps.BareMetal.IngressIPs, nil
		}
	case configv1.OpenStackPlatformType:
		if ps.OpenStack != nil {
			if api {
				return ps.OpenStack.APIServerInternalIPs, nil
			}
			return ps.OpenStack.IngressIPs, nil
		}
	case configv1.VSpherePlatformType:
		if ps.VSphere != nil {
			if api {
				return ps.VSphere.APIServerInternalIPs, nil
			}
			return ps.VSphere.IngressIPs, nil
		}
	}
	return nil, nil
}

// renderTemplate is render.go renderTemplate: a template that does not parse or execute fails
// the render (the stand-in used to skip it, which dropped a file the real MCO writes).
func renderTemplate(b behaviour, rc *renderConfig, path string, data []byte) ([]byte, error) {
	t, err := template.New(path).Funcs(funcMap(b)).Parse(string(data))
	if err != nil {
		return nil, fmt.Errorf("failed to parse template %s: %w", path, err)
	}
	if rc.Constants == nil {
		rc.Constants = constantsByName
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, rc); err != nil {
		return nil, fmt.Errorf("failed to execute template: %w", err)
	}
	return buf.Bytes(), nil
}

// filterTemplates is render.go filterTemplates: renders every file under dir into into by file
// name. An empty template file removes the name (an override that disables a file); a template
// that renders to nothing but white space leaves what an earlier directory put there.
func filterTemplates(b behaviour, rc *renderConfig, into map[string]string, dir string) error {
	return filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		if info.Size() == 0 {
			delete(into, info.Name())
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("failed to read file %q: %w", p, err)
		}
		out, err := renderTemplate(b, rc, p, data)
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(out)) > 0 {
			into[info.Name()] = string(out)
		}
		return nil
	})
}

func existsDir(p string) (bool, error) {
	info, err := os.Stat(p)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !info.IsDir() {
		return false, fmt.Errorf("expected template directory, %q is not a directory", p)
	}
	return true, nil
}

// renderTemplates is template_controller.go getMachineConfigsForControllerConfig → render.go
// generateTemplateMachineConfigs: one MachineConfig per templates/<role>/<name>/ for every role
// directory but common, stamped with the controller version, sorted by name.
func renderTemplates(b behaviour, dir string, rc *renderConfig, log io.Writer) ([]*mcfgv1.MachineConfig, error) {
	roles, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to read dir %q: %w", dir, err)
	}
	var out []*mcfgv1.MachineConfig
	for _, r := range roles {
		if !r.IsDir() || r.Name() == "common" {
			continue
		}
		// 4.20+: no arbiter configs without an arbiter (render.go hasControlPlaneTopology).
		if r.Name() == "arbiter" && rc.Infra.Status.ControlPlaneTopology != "HighlyAvailableArbiter" {
			continue
		}
		mcs, err := generateMachineConfigsForRole(b, rc, r.Name(), dir)
		if err != nil {
			return nil, fmt.Errorf("failed to create MachineConfig for role %s: %w", r.Name(), err)
		}
		out = append(out, mcs...)
	}
	for _, mc := range out {
		mc.Annotations = map[string]string{"machineconfiguration.openshift.io/generated-by-controller-version": versionHash}
		fmt.Fprintf(log, "I rendered %s from templates\n", mc.Name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// generateMachineConfigsForRole is render.go GenerateMachineConfigsForRole: for each
// templates/<role>/<name>/ (custom pools use worker's), the files and units of the platform
// directories of common (for the first name only) and of that name, later directories
// overriding earlier ones by file name, transpiled in file-name order.
func generateMachineConfigsForRole(b behaviour, rc *renderConfig, role, dir string) ([]*mcfgv1.MachineConfig, error) {
	rolePath := role
	if role != "worker" && role != "master" {
		rolePath = "worker"
	}
	names, err := os.ReadDir(filepath.Join(dir, rolePath))
	if err != nil {
		return nil, fmt.Errorf("failed to read dir %q: %w", filepath.Join(dir, rolePath), err)
	}
	platform, err := platformString(rc)
	if err != nil {
		return nil, err
	}
	paths := platformDirs(b, rc, platform)
	var out []*mcfgv1.MachineConfig
	commonAdded := false
	for _, n := range names {
		if !n.IsDir() {
			continue
		}
		var srcDirs []string
		if !commonAdded {
			for _, p := range paths {
				srcDirs = append(srcDirs, filepath.Join(dir, "common", p))
			}
			commonAdded = true
		}
		for _, p := range paths {
			srcDirs = append(srcDirs, filepath.Join(dir, rolePath, n.Name(), p))
		}
		files, units, extensions := map[string]string{}, map[string]string{}, map[string]string{}
		for _, d := range srcDirs {
			if ok, err := existsDir(d); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
			subs := map[string]map[string]string{"files": files, "units": units}
			if b.name != "4.18" {
				subs["extensions"] = extensions // 4.20+: extension names by file name
			}
			for sub, into := range subs {
				p := filepath.Join(d, sub)
				ok, err := existsDir(p)
				if err != nil {
					return nil, err
				}
				if ok {
					if err := filterTemplates(b, rc, into, p); err != nil {
						return nil, err
					}
				}
			}
		}
		cfg, err := transpile(b, valuesByKey(files), valuesByKey(units))
		if err != nil {
			return nil, fmt.Errorf("error transpiling CoreOS config to Ignition config: %w", err)
		}
		mc, err := machineConfigFromIgn(b, role, n.Name(), cfg)
		if err != nil {
			return nil, err
		}
		mc.Spec.Extensions = append(mc.Spec.Extensions, sortedKeys(extensions)...)
		if b.templateOSImageURL {
			mc.Spec.OSImageURL = rc.BaseOSContainerImage // GetDefaultBaseImageContainer
		}
		out = append(out, mc)
	}
	return out, nil
}

// valuesByKey returns m's values in key order (generateMachineConfigForName keySortVals).
func valuesByKey(m map[string]string) []string {
	var vs []string
	for _, k := range sortedKeys(m) {
		vs = append(vs, m[k])
	}
	return vs
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The template YAML shapes: Fedora CoreOS Config base v0.1 (github.com/coreos/fcct base/v0_1
// File and Unit, which the MCO decodes with ghodss/yaml, so keys match field names without
// regard to case).
type fcctFile struct {
	Path      string
	Mode      *int
	Overwrite *bool
	Contents  fcctContents
	Append    []fcctContents
	User      fcctNode
	Group     fcctNode
}

type fcctContents struct {
	Compression, Source, Inline *string
	Verification                struct{ Hash *string }
}

type fcctNode struct {
	ID   *int
	Name *string
}

type fcctUnit struct {
	Name     string
	Enabled  *bool
	Mask     *bool
	Contents *string
	Dropins  []struct {
		Name     string
		Contents *string
	}
}

// transpile is ctrlcommon.TranspileCoreOSConfigToIgn: each file (overwrite forced on) and unit
// through fcct's ToIgn3_0 and up to the release's spec, merged in order. fcct writes inline
// contents as a plain URL-escaped data URL, never compressed (base/v0_1 translateFileContents),
// and an owner only when the template names one.
func transpile(b behaviour, files, units []string) (types.Config, error) {
	var out types.Config
	for _, c := range files {
		var f fcctFile
		if err := yaml.Unmarshal([]byte(c), &f); err != nil {
			return types.Config{}, fmt.Errorf("failed to unmarshal %q into struct: %w", c, err)
		}
		yes := true
		file := types.File{
			Node: types.Node{Path: f.Path, Overwrite: &yes, User: types.NodeUser{ID: f.User.ID, Name: f.User.Name},
				Group: types.NodeGroup{ID: f.Group.ID, Name: f.Group.Name}},
			FileEmbedded1: types.FileEmbedded1{Mode: f.Mode, Contents: fcctResource(f.Contents)},
		}
		for _, a := range f.Append {
			file.Append = append(file.Append, fcctResource(a))
		}
		out = v35.Merge(out, types.Config{Ignition: types.Ignition{Version: b.ignitionVersion}, Storage: types.Storage{Files: []types.File{file}}})
	}
	for _, c := range units {
		var u fcctUnit
		if err := yaml.Unmarshal([]byte(c), &u); err != nil {
			return types.Config{}, fmt.Errorf("failed to unmarshal systemd unit into struct: %w", err)
		}
		unit := types.Unit{Name: u.Name, Enabled: u.Enabled, Mask: u.Mask, Contents: u.Contents}
		for _, d := range u.Dropins {
			unit.Dropins = append(unit.Dropins, types.Dropin{Name: d.Name, Contents: d.Contents})
		}
		out = v35.Merge(out, types.Config{Ignition: types.Ignition{Version: b.ignitionVersion}, Systemd: types.Systemd{Units: []types.Unit{unit}}})
	}
	return out, nil
}

// fcctResource is fcct base/v0_1 translateFileContents.
func fcctResource(c fcctContents) types.Resource {
	r := types.Resource{Source: c.Source, Compression: c.Compression, Verification: types.Verification{Hash: c.Verification.Hash}}
	if c.Inline != nil {
		src := (&url.URL{Scheme: "data", Opaque: "," + dataurl.EscapeString(*c.Inline)}).String()
		r.Source = &src
	}
	return r
}

// parseIgn is ctrlcommon.ParseAndConvertConfig for the spec versions the release reads: any
// 3.x up to its own (4.18: v3_4.ParseCompatibleVersion, 4.20+: v3_5), translated to the v3_5
// types the stand-in works in. Spec 2.x configs, which the real one converts, are refused.
func parseIgn(b behaviour, raw []byte) (types.Config, error) {
	if b.ignitionVersion == "3.4.0" {
		cfg, rpt, err := v34.ParseCompatibleVersion(raw)
		if err != nil || rpt.IsFatal() {
			return types.Config{}, fmt.Errorf("failed to parse Ignition config: parsing Ignition config spec v3 failed with error: %v\nReport: %v", err, rpt)
		}
		return v35translate.Translate(cfg), nil
	}
	cfg, rpt, err := v35.ParseCompatibleVersion(raw)
	if err != nil || rpt.IsFatal() {
		return types.Config{}, fmt.Errorf("failed to parse Ignition config: parsing Ignition config spec v3 failed with error: %v\nReport: %v", err, rpt)
	}
	return cfg, nil
}

// machineConfigFromIgn is ctrlcommon.MachineConfigFromIgnConfig: the config (clarketm-encoded)
// as MachineConfig name for role, nothing else set.
func machineConfigFromIgn(b behaviour, role, name string, cfg types.Config) (*mcfgv1.MachineConfig, error) {
	raw, err := marshalIgn(b, cfg)
	if err != nil {
		return nil, fmt.Errorf("error marshalling Ignition config: %w", err)
	}
	return &mcfgv1.MachineConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"machineconfiguration.openshift.io/role": role},
		},
		Spec: mcfgv1.MachineConfigSpec{Config: runtime.RawExtension{Raw: raw}},
	}, nil
}
