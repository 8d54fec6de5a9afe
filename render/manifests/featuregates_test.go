package manifests

import (
	"slices"
	"sort"
	"testing"

	"github.com/openshift/api/features"
)

// TestFeatureGateTable requires the generated table to equal openshift/api's features package
// for every cluster profile and feature set, both ways: a bump of github.com/openshift/api
// without `go generate ./render/manifests` fails here.
func TestFeatureGateTable(t *testing.T) {
	names := func(ds []features.FeatureGateDescription) []string {
		var out []string
		for _, d := range ds {
			out = append(out, string(d.FeatureGateAttributes.Name))
		}
		sort.Strings(out)
		return out
	}
	n := 0
	for profile, sets := range features.AllFeatureSets() {
		for fs, want := range sets {
			n++
			got, err := featureGates(string(profile), string(fs))
			if err != nil {
				t.Errorf("%s %q: %v (run go generate ./render/manifests)", profile, fs, err)
				continue
			}
			if !slices.Equal(got.Enabled, names(want.Enabled)) || !slices.Equal(got.Disabled, names(want.Disabled)) {
				t.Errorf("%s %q: table differs from github.com/openshift/api/features (run go generate ./render/manifests)", profile, fs)
			}
		}
	}
	if n == 0 || len(featureGateTable) != n {
		t.Errorf("table has %d rows, openshift/api %d", len(featureGateTable), n)
	}
	if _, err := featureGates("include.release.openshift.io/nope", ""); err == nil {
		t.Error("unknown profile accepted")
	}
}
