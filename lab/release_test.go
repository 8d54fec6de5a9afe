package lab

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetPayload: the payload names the release. The version and flavour it recorded are the
// declared values release.version and derived.release; a release.version the lab sets is an
// assertion, and a different payload version is an error naming both and the file's line.
func TestSetPayload(t *testing.T) {
	c := DefaultConfig()
	if got, _ := c.Lookup(DerivedRelease); string(got) != `""` || c.Release.Version != "" {
		t.Errorf("before the payload: derived.release %s, version %q; want both empty", got, c.Release.Version)
	}
	for _, tc := range []struct {
		version string
		okd     bool
		row     string
	}{
		{"4.22.0", false, "4.22"}, {"4.20.8", false, "4.20"}, {"4.22.0-okd-scos.1", true, "okd-4.22"}, {"4.18.0-rc.1", false, "4.18"},
	} {
		c := DefaultConfig()
		if err := c.SetPayload(tc.version, tc.okd); err != nil {
			t.Fatal(err)
		}
		v, _ := c.Lookup(ReleaseVersion)
		r, _ := c.Lookup(DerivedRelease)
		if string(v) != `"`+tc.version+`"` || string(r) != `"`+tc.row+`"` || c.PayloadOKD() != tc.okd {
			t.Errorf("SetPayload(%s, %v): release.version %s, derived.release %s", tc.version, tc.okd, v, r)
		}
	}
	c, err := ParseConfig([]byte("release:\n  image: quay.io/openshift-release-dev/ocp-release:4.20.8-x86_64\n  version: 4.20.8\n"), "lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetPayload("4.20.8", false); err != nil {
		t.Errorf("a matching release.version: %v", err)
	}
	err = c.SetPayload("4.22.0", false)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Line != 3 || ce.Field != ReleaseVersion || !strings.Contains(ce.Msg, "4.20.8") || !strings.Contains(ce.Msg, "4.22.0") {
		t.Errorf("a different payload version: %v, want a ConfigError at lab.yaml:3 naming both", err)
	}
}

// TestReleaseDefaults: a release's default feature set replaces only an unset one, and a pull
// secret counts as given when the file names one or the default's file exists.
func TestReleaseDefaults(t *testing.T) {
	c, err := ParseConfig([]byte("cluster:\n  name: okd\n"), "lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.DefaultFeatureSet("OKD") || c.Cluster.FeatureSet != "OKD" {
		t.Errorf("an unset feature set: %q, want OKD", c.Cluster.FeatureSet)
	}
	c, _ = ParseConfig([]byte("cluster:\n  featureSet: Default\n"), "lab.yaml")
	if c.DefaultFeatureSet("OKD") || c.Cluster.FeatureSet != "Default" {
		t.Errorf("a set feature set was replaced: %q", c.Cluster.FeatureSet)
	}
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	c, _ = ParseConfig([]byte("cluster:\n  name: okd\n"), "lab.yaml")
	if c.PullSecretGiven(dir) {
		t.Error("the default ~/.pull-secret.json does not exist, yet a pull secret is given")
	}
	os.WriteFile(filepath.Join(dir, ".pull-secret.json"), []byte("{}"), 0o600)
	if !c.PullSecretGiven(dir) {
		t.Error("the default ~/.pull-secret.json exists, yet no pull secret is given")
	}
	c, _ = ParseConfig([]byte("access:\n  pullSecretFile: missing.json\n"), "lab.yaml")
	if !c.PullSecretGiven(dir) {
		t.Error("a pullSecretFile the file names counts as given, present or not")
	}
}
