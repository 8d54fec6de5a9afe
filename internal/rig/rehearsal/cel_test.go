package rehearsal

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

func TestDropCEL131(t *testing.T) {
	const crd = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec:
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        properties:
          ips:
            maxItems: 4294967295
            x-kubernetes-validations:
            - rule: isIP(self[0])
              message: an IP
            - rule: size(self) > 0
          cidr:
            x-kubernetes-validations:
            - rule: self == oldSelf || isCIDR(self)
`
	for _, tc := range []struct {
		name, in string
		want     []DroppedRule
		kept     []string // substrings the output keeps
		gone     []string
	}{
		{name: "crd", in: crd,
			want: []DroppedRule{
				{Path: "spec.versions[0].schema.openAPIV3Schema.properties.ips", Rule: "isIP(self[0])"},
				{Path: "spec.versions[0].schema.openAPIV3Schema.properties.cidr", Rule: "self == oldSelf || isCIDR(self)"},
			},
			kept: []string{"size(self) > 0", "maxItems: 4294967295", "cidr: {}"},
			gone: []string{"isIP", "isCIDR"}},
		{name: "not a CRD", in: strings.Replace(crd, "CustomResourceDefinition", "ConfigMap", 1)},
		{name: "no IP rule", in: "kind: CustomResourceDefinition\nspec: {x-kubernetes-validations: [{rule: 'self.zip(1)'}]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, dropped, err := DropCEL131([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(dropped, tc.want) {
				t.Errorf("dropped %+v, want %+v", dropped, tc.want)
			}
			if len(tc.want) == 0 && string(out) != tc.in {
				t.Errorf("nothing dropped but the bytes changed:\n%s", out)
			}
			for _, s := range tc.kept {
				if !strings.Contains(string(out), s) {
					t.Errorf("output lost %q:\n%s", s, out)
				}
			}
			for _, s := range tc.gone {
				if strings.Contains(string(out), s) {
					t.Errorf("output still has %q:\n%s", s, out)
				}
			}
		})
	}
}

// TestAdaptCRDsFor130 runs the adaptation on the 4.18 CRDs the bootstrap applies (the
// fixtures labbuild's sample payload carries): exactly the two CRDs kube-apiserver 1.30
// refused in the rehearsal change, each keeps its other rules, and the rest stay byte for byte.
func TestAdaptCRDsFor130(t *testing.T) {
	shared := testenv.RequireShared(t)
	root := t.TempDir()
	dir := filepath.Join(root, "opt", "openshift", "manifests")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Glob(filepath.Join(shared, "fixtures", "release", "crds", "*.crd.yaml"))
	orig := map[string][]byte{}
	for _, p := range src {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		orig[filepath.Base(p)] = b
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dropped, err := AdaptCRDsFor130(root)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]int{}
	for _, d := range dropped {
		files[filepath.Base(d.File)]++
		if !CEL131.MatchString(d.Rule) {
			t.Errorf("dropped %q, which calls no IP/CIDR function", d.Rule)
		}
	}
	want := []string{"0000_10_config-operator_01_infrastructures-Default.crd.yaml", "0000_80_machine-config_01_controllerconfigs-Default.crd.yaml"}
	var got []string
	for f := range files {
		got = append(got, f)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("changed %v, want %v", got, want)
	}
	for name, b := range orig {
		now, _ := os.ReadFile(filepath.Join(dir, name))
		if !slices.Contains(want, name) {
			if string(now) != string(b) {
				t.Errorf("%s changed", name)
			}
			continue
		}
		var a, c map[string]any
		if err := yaml.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(now, &c); err != nil {
			t.Fatalf("%s: rewritten file does not parse: %v", name, err)
		}
		before, after := rules(a), rules(c)
		if len(before)-len(after) != files[name] {
			t.Errorf("%s: %d rules before, %d after, %d dropped", name, len(before), len(after), files[name])
		}
		for _, r := range after {
			if CEL131.MatchString(r) {
				t.Errorf("%s keeps %q", name, r)
			}
		}
		if a["metadata"].(map[string]any)["name"] != c["metadata"].(map[string]any)["name"] {
			t.Errorf("%s: metadata.name changed", name)
		}
	}
}

// rules lists every x-kubernetes-validations rule in v.
func rules(v any) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		if rs, ok := x["x-kubernetes-validations"].([]any); ok {
			for _, r := range rs {
				out = append(out, r.(map[string]any)["rule"].(string))
			}
		}
		for k, e := range x {
			if k != "x-kubernetes-validations" {
				out = append(out, rules(e)...)
			}
		}
	case []any:
		for _, e := range x {
			out = append(out, rules(e)...)
		}
	}
	return out
}
