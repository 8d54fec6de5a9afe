package targets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/releases"
	"github.com/labbuild/labbuild/targets/oci"
)

// The payload decides the release (issue 37): release.image names it, and before anything is
// planned or built the CLI reads the payload's version and flavour (ReadPayload), refuses a
// release outside render/releases.Supported (exit 2, nothing written), and records them on the
// config (lab.Config.SetPayload). Targets that follow a release then read derived.release (the
// row's name) as a declared value and find their row with releaseRow.

// Payload is what ReadPayload read from a release payload.
type Payload struct {
	// Digest is release.image's digest pull spec.
	Digest string `json:"digest"`
	// Version is /release-manifests/release-metadata's version.
	Version string `json:"version"`
	// OKD is whether image-references carries the base OS tag stream-coreos (an OKD payload:
	// its MCO was built with TAGS=scos, machine-config-operator Dockerfile lines 28-32).
	OKD bool `json:"okd"`
}

// Release returns p's row of render/releases, or an error naming p's version and the supported
// releases.
func (p Payload) Release() (releases.Release, error) { return releases.Lookup(p.Version, p.OKD) }

// ReadPayload reads release.image's release-metadata and image-references from its last layer
// (through release.mirrors; with the pull secret when its file exists, anonymously otherwise, so
// an OKD payload needs none), as release/metadata does, and writes nothing but the client's blob
// cache. baseDir is the lab config's directory. A payload of a release labbuild does not build is
// a *lab.ConfigError on release.image naming its version and the supported releases.
func ReadPayload(ctx context.Context, c *lab.Config, baseDir string) (Payload, error) {
	var p Payload
	cl := &oci.Client{Mirrors: c.Release.Mirrors}
	if c.Access.PullSecretFile != "" {
		b, err := os.ReadFile(lab.ExpandPath(c.Access.PullSecretFile, baseDir))
		switch {
		case err == nil:
			if cl.Keychain, err = oci.NewKeychain(b); err != nil {
				return p, fmt.Errorf("access.pullSecretFile: %w", err)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return p, fmt.Errorf("access.pullSecretFile: %w", err)
		}
	}
	var err error
	if p.Digest, err = cl.Resolve(ctx, c.Release.Image); err != nil {
		return p, fmt.Errorf("release.image: %w", err)
	}
	img, err := cl.Image(ctx, p.Digest)
	if err != nil {
		return p, fmt.Errorf("release.image: %w", err)
	}
	files, err := releaseReadFiles(ctx, cl, img, oci.Want{Paths: []string{releaseImageReferencesPath, releaseMetadataPath}, LastLayerOnly: true})
	if err != nil {
		return p, fmt.Errorf("release.image %s: %w", p.Digest, err)
	}
	md, refs := files[strings.TrimPrefix(releaseMetadataPath, "/")], files[strings.TrimPrefix(releaseImageReferencesPath, "/")]
	if md == nil || refs == nil {
		return p, &lab.ConfigError{File: c.Source(), Line: c.Line(lab.ReleaseImage), Field: lab.ReleaseImage,
			Msg: fmt.Sprintf("%s has no %s and %s in its last layer: it is not a release payload", c.Release.Image, releaseMetadataPath, releaseImageReferencesPath),
			Fix: "name an OpenShift or OKD release image (quay.io/openshift-release-dev/ocp-release:<version>-x86_64, quay.io/okd/scos-release:<version>)"}
	}
	if p.Version, err = releaseParseMetadata(md); err != nil {
		return p, fmt.Errorf("release.image %s: %w", p.Digest, err)
	}
	is, err := releaseParseImageReferences(refs)
	if err != nil {
		return p, fmt.Errorf("release.image %s: %w", p.Digest, err)
	}
	if is.Metadata.Name != p.Version {
		return p, fmt.Errorf("release.image %s is inconsistent: release-metadata says version %s but image-references is named %s; the payload is broken, use another release.image",
			p.Digest, p.Version, is.Metadata.Name)
	}
	p.OKD = is.Pullspec("stream-coreos") != ""
	if _, err := p.Release(); err != nil {
		return p, &lab.ConfigError{File: c.Source(), Line: c.Line(lab.ReleaseImage), Field: lab.ReleaseImage,
			Msg: fmt.Sprintf("%s: %v", c.Release.Image, err),
			Fix: "pick a payload of one of those (labbuild init writes a lab for " + releases.Newest + "; docs/releases.md says what differs)"}
	}
	return p, nil
}

// releaseParseMetadata reads the version of release-metadata (cincinnati-metadata-v0).
func releaseParseMetadata(b []byte) (string, error) {
	var md releaseMetadata
	if err := json.Unmarshal(b, &md); err != nil || md.Version == "" {
		return "", fmt.Errorf("release-metadata has no version (want cincinnati-metadata-v0 JSON)")
	}
	return md.Version, nil
}

// releaseRow returns the row of render/releases a target follows, from the declared value
// derived.release (the target must read it: releaseRowReads).
func releaseRow(s *engine.Step) (releases.Release, error) {
	name, err := s.String(lab.DerivedRelease)
	if err != nil {
		return releases.Release{}, err
	}
	if name == "" {
		return releases.Release{}, fmt.Errorf("%s: the release is unknown: labbuild reads it from the payload before it builds (lab.Config.SetPayload)", s.Target().Name)
	}
	r, ok := releases.Named(name)
	if !ok {
		return r, fmt.Errorf("%s: release %s is not one labbuild builds (%s)", s.Target().Name, name, releases.SupportedText())
	}
	return r, nil
}

// releaseRowReads are the values releaseRow reads.
var releaseRowReads = []string{lab.DerivedRelease}

// ReleaseByDigest reports whether the lab names its payload by digest (release.image
// @sha256:…), which names the same bytes forever.
func ReleaseByDigest(c *lab.Config) bool { return oci.IsDigest(c.Release.Image) }

// NewestRelease is the newest supported OpenShift release (`labbuild init` writes a lab for
// it); SupportedReleases names every supported release for messages.
const NewestRelease = releases.Newest

// SupportedReleases names the supported releases: "OpenShift 4.22, 4.20 and 4.18, and OKD 4.22".
func SupportedReleases() string { return releases.SupportedText() }

// PayloadDefaults is what ApplyPayload changed in a lab for its release.
type PayloadDefaults struct {
	// Release is the payload's row of render/releases ("okd-4.22").
	Release string
	// FeatureSet is the feature set the release made the lab's default ("" when the lab's
	// stays: it set one, or the release has no default).
	FeatureSet string
	// FakePullSecret is the release's fake pull secret when the lab names no pull secret file
	// that exists (OKD's); nil otherwise. The caller puts it in a file and names that file in
	// access.pullSecretFile.
	FakePullSecret []byte
}

// ApplyPayload records p on c (lab.Config.SetPayload) with its release's defaults — the
// feature set of a lab that sets none, the fake pull secret of a lab that has none — and
// refuses a feature set the release does not have (the installer refuses OKD on OpenShift,
// pkg/types/validation/installconfig.go). baseDir is the lab config's directory.
func ApplyPayload(c *lab.Config, p Payload, baseDir string) (PayloadDefaults, error) {
	row, err := p.Release()
	if err != nil {
		return PayloadDefaults{}, &lab.ConfigError{File: c.Source(), Line: c.Line(lab.ReleaseImage), Field: lab.ReleaseImage, Msg: err.Error(),
			Fix: "pick a payload of one of those (labbuild init writes a lab for " + releases.Newest + ")"}
	}
	if err := c.SetPayload(p.Version, p.OKD); err != nil {
		return PayloadDefaults{}, err
	}
	d := PayloadDefaults{Release: row.Name}
	if c.DefaultFeatureSet(row.DefaultFeatureSet) {
		d.FeatureSet = row.DefaultFeatureSet
	}
	fs := c.Cluster.FeatureSet
	if fs == "" {
		fs = "Default"
	}
	if !slices.Contains(row.FeatureSets, fs) {
		return d, &lab.ConfigError{File: c.Source(), Line: c.Line(lab.ClusterFeatureSet), Field: lab.ClusterFeatureSet,
			Msg: fmt.Sprintf("%s is not a feature set of a %s payload", fs, row.Name),
			Fix: "use one of " + strings.Join(row.FeatureSets, ", ") + " (OKD is for OKD payloads only, as the installer says)"}
	}
	if row.FakePullSecret != "" && !c.PullSecretGiven(baseDir) {
		d.FakePullSecret = []byte(row.FakePullSecret + "\n")
	}
	return d, nil
}
