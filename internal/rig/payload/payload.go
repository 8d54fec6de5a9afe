// Package payload builds a small OpenShift release payload for tests and for the README's
// sample lab, for each release of Releases (4.18, 4.20, 4.22 and OKD 4.22), from real data
// where real data exists:
//
//   - REAL: the cluster-config-api image's /manifests (CRDs, FeatureGates, empty resources:
//     ../shared/fixtures/[versions/<release>/]release/cluster-config-api/manifests or, for 4.18
//     without ../shared, the github.com/openshift/api module's payload-manifests/), the
//     cluster-version-operator's /manifests and /bootstrap (release/cvo), the MCO image's
//     /etc/mcc/templates (mco/templates) and /manifests (release/machine-config-operator/
//     manifests, with its image-references fragment), the CoreOS stream metadata
//     (installer/coreos, in the installer's coreos-bootimages ConfigMap), the tag names
//     (release/payload-components-<v>.tsv), and the payload's file layout
//     (/release-manifests/image-references as an ImageStream, /release-manifests/release-metadata
//     as cincinnati-metadata-v0).
//   - STAND-IN: the machine-config-operator/-controller programs (the caller passes a build of
//     ./internal/rig/standin/mco for the release, BuildStandin; there is no real MCO binary
//     outside a real release), the templates tree when ../shared is absent (standin-templates/),
//     every other component image (one small file naming its tag), the boot image's location
//     (Options.RHCOS), and a filler base layer standing in for the RHEL base layers (so
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
	"slices"
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

// Tags are the payload tags the 4.18 sample carries: TagsOf's rule applied to
// ../shared/fixtures/release/payload-components-4.18.tsv (ocp-build-data openshift-4.18),
// fixed here so that the sample builds from the openshift/api module without ../shared.
// Sorted.
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
	// Release names the row of Releases to build ("" is 4.18); every release but 4.18 needs
	// Shared.
	Release string
	// Version is the release version: release-metadata "version" and image-references
	// metadata.name (the release's Version).
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
	// /usr/bin/machine-config-controller (a build of ./internal/rig/standin/mco for the
	// release, see BuildStandin); nil installs a placeholder shell script that only says it is
	// one.
	MCOBinary []byte
	// BaseLayerBytes sizes the filler base layer (incompressible); 0 means 1 MiB, <0 none.
	BaseLayerBytes int
	// Revision adds a line to the stand-in image of a tag, giving it a new digest while every
	// other tag keeps its own (tests of a release tag that moves).
	Revision map[string]string
	// RHCOS is the x86_64 QEMU boot image the payload's CoreOS stream metadata names
	// (/release-manifests/0000_50_installer_coreos-bootimages.yaml). Zero uses DefaultRHCOS
	// for 4.18 and the release's real image at a reserved .invalid host for the others, which
	// does not resolve: tests serve a real image on loopback (testenv.ServeRHCOSImage) and pass
	// its URL and sha256 here.
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
	// Release is the row it was built for; Tags the tags it carries, sorted.
	Release         Release
	Tags            []string
	Version         string
	ReleaseRepo     string
	ComponentRepo   string
	ReleaseImage    v1.Image
	Images          map[string]v1.Image // by tag
	ImageReferences []byte
	ReleaseMetadata []byte
	// CoreOSBootImages is the coreos-bootimages ConfigMap at CoreOSBootImagesPath (nil with
	// Options.NoCoreOSStream); RHCOS the QEMU disk its default stream names.
	CoreOSBootImages []byte
	RHCOS            RHCOSImage
	// CRDFiles are the names of the *.crd.yaml files of the cluster-config-api image's
	// /manifests; CVOCRDFiles those of the release image's /manifests.
	CRDFiles, CVOCRDFiles []string
}

// ReleaseTag is the tag Push gives the release image: "<version>-x86_64", as quay.io's
// ocp-release tags.
func (p *Payload) ReleaseTag() string { return p.Version + "-x86_64" }

// ReleaseRef returns the release image's digest pull spec.
func (p *Payload) ReleaseRef() string { return ref(p.ReleaseRepo, p.ReleaseImage) }

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

// StandinReleaseVar is the stand-in's variable BuildStandin sets with -ldflags -X to the
// release it plays (a Releases name), as the real MCO learns its release from its build
// (machine-config-operator pkg/version: Raw and ReleaseVersion set by -ldflags, and the scos
// build tag for OKD, pkg/version/version_scos.go).
const StandinReleaseVar = "main.payloadRelease"

// BuildStandin compiles ./internal/rig/standin/mco of the module at repoRoot for release (a
// Releases name; "" is 4.18) and returns the binary (linux/amd64, static), the MCO stand-in
// the sample payload ships as the MCO programs: -ldflags -X StandinReleaseVar=<release>, and
// -tags scos for OKD, as the real MCO image is built with TAGS=scos (machine-config-operator
// release-4.22 Dockerfile).
func BuildStandin(ctx context.Context, repoRoot, release string) ([]byte, error) {
	r, err := ReleaseNamed(release)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "labbuild-mco-standin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "machine-config-operator")
	args := []string{"build", "-trimpath", "-ldflags=-X " + StandinReleaseVar + "=" + r.Name}
	if r.OKD {
		args = append(args, "-tags", "scos")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "-o", out, "./internal/rig/standin/mco")...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./internal/rig/standin/mco (release %s): %v\n%s", r.Name, err, b)
	}
	return os.ReadFile(out)
}

// sources are the real files of a payload, as image entries.
type sources struct {
	cfgAPI, cvo, cvoBootstrap, templates, mcoManifests []entry
}

// fixtureSources reads r's fixtures in shared: each folder of the release's root, with the
// overlay's files replacing those of the same name (OKD).
func fixtureSources(shared string, r Release) (sources, error) {
	var src sources
	for _, d := range []struct {
		into   *[]entry
		dir    string
		prefix string
	}{
		{&src.cfgAPI, "release/cluster-config-api/manifests", "manifests"},
		{&src.cvo, "release/cvo/manifests", "manifests"},
		{&src.cvoBootstrap, "release/cvo/bootstrap", "bootstrap"},
		{&src.templates, "mco/templates", "etc/mcc/templates"},
		{&src.mcoManifests, "release/machine-config-operator/manifests", "manifests"},
	} {
		es, err := readDir(os.DirFS(filepath.Join(shared, r.Dir)), d.dir, d.prefix, nil)
		if err != nil {
			return src, err
		}
		if over := filepath.Join(shared, r.Overlay, d.dir); r.Overlay != "" && exists(over) {
			ov, err := readDir(os.DirFS(filepath.Join(shared, r.Overlay)), d.dir, d.prefix, nil)
			if err != nil {
				return src, err
			}
			for _, o := range ov {
				i := slices.IndexFunc(es, func(e entry) bool { return e.name == o.name })
				if i < 0 {
					es = append(es, o)
				} else {
					es[i] = o
				}
			}
		}
		*d.into = es
	}
	return src, nil
}

// moduleSources reads the 4.18 payload's real files from the github.com/openshift/api module
// (CRDs, FeatureGates, the CVO's CRDs) and the embedded stand-in templates.
func moduleSources(apiDir string) (sources, error) {
	var src sources
	var err error
	isCRD := func(n string) bool { return strings.HasSuffix(n, ".crd.yaml") }
	cvoCRD := func(n string) bool {
		return strings.HasPrefix(n, "0000_00_cluster-version-operator_") && strings.HasSuffix(n, ".crd.yaml")
	}
	api := os.DirFS(apiDir)
	if src.cfgAPI, err = readDir(api, "payload-manifests/crds", "manifests", isCRD); err != nil {
		return src, err
	}
	fg, err := readDir(api, "payload-manifests/featuregates", "manifests", nil)
	if err != nil {
		return src, err
	}
	src.cfgAPI = append(src.cfgAPI, fg...)
	if src.cvo, err = readDir(api, "config/v1/zz_generated.crd-manifests", "manifests", cvoCRD); err != nil {
		return src, err
	}
	if src.templates, err = readDir(standinTemplates, "standin-templates", "etc/mcc/templates", nil); err != nil {
		return src, err
	}
	return src, nil
}

// Build assembles the payload in memory.
func Build(o Options) (*Payload, error) {
	rel, err := ReleaseNamed(o.Release)
	if err != nil {
		return nil, err
	}
	if o.Version == "" {
		o.Version = rel.Version
	}
	if o.ReleaseRepo == "" {
		o.ReleaseRepo = rel.ReleaseRepo
	}
	if o.ComponentRepo == "" {
		o.ComponentRepo = rel.ComponentRepo
	}
	if o.BaseLayerBytes == 0 {
		o.BaseLayerBytes = 1 << 20
	}
	p := &Payload{Release: rel, Version: o.Version, ReleaseRepo: o.ReleaseRepo, ComponentRepo: o.ComponentRepo, Images: map[string]v1.Image{}}

	// Sources of real data: ../shared/fixtures, else (4.18 only) the openshift/api module.
	var src sources
	switch {
	case o.Shared != "":
		if src, err = fixtureSources(o.Shared, rel); err != nil {
			return nil, err
		}
		if p.Tags, err = TagsOf(o.Shared, rel); err != nil {
			return nil, err
		}
	case rel.Name != "4.18":
		return nil, fmt.Errorf("the sample release %s is built from ../shared/fixtures/versions (Options.Shared); only 4.18 builds from the openshift/api module", rel.Name)
	default:
		if o.APIDir == "" {
			if o.APIDir, err = OpenShiftAPIDir(); err != nil {
				return nil, err
			}
		}
		if src, err = moduleSources(o.APIDir); err != nil {
			return nil, err
		}
		p.Tags = Tags
	}
	for _, e := range src.cfgAPI {
		if strings.HasSuffix(e.name, ".crd.yaml") {
			p.CRDFiles = append(p.CRDFiles, path.Base(e.name))
		}
	}
	for _, e := range src.cvo {
		if n := path.Base(e.name); strings.HasPrefix(n, "0000_00_cluster-version-operator_") && strings.HasSuffix(n, ".crd.yaml") {
			p.CVOCRDFiles = append(p.CVOCRDFiles, n)
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
	for _, tag := range p.Tags {
		var img v1.Image
		switch tag {
		case "cluster-config-api":
			l, err := layer(src.cfgAPI)
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
			}, src.templates...)
			es = append(es, src.mcoManifests...) // COPY install /manifests (MCO Dockerfile)
			l, err := layer(es)
			if err != nil {
				return nil, err
			}
			if img, err = image(label(tag), base, l); err != nil {
				return nil, err
			}
		default:
			l, err := layer([]entry{{name: "labbuild-sample/" + tag, mode: 0o644,
				data: []byte("STAND-IN image for payload tag " + tag + " of labbuild's sample release " + rel.Name + "; it holds no program.\n" + o.Revision[tag])}})
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
	for _, tag := range p.Tags {
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
	cvoLayer, err := layer(append(append([]entry{}, src.cvo...), src.cvoBootstrap...))
	if err != nil {
		return nil, err
	}
	manifests := []entry{
		{name: "release-manifests/image-references", mode: 0o644, data: p.ImageReferences},
		{name: "release-manifests/release-metadata", mode: 0o644, data: p.ReleaseMetadata},
	}
	if !o.NoCoreOSStream {
		if p.CoreOSBootImages, p.RHCOS, err = coreOSBootImages(o, rel); err != nil {
			return nil, err
		}
		manifests = append([]entry{{name: CoreOSBootImagesPath, mode: 0o644, data: p.CoreOSBootImages}}, manifests...)
	}
	rm, err := layer(manifests)
	if err != nil {
		return nil, err
	}
	if p.ReleaseImage, err = image(map[string]string{"io.openshift.release": o.Version}, base, cvoLayer, rm); err != nil {
		return nil, err
	}
	return p, nil
}

// coreOSBootImages is the payload's coreos-bootimages ConfigMap: 4.18's synthetic stream, or
// the release's real streams with the QEMU disk at o.RHCOS (or the release's own image at an
// .invalid host).
func coreOSBootImages(o Options, r Release) ([]byte, RHCOSImage, error) {
	if r.Streams == nil {
		img := o.RHCOS
		if img.URL == "" {
			img = DefaultRHCOS
		}
		cm, err := CoreOSBootImages(o.Version, img)
		return cm, img, err
	}
	b, err := os.ReadFile(r.file(o.Shared, r.Streams[0]))
	if err != nil {
		return nil, RHCOSImage{}, err
	}
	img, err := rhcosFor(r, b, o.RHCOS)
	if err != nil {
		return nil, img, err
	}
	cm, err := CoreOSBootImagesOf(o.Shared, r, o.Version, img)
	return cm, img, err
}

// all returns every image with its repository, release first, then tags in order.
func (p *Payload) all() []struct {
	repo, tag string
	img       v1.Image
} {
	out := []struct {
		repo, tag string
		img       v1.Image
	}{{p.ReleaseRepo, p.ReleaseTag(), p.ReleaseImage}}
	for _, t := range p.Tags {
		out = append(out, struct {
			repo, tag string
			img       v1.Image
		}{p.ComponentRepo, "", p.Images[t]})
	}
	return out
}

// WriteLayout writes every image into an OCI image layout at dir (replacing one that is there),
// the release annotated with its tag reference (org.opencontainers.image.ref.name).
func (p *Payload) WriteLayout(dir string) error { return WriteLayouts(dir, p) }

// WriteLayouts writes the images of several payloads into one OCI image layout at dir
// (replacing one that is there), as a mirror holding two releases does: a lab switches between
// them by release.image alone, its release.mirrors unchanged.
func WriteLayouts(dir string, ps ...*Payload) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing OCI layout %s: %w", dir, err)
	}
	seen := map[v1.Hash]bool{}
	for _, p := range ps {
		for _, e := range p.all() {
			d, err := e.img.Digest()
			if err != nil {
				return err
			}
			if seen[d] && e.tag == "" {
				continue
			}
			seen[d] = true
			var opts []layout.Option
			if e.tag != "" {
				opts = append(opts, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": e.repo + ":" + e.tag}))
			}
			if err := lp.AppendImage(e.img, opts...); err != nil {
				return fmt.Errorf("writing OCI layout %s: %w", dir, err)
			}
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
