package payload_test

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"sigs.k8s.io/yaml"

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
	if is.Metadata.Name != payload.DefaultVersion || len(is.Spec.Tags) != len(payload.Tags) || !slices.Equal(p.Tags, payload.Tags) {
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

// TestTagsCoverFixture: for every release, every tag its payload-components TSV marks as used
// by bootkube, node-image-pull or the MCO is in the sample (renamed stream-coreos for OKD), and
// 4.18's fixed Tags are TagsOf's rule.
func TestTagsCoverFixture(t *testing.T) {
	shared := testenv.RequireShared(t)
	for _, r := range payload.Releases {
		t.Run(r.Name, func(t *testing.T) {
			tags, err := payload.TagsOf(shared, r)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(shared, r.Dir, r.Components))
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
				tag := f[0]
				if r.OKD {
					tag = strings.Replace(tag, "rhel-coreos", "stream-coreos", 1)
				}
				if !slices.Contains(tags, tag) {
					t.Errorf("tag %s (used by %s) missing from the %s sample's tags", tag, f[3], r.Name)
				}
			}
			if n < 20 {
				t.Errorf("only %d used tags parsed from the fixture", n)
			}
			if r.Name == "4.18" && !slices.Equal(tags, payload.Tags) {
				t.Errorf("TagsOf(4.18) = %v\nwant payload.Tags %v", tags, payload.Tags)
			}
		})
	}
}

// TestBuildReleases builds the sample of every release from ../shared and checks what makes it
// that release's payload: its tag set (4.22's docker-registry and RHEL 10 node images, OKD's
// stream-coreos and no rhel-coreos), the CRD files of its cluster-config-api image (the
// fixture's), release-metadata's version, the CVO's /bootstrap pod, the MCO image's
// /manifests, and the CoreOS stream of the coreos-bootimages ConfigMap.
func TestBuildReleases(t *testing.T) {
	shared := testenv.RequireShared(t)
	for _, tc := range []struct {
		release, version, stream string
		crds, cvoCRDs            int
		has, hasNot              []string
		streams                  bool // data.streams present (4.22, OKD)
	}{
		{"4.18", "4.18.0", "rhcos-4.18", 94, 5, []string{"rhel-coreos"}, []string{"docker-registry", "stream-coreos"}, false},
		{"4.20", "4.20.0", "rhcos-4.20", 94, 8, []string{"rhel-coreos", "cluster-authentication-operator"}, []string{"docker-registry", "stream-coreos", "rhel-coreos-10"}, false},
		{"4.22", "4.22.0", "rhcos-4.21", 120, 7, []string{"rhel-coreos", "docker-registry", "rhel-coreos-10", "rhel-coreos-10-extensions"}, []string{"stream-coreos"}, true},
		{"okd-4.22", "4.22.0-okd-scos.1", "c10s", 120, 7, []string{"stream-coreos", "stream-coreos-extensions", "docker-registry"}, []string{"rhel-coreos", "rhel-coreos-10", "stream-coreos-10"}, true},
	} {
		t.Run(tc.release, func(t *testing.T) {
			p, err := payload.Build(payload.Options{Release: tc.release, Shared: shared, BaseLayerBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			if p.Version != tc.version || !strings.Contains(string(p.ReleaseMetadata), `"version": "`+tc.version+`"`) {
				t.Errorf("version %s, release-metadata %s; want %s", p.Version, p.ReleaseMetadata, tc.version)
			}
			for _, tag := range tc.has {
				if !slices.Contains(p.Tags, tag) {
					t.Errorf("no tag %s in %v", tag, p.Tags)
				}
			}
			for _, tag := range tc.hasNot {
				if slices.Contains(p.Tags, tag) {
					t.Errorf("tag %s in %v", tag, p.Tags)
				}
			}
			if len(p.CRDFiles) != tc.crds || len(p.CVOCRDFiles) != tc.cvoCRDs {
				t.Errorf("%d config-api CRDs and %d CVO CRDs, want %d and %d", len(p.CRDFiles), len(p.CVOCRDFiles), tc.crds, tc.cvoCRDs)
			}
			files := layerFiles(t, p.ReleaseImage)
			if !bytes.Contains(files["bootstrap/bootstrap-pod.yaml"], []byte("{{.ReleaseImage}}")) {
				t.Errorf("the release image has no CVO /bootstrap/bootstrap-pod.yaml template")
			}
			mco := layerFiles(t, p.Images["machine-config-operator"])
			if _, ok := mco["manifests/image-references"]; !ok {
				t.Errorf("the MCO image has no /manifests/image-references")
			}
			if tc.release == "okd-4.22" && !bytes.Contains(mco["manifests/image-references"], []byte("name: stream-coreos")) {
				t.Errorf("the OKD MCO image's /manifests/image-references is not the scos one")
			}
			var cm struct {
				Data map[string]string `json:"data"`
			}
			if err := yaml.Unmarshal(p.CoreOSBootImages, &cm); err != nil {
				t.Fatal(err)
			}
			var st struct{ Stream string }
			if err := json.Unmarshal([]byte(cm.Data["stream"]), &st); err != nil || st.Stream != tc.stream {
				t.Errorf("data.stream is stream %q (%v), want %q", st.Stream, err, tc.stream)
			}
			if _, ok := cm.Data["streams"]; ok != tc.streams {
				t.Errorf("data.streams present: %v, want %v", ok, tc.streams)
			}
			if !strings.Contains(cm.Data["stream"], p.RHCOS.URL) || !strings.Contains(p.RHCOS.URL, ".invalid/") {
				t.Errorf("the stream does not name the stand-in boot image %s", p.RHCOS.URL)
			}
			q, err := payload.Build(payload.Options{Release: tc.release, Shared: shared, BaseLayerBytes: -1})
			if err != nil {
				t.Fatal(err)
			}
			if p.ReleaseRef() != q.ReleaseRef() {
				t.Errorf("not deterministic: %s then %s", p.ReleaseRef(), q.ReleaseRef())
			}
		})
	}
	if _, err := payload.Build(payload.Options{Release: "4.16"}); err == nil || !strings.Contains(err.Error(), "4.22") {
		t.Errorf("release 4.16: %v, want an error naming the releases", err)
	}
	if _, err := payload.Build(payload.Options{Release: "4.22", APIDir: t.TempDir()}); err == nil {
		t.Errorf("4.22 without ../shared built")
	}
}

// layerFiles returns every regular file of img's layers by path (later layers win).
func layerFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, l := range ls {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				b, _ := io.ReadAll(tr)
				out[h.Name] = b
			}
		}
		rc.Close()
	}
	return out
}
