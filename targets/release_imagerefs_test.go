package targets

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	imagev1 "github.com/openshift/api/image/v1"

	"github.com/labbuild/labbuild/targets/oci"
)

// TestReleaseImageReferencesLikeOpenShiftAPI checks the local image-references struct against
// openshift/api's image/v1 ImageStream, which it replaces: on the payload fixtures and on
// malformed documents, both decode to the same kind, name and tags, and accept or reject the
// same input.
func TestReleaseImageReferencesLikeOpenShiftAPI(t *testing.T) {
	cases := map[string][]byte{
		"not json":       []byte(`{"kind":`),
		"wrong kind":     []byte(`{"kind":"ConfigMap","metadata":{"name":"4.18.0"},"spec":{"tags":[{"name":"a","from":{"kind":"DockerImage","name":"q.io/a@sha256:` + sha64 + `"}}]}}`),
		"no tags":        []byte(`{"kind":"ImageStream","metadata":{"name":"4.18.0"},"spec":{}}`),
		"no name":        []byte(`{"kind":"ImageStream","spec":{"tags":[{"name":"a","from":{"kind":"DockerImage","name":"q.io/a@sha256:` + sha64 + `"}}]}}`),
		"tag by tag":     []byte(`{"kind":"ImageStream","metadata":{"name":"4.18.0"},"spec":{"tags":[{"name":"a","from":{"kind":"DockerImage","name":"q.io/a:latest"}}]}}`),
		"no from":        []byte(`{"kind":"ImageStream","metadata":{"name":"4.18.0"},"spec":{"tags":[{"name":"a"}]}}`),
		"tags not array": []byte(`{"kind":"ImageStream","metadata":{"name":"4.18.0"},"spec":{"tags":{}}}`),
		"name a number":  []byte(`{"kind":"ImageStream","metadata":{"name":418},"spec":{"tags":[]}}`),
		"good": []byte(`{"kind":"ImageStream","apiVersion":"image.openshift.io/v1","metadata":{"name":"4.18.0","creationTimestamp":null},"spec":{"lookupPolicy":{"local":false},"tags":[` +
			`{"name":"a","annotations":{"io.openshift.build.commit.id":"x"},"from":{"kind":"DockerImage","name":"q.io/a@sha256:` + sha64 + `"},"generation":null,"importPolicy":{},"referencePolicy":{"type":""}}]}}`),
	}
	for _, p := range []string{"release/machine-config-operator/manifests/image-references", "release/cluster-config-api/manifests/image-references", "release/examples/image-references.4.1.0.excerpt.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "shared", "fixtures", p))
		if err != nil {
			t.Fatal(err)
		}
		cases[p] = b
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			got, gotErr := releaseParseImageReferences(b)
			var want imagev1.ImageStream
			wantErr := json.Unmarshal(b, &want)
			if (gotErr != nil) != (wantErr != nil || want.Kind != "ImageStream" || want.Name == "" || len(want.Spec.Tags) == 0 || !imagev1Pinned(want)) {
				t.Fatalf("local parse error %v; openshift/api decode error %v, kind %q, name %q, %d tags", gotErr, wantErr, want.Kind, want.Name, len(want.Spec.Tags))
			}
			if gotErr != nil {
				return
			}
			type tag struct{ Name, Kind, From string }
			var g, w []tag
			for _, t := range got.Spec.Tags {
				g = append(g, tag{t.Name, t.From.Kind, t.From.Name})
			}
			for _, t := range want.Spec.Tags {
				w = append(w, tag{t.Name, t.From.Kind, t.From.Name})
			}
			if got.Kind != want.Kind || got.Metadata.Name != want.Name || !reflect.DeepEqual(g, w) {
				t.Errorf("local parse %q %q %v; openshift/api %q %q %v", got.Kind, got.Metadata.Name, g, want.Kind, want.Name, w)
			}
		})
	}
}

const sha64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// imagev1Pinned says whether every tag of is points at a digest pull spec.
func imagev1Pinned(is imagev1.ImageStream) bool {
	for _, t := range is.Spec.Tags {
		if t.From == nil || !oci.IsDigest(t.From.Name) {
			return false
		}
	}
	return true
}
