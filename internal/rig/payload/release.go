package payload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Release is one release the sample payload can be built for: the rig's row of it (which
// fixtures under ../shared hold its data, the version its release-metadata gets, whether it is
// an OKD payload). What labbuild itself must know about a release lives in render/releases;
// this table is the test side's.
type Release struct {
	// Name is what `labbuild-sample -release` and Options.Release take: "4.18", "4.20", "4.22",
	// "okd-4.22".
	Name string
	// Version is the default release-metadata version. From 4.22 the CVO's render requires it
	// to be strict semver (cluster-version-operator release-4.22 pkg/payload/render.go
	// loadReleaseVersion), so OKD's is spelled as quay.io/okd/scos-release tags are.
	Version string
	// Dir is the release's fixture root below ../shared: "fixtures" for 4.18,
	// "fixtures/versions/<release>" for the others.
	Dir string
	// Overlay is a fixture root whose files replace Dir's (OKD holds only what differs from
	// OCP 4.22: ../shared/fixtures/versions/okd-4.22/NOTES.md); "" for none.
	Overlay string
	// Components is the payload-components TSV below Dir (ocp-build-data's tag names, with the
	// programs that read each tag).
	Components string
	// OKD marks an SCOS payload: the MCO's TAGS=scos build renames the rhel-coreos tags to
	// stream-coreos and comments out the RHEL 10 ones (machine-config-operator release-4.22
	// Dockerfile, lines 28-32); the stand-in is built with -tags scos as the real MCO is.
	OKD bool
	// Streams are the CoreOS stream metadata files below Dir (or Overlay), the first the
	// default (the installer's data.stream); Keys their data.streams keys (installer
	// hack/build-coreos-manifest.go at main 9407f69d: "rhel-9"/"rhel-10", and "" for SCOS),
	// nil where the installer writes data.stream alone (4.20, installer 13a5f6b9). A nil
	// Streams is 4.18's synthetic stream (CoreOSBootImages).
	Streams []string
	Keys    []string
	// ReleaseRepo and ComponentRepo are the default repositories (Options), at the reserved
	// .invalid domain: quay.io/openshift-release-dev/ocp-release and ocp-v4.0-art-dev for OCP,
	// quay.io/okd/scos-release and scos-content for OKD.
	ReleaseRepo, ComponentRepo string
}

// Releases are the releases the sample payload builds, oldest first; Newest is the default of
// labbuild-sample (as `labbuild init` writes the newest supported release).
var Releases = []Release{
	{Name: "4.18", Version: "4.18.0", Dir: "fixtures", Components: "release/payload-components-4.18.tsv",
		ReleaseRepo: DefaultReleaseRepo, ComponentRepo: DefaultComponentRepo},
	{Name: "4.20", Version: "4.20.0", Dir: "fixtures/versions/4.20", Components: "release/payload-components-4.20.tsv",
		Streams:     []string{"installer/coreos/rhcos.json"},
		ReleaseRepo: DefaultReleaseRepo, ComponentRepo: DefaultComponentRepo},
	{Name: "4.22", Version: "4.22.0", Dir: "fixtures/versions/4.22", Components: "release/payload-components-4.22.tsv",
		Streams: []string{"installer/coreos/coreos-rhel-9.json", "installer/coreos/coreos-rhel-10.json"}, Keys: []string{"rhel-9", "rhel-10"},
		ReleaseRepo: DefaultReleaseRepo, ComponentRepo: DefaultComponentRepo},
	{Name: "okd-4.22", Version: "4.22.0-okd-scos.1", Dir: "fixtures/versions/4.22", Overlay: "fixtures/versions/okd-4.22",
		Components: "release/payload-components-4.22.tsv", OKD: true,
		Streams: []string{"installer/coreos/scos.json"}, Keys: []string{""},
		ReleaseRepo: "registry.labbuild.invalid/okd/scos-release", ComponentRepo: "registry.labbuild.invalid/okd/scos-content"},
}

// Newest is the newest OCP release of Releases: labbuild-sample's default.
const Newest = "4.22"

// ReleaseNamed returns the row called name ("" is 4.18, the zero Options' release), or an
// error listing the names.
func ReleaseNamed(name string) (Release, error) {
	if name == "" {
		name = "4.18"
	}
	for _, r := range Releases {
		if r.Name == name {
			return r, nil
		}
	}
	return Release{}, fmt.Errorf("no sample release %q: pick one of %s", name, strings.Join(ReleaseNames(), ", "))
}

// ReleaseNames returns the names of Releases.
func ReleaseNames() []string {
	var out []string
	for _, r := range Releases {
		out = append(out, r.Name)
	}
	return out
}

// file returns the path of rel below the release's fixture roots in shared: the overlay's
// copy when it has one.
func (r Release) file(shared, rel string) string {
	if r.Overlay != "" {
		if p := filepath.Join(shared, r.Overlay, rel); exists(p) {
			return p
		}
	}
	return filepath.Join(shared, r.Dir, rel)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// labbuildReads are the tags labbuild's release family reads (targets.ReleaseImageTags), so
// that every release/image/<tag> target resolves on the sample.
var labbuildReads = []string{
	"etcd", "hyperkube", "kube-proxy", "pod", "machine-config-operator", "cluster-config-api",
	"cluster-version-operator", "cluster-etcd-operator", "keepalived-ipfailover", "haproxy-router",
	"coredns", "baremetal-runtimecfg", "kube-rbac-proxy", "oauth-proxy",
}

// TagsOf returns the tags the sample payload of r carries, sorted: every tag the release's
// payload-components TSV marks as used by the installer's bootkube.sh, node-image-pull.sh or
// `machine-config-operator bootstrap`, the tags of the MCO image's image-references fragment
// (release/machine-config-operator/manifests/image-references: the RHEL 10 node images at
// 4.22, stream-coreos for OKD), and labbuild's own reads. For OKD the rhel-coreos tags become
// stream-coreos and the RHEL 10 ones go, as the TAGS=scos build's sed does.
func TagsOf(shared string, r Release) ([]string, error) {
	set := map[string]bool{}
	for _, t := range labbuildReads {
		set[t] = true
	}
	b, err := os.ReadFile(r.file(shared, r.Components))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, "\t")
		if strings.HasPrefix(line, "#") || len(f) < 4 || f[0] == "tag" || f[3] == "" {
			continue
		}
		set[f[0]] = true
	}
	frag, err := os.ReadFile(r.file(shared, "release/machine-config-operator/manifests/image-references"))
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(frag), "\n") {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "- name: "); ok {
			set[strings.TrimSpace(n)] = true // commented-out lines start with '#': not counted
		}
	}
	var out []string
	for t := range set {
		if r.OKD && strings.HasPrefix(t, "rhel-coreos") {
			if strings.HasPrefix(t, "rhel-coreos-10") {
				continue
			}
			t = "stream-coreos" + strings.TrimPrefix(t, "rhel-coreos")
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out, nil
}

// rhcosFor returns img, or when it is zero a stand-in shaped like the release's real boot
// image: the stream's own location with its host replaced by a reserved .invalid one (so
// nothing downloads it by accident), and its real sha256.
func rhcosFor(r Release, stream []byte, img RHCOSImage) (RHCOSImage, error) {
	if img.URL != "" {
		return img, nil
	}
	if r.Streams == nil {
		return DefaultRHCOS, nil
	}
	var st struct {
		Architectures map[string]struct {
			Artifacts map[string]struct {
				Formats map[string]map[string]struct {
					Location     string `json:"location"`
					SHA256       string `json:"sha256"`
					Uncompressed string `json:"uncompressed-sha256"`
				} `json:"formats"`
			} `json:"artifacts"`
		} `json:"architectures"`
	}
	if err := json.Unmarshal(stream, &st); err != nil {
		return img, err
	}
	d := st.Architectures["x86_64"].Artifacts["qemu"].Formats["qcow2.gz"]["disk"]
	if d.Location == "" {
		return img, fmt.Errorf("sample %s: the stream has no x86_64 qemu qcow2.gz disk", r.Name)
	}
	loc := d.Location
	if i := strings.Index(loc, "://"); i >= 0 {
		if j := strings.IndexByte(loc[i+3:], '/'); j >= 0 {
			loc = "https://rhcos.mirror.labbuild.invalid" + loc[i+3+j:]
		}
	}
	return RHCOSImage{URL: loc, SHA256: d.SHA256, UncompressedSHA256: d.Uncompressed}, nil
}

// withDisk returns the stream JSON with every x86_64 qemu qcow2.gz disk pointing at img,
// re-marshalled with two-space indentation as the installer's build-coreos-manifest.go does.
func withDisk(stream []byte, img RHCOSImage) ([]byte, error) {
	var st map[string]any
	if err := json.Unmarshal(stream, &st); err != nil {
		return nil, err
	}
	get := func(m any, k string) map[string]any {
		if mm, ok := m.(map[string]any); ok {
			if v, ok := mm[k].(map[string]any); ok {
				return v
			}
		}
		return nil
	}
	f := get(get(get(get(get(get(st, "architectures"), "x86_64"), "artifacts"), "qemu"), "formats"), "qcow2.gz")
	if f == nil {
		return nil, fmt.Errorf("stream has no x86_64 qemu qcow2.gz")
	}
	disk := map[string]any{"location": img.URL, "sha256": img.SHA256}
	if img.UncompressedSHA256 != "" {
		disk["uncompressed-sha256"] = img.UncompressedSHA256
	}
	f["disk"] = disk
	return json.MarshalIndent(st, "", "  ")
}

// CoreOSBootImagesOf returns the coreos-bootimages ConfigMap of release r (Streams set): its
// data.stream is the default stream and, where the release has several (4.22: rhel-9 and
// rhel-10; OKD: the one SCOS stream under ""), data.streams is the JSON map of them all
// (openshift/installer hack/build-coreos-manifest.go at main 9407f69d, "MCO-2133"), each with
// its x86_64 QEMU disk pointing at img.
func CoreOSBootImagesOf(shared string, r Release, version string, img RHCOSImage) ([]byte, error) {
	streams := map[string]json.RawMessage{}
	var first []byte
	for i, f := range r.Streams {
		b, err := os.ReadFile(r.file(shared, f))
		if err != nil {
			return nil, err
		}
		if b, err = withDisk(b, img); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if i == 0 {
			first = b
		}
		if r.Keys != nil {
			streams[r.Keys[i]] = b
		}
	}
	var buf bytes.Buffer
	buf.WriteString(`apiVersion: v1
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
	indent(&buf, first)
	if r.Keys != nil {
		all, err := json.MarshalIndent(streams, "", "  ")
		if err != nil {
			return nil, err
		}
		buf.WriteString("  streams: |\n")
		indent(&buf, all)
	}
	return buf.Bytes(), nil
}

func indent(b *bytes.Buffer, js []byte) {
	for _, l := range strings.Split(string(js), "\n") {
		b.WriteString("    " + l + "\n")
	}
}
