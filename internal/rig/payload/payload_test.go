package payload_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/labbuild/labbuild/internal/rig/payload"
	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// TestBuildFromModule builds the payload without ../shared: the 94 real CRDs and the 5 CVO CRDs
// come from the openshift/api module; the build is deterministic (same digests twice) and the
// OCI layout holds every image by digest.
func TestBuildFromModule(t *testing.T) {
	dir, err := payload.OpenShiftAPIDir()
	if err != nil {
		t.Skipf("openshift/api module unavailable: %v", err)
	}
	p, err := payload.Build(payload.Options{APIDir: dir, BaseLayerBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.CRDFiles) != 94 || len(p.CVOCRDFiles) != 5 {
		t.Errorf("%d config-api CRDs and %d CVO CRDs, want 94 and 5", len(p.CRDFiles), len(p.CVOCRDFiles))
	}
	q, err := payload.Build(payload.Options{APIDir: dir, BaseLayerBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if p.ReleaseRef() != q.ReleaseRef() {
		t.Errorf("not deterministic: %s then %s", p.ReleaseRef(), q.ReleaseRef())
	}
	var is struct {
		Metadata struct{ Name string }
		Spec     struct {
			Tags []struct {
				Name string
				From struct{ Name string }
			}
		}
	}
	if err := json.Unmarshal(p.ImageReferences, &is); err != nil {
		t.Fatal(err)
	}
	if is.Metadata.Name != payload.DefaultVersion || len(is.Spec.Tags) != len(payload.Tags) {
		t.Errorf("image-references: name %q, %d tags; want %s, %d", is.Metadata.Name, len(is.Spec.Tags), payload.DefaultVersion, len(payload.Tags))
	}
	out := filepath.Join(t.TempDir(), "payload")
	if err := p.WriteLayout(out); err != nil {
		t.Fatal(err)
	}
	ii, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(payload.Tags)+1 {
		t.Errorf("layout holds %d images, want %d", len(im.Manifests), len(payload.Tags)+1)
	}
	for _, tag := range payload.Tags {
		d := strings.SplitN(p.Pullspec(tag), "@", 2)[1]
		if _, err := os.Stat(filepath.Join(out, "blobs", "sha256", strings.TrimPrefix(d, "sha256:"))); err != nil {
			t.Errorf("layout lacks %s: %v", tag, err)
		}
	}
}

// TestTagsCoverFixture: every tag the fixture marks as used by bootkube or the MCO is in Tags.
func TestTagsCoverFixture(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RequireShared(t), "fixtures/release/payload-components-4.18.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, "\t")
		if strings.HasPrefix(line, "#") || len(f) < 4 || f[0] == "tag" || f[3] == "" {
			continue
		}
		n++
		if !slices.Contains(payload.Tags, f[0]) {
			t.Errorf("tag %s (used by %s) missing from payload.Tags", f[0], f[3])
		}
	}
	if n < 20 {
		t.Errorf("only %d used tags parsed from the fixture", n)
	}
}
