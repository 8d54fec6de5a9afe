package targets

// The release family reads the OpenShift release payload (../shared/spec/target-graph.md §3.1)
// with go-containerregistry through targets/oci: no oc, no podman. Everything downstream pins
// images by the digests these targets write.
//
//	release/resolve            release.image (tag or digest) → pullspec (digest pull spec)
//	release/image-references   /release-manifests/image-references of the payload's last layer
//	release/metadata           /release-manifests/release-metadata, checked against the above
//	release/image/<tag>        pullspec of one payload tag (one target per tag: early cutoff)
//	release/featuregates       featuregates/<file>: the FeatureGate manifests of the cluster-config-api
//	                           image's /manifests (the status the release's render computes)
//	release/crds               crds/<file>: the cluster-config-api CRDs the cluster's feature set
//	                           and profile select, plus ClusterVersion and ClusterOperator
//	release/cvo-bootstrap      bootstrap-pod.yaml: the CVO's /bootstrap/bootstrap-pod.yaml template
//	release/mco                bin/machine-config-{operator,controller}, templates/ (/etc/mcc/templates)
//	release/coreos-stream      the CoreOS stream metadata (coreos-bootimages): the RHCOS QEMU image
//
// The pull secret is only a registry credential here: it is declared (so a new one re-runs the
// pulls) but no output depends on it, and early cutoff stops the rebuild at these targets.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/render/releases"
	"github.com/labbuild/labbuild/targets/oci"
)

// ReleaseImageTags are the payload tags labbuild's targets read, one release/image/<tag> target
// each: the tags the installer's bootkube.sh and the MCO bootstrap resolve in every supported
// release (../shared/fixtures/[versions/<release>/]release/payload-components-<v>.tsv), and which
// labbuild's manifests, MCO and Ignition targets use. The node OS image's tag is not among them:
// it is the release's (rhel-coreos, stream-coreos for OKD: render/releases BaseOSTag), and the
// MCO bootstrap reads it from image-references itself.
var ReleaseImageTags = []string{
	"etcd", "hyperkube", "kube-proxy", "pod", "machine-config-operator", "cluster-config-api",
	"cluster-version-operator", "cluster-etcd-operator", "keepalived-ipfailover", "haproxy-router",
	"coredns", "baremetal-runtimecfg", "kube-rbac-proxy", "oauth-proxy",
}

// releaseResolveTTL is how long a tag's resolution holds: after it, the next build asks the
// registry again (and downstream rebuilds only if the digest moved). A digest never expires.
const releaseResolveTTL = 24 * time.Hour

// Defaults of the CRD selection (openshift/api payload-command/render: InstallerFeatureSet and
// ClusterProfile).
const (
	releaseDefaultFeatureSet = "Default"
	releaseDefaultProfile    = "self-managed-high-availability"
)

// Payload paths read by the release targets (oc adm release extract; openshift/api
// Dockerfile.ocp; MCO Dockerfile).
const (
	releaseImageReferencesPath = "/release-manifests/image-references"
	releaseMetadataPath        = "/release-manifests/release-metadata"
	releaseManifestsDir        = "/manifests/"
	releaseMCOOperatorPath     = "/usr/bin/machine-config-operator"
	releaseMCOControllerPath   = "/usr/bin/machine-config-controller"
	releaseMCOTemplatesDir     = "/etc/mcc/templates/"
	// releaseCVOBootstrapPod is the CVO's bootstrap pod template in the release image
	// (cluster-version-operator bootstrap/bootstrap-pod.yaml, rendered by its `render` into
	// /assets/cvo-bootstrap/bootstrap; Dockerfile.rhel COPY bootstrap /bootstrap).
	releaseCVOBootstrapPod = "/bootstrap/bootstrap-pod.yaml"
)

// releaseImage opens the image whose digest pull spec upstream dep wrote.
func releaseImage(ctx context.Context, s *engine.Step, c *oci.Client, dep string) (*oci.Image, error) {
	ref, err := depPullspec(s, dep)
	if err != nil {
		return nil, err
	}
	img, err := c.Image(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	return img, nil
}

// releaseReadFiles extracts the wanted paths into memory (small files only: manifests).
// releaseLastLayerFile reads one file (an absolute path such as
// /release-manifests/image-references) from the last layer of the payload release/resolve
// pinned, as oc reads the release manifests.
func releaseLastLayerFile(ctx context.Context, s *engine.Step, file string) (*oci.Image, []byte, error) {
	cl, err := releaseClient(s)
	if err != nil {
		return nil, nil, err
	}
	img, err := releaseImage(ctx, s, cl, "release/resolve")
	if err != nil {
		return nil, nil, err
	}
	files, err := releaseReadFiles(ctx, cl, img, oci.Want{Paths: []string{file}, LastLayerOnly: true})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	b, ok := files[strings.TrimPrefix(file, "/")]
	if !ok {
		return nil, nil, fmt.Errorf("%s: %s has no %s in its last layer: is release.image a release payload?", s.Target().Name, img.Ref, file)
	}
	return img, b, nil
}

func releaseReadFiles(ctx context.Context, c *oci.Client, img *oci.Image, w oci.Want) (map[string][]byte, error) {
	out := map[string][]byte{}
	_, err := c.Extract(ctx, img, w, func(f oci.File, r io.Reader) error {
		b, err := io.ReadAll(io.LimitReader(r, 64<<20))
		out[f.Name] = b
		return err
	})
	return out, err
}

// releaseMetadata is /release-manifests/release-metadata (cincinnati-metadata-v0).
type releaseMetadata struct {
	Kind    string `json:"kind"`
	Version string `json:"version"`
}

// releaseSelectCRD reports whether a CRD manifest belongs to a cluster of featureSet and
// profile, as openshift/api payload-command/render/renderassets does: the
// release.openshift.io/feature-set annotation is absent or lists featureSet (comma-separated),
// and include.release.openshift.io/<profile> is "true".
func releaseSelectCRD(data []byte, featureSet, profile string) (bool, error) {
	var m struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	// Only metadata matters: decode the top-level metadata block alone when the document is
	// a plain block mapping (every CRD of openshift/api is), which is a tenth of the work of a
	// 200 KiB CRD; anything else is decoded whole.
	doc := data
	if b, ok := releaseMetadataBlock(data); ok {
		doc = b
	}
	if err := yaml.Unmarshal(doc, &m); err != nil {
		return false, err
	}
	a := m.Metadata.Annotations
	if a["include.release.openshift.io/"+profile] != "true" {
		return false, nil
	}
	fs, ok := a["release.openshift.io/feature-set"]
	if !ok {
		return true, nil
	}
	return slices.Contains(strings.Split(fs, ","), featureSet), nil
}

// releaseMetadataBlock returns the lines of data's top-level "metadata:" entry (from that
// line to the next line that starts in column 0), when data is one YAML block mapping: no
// document markers or directives, no flow-style top level, and exactly one metadata key. In
// a block mapping at indentation 0 every line of a value is indented (YAML 1.2 §8.2.2), so
// the entry ends at the next unindented line. ok is false otherwise.
func releaseMetadataBlock(data []byte) (block []byte, ok bool) {
	start, end := -1, -1
	for off := 0; off < len(data); {
		line := data[off:]
		next := len(data)
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line, next = line[:i], off+i+1
		}
		switch {
		case len(line) == 0 || line[0] == ' ' || line[0] == '#' || line[0] == '\r':
			// inside the current entry (or a blank line or comment)
		case bytes.IndexByte([]byte("\t-.%{[?<&*!\"'|>@`"), line[0]) >= 0:
			// A tab, document marker, directive, flow style, complex, quoted or merge key,
			// anchor, alias or tag: decode the whole document.
			return nil, false
		default:
			if start >= 0 && end < 0 {
				end = off
			}
			if k, ok := bytes.CutPrefix(line, []byte("metadata:")); ok && (len(k) == 0 || k[0] == ' ' || k[0] == '\r') {
				if start >= 0 {
					return nil, false // a duplicate key: let the decoder judge
				}
				start, end = off, -1
			}
		}
		off = next
	}
	if start < 0 {
		return nil, false
	}
	if end < 0 {
		end = len(data)
	}
	return data[start:end], true
}

func releaseTargets(c *lab.Config) []*engine.Target {
	resolve := &engine.Target{
		Name:    "release/resolve",
		Doc:     "release.image → digest pull spec (a digest never touches the network; a tag is re-resolved after a TTL or -B)",
		Reads:   []string{lab.ReleaseImage},
		Version: 1,
		Run: func(ctx context.Context, s *engine.Step) error {
			image, err := s.String(lab.ReleaseImage)
			if err != nil {
				return err
			}
			if oci.IsDigest(image) {
				d, err := (&oci.Client{}).Resolve(ctx, image) // canonical form, no network
				if err != nil {
					return fmt.Errorf("%s: release.image: %w", s.Target().Name, err)
				}
				return s.WriteFile("pullspec", []byte(d+"\n"), 0o644)
			}
			cl, err := releaseClient(s)
			if err != nil {
				return err
			}
			d, err := cl.Resolve(ctx, image)
			if err != nil {
				return fmt.Errorf("%s: release.image: %w", s.Target().Name, err)
			}
			s.Logf("resolved %s to %s at %s; re-resolved after %s", image, d, s.Now().UTC().Format(time.RFC3339), releaseResolveTTL)
			s.SetStaleAt(s.Now().Add(releaseResolveTTL))
			return s.WriteFile("pullspec", []byte(d+"\n"), 0o644)
		},
	}
	// Only a tag needs the credential to resolve; a digest keeps the pull secret out of the key.
	if !oci.IsDigest(c.Release.Image) {
		resolve.Files = []string{lab.AccessPullSecretFile}
	}
	pullFiles := []string{lab.AccessPullSecretFile}
	// release.mirrors is omitted from the config when unset, and a target may only declare
	// fields the config has; without mirrors, releaseClient finds none.
	withMirrors := func(reads ...string) []string {
		if len(c.Release.Mirrors) > 0 {
			return append(reads, lab.ReleaseMirrors)
		}
		return reads
	}
	ts := []*engine.Target{resolve,
		{
			Name:    "release/image-references",
			Doc:     "the payload's /release-manifests/image-references (ImageStream: tag → digest pull spec), from its last layer",
			Deps:    []string{"release/resolve"},
			Reads:   withMirrors(),
			Files:   pullFiles,
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				img, b, err := releaseLastLayerFile(ctx, s, releaseImageReferencesPath)
				if err != nil {
					return err
				}
				if _, err := releaseParseImageReferences(b); err != nil {
					return fmt.Errorf("%s: %s: %w", s.Target().Name, img.Ref, err)
				}
				return s.WriteFile("image-references", b, 0o644)
			},
		},
		{
			Name:    "release/metadata",
			Doc:     "the payload's /release-manifests/release-metadata; its version must match image-references and the version labbuild read before the build (release.version)",
			Deps:    []string{"release/resolve", "release/image-references"},
			Reads:   withMirrors(append([]string{lab.ReleaseVersion}, releaseRowReads...)...),
			Files:   pullFiles,
			Version: 2,
			Run: func(ctx context.Context, s *engine.Step) error {
				want, err := s.String(lab.ReleaseVersion)
				if err != nil {
					return err
				}
				refs, err := s.DepFile("release/image-references", "image-references")
				if err != nil {
					return err
				}
				is, err := releaseParseImageReferences(refs)
				if err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				img, b, err := releaseLastLayerFile(ctx, s, releaseMetadataPath)
				if err != nil {
					return err
				}
				version, err := releaseParseMetadata(b)
				if err != nil {
					return fmt.Errorf("%s: %s: %w", s.Target().Name, img.Ref, err)
				}
				if version != is.Metadata.Name {
					return fmt.Errorf("%s: %s is inconsistent: release-metadata says version %s but image-references is named %s; the payload is broken, use another release.image",
						s.Target().Name, img.Ref, version, is.Metadata.Name)
				}
				if version != want {
					return fmt.Errorf("%s: release.image %s is version %s, but labbuild read version %s from it before the build (%s): the tag moved; run labbuild again",
						s.Target().Name, img.Ref, version, want, s.Where(lab.ReleaseVersion))
				}
				if _, err := releaseRow(s); err != nil {
					return err
				}
				return s.WriteFile("release-metadata", b, 0o644)
			},
		},
		{
			Name:    "release/featuregates",
			Doc:     "the FeatureGate manifests of the cluster-config-api image's /manifests (featureGate-*.yaml: each feature set's gates, per profile and major version)",
			Deps:    []string{"release/image/cluster-config-api"},
			Reads:   withMirrors(),
			Files:   pullFiles,
			Version: 1,
			Run:     releaseRunFeatureGates,
		},
		{
			Name:  "release/crds",
			Doc:   "CRDs of the cluster-config-api image selected by cluster.featureSet and cluster.profile, plus ClusterVersion and ClusterOperator from the payload; from 4.22 without those the CVO excludes by feature gate and major version (excluded.txt)",
			Deps:  []string{"release/resolve", "release/image/cluster-config-api", "manifests/cluster/featuregate"},
			Reads: withMirrors(append([]string{lab.ClusterFeatureSet, lab.ClusterProfile}, releaseRowReads...)...),
			Files: pullFiles,
			// Version 2: the release's CVO filters (issue 37).
			Version: 2,
			Run:     releaseRunCRDs,
		},
		{
			Name:    "release/cvo-bootstrap",
			Doc:     "the release image's /bootstrap/bootstrap-pod.yaml: the cluster-version operator's own bootstrap pod template",
			Deps:    []string{"release/resolve"},
			Reads:   withMirrors(),
			Files:   pullFiles,
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				cl, err := releaseClient(s)
				if err != nil {
					return err
				}
				img, err := releaseImage(ctx, s, cl, "release/resolve")
				if err != nil {
					return err
				}
				files, err := releaseReadFiles(ctx, cl, img, oci.Want{Paths: []string{releaseCVOBootstrapPod}})
				if err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				b, ok := files[strings.TrimPrefix(releaseCVOBootstrapPod, "/")]
				if !ok {
					return fmt.Errorf("%s: %s has no %s: is release.image a release payload?", s.Target().Name, img.Ref, releaseCVOBootstrapPod)
				}
				return s.WriteFile("bootstrap-pod.yaml", b, 0o644)
			},
		},
		{
			Name:    "release/mco",
			Doc:     "the machine-config-operator image's operator and controller programs (bin/) and /etc/mcc/templates (templates/)",
			Deps:    []string{"release/image/machine-config-operator"},
			Reads:   withMirrors(),
			Files:   pullFiles,
			Version: 1,
			Run:     releaseRunMCO,
		},
	}
	// rhcos.imageURL with rhcos.imageSHA256 is a full override (validate.go requires the two
	// together): nothing reads the payload's CoreOS stream then, so it is not a target at all,
	// and a payload without one (a custom or trimmed release) builds.
	if c == nil || c.RHCOS.ImageURL == "" {
		ts = append(ts, coreOSTarget(withMirrors()))
	}
	for _, tag := range ReleaseImageTags {
		ts = append(ts, &engine.Target{
			Name:    "release/image/" + tag,
			Doc:     "digest pull spec of payload tag " + tag + " (from image-references)",
			Deps:    []string{"release/image-references"},
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				b, err := s.DepFile("release/image-references", "image-references")
				if err != nil {
					return err
				}
				is, err := releaseParseImageReferences(b)
				if err != nil {
					return fmt.Errorf("%s: %w", s.Target().Name, err)
				}
				p := is.Pullspec(tag)
				if p == "" {
					return fmt.Errorf("%s: payload %s has no tag %q in image-references", s.Target().Name, is.Metadata.Name, tag)
				}
				return s.WriteFile("pullspec", []byte(p+"\n"), 0o644)
			},
		})
	}
	return ts
}

func releaseRunCRDs(ctx context.Context, s *engine.Step) error {
	featureSet, err := s.String(lab.ClusterFeatureSet)
	if err != nil {
		return err
	}
	if featureSet == "" {
		featureSet = releaseDefaultFeatureSet
	}
	profile, err := s.String(lab.ClusterProfile)
	if err != nil {
		return err
	}
	if profile == "" {
		profile = releaseDefaultProfile
	}
	cl, err := releaseClient(s)
	if err != nil {
		return err
	}
	selected := map[string][]byte{}
	for _, src := range []struct {
		dep  string
		keep func(string) bool
	}{
		{"release/image/cluster-config-api", func(n string) bool { return strings.HasSuffix(n, ".crd.yaml") }},
		// The release image is the cluster-version-operator image: its own CRDs are in /manifests.
		{"release/resolve", func(n string) bool {
			return strings.HasPrefix(n, "0000_00_cluster-version-operator_") && strings.HasSuffix(n, ".crd.yaml")
		}},
	} {
		img, err := releaseImage(ctx, s, cl, src.dep)
		if err != nil {
			return err
		}
		files, err := releaseReadFiles(ctx, cl, img, oci.Want{Paths: []string{releaseManifestsDir}})
		if err != nil {
			return fmt.Errorf("%s: %w", s.Target().Name, err)
		}
		n := 0
		for name, b := range files {
			base := path.Base(name)
			if path.Dir(name) != "manifests" || !src.keep(base) {
				continue
			}
			n++
			ok, err := releaseSelectCRD(b, featureSet, profile)
			if err != nil {
				return fmt.Errorf("%s: %s: %s: %w", s.Target().Name, img.Ref, name, err)
			}
			if ok {
				selected[base] = b
			}
		}
		if n == 0 {
			return fmt.Errorf("%s: %s (%s) has no CRD files in %s", s.Target().Name, img.Ref, src.dep, releaseManifestsDir)
		}
	}
	row, err := releaseRow(s)
	if err != nil {
		return err
	}
	var excluded []string
	if row.CVOIncludeGates {
		if excluded, err = releaseCVOExclude(s, selected); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(selected))
	for n := range selected {
		names = append(names, n)
	}
	sort.Strings(names)
	cv, co := false, false
	for _, n := range names {
		cv = cv || strings.HasPrefix(n, "0000_00_cluster-version-operator_01_clusterversions")
		co = co || strings.HasPrefix(n, "0000_00_cluster-version-operator_01_clusteroperators")
	}
	if !cv || !co {
		return fmt.Errorf("%s: the payload's /manifests gave no ClusterVersion or ClusterOperator CRD for feature set %s and profile %s", s.Target().Name, featureSet, profile)
	}
	s.Logf("selected %d CRDs for feature set %s, profile %s; the %s CVO excludes %d of them", len(names)+len(excluded), featureSet, profile, row.Name, len(excluded))
	for _, n := range names {
		if err := s.WriteFile("crds/"+n, selected[n], 0o644); err != nil {
			return err
		}
	}
	if row.CVOIncludeGates {
		return s.WriteFile("excluded.txt", []byte(strings.Join(excluded, "")), 0o644)
	}
	return nil
}

// releaseCVOExclude removes from selected the CRDs the release's CVO would not apply by its
// feature gates and major version (manifests.CVOExcludes, with the cluster's FeatureGate
// status), and returns one line per CRD it removed: "<file>: <why>\n", sorted.
func releaseCVOExclude(s *engine.Step, selected map[string][]byte) ([]string, error) {
	fg, err := depFiles(s, "manifests/cluster/featuregate", "")
	if err != nil {
		return nil, err
	}
	var st manifests.FeatureGateStatus
	for name, b := range fg { // one file
		if st, err = manifests.ParseFeatureGateStatus(b); err != nil {
			return nil, fmt.Errorf("%s: manifests/cluster/featuregate %s: %w", s.Target().Name, name, err)
		}
	}
	major, ok := releases.Major(st.Version)
	if !ok {
		return nil, fmt.Errorf("%s: the FeatureGate's version %q has no major version", s.Target().Name, st.Version)
	}
	var out []string
	for name, b := range selected {
		var m struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		doc := b
		if blk, ok := releaseMetadataBlock(b); ok {
			doc = blk
		}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", s.Target().Name, name, err)
		}
		why, err := manifests.CVOExcludes(m.Metadata.Annotations, st.Enabled, major)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", s.Target().Name, name, err)
		}
		if why != "" {
			delete(selected, name)
			out = append(out, name+": "+why+"\n")
		}
	}
	sort.Strings(out)
	return out, nil
}

func releaseRunFeatureGates(ctx context.Context, s *engine.Step) error {
	cl, err := releaseClient(s)
	if err != nil {
		return err
	}
	img, err := releaseImage(ctx, s, cl, "release/image/cluster-config-api")
	if err != nil {
		return err
	}
	files, err := releaseReadFiles(ctx, cl, img, oci.Want{Paths: []string{releaseManifestsDir}})
	if err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	names := make([]string, 0, len(files))
	for n, b := range files {
		if path.Dir(n) != "manifests" || !bytes.Contains(b, []byte("FeatureGate")) {
			continue
		}
		var m struct{ APIVersion, Kind string }
		if yaml.Unmarshal(b, &m) == nil && m.APIVersion == "config.openshift.io/v1" && m.Kind == "FeatureGate" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("%s: %s has no FeatureGate manifests in %s: is release/image/cluster-config-api the cluster-config-api image?", s.Target().Name, img.Ref, releaseManifestsDir)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := s.WriteFile("featuregates/"+path.Base(n), files[n], 0o644); err != nil {
			return err
		}
	}
	s.Logf("%d FeatureGate manifests in %s", len(names), img.Ref)
	return nil
}

func releaseRunMCO(ctx context.Context, s *engine.Step) error {
	cl, err := releaseClient(s)
	if err != nil {
		return err
	}
	img, err := releaseImage(ctx, s, cl, "release/image/machine-config-operator")
	if err != nil {
		return err
	}
	var templates int
	got := map[string]bool{}
	_, err = cl.Extract(ctx, img, oci.Want{Paths: []string{releaseMCOOperatorPath, releaseMCOControllerPath, releaseMCOTemplatesDir}},
		func(f oci.File, r io.Reader) error {
			var rel string
			mode := f.Mode
			switch {
			case "/"+f.Name == releaseMCOOperatorPath || "/"+f.Name == releaseMCOControllerPath:
				rel, mode = "bin/"+path.Base(f.Name), 0o755
			default:
				rel = "templates/" + strings.TrimPrefix("/"+f.Name, releaseMCOTemplatesDir)
				mode = 0o644
				templates++
			}
			got[rel] = true
			w, err := s.Create(rel, mode)
			if err != nil {
				return err
			}
			if _, err := io.Copy(w, r); err != nil {
				w.Close()
				return err
			}
			return w.Close()
		})
	if err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	for _, b := range []string{"bin/machine-config-operator", "bin/machine-config-controller"} {
		if !got[b] {
			return fmt.Errorf("%s: %s has no /usr/%s: is release/image/machine-config-operator the MCO image?", s.Target().Name, img.Ref, b)
		}
	}
	if templates == 0 {
		return fmt.Errorf("%s: %s has no files under %s", s.Target().Name, img.Ref, releaseMCOTemplatesDir)
	}
	s.Logf("extracted the MCO programs and %d template files from %s", templates, img.Ref)
	return nil
}

func init() {
	Register(Family{Name: "release", Doc: "the OpenShift release payload: digests, image-references, metadata, CRDs, MCO (stage 03)", Targets: fromConfig(releaseTargets)})
}
