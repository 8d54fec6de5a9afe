package main

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	configv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/render/ignition"
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

// onPremPlatforms use templates/*/on-prem (pkg/controller/template/render.go).
var onPremPlatforms = map[configv1.PlatformType]bool{
	configv1.BareMetalPlatformType: true, configv1.OpenStackPlatformType: true, configv1.OvirtPlatformType: true,
	configv1.VSpherePlatformType: true, configv1.NutanixPlatformType: true,
}

func platformType(rc *renderConfig) configv1.PlatformType {
	if rc.Infra != nil && rc.Infra.Status.PlatformStatus != nil {
		return rc.Infra.Status.PlatformStatus.Type
	}
	return configv1.NonePlatformType
}

// platformDirs lists the per-MC subdirectories applied in order: _base, on-prem, the
// lower-cased platform (unknown types map to none), sno for SingleReplica.
func platformDirs(rc *renderConfig) []string {
	dirs := []string{"_base"}
	pt := platformType(rc)
	if onPremPlatforms[pt] {
		dirs = append(dirs, "on-prem")
	}
	name := strings.ToLower(string(pt))
	switch pt {
	case configv1.AWSPlatformType, configv1.AzurePlatformType, configv1.GCPPlatformType, configv1.BareMetalPlatformType,
		configv1.OpenStackPlatformType, configv1.OvirtPlatformType, configv1.VSpherePlatformType, configv1.NutanixPlatformType,
		configv1.KubevirtPlatformType, configv1.PowerVSPlatformType, configv1.ExternalPlatformType, configv1.NonePlatformType:
	default:
		name = "none"
	}
	dirs = append(dirs, name)
	if rc.Infra != nil && rc.Infra.Status.ControlPlaneTopology == configv1.SingleReplicaTopologyMode {
		dirs = append(dirs, "sno")
	}
	return dirs
}

func funcMap() template.FuncMap {
	return template.FuncMap{
		"skip": func(key string) (any, error) { return fmt.Sprintf("{{.%s}}", key), nil },
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
		"onPremPlatformAPIServerInternalIPs": func(rc *renderConfig) ([]string, error) {
			return onPremIPs(rc, true)
		},
		"onPremPlatformIngressIPs": func(rc *renderConfig) ([]string, error) { return onPremIPs(rc, false) },
		// The namespace word of the on-prem static pods (openshift-<short>-infra): "kni" for
		// BareMetal, the lower-cased type otherwise (MCO pkg/controller/template/render.go
		// onPremPlatformShortName).
		"onPremPlatformShortName": func(rc *renderConfig) string {
			switch pt := platformType(rc); {
			case pt == configv1.BareMetalPlatformType:
				return "kni"
			case onPremPlatforms[pt] || pt == configv1.KubevirtPlatformType:
				return strings.ToLower(string(pt))
			}
			return ""
		},
		// keepalived runs unicast VRRP on BareMetal and KubeVirt, multicast elsewhere (MCO
		// render.go onPremPlatformKeepalivedEnableUnicast).
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
		// From sprig, which MCO's func map includes.
		"toString": func(v any) string {
			if b, ok := v.([]byte); ok {
				return string(b)
			}
			return fmt.Sprint(v)
		},
		"indent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
	}
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

// butaneFile and butaneUnit are the template YAML shapes (Butane base types).
type butaneFile struct {
	Path      string `json:"path"`
	Mode      *int   `json:"mode"`
	Overwrite *bool  `json:"overwrite"`
	Contents  struct {
		Inline *string `json:"inline"`
		Source *string `json:"source"`
	} `json:"contents"`
	User  *struct{ Name *string } `json:"user"`
	Group *struct{ Name *string } `json:"group"`
}

type butaneUnit struct {
	Name     string  `json:"name"`
	Enabled  *bool   `json:"enabled"`
	Mask     *bool   `json:"mask"`
	Contents *string `json:"contents"`
	Dropins  []struct {
		Name     string  `json:"name"`
		Contents *string `json:"contents"`
	} `json:"dropins"`
}

// renderTemplates renders templates/<role>/<name>/ for every role directory (all but common)
// into one MachineConfig per name, as pkg/controller/template generateTemplateMachineConfigs.
func renderTemplates(dir string, rc *renderConfig, log io.Writer) ([]*mcfgv1.MachineConfig, error) {
	roles, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--templates: %w", err)
	}
	pdirs := platformDirs(rc)
	var out []*mcfgv1.MachineConfig
	for _, r := range roles {
		if !r.IsDir() || r.Name() == "common" {
			continue
		}
		role := r.Name()
		names, err := os.ReadDir(filepath.Join(dir, role))
		if err != nil {
			return nil, err
		}
		commonAdded := false
		for _, n := range names {
			if !n.IsDir() {
				continue
			}
			var srcDirs []string
			if !commonAdded {
				for _, p := range pdirs {
					srcDirs = append(srcDirs, filepath.Join(dir, "common", p))
				}
				commonAdded = true
			}
			for _, p := range pdirs {
				srcDirs = append(srcDirs, filepath.Join(dir, role, n.Name(), p))
			}
			cfg, nf, nu, err := renderOne(srcDirs, rc, log)
			if err != nil {
				return nil, fmt.Errorf("rendering %s/%s: %w", role, n.Name(), err)
			}
			mc, err := machineConfigFromIgn(role, n.Name(), cfg, rc.ControllerConfigSpec)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(log, "I rendered %s from templates: %d files, %d units\n", n.Name(), nf, nu)
			out = append(out, mc)
		}
	}
	return out, nil
}

// renderOne renders the files/ and units/ of srcDirs (later dirs override earlier ones by
// file name), drops empty outputs, and merges them in file-name order.
func renderOne(srcDirs []string, rc *renderConfig, log io.Writer) (types.Config, int, int, error) {
	files, units := map[string]string{}, map[string]string{}
	for _, d := range srcDirs {
		for sub, m := range map[string]map[string]string{"files": files, "units": units} {
			entries, err := os.ReadDir(filepath.Join(d, sub))
			if os.IsNotExist(err) {
				continue
			} else if err != nil {
				return types.Config{}, 0, 0, err
			}
			for _, e := range entries {
				if e.IsDir() {
					continue
				}
				p := filepath.Join(d, sub, e.Name())
				b, err := os.ReadFile(p)
				if err != nil {
					return types.Config{}, 0, 0, err
				}
				t, err := template.New(p).Funcs(funcMap()).Option("missingkey=error").Parse(string(b))
				if err != nil {
					fmt.Fprintf(log, "W stand-in: skipping template %s: %v\n", p, err)
					continue
				}
				var buf bytes.Buffer
				if err := t.Execute(&buf, rc); err != nil {
					if strings.Contains(err.Error(), "unknown scheme") {
						return types.Config{}, 0, 0, fmt.Errorf("%s: %w", p, err)
					}
					fmt.Fprintf(log, "W stand-in: skipping template %s: %v\n", p, err)
					continue
				}
				if buf.Len() == 0 {
					delete(m, e.Name())
					continue
				}
				m[e.Name()] = buf.String()
			}
		}
	}
	cfg := ignition.New()
	for _, k := range sortedKeys(files) {
		var f butaneFile
		if err := yaml.Unmarshal([]byte(files[k]), &f); err != nil {
			return types.Config{}, 0, 0, fmt.Errorf("failed to unmarshal %q into struct: %w", k, err)
		}
		if f.Path == "" {
			continue
		}
		var data []byte
		if f.Contents.Inline != nil {
			data = []byte(*f.Contents.Inline)
		}
		mode := 0o644
		if f.Mode != nil {
			mode = *f.Mode
		}
		ign := ignition.IgnFile(ignition.File{Path: f.Path, Mode: mode, Contents: data})
		if f.Contents.Source != nil {
			ign.Contents.Source, ign.Contents.Compression = f.Contents.Source, nil
		}
		cfg = v34.Merge(cfg, types.Config{Ignition: cfg.Ignition, Storage: types.Storage{Files: []types.File{ign}}})
	}
	for _, k := range sortedKeys(units) {
		var u butaneUnit
		if err := yaml.Unmarshal([]byte(units[k]), &u); err != nil {
			return types.Config{}, 0, 0, fmt.Errorf("failed to unmarshal %q into struct: %w", k, err)
		}
		if u.Name == "" {
			continue
		}
		iu := types.Unit{Name: u.Name, Enabled: u.Enabled, Mask: u.Mask, Contents: u.Contents}
		for _, d := range u.Dropins {
			iu.Dropins = append(iu.Dropins, types.Dropin{Name: d.Name, Contents: d.Contents})
		}
		cfg = v34.Merge(cfg, types.Config{Ignition: cfg.Ignition, Systemd: types.Systemd{Units: []types.Unit{iu}}})
	}
	return cfg, len(cfg.Storage.Files), len(cfg.Systemd.Units), nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
