package targets

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/oci"
)

// Shared by the release, host and mirror families: the pull client of the release payload
// (from the declared pull secret and mirrors) and the payload's image-references.

// releaseClientHook lets tests adjust the pull client (sleep, transport); nil in production.
var releaseClientHook func(*oci.Client)

// releaseClient builds the pull client from the declared pull secret and mirrors.
func releaseClient(s *engine.Step) (*oci.Client, error) {
	ps, err := s.File(lab.AccessPullSecretFile)
	if err != nil {
		return nil, err
	}
	kc, err := oci.NewKeychain(ps)
	if err != nil {
		return nil, fmt.Errorf("%s: access.pullSecretFile: %w", s.Target().Name, err)
	}
	c := &oci.Client{Keychain: kc}
	if slices.Contains(s.Target().Reads, lab.ReleaseMirrors) { // declared only when set
		if err := s.Value(lab.ReleaseMirrors, &c.Mirrors); err != nil {
			return nil, err
		}
	}
	if releaseClientHook != nil {
		releaseClientHook(c)
	}
	return c, nil
}

// releaseImageStream is /release-manifests/image-references: an image.openshift.io/v1
// ImageStream (render/manifests' mirror of openshift/api's type) whose metadata.name is the
// release version and whose spec.tags map a payload tag to a DockerImage digest pull spec (oc
// adm release new).
type releaseImageStream struct{ manifests.ImageStream }

// releaseParseImageReferences decodes and checks image-references: kind ImageStream, a name,
// and every tag pinned by digest.
func releaseParseImageReferences(b []byte) (*releaseImageStream, error) {
	var is releaseImageStream
	if err := json.Unmarshal(b, &is.ImageStream); err != nil {
		return nil, fmt.Errorf("image-references is not an ImageStream JSON: %w", err)
	}
	if is.Kind != "ImageStream" || is.Metadata.Name == "" || len(is.Spec.Tags) == 0 {
		return nil, fmt.Errorf("image-references: want kind ImageStream with metadata.name and spec.tags, got kind %q, name %q, %d tags",
			is.Kind, is.Metadata.Name, len(is.Spec.Tags))
	}
	for _, t := range is.Spec.Tags {
		if t.From == nil || !oci.IsDigest(t.From.Name) {
			from := ""
			if t.From != nil {
				from = t.From.Name
			}
			return nil, fmt.Errorf("image-references: tag %q points at %q, not a digest pull spec", t.Name, from)
		}
	}
	return &is, nil
}

// Pullspec returns tag's digest pull spec, or "" when the payload lacks the tag.
func (is *releaseImageStream) Pullspec(tag string) string {
	for _, t := range is.Spec.Tags {
		if t.Name == tag && t.From != nil {
			return t.From.Name
		}
	}
	return ""
}
