package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vincent-petithory/dataurl"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// TestReleaseBehaviour runs the stand-in built for each release (and the OKD build) on that
// release's templates and FeatureGate, and checks what differs between the branches it follows
// (release.go): the Ignition spec, the cgroup kernel arguments (4.22 drops psi=0), the 4.20
// z-stream's extra MachineConfigs, 4.22's docker-registry image, the OKD base OS tag, and
// kubelet.conf carrying every gate of the FeatureGate. TestMatchesRealMCO holds each of them to
// the real bytes where a fixture exists.
func TestReleaseBehaviour(t *testing.T) {
	shared := testenv.RequireShared(t)
	for _, tc := range []struct {
		rel            string
		okd            bool
		ign            string
		kargs          []string
		extraSources   []string // in both pools' source lists, beyond 4.18's
		dockerRegistry bool
		baseOSTag      string
	}{
		{"4.18", false, "3.4.0", []string{"systemd.unified_cgroup_hierarchy=1", `cgroup_no_v1="all"`, "psi=0"}, nil, false, "rhel-coreos"},
		{"4.20", false, "3.5.0", []string{"systemd.unified_cgroup_hierarchy=1", `cgroup_no_v1="all"`, "psi=0"},
			[]string{"00-override-master-generated-crio-default-ulimits", "50-worker-auto-sizing-disabled"}, false, "rhel-coreos"},
		{"4.22", false, "3.5.0", []string{"systemd.unified_cgroup_hierarchy=1", `cgroup_no_v1="all"`}, nil, true, "rhel-coreos"},
		{"4.22", true, "3.5.0", []string{"systemd.unified_cgroup_hierarchy=1", `cgroup_no_v1="all"`}, nil, true, "stream-coreos"},
	} {
		name := tc.rel
		if tc.okd {
			name = "okd-" + tc.rel
		}
		t.Run(name, func(t *testing.T) {
			playRelease(t, tc.rel, tc.okd)
			templates := filepath.Join(shared, "fixtures/versions", tc.rel, "mco/templates")
			if tc.rel == "4.18" {
				templates = filepath.Join(shared, "fixtures/mco/templates")
			}
			dir := t.TempDir()
			args := labFor(t, dir, tc.rel, nil)
			if code, log := run(t, "machine-config-operator", args); code != 0 {
				t.Fatalf("operator bootstrap exit %d:\n%s", code, log)
			}
			var cc struct {
				Spec struct {
					BaseOSContainerImage string            `json:"baseOSContainerImage"`
					Images               map[string]string `json:"images"`
				} `json:"spec"`
			}
			ccDoc, err := os.ReadFile(filepath.Join(dir, "mco-bootstrap/bootstrap/manifests/machineconfigcontroller-controllerconfig.yaml"))
			if err != nil || yaml.Unmarshal(ccDoc, &cc) != nil {
				t.Fatalf("ControllerConfig: %v", err)
			}
			if _, ok := cc.Spec.Images["dockerRegistryImage"]; ok != tc.dockerRegistry {
				t.Errorf("ControllerConfig images.dockerRegistryImage present: %v, want %v", ok, tc.dockerRegistry)
			}
			refs, _ := os.ReadFile(filepath.Join(dir, "image-references"))
			if want := tagImage(t, refs, tc.baseOSTag); cc.Spec.BaseOSContainerImage != want {
				t.Errorf("baseOSContainerImage = %q, want the %s tag's %q", cc.Spec.BaseOSContainerImage, tc.baseOSTag, want)
			}
			if code, log := run(t, "machine-config-controller", controllerArgsFor(t, dir, templates, tc.rel+".0")); code != 0 {
				t.Fatalf("controller bootstrap exit %d:\n%s", code, log)
			}
			fgJSON, _ := os.ReadFile(filepath.Join(dir, "manifests/featuregate.yaml"))
			var fg struct {
				Status struct {
					FeatureGates []struct{ Enabled, Disabled []struct{ Name string } } `json:"featureGates"`
				} `json:"status"`
			}
			if err := json.Unmarshal(fgJSON, &fg); err != nil {
				t.Fatal(err)
			}
			wantGates := len(fg.Status.FeatureGates[0].Enabled) + len(fg.Status.FeatureGates[0].Disabled)
			for _, pool := range []string{"master", "worker"} {
				m, _ := filepath.Glob(filepath.Join(dir, "mcc-output/machine-configs/rendered-"+pool+"-*.yaml"))
				if len(m) != 1 {
					t.Fatalf("rendered %s: %v", pool, m)
				}
				var mc struct {
					Spec struct {
						Config struct {
							Ignition struct{ Version string }
							Storage  struct {
								Files []struct {
									Path     string
									User     *struct{}
									Contents struct{ Source string }
								}
							}
						}
						KernelArguments []string `json:"kernelArguments"`
						KernelType      string   `json:"kernelType"`
					}
				}
				doc, _ := os.ReadFile(m[0])
				if err := yaml.Unmarshal(doc, &mc); err != nil {
					t.Fatal(err)
				}
				if mc.Spec.Config.Ignition.Version != tc.ign {
					t.Errorf("%s: ignition.version %s, want %s", pool, mc.Spec.Config.Ignition.Version, tc.ign)
				}
				if !slices.Equal(mc.Spec.KernelArguments, tc.kargs) || mc.Spec.KernelType != "default" {
					t.Errorf("%s: kernelArguments %q kernelType %q, want %q and default", pool, mc.Spec.KernelArguments, mc.Spec.KernelType, tc.kargs)
				}
				gates := -1
				for _, f := range mc.Spec.Config.Storage.Files {
					if f.User != nil {
						t.Errorf("%s: %s has a user; the real MCO writes none", pool, f.Path)
					}
					if f.Path != kubeletConfPath {
						continue
					}
					u, err := dataurl.DecodeString(f.Contents.Source)
					if err != nil {
						t.Fatal(err)
					}
					var kc struct {
						FeatureGates map[string]bool `json:"featureGates"`
					}
					if err := yaml.Unmarshal(u.Data, &kc); err != nil {
						t.Fatal(err)
					}
					gates = len(kc.FeatureGates)
				}
				if gates != wantGates {
					t.Errorf("%s: kubelet.conf has %d feature gates, want the FeatureGate's %d", pool, gates, wantGates)
				}
				pb, _ := os.ReadFile(filepath.Join(dir, "mcc-output/machine-pools", pool+".yaml"))
				for _, src := range append([]string{"97-" + pool + "-generated-kubelet", "98-" + pool + "-generated-kubelet"}, tc.extraSources...) {
					if !strings.Contains(string(pb), "name: "+src+"\n") {
						t.Errorf("pool %s: source %s missing", pool, src)
					}
				}
				if len(tc.extraSources) == 0 && strings.Contains(string(pb), "crio-default-ulimits") {
					t.Errorf("pool %s lists the 4.20-only crio-default-ulimits config", pool)
				}
			}
		})
	}
}

func tagImage(t *testing.T, refs []byte, tag string) string {
	t.Helper()
	var is struct {
		Spec struct {
			Tags []struct {
				Name string
				From struct{ Name string }
			}
		}
	}
	if err := yaml.Unmarshal(refs, &is); err != nil {
		t.Fatal(err)
	}
	for _, tg := range is.Spec.Tags {
		if tg.Name == tag {
			return tg.From.Name
		}
	}
	t.Fatalf("no tag %s", tag)
	return ""
}

// TestReleaseFailsLikeTheRealOne: what each release's real programs refuse, refused the same way:
// 4.22's operator without a docker-registry tag, a template calling a function the release does
// not have (4.22's dnsRecordsType under 4.20: the real renderTemplate fails, the stand-in used to
// skip the file), and a build for a release the stand-in does not play.
func TestReleaseFailsLikeTheRealOne(t *testing.T) {
	testenv.RequireShared(t)
	t.Run("4.22 without docker-registry", func(t *testing.T) {
		playRelease(t, "4.22", false)
		args := labFor(t, t.TempDir(), "4.22", func(f map[string]string) {
			f["image-references"] = strings.Replace(f["image-references"], "name: docker-registry", "name: not-docker-registry", 1)
		})
		if code, log := run(t, "machine-config-operator", args); code == 0 || !strings.Contains(log, "Failed to find docker-registry in image references") {
			t.Errorf("exit %d: %s", code, log)
		}
	})
	t.Run("4.18 does not need docker-registry", func(t *testing.T) {
		playRelease(t, "4.18", false)
		args := labFor(t, t.TempDir(), "4.18", func(f map[string]string) {
			f["image-references"] = strings.Replace(f["image-references"], "name: docker-registry", "name: not-docker-registry", 1)
		})
		if code, log := run(t, "machine-config-operator", args); code != 0 {
			t.Errorf("exit %d: %s", code, log)
		}
	})
	t.Run("template function of a later release", func(t *testing.T) {
		playRelease(t, "4.20", false)
		dir := t.TempDir()
		if code, log := run(t, "machine-config-operator", labFor(t, dir, "4.20", nil)); code != 0 {
			t.Fatal(log)
		}
		templates := filepath.Join(dir, "templates")
		f := filepath.Join(templates, "master/00-master/_base/files/corefile.yaml")
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, []byte("mode: 0644\npath: /etc/x\ncontents:\n  inline: {{ dnsRecordsType . }}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, log := run(t, "machine-config-controller", controllerArgsFor(t, dir, templates, "4.20.0"))
		if code == 0 || !strings.Contains(log, "failed to parse template "+f) || !strings.Contains(log, `function "dnsRecordsType" not defined`) {
			t.Errorf("exit %d, want the template's parse error: %s", code, log)
		}
	})
	t.Run("OKD name without the scos build", func(t *testing.T) {
		playRelease(t, "4.22", false)
		payloadRelease = "okd-4.22"
		code, log := run(t, "machine-config-operator", labFor(t, t.TempDir(), "4.22", nil))
		if code == 0 || !strings.Contains(log, "without -tags scos") {
			t.Errorf("exit %d: %s", code, log)
		}
	})
	t.Run("unknown release", func(t *testing.T) {
		playRelease(t, "4.16", false)
		code, log := run(t, "machine-config-operator", lab(t, t.TempDir(), nil))
		if code == 0 || !strings.Contains(log, `built for release "4.16"; it plays 4.18, 4.20, 4.22`) {
			t.Errorf("exit %d: %s", code, log)
		}
	})
}
