package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/template"

	configv1 "github.com/openshift/api/config/v1"
	imagev1 "github.com/openshift/api/image/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// mcoRenderConfig is the data the real MCO 4.18 renders manifests/ with (pkg/operator/render.go
// renderConfig): the fields the on-prem manifests read.
type mcoRenderConfig struct {
	ControllerConfig mcfgv1.ControllerConfigSpec
	Images           *mcoRenderConfigImages
}

// mcoRenderConfigImages is pkg/controller/common/images.go RenderConfigImages (the *Bootstrap
// images, set by cmd/machine-config-operator/bootstrap.go from --keepalived-image,
// --coredns-image, --baremetal-runtimecfg-image or the image-references tags).
type mcoRenderConfigImages struct {
	KeepalivedBootstrap, CorednsBootstrap, BaremetalRuntimeCfgBootstrap string
}

// mcoFuncs are the functions of pkg/operator/render.go addTemplateFuncs that the on-prem
// manifests call, as release-4.18 defines them for platform BareMetal.
func mcoFuncs() template.FuncMap {
	return template.FuncMap{
		"onPremPlatformShortName": func(cfg mcfgv1.ControllerConfigSpec) any {
			if cfg.Infra.Status.PlatformStatus != nil && cfg.Infra.Status.PlatformStatus.Type == configv1.BareMetalPlatformType {
				return "kni"
			}
			return ""
		},
		"onPremPlatformAPIServerInternalIPs": func(cfg mcfgv1.ControllerConfigSpec) (any, error) {
			if ps := cfg.Infra.Status.PlatformStatus; ps != nil && ps.Type == configv1.BareMetalPlatformType {
				return ps.BareMetal.APIServerInternalIPs, nil
			}
			return nil, fmt.Errorf("invalid platform for API Server Internal IP")
		},
		"onPremPlatformIngressIPs": func(cfg mcfgv1.ControllerConfigSpec) (any, error) {
			if ps := cfg.Infra.Status.PlatformStatus; ps != nil && ps.Type == configv1.BareMetalPlatformType {
				return ps.BareMetal.IngressIPs, nil
			}
			return nil, fmt.Errorf("invalid platform for Ingress IP")
		},
		"join": strings.Join,
	}
}

// realOnPremBootstrap renders the real MCO 4.18 manifests/on-prem/ templates
// (../shared/fixtures/mco/on-prem) for the lab in dir, as pkg/operator/bootstrap.go
// RenderBootstrap and getPlatformManifests do for platform BareMetal with load balancer
// OpenShiftManagedDefault, and returns them by their --dest-dir path.
func realOnPremBootstrap(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	var infra configv1.Infrastructure
	var dns configv1.DNS
	var is imagev1.ImageStream
	for f, into := range map[string]any{"manifests/cluster-infrastructure-02-config.yml": &infra, "manifests/cluster-dns-02-config.yml": &dns, "image-references": &is} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	tags := map[string]string{}
	for _, tg := range is.Spec.Tags {
		tags[tg.Name] = tg.From.Name
	}
	rc := mcoRenderConfig{
		ControllerConfig: mcfgv1.ControllerConfigSpec{Infra: &infra, DNS: &dns},
		Images:           &mcoRenderConfigImages{KeepalivedBootstrap: tags["keepalived-ipfailover"], CorednsBootstrap: tags["coredns"], BaremetalRuntimeCfgBootstrap: tags["baremetal-runtimecfg"]},
	}
	src := filepath.Join(testenv.RequireShared(t), "fixtures/mco/on-prem")
	out := map[string][]byte{}
	for name, dest := range map[string]string{
		"coredns.yaml":          "baremetal/manifests/coredns.yaml",
		"coredns-corefile.tmpl": "baremetal/static-pod-resources/coredns/Corefile.tmpl",
		"keepalived.yaml":       "baremetal/manifests/keepalived.yaml",
		"keepalived.conf.tmpl":  "baremetal/static-pod-resources/keepalived/keepalived.conf.tmpl",
	} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		tm, err := template.New(name).Funcs(mcoFuncs()).Parse(string(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var buf bytes.Buffer
		if err := tm.Execute(&buf, rc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[dest] = buf.Bytes()
	}
	return out
}

// treeUnder returns the regular files under root/sub by their path relative to root.
func treeUnder(t *testing.T, root, sub string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	filepath.WalkDir(filepath.Join(root, sub), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	return out
}

func sortedPaths(m map[string][]byte) []string {
	var k []string
	for p := range m {
		k = append(k, p)
	}
	sort.Strings(k)
	return k
}

// TestBootstrapOnPremMatchesMCO: with platform BareMetal the stand-in operator's bootstrap
// writes baremetal/manifests/{coredns,keepalived}.yaml and
// baremetal/static-pod-resources/{coredns/Corefile.tmpl,keepalived/keepalived.conf.tmpl}, and
// each file is byte for byte what the real MCO 4.18 manifests/on-prem templates give for the
// same inputs; with platform None it writes no baremetal/ tree.
func TestBootstrapOnPremMatchesMCO(t *testing.T) {
	dir := t.TempDir()
	args := bareMetalLab(t, dir)
	if code, log := run(t, "machine-config-operator", args); code != 0 {
		t.Fatalf("operator bootstrap exit %d:\n%s", code, log)
	}
	got := treeUnder(t, filepath.Join(dir, "mco-bootstrap"), "baremetal")
	want := realOnPremBootstrap(t, dir)
	if g, w := sortedPaths(got), sortedPaths(want); !slicesEqual(g, w) {
		t.Errorf("baremetal/ files:\n got %v\nwant %v", g, w)
	}
	for _, p := range sortedPaths(want) {
		if !bytes.Equal(got[p], want[p]) {
			t.Errorf("%s differs from the real MCO render:\n--- stand-in\n%s\n--- real templates\n%s", p, got[p], want[p])
			if os.Getenv("ONPREM_DUMP") != "" {
				os.MkdirAll(filepath.Dir(filepath.Join(os.Getenv("ONPREM_DUMP"), p)), 0o755)
				os.WriteFile(filepath.Join(os.Getenv("ONPREM_DUMP"), p), want[p], 0o644)
			}
		}
	}

	none := t.TempDir()
	if code, log := run(t, "machine-config-operator", lab(t, none, nil)); code != 0 {
		t.Fatalf("operator bootstrap exit %d:\n%s", code, log)
	}
	if got := treeUnder(t, filepath.Join(none, "mco-bootstrap"), "baremetal"); len(got) > 0 {
		t.Errorf("platform None: baremetal/ written: %v", sortedPaths(got))
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// bareMetalBootstrap runs the stand-in operator bootstrap on bareMetalLab and returns its
// baremetal/ output by --dest-dir path.
func bareMetalBootstrap(t *testing.T) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	if code, log := run(t, "machine-config-operator", bareMetalLab(t, dir)); code != 0 {
		t.Fatalf("operator bootstrap exit %d:\n%s", code, log)
	}
	return treeUnder(t, filepath.Join(dir, "mco-bootstrap"), "baremetal")
}
