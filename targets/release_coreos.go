package targets

import (
	"context"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// release/coreos-stream reads the payload's CoreOS stream metadata, so the RHCOS boot image
// comes from the release by default and matches it (what `openshift-install coreos
// print-stream-json` prints, and what the installer uses for its bootstrap and machines). The
// release image carries it as the ConfigMap openshift-machine-config-operator/coreos-bootimages
// in /release-manifests/0000_50_installer_coreos-bootimages.yaml; data.stream is the stream
// JSON (openshift/installer data/data/coreos/rhcos.json). rhcos.imageURL overrides it.

// Payload path of the coreos-bootimages ConfigMap (openshift/installer; read by oc, HyperShift
// and origin's tests from the same place).
const releaseCoreOSBootImagesPath = "/release-manifests/0000_50_installer_coreos-bootimages.yaml"

// CoreOS stream artifact labbuild boots: the QEMU image, gzipped qcow2, of the host
// architecture (.architectures.x86_64.artifacts.qemu.formats["qcow2.gz"].disk).
const (
	coreOSArch     = "x86_64"
	coreOSPlatform = "qemu"
	coreOSFormat   = "qcow2.gz"
)

// coreOSStream is the part of CoreOS stream metadata (coreos/stream-metadata-go stream.Stream)
// labbuild reads.
type coreOSStream struct {
	Stream        string `json:"stream"`
	Architectures map[string]struct {
		Artifacts map[string]struct {
			Release string                               `json:"release"`
			Formats map[string]map[string]coreOSArtifact `json:"formats"`
		} `json:"artifacts"`
	} `json:"architectures"`
}

// coreOSParse decodes the coreos-bootimages ConfigMap and picks the QEMU qcow2.gz disk of
// x86_64 from data.stream or, when osImageStream names one and the payload has data.streams
// (4.22: installer hack/build-coreos-manifest.go at main 9407f69d writes every stream there,
// keyed rhel-9 and rhel-10), from that stream. Errors say what is missing, by its path in the
// stream.
func coreOSParse(cm []byte, osImageStream string) (stream []byte, img coreOSImage, err error) {
	var m struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(cm, &m); err != nil {
		return nil, img, fmt.Errorf("not a ConfigMap: %w", err)
	}
	if m.Kind != "ConfigMap" || m.Metadata.Name != "coreos-bootimages" || m.Data["stream"] == "" {
		return nil, img, fmt.Errorf("want ConfigMap coreos-bootimages with data.stream, got kind %q name %q", m.Kind, m.Metadata.Name)
	}
	stream = []byte(m.Data["stream"])
	if all := m.Data["streams"]; osImageStream != "" && all != "" {
		var streams map[string]json.RawMessage
		if err := json.Unmarshal([]byte(all), &streams); err != nil {
			return nil, img, fmt.Errorf("data.streams is not a JSON map of streams: %w", err)
		}
		one, ok := streams[osImageStream]
		if !ok {
			return nil, img, fmt.Errorf("data.streams has no stream %q", osImageStream)
		}
		stream = one
	}
	var st coreOSStream
	if err := json.Unmarshal(stream, &st); err != nil {
		return nil, img, fmt.Errorf("data.stream is not CoreOS stream metadata JSON: %w", err)
	}
	where := fmt.Sprintf(".architectures.%s.artifacts.%s.formats[%q].disk", coreOSArch, coreOSPlatform, coreOSFormat)
	a, ok := st.Architectures[coreOSArch].Artifacts[coreOSPlatform]
	if !ok {
		return nil, img, fmt.Errorf("stream %q has no %s", st.Stream, where)
	}
	d, ok := a.Formats[coreOSFormat]["disk"]
	if !ok || d.Location == "" || d.SHA256 == "" {
		return nil, img, fmt.Errorf("stream %q has no location and sha256 at %s", st.Stream, where)
	}
	return stream, coreOSImage{Stream: st.Stream, Release: a.Release, coreOSArtifact: d}, nil
}

// coreOSTarget is release/coreos-stream.
func coreOSTarget(reads []string) *engine.Target {
	return &engine.Target{
		Name:  "release/coreos-stream",
		Doc:   "the payload's CoreOS stream metadata (coreos-bootimages ConfigMap; 4.22: its release's default stream, rhel-9): stream.json, and qemu.json naming the x86_64 QEMU qcow2.gz and its sha256",
		Deps:  []string{"release/resolve"},
		Reads: append(append([]string{}, reads...), releaseRowReads...),
		Files: []string{lab.AccessPullSecretFile},
		// Version 2: the release's default OS image stream (issue 37).
		Version: 2,
		Run: func(ctx context.Context, s *engine.Step) error {
			img, b, err := releaseLastLayerFile(ctx, s, releaseCoreOSBootImagesPath)
			if err != nil {
				return fmt.Errorf("%w (or set rhcos.imageURL and rhcos.imageSHA256 in %s)", err, s.ConfigFile())
			}
			row, err := releaseRow(s)
			if err != nil {
				return err
			}
			stream, q, err := coreOSParse(b, row.DefaultOSImageStream)
			if err != nil {
				return fmt.Errorf("%s: %s %s: %w (or set rhcos.imageURL and rhcos.imageSHA256 in %s)", s.Target().Name, img.Ref, releaseCoreOSBootImagesPath, err, s.ConfigFile())
			}
			s.Logf("stream %s: RHCOS %s, %s", q.Stream, q.Release, q.Location)
			if err := s.WriteFile("stream.json", stream, 0o644); err != nil {
				return err
			}
			j, _ := json.MarshalIndent(q, "", "  ")
			return s.WriteFile("qemu.json", append(j, '\n'), 0o644)
		},
	}
}
