package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/ignition"
)

// realMCODir holds what the real machine-config-operator release-4.18 RunImageBootstrap
// returned for the inputs beside it (testdata/real-mco-4.18/README.md says how it was run):
// <case>/99-<pool>-generated-registries.ign is that MachineConfig's spec.config, byte for byte.
const realMCODir = "testdata/real-mco-4.18"

// TestRegistriesMatchRealMCO: for each input set — none (every lab without a mirror), labbuild's
// own ImageDigestMirrorSet (render/manifests' mirror golden), and a mix of two IDMS (one
// NeverContactSource), an ICSP on a parent scope and an ITMS — the stand-in's
// 99-<pool>-generated-registries spec.config is byte for byte the real 4.18 controller's, and
// the rendered pool config (what the node's Ignition carries) has that registries.conf.
func TestRegistriesMatchRealMCO(t *testing.T) {
	templates := filepath.Join(testenv.RequireShared(t), "fixtures/mco/templates")
	for _, tc := range []struct {
		name  string
		input []string
	}{
		{"none", nil},
		{"labbuild-idms", []string{"labbuild-idms.yaml"}},
		{"merged-inputs", []string{"merged-inputs.yaml", "labbuild-idms.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if code, log := run(t, "machine-config-operator", lab(t, dir, nil)); code != 0 {
				t.Fatalf("operator bootstrap exit %d:\n%s", code, log)
			}
			args := controllerArgs(t, dir, templates)
			mdir := filepath.Join(dir, "mcc-input")
			for _, f := range tc.input {
				b, err := os.ReadFile(filepath.Join(realMCODir, f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(mdir, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			code, log := run(t, "machine-config-controller", args)
			if code != 0 {
				t.Fatalf("controller bootstrap exit %d:\n%s", code, log)
			}
			// The generated MachineConfigs themselves (the controller writes only the rendered
			// ones): the same steps as controllerBootstrap.
			in, err := readManifests(mdir, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			generated, err := renderTemplates(releases["4.18"], templates, &renderConfig{ControllerConfigSpec: &in.cconfig.Spec, TLSMinVersion: "VersionTLS12",
				TLSCipherSuites: intermediateCiphers, Constants: map[string]string{"APIServerURLFile": "/etc/kubernetes/apiserver-url.env"}}, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			regs, err := runImageBootstrap(releases["4.18"], in.images, in.pools, generated)
			if err != nil {
				t.Fatal(err)
			}
			if len(regs) != 2 {
				t.Fatalf("%d registries MachineConfigs, want one per pool (2)", len(regs))
			}
			for _, mc := range regs {
				pool := mc.Labels["machineconfiguration.openshift.io/role"]
				if mc.Name != "99-"+pool+"-generated-registries" {
					t.Errorf("MachineConfig %s for role %s", mc.Name, pool)
				}
				want, err := os.ReadFile(filepath.Join(realMCODir, tc.name, mc.Name+".ign"))
				if err != nil {
					t.Fatal(err)
				}
				if string(mc.Spec.Config.Raw) != string(want) {
					t.Errorf("%s spec.config differs from the real MCO's:\n--- stand-in\n%s\n--- real 4.18\n%s", mc.Name, mc.Spec.Config.Raw, want)
				}
				wantCfg, err := ignition.Parse(want)
				if err != nil {
					t.Fatal(err)
				}
				// The node's registries.conf: the rendered pool config's file.
				matches, _ := filepath.Glob(filepath.Join(dir, "mcc-output", "machine-configs", "rendered-"+pool+"-*.yaml"))
				if len(matches) != 1 {
					t.Fatalf("rendered %s: %v", pool, matches)
				}
				doc, _ := os.ReadFile(matches[0])
				rendered, err := ignition.ParseMachineConfig(doc)
				if err != nil {
					t.Fatal(err)
				}
				got, err := ignition.FileContents(rendered.Config, registriesConfigPath)
				if err != nil {
					t.Fatal(err)
				}
				if tc.input == nil {
					if len(wantCfg.Storage.Files) != 0 {
						t.Fatalf("real MCO wrote files without mirror sets: %s", want)
					}
					// The templates' own registries.conf stays.
					if !strings.HasPrefix(string(got), "unqualified-search-registries = ['registry.access.redhat.com', 'docker.io']") {
						t.Errorf("rendered-%s registries.conf without mirrors:\n%s", pool, got)
					}
					continue
				}
				real, err := ignition.FileContents(wantCfg, registriesConfigPath)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != string(real) {
					t.Errorf("rendered-%s /etc/containers/registries.conf:\n%s\nwant the real MCO's:\n%s", pool, got, real)
				}
				if !strings.Contains(string(got), `location = "198.18.0.1:5000/openshift-release-dev/ocp-v4.0-art-dev"`) || !strings.Contains(string(got), `pull-from-mirror = "digest-only"`) {
					t.Errorf("rendered-%s registries.conf lacks the art-dev mirror by digest:\n%s", pool, got)
				}
			}
		})
	}
}

// TestRegistriesRefused: inputs the real controller refuses, refused with its message; and what
// the stand-in does not render (an Image's registrySources, image policies) refused by name.
func TestRegistriesRefused(t *testing.T) {
	templates := filepath.Join(testenv.RequireShared(t), "fixtures/mco/templates")
	for _, tc := range []struct{ name, doc, want string }{
		{"bad source", "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata: {name: x}\nspec:\n  imageDigestMirrors:\n  - source: quay.io/UPPER\n    mirrors: [m.example.com/a]\n",
			`invalid format for source "quay.io/UPPER"`},
		{"never contact itself", "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata: {name: x}\nspec:\n  imageDigestMirrors:\n  - source: quay.io/a\n    mirrorSourcePolicy: NeverContactSource\n    mirrors: [quay.io/a]\n",
			`cannot set mirrorSourcePolicy: NeverContactSource if the source "quay.io/a" is one of the mirrors`},
		{"conflicting policy", "apiVersion: config.openshift.io/v1\nkind: ImageDigestMirrorSet\nmetadata: {name: x}\nspec:\n  imageDigestMirrors:\n  - source: quay.io/a\n    mirrorSourcePolicy: NeverContactSource\n    mirrors: [m.example.com/a]\n  - source: quay.io/a\n    mirrors: [n.example.com/a]\n",
			`conflicting mirrorSourcePolicy is set for the same source "quay.io/a"`},
		{"image registry sources", "apiVersion: config.openshift.io/v1\nkind: Image\nmetadata: {name: cluster}\nspec:\n  registrySources:\n    insecureRegistries: [insecure.example.com]\n",
			"Image cluster spec.registrySources is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if code, log := run(t, "machine-config-operator", lab(t, dir, nil)); code != 0 {
				t.Fatalf("operator bootstrap exit %d:\n%s", code, log)
			}
			args := controllerArgs(t, dir, templates)
			os.WriteFile(filepath.Join(dir, "mcc-input", "input.yaml"), []byte(tc.doc), 0o644)
			code, log := run(t, "machine-config-controller", args)
			if code == 0 || !strings.Contains(log, tc.want) {
				t.Errorf("exit %d, want a failure saying %q:\n%s", code, tc.want, log)
			}
		})
	}
}
