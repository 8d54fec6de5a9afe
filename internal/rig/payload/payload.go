// Package payload builds a small OpenShift 4.18 release payload for tests and for the README's
// sample lab, from real data where real data exists:
//
//   - REAL: the 94 CRD files of the cluster-config-api image (../shared/fixtures or, without it,
//     the github.com/openshift/api module's payload-manifests/crds/), the cluster-version-operator
//     manifests and CRDs (../shared/fixtures/release/cvo, or the module's
//     config/v1/zz_generated.crd-manifests/0000_00_cluster-version-operator_*), the MCO
//     templates tree (../shared/fixtures/mco/templates), and the payload's file layout
//     (/release-manifests/image-references as an ImageStream, /release-manifests/release-metadata
//     as cincinnati-metadata-v0, /manifests in the cluster-config-api image, /usr/bin and
//     /etc/mcc/templates in the machine-config-operator image).
//   - STAND-IN: the machine-config-operator/-controller programs (the caller passes a build of
//     ./internal/rig/standin/mco; there is no real MCO binary outside a real release), the templates tree
//     when ../shared is absent (standin-templates/), every other component image (one small
//     file naming its tag), and a filler base layer standing in for the RHEL base layers (so
//     that tests see a pull skip layers that cannot hold the wanted files).
//
// Images are deterministic: the same inputs give the same digests.
package payload

import (
	"archive/tar"
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

//go:embed all:standin-templates
var standinTemplates embed.FS

// Tags are the payload tags the sample carries: the 16 labbuild's targets read plus every tag
// ../shared/fixtures/release/payload-components-4.18.tsv marks as used by the installer's
// bootkube.sh or by `machine-config-operator bootstrap --image-references` (ocp-build-data
// openshift-4.18). Sorted.
var Tags = []string{
	"baremetal-runtimecfg", "cloud-credential-operator", "cluster-bootstrap", "cluster-config-api",
	"cluster-config-operator", "cluster-etcd-operator", "cluster-ingress-operator",
	"cluster-kube-apiserver-operator", "cluster-kube-controller-manager-operator",
	"cluster-kube-scheduler-operator", "cluster-node-tuning-operator", "cluster-policy-controller",
	"cluster-version-operator", "coredns", "etcd", "haproxy-router", "hyperkube",
	"keepalived-ipfailover", "kube-proxy", "kube-rbac-proxy", "machine-config-operator",
	"oauth-proxy", "pod", "rhel-coreos", "rhel-coreos-extensions",
}

// Defaults of Options.
const (
	DefaultVersion       = "4.18.0"
	DefaultReleaseRepo   = "registry.labbuild.invalid/ocp/release"
	DefaultComponentRepo = "registry.labbuild.invalid/ocp/art-dev"
)

// Options shapes a payload. Zero fields take the defaults.
type Options struct {
	// Version is the release version: release-metadata "version" and image-references
	// metadata.name (DefaultVersion).
	Version string
	// ReleaseRepo and ComponentRepo are where the release image and the component images live
	// (quay.io/openshift-release-dev/ocp-release and .../ocp-v4.0-art-dev in a real release).
	// The defaults use the reserved .invalid domain: they can only be served by a mirror.
	ReleaseRepo, ComponentRepo string
	// Shared is ../shared (fixtures); "" takes the real CRDs from APIDir.
	Shared string
	// APIDir is the github.com/openshift/api module directory; "" finds it with
	// OpenShiftAPIDir when Shared is "".
	APIDir string
	// MCOBinary is the program installed as /usr/bin/machine-config-operator and
	// /usr/bin/machine-config-controller (a build of ./internal/rig/standin/mco, see BuildStandin); nil
	// installs a placeholder shell script that only says it is one.
	MCOBinary []byte
	// BaseLayerBytes sizes the filler base layer (incompressible); 0 means 1 MiB, <0 none.
	BaseLayerBytes int
	// Revision adds a line to the stand-in image of a tag, giving it a new digest while every
	// other tag keeps its own (tests of a release tag that moves).
	Revision map[string]string
	// RHCOS is the x86_64 QEMU boot image the payload's CoreOS stream metadata names
	// (/release-manifests/0000_50_installer_coreos-bootimages.yaml). Zero uses DefaultRHCOS,
	// which names a host that does not resolve: tests serve a real image on loopback
	// (testenv.ServeRHCOSImage) and pass its URL and sha256 here.
	RHCOS RHCOSImage
	// NoCoreOSStream leaves the CoreOS stream metadata (CoreOSBootImagesPath) out of the
	// payload, as in a payload built without the installer's coreos-bootimages manifest: a lab
	// must then name its boot image with rhcos.imageURL and rhcos.imageSHA256.
	NoCoreOSStream bool
}

// RHCOSImage is one disk artifact of CoreOS stream metadata: its location and the sha256 of
// the file as published (compressed), as coreos/stream-metadata-go's Artifact has them.
type RHCOSImage struct {
	URL, SHA256 string
	// UncompressedSHA256 is the sha256 of the unpacked qcow2 (stream metadata
	// "uncompressed-sha256"); optional.
	UncompressedSHA256 string
}

// DefaultRHCOS is the stand-in boot image of the sample payload: the shape of a real 4.18
// entry, at a reserved .invalid host, so nothing can download it by accident.
var DefaultRHCOS = RHCOSImage{
	URL:    "https://rhcos.mirror.labbuild.invalid/art/storage/prod/streams/4.18-9.4/builds/418.94.202501221327-0/x86_64/rhcos-418.94.202501221327-0-qemu.x86_64.qcow2.gz",
	SHA256: "0000000000000000000000000000000000000000000000000000000000000418",
}

// CoreOSBootImagesPath is where a release payload carries its CoreOS stream metadata: the
// installer's ConfigMap openshift-machine-config-operator/coreos-bootimages, whose data.stream
// is what `openshift-install coreos print-stream-json` prints (openshift/installer
// data/data/coreos/rhcos.json; enhancements/coreos-bootimages).
const CoreOSBootImagesPath = "release-manifests/0000_50_installer_coreos-bootimages.yaml"

// CoreOSBootImages returns the ConfigMap YAML for img, shaped as the one the installer
// image contributes to real payloads: the CVO include annotations, data.releaseVersion and
// data.stream (stream metadata JSON with the qemu qcow2.gz disk for x86_64, beside a metal ISO
// so readers must pick the right artifact).
func CoreOSBootImages(version string, img RHCOSImage) ([]byte, error) {
	disk := map[string]string{"location": img.URL, "sha256": img.SHA256}
	if img.UncompressedSHA256 != "" {
		disk["uncompressed-sha256"] = img.UncompressedSHA256
	}
	const build = "418.94.202501221327-0"
	iso := strings.TrimSuffix(img.URL, "-qemu.x86_64.qcow2.gz") + "-live.x86_64.iso"
	stream := map[string]any{
		"stream":   "rhcos-4.18",
		"metadata": map[string]string{"last-modified": "2025-01-22T13:27:00Z", "generator": "labbuild sample payload (stand-in stream)"},
		"architectures": map[string]any{
			"x86_64": map[string]any{
				"artifacts": map[string]any{
					"metal": map[string]any{"release": build, "formats": map[string]any{
						"iso": map[string]any{"disk": map[string]string{"location": iso, "sha256": strings.Repeat("1", 64)}}}},
					"qemu": map[string]any{"release": build, "formats": map[string]any{
						"qcow2.gz": map[string]any{"disk": disk}}},
				},
			},
		},
	}
	js, err := json.MarshalIndent(stream, "", "  ")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`apiVersion: v1
kind: ConfigMap
metadata:
  name: coreos-bootimages
  namespace: openshift-machine-config-operator
  annotations:
    include.release.openshift.io/ibm-cloud-managed: "true"
    include.release.openshift.io/self-managed-high-availability: "true"
    include.release.openshift.io/single-node-developer: "true"
data:
  releaseVersion: ` + version + `
  stream: |
`)
	for _, l := range strings.Split(string(js), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.Bytes(), nil
}

// Payload is a built release: the release image and one image per tag.
type Payload struct {
	Version         string
	ReleaseRepo     string
	ComponentRepo   string
	Release         v1.Image
	Images          map[string]v1.Image // by tag
	ImageReferences []byte
	ReleaseMetadata []byte
	// CoreOSBootImages is the coreos-bootimages ConfigMap at CoreOSBootImagesPath (nil with
	// Options.NoCoreOSStream).
	CoreOSBootImages []byte
	// CRDFiles are the names of the *.crd.yaml files of the cluster-config-api image's
	// /manifests; CVOCRDFiles those of the release image's /manifests.
	CRDFiles, CVOCRDFiles []string
}

// ReleaseTag is the tag Push gives the release image: "<version>-x86_64", as quay.io's
// ocp-release tags.
func (p *Payload) ReleaseTag() string { return p.Version + "-x86_64" }

// ReleaseRef returns the release image's digest pull spec.
func (p *Payload) ReleaseRef() string { return ref(p.ReleaseRepo, p.Release) }

// Pullspec returns the digest pull spec of tag's image.
func (p *Payload) Pullspec(tag string) string { return ref(p.ComponentRepo, p.Images[tag]) }

func ref(repo string, img v1.Image) string {
	d, err := img.Digest()
	if err != nil {
		panic(err) // in-memory images always have a digest
	}
	return repo + "@" + d.String()
}

// epoch is the mtime of every file and the creation time of every image, so digests do not
// depend on when the payload was built.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// entry is one file of a layer.
type entry struct {
	name string // image path without leading slash
	mode int64
	data []byte
}

// layer makes a deterministic gzip layer from entries, adding parent directories.
func layer(entries []entry) (v1.Layer, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, e := range entries {
		var parents []string
		for d := path.Dir(e.name); d != "." && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		for i := len(parents) - 1; i >= 0; i-- {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: parents[i] + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: e.mode, Size: int64(len(e.data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// image makes an OCI linux/amd64 image of layers (bottom first).
func image(labels map[string]string, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err := mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: "amd64", OS: "linux", Created: v1.Time{Time: epoch},
		Config: v1.Config{Labels: labels},
	})
	if err != nil {
		return nil, err
	}
	var adds []mutate.Addendum
	for _, l := range layers {
		if l != nil {
			adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "labbuild payload builder"}})
		}
	}
	return mutate.Append(img, adds...)
}

// readDir returns the regular files under dir (recursively) as entries below prefix, keeping
// only names for which keep returns true (nil keeps all).
func readDir(fsys fs.FS, dir, prefix string, keep func(string) bool) ([]entry, error) {
	var out []entry
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		if keep != nil && !keep(rel) {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		out = append(out, entry{name: path.Join(prefix, rel), mode: 0o644, data: b})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	return out, nil
}

// OpenShiftAPIDir returns the module cache directory of github.com/openshift/api at the version
// go.mod requires, downloading it through the module proxy when absent
// (`go mod download -json github.com/openshift/api`, run in the module root, the current
// directory or a parent of it).
func OpenShiftAPIDir() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/openshift/api")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download github.com/openshift/api: %v: %s (run from the labbuild repository)", err, strings.TrimSpace(stderr.String()))
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		return "", fmt.Errorf("go mod download github.com/openshift/api: no Dir in its output (%s)", m.Error)
	}
	return m.Dir, nil
}

// BuildStandin compiles ./internal/rig/standin/mco of the module at repoRoot and returns the binary
// (linux/amd64, static), the MCO stand-in the sample payload ships as the MCO programs.
func BuildStandin(ctx context.Context, repoRoot string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "labbuild-mco-standin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "machine-config-operator")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./internal/rig/standin/mco")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./internal/rig/standin/mco: %v\n%s", err, b)
	}
	return os.ReadFile(out)
}

// Build assembles the payload in memory.
func Build(o Options) (*Payload, error) {
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.ReleaseRepo == "" {
		o.ReleaseRepo = DefaultReleaseRepo
	}
	if o.ComponentRepo == "" {
		o.ComponentRepo = DefaultComponentRepo
	}
	if o.BaseLayerBytes == 0 {
		o.BaseLayerBytes = 1 << 20
	}
	p := &Payload{Version: o.Version, ReleaseRepo: o.ReleaseRepo, ComponentRepo: o.ComponentRepo, Images: map[string]v1.Image{}}

	// Sources of real data: ../shared/fixtures, else the openshift/api module.
	var cfgAPI, cvo, templates []entry
	var err error
	isCRD := func(n string) bool { return strings.HasSuffix(n, ".crd.yaml") }
	cvoCRD := func(n string) bool {
		return strings.HasPrefix(n, "0000_00_cluster-version-operator_") && strings.HasSuffix(n, ".crd.yaml")
	}
	if o.Shared != "" {
		fx := os.DirFS(filepath.Join(o.Shared, "fixtures"))
		if cfgAPI, err = readDir(fx, "release/cluster-config-api/manifests", "manifests", nil); err != nil {
			return nil, err
		}
		if cvo, err = readDir(fx, "release/cvo/manifests", "manifests", nil); err != nil {
			return nil, err
		}
		if templates, err = readDir(fx, "mco/templates", "etc/mcc/templates", nil); err != nil {
			return nil, err
		}
	} else {
		if o.APIDir == "" {
			if o.APIDir, err = OpenShiftAPIDir(); err != nil {
				return nil, err
			}
		}
		api := os.DirFS(o.APIDir)
		if cfgAPI, err = readDir(api, "payload-manifests/crds", "manifests", isCRD); err != nil {
			return nil, err
		}
		fg, err := readDir(api, "payload-manifests/featuregates", "manifests", nil)
		if err != nil {
			return nil, err
		}
		cfgAPI = append(cfgAPI, fg...)
		if cvo, err = readDir(api, "config/v1/zz_generated.crd-manifests", "manifests", cvoCRD); err != nil {
			return nil, err
		}
		if templates, err = readDir(standinTemplates, "standin-templates", "etc/mcc/templates", nil); err != nil {
			return nil, err
		}
	}
	for _, e := range cfgAPI {
		if isCRD(e.name) {
			p.CRDFiles = append(p.CRDFiles, path.Base(e.name))
		}
	}
	for _, e := range cvo {
		if cvoCRD(path.Base(e.name)) {
			p.CVOCRDFiles = append(p.CVOCRDFiles, path.Base(e.name))
		}
	}

	var base v1.Layer
	if o.BaseLayerBytes > 0 {
		filler := make([]byte, o.BaseLayerBytes)
		rng := rand.New(rand.NewPCG(4, 18))
		for i := range filler {
			filler[i] = byte(rng.Uint32())
		}
		if base, err = layer([]entry{{name: "usr/share/labbuild-sample/base-layer.bin", mode: 0o644, data: filler}}); err != nil {
			return nil, err
		}
	}
	label := func(tag string) map[string]string {
		return map[string]string{"io.openshift.release.operator": "true", "labbuild.sample.tag": tag}
	}
	for _, tag := range Tags {
		var img v1.Image
		switch tag {
		case "cluster-config-api":
			l, err := layer(cfgAPI)
			if err != nil {
				return nil, err
			}
			img, err = image(label(tag), base, l)
			if err != nil {
				return nil, err
			}
		case "machine-config-operator":
			bin := o.MCOBinary
			if bin == nil {
				bin = []byte("#!/bin/sh\necho 'labbuild sample: placeholder, not the MCO (build the sample with labbuild-sample for the stand-in)' >&2\nexit 1\n")
			}
			es := append([]entry{
				{name: "usr/bin/machine-config-operator", mode: 0o755, data: bin},
				{name: "usr/bin/machine-config-controller", mode: 0o755, data: bin},
			}, templates...)
			l, err := layer(es)
			if err != nil {
				return nil, err
			}
			if img, err = image(label(tag), base, l); err != nil {
				return nil, err
			}
		default:
			l, err := layer([]entry{{name: "labbuild-sample/" + tag, mode: 0o644,
				data: []byte("STAND-IN image for payload tag " + tag + " of labbuild's sample release; it holds no program.\n" + o.Revision[tag])}})
			if err != nil {
				return nil, err
			}
			if img, err = image(label(tag), l); err != nil {
				return nil, err
			}
		}
		p.Images[tag] = img
	}

	// /release-manifests: image-references (ImageStream, as `oc adm release new` writes it)
	// and release-metadata (cincinnati-metadata-v0).
	type tagRef struct {
		Name string `json:"name"`
		From struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"from"`
	}
	is := struct {
		Kind       string `json:"kind"`
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			Name        string            `json:"name"`
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Tags []tagRef `json:"tags"`
		} `json:"spec"`
	}{Kind: "ImageStream", APIVersion: "image.openshift.io/v1"}
	is.Metadata.Name = o.Version
	is.Metadata.Annotations = map[string]string{"release.openshift.io/from-image-stream": "labbuild/sample"}
	for _, tag := range Tags {
		var t tagRef
		t.Name = tag
		t.From.Kind = "DockerImage"
		t.From.Name = p.Pullspec(tag)
		is.Spec.Tags = append(is.Spec.Tags, t)
	}
	if p.ImageReferences, err = json.MarshalIndent(is, "", "  "); err != nil {
		return nil, err
	}
	p.ReleaseMetadata = []byte(`{
  "kind": "cincinnati-metadata-v0",
  "version": "` + o.Version + `",
  "previous": [],
  "metadata": {
    "description": "labbuild sample payload: real CRDs and templates, stand-in programs; not an OpenShift release"
  }
}
`)
	cvoLayer, err := layer(cvo)
	if err != nil {
		return nil, err
	}
	if o.RHCOS.URL == "" {
		o.RHCOS = DefaultRHCOS
	}
	manifests := []entry{
		{name: "release-manifests/image-references", mode: 0o644, data: p.ImageReferences},
		{name: "release-manifests/release-metadata", mode: 0o644, data: p.ReleaseMetadata},
	}
	if !o.NoCoreOSStream {
		if p.CoreOSBootImages, err = CoreOSBootImages(o.Version, o.RHCOS); err != nil {
			return nil, err
		}
		manifests = append([]entry{{name: CoreOSBootImagesPath, mode: 0o644, data: p.CoreOSBootImages}}, manifests...)
	}
	rm, err := layer(manifests)
	if err != nil {
		return nil, err
	}
	if p.Release, err = image(map[string]string{"io.openshift.release": o.Version}, base, cvoLayer, rm); err != nil {
		return nil, err
	}
	return p, nil
}

// all returns every image with its repository, release first, then tags in order.
func (p *Payload) all() []struct {
	repo, tag string
	img       v1.Image
} {
	out := []struct {
		repo, tag string
		img       v1.Image
	}{{p.ReleaseRepo, p.ReleaseTag(), p.Release}}
	for _, t := range Tags {
		out = append(out, struct {
			repo, tag string
			img       v1.Image
		}{p.ComponentRepo, "", p.Images[t]})
	}
	return out
}

// WriteLayout writes every image into an OCI image layout at dir (replacing one that is there),
// the release annotated with its tag reference (org.opencontainers.image.ref.name).
func (p *Payload) WriteLayout(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout %s: %w", dir, err)
	}
	for _, e := range p.all() {
		var opts []layout.Option
		if e.tag != "" {
			opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": e.repo + ":" + e.tag}))
		}
		if err := lp.AppendImage(e.img, opts...); err != nil {
			return fmt.Errorf("writing OCI layout %s: %w", dir, err)
		}
	}
	return nil
}

// Push uploads every image to its repository by digest, and tags the release ReleaseTag().
// opts carry the registry's credentials (remote.WithAuth).
func (p *Payload) Push(ctx context.Context, opts ...remote.Option) error {
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	for _, e := range p.all() {
		d, err := e.img.Digest()
		if err != nil {
			return err
		}
		r, err := name.ParseReference(e.repo + "@" + d.String())
		if err != nil {
			return err
		}
		if e.tag != "" {
			if r, err = name.ParseReference(e.repo + ":" + e.tag); err != nil {
				return err
			}
		}
		if err := remote.Write(r, e.img, opts...); err != nil {
			return fmt.Errorf("pushing %s: %w", r, err)
		}
	}
	return nil
}
