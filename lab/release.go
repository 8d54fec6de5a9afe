package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The release payload decides what release a lab builds: release.image names it, and labbuild
// reads the version (release-metadata) and the flavour (OKD when image-references carries
// stream-coreos) from the payload before it plans or builds anything (targets.ReadPayload).
// SetPayload records them on the config, so the targets that follow a release read them as
// declared values (release.version, derived.release) and a plan shows a change of release as a
// change of those values, old → new.

// ReleaseRow returns the release line of the recorded payload (DerivedRelease): "4.22" or
// "okd-4.22", "" when release.version has no major.minor. It spells render/releases' RowName,
// which lab may not import (TestReleaseRowNames holds the two together).
func (c *Config) ReleaseRow() string {
	parts := strings.SplitN(c.Release.Version, ".", 3)
	if len(parts) < 2 {
		return ""
	}
	minor, _, _ := strings.Cut(parts[1], "-")
	minor, _, _ = strings.Cut(minor, "+")
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil || maj < 0 || min < 0 {
		return ""
	}
	row := fmt.Sprintf("%d.%d", maj, min)
	if c.payloadOKD {
		row = "okd-" + row
	}
	return row
}

// SetPayload records what the release payload said: its release-metadata version and whether
// it is an OKD payload. A release.version the lab sets must equal version (it is an assertion
// now; the payload names the release): otherwise the error names both and the way out.
func (c *Config) SetPayload(version string, okd bool) error {
	if c.Release.Version != "" && c.Release.Version != version {
		return &ConfigError{File: c.Source(), Line: c.Line(ReleaseVersion), Field: ReleaseVersion,
			Msg: fmt.Sprintf("is %s, but release.image %s is version %s", c.Release.Version, c.Release.Image, version),
			Fix: "remove release.version (labbuild reads the version from the payload), or set release.image to the " + c.Release.Version + " payload"}
	}
	c.Release.Version, c.payloadOKD = version, okd
	return nil
}

// PayloadOKD reports whether SetPayload recorded an OKD payload.
func (c *Config) PayloadOKD() bool { return c.payloadOKD }

// DefaultFeatureSet makes fs the feature set when the lab file does not set cluster.featureSet
// (the release's default: OKD for an OKD payload). It reports whether it did.
func (c *Config) DefaultFeatureSet(fs string) bool {
	if fs == "" || c.Line(ClusterFeatureSet) > 0 || c.Cluster.FeatureSet == fs {
		return false
	}
	c.Cluster.FeatureSet = fs
	return true
}

// PullSecretGiven reports whether the lab has a pull secret: a pullSecretFile the file sets
// (present or not: the user meant that file), or the default's file when it exists. baseDir is
// the lab config's directory. Without one, an OKD lab uses the release's fake pull secret.
func (c *Config) PullSecretGiven(baseDir string) bool {
	if c.Access.PullSecretFile == "" {
		return false
	}
	if c.Line(AccessPullSecretFile) > 0 {
		return true
	}
	_, err := os.Stat(ExpandPath(c.Access.PullSecretFile, baseDir))
	return err == nil
}
