// Package mco renders the inputs of the Machine Config Operator's two bootstrap programs and
// their command lines, and reads back what they wrote (../shared/spec/mco-bootstrap.md; MCO
// release-4.18 cmd/machine-config-operator/bootstrap.go and
// cmd/machine-config-controller/bootstrap.go, called as openshift-install 4.18's
// bootkube.sh.template calls them).
//
// It is pure: config values and upstream bytes in, bytes and argument lists out. Running the
// binaries is targets/mco.go's job. The cluster objects come from render/manifests, so the MCO
// sees exactly the Infrastructure, Network, DNS, Proxy and FeatureGate the cluster gets.
package mco

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/render/manifests"
)

// Work-dir paths, relative to the directory passed to OperatorArgs. The base names are the
// installer's (bootkube.sh passes /assets/tls/root-ca.crt, /assets/manifests/cluster-config.yaml,
// ...) and the defaults of the MCO's --*-config-file flags.
const (
	RootCAFile          = "tls/root-ca.crt"
	KubeCAFile          = "tls/kube-apiserver-complete-client-ca-bundle.crt"
	ClusterConfigFile   = "manifests/cluster-config.yaml"
	PullSecretFile      = "manifests/openshift-config-secret-pull-secret.yaml"
	InfrastructureFile  = "manifests/cluster-infrastructure-02-config.yml"
	NetworkFile         = "manifests/cluster-network-02-config.yml"
	DNSFile             = "manifests/cluster-dns-02-config.yml"
	ProxyFile           = "manifests/cluster-proxy-01-config.yaml"
	FeatureGateFile     = "manifests/featuregate.yaml"
	ImageReferencesFile = "image-references"
)

// Output paths of the two programs, relative to their --dest-dir (mco-bootstrap.md §1 and §2).
const (
	// OperatorManifestDir holds the ControllerConfig, the two pools and the pull-secret copy
	// that bootkube.sh copies to /etc/mcc/bootstrap, the controller's --manifest-dir.
	OperatorManifestDir = "bootstrap/manifests"
	// OperatorPullSecret is the verbatim copy of --pull-secret, the controller's --pull-secret.
	OperatorPullSecret = "bootstrap/manifests/machineconfigcontroller-pull-secret"
	// ControllerConfigFile is the ControllerConfig the controller re-encodes.
	ControllerConfigFile = "controller-config/machine-config-controller.yaml"
)

// Inputs are the values the MCO work dir is made of.
type Inputs struct {
	// ClusterName and BaseDomain make the cluster domain <ClusterName>.<BaseDomain>.
	ClusterName, BaseDomain string
	// InfraID is the infrastructure name (manifests/ids).
	InfraID string
	// Masters is the master count (topologies, install-config controlPlane replicas); Workers
	// the worker count, of which only 0, 1 or more matters (infrastructureTopology).
	Masters, Workers int
	// ClusterNetwork, ServiceNetwork and MachineNetwork are CIDRs; HostPrefix the per-node
	// prefix length of the cluster network.
	ClusterNetwork string
	HostPrefix     int
	ServiceNetwork string
	MachineNetwork string
	// FeatureGate is FeatureGate `cluster` with its status for the payload version
	// (manifests.FeatureGateFromPayload, the cluster's own), which the controller requires.
	FeatureGate []byte
	// PullSecret is the dockerconfigjson (already validated by the caller).
	PullSecret []byte
	// RootCA is the PEM for --root-ca (ControllerConfig rootCAData); KubeCA the
	// kube-apiserver serving CA bundle for --kube-ca (kubeAPIServerServingCAData, which the
	// MCS writes to /etc/kubernetes/kubelet-ca.crt).
	RootCA, KubeCA []byte
	// ImageReferences is the release's /release-manifests/image-references ImageStream;
	// RequiredTags the tags its MCO bootstrap dies without (render/releases
	// Release.MCORequiredTags: `machine-config-operator bootstrap` exits with "Failed to find
	// <tag> in image references", cmd/machine-config-operator/bootstrap.go findImageOrDie; the
	// base OS tags only warn).
	ImageReferences []byte
	RequiredTags    []string
	// BareMetal, when set, makes Infrastructure and cluster-config-v1 platform BareMetal with
	// the lab's VIPs (in-cluster VIP mode), so the MCO renders its on-prem templates.
	BareMetal *manifests.BareMetal
	// ImageDigestSources are the release mirror's, when the lab has one; AdditionalTrustBundle
	// (PEM) is the lab's trust bundle (the mirror CA, the BMC CA on platform baremetal), when it
	// has one: cluster-config-v1 carries them, the Proxy names user-ca-bundle, and the
	// user-ca-bundle ConfigMap is the operator's --additional-trust-bundle-config-file.
	ImageDigestSources    []manifests.MirrorSource
	AdditionalTrustBundle []byte
}

// UserCABundleFile is the work-dir path of the user-ca-bundle ConfigMap, the operator's
// --additional-trust-bundle-config-file (present only with a trust bundle).
const UserCABundleFile = "manifests/user-ca-bundle-config.yaml"

// File is one work-dir file; Secret marks files holding the pull secret (mode 0600).
type File struct {
	Path   string
	Data   []byte
	Secret bool
}

// WorkDir returns the work dir the operator's bootstrap reads, sorted by path: the two CAs,
// cluster-config-v1, the pull-secret Secret, Infrastructure, Network, DNS, Proxy, FeatureGate
// and image-references. Errors name the empty or malformed input.
func WorkDir(in Inputs) ([]File, error) {
	if !bytes.Contains(in.RootCA, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, errors.New("mco: root CA is not a PEM certificate (pki/ca/root tls.crt)")
	}
	if !bytes.Contains(in.KubeCA, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, errors.New("mco: kubelet client CA bundle is not a PEM certificate (pki/bundle/kubelet-client-ca ca-bundle.crt)")
	}
	if err := CheckImageReferences(in.ImageReferences, in.RequiredTags); err != nil {
		return nil, err
	}
	domain := in.ClusterName + "." + in.BaseDomain
	var out []File
	add := func(path string, f manifests.File, err error) error {
		if err != nil {
			return fmt.Errorf("mco: %s: %w", path, err)
		}
		out = append(out, File{Path: path, Data: f.Data, Secret: f.Secret})
		return nil
	}
	cc, err := manifests.ClusterConfigV1(manifests.InstallConfig{Name: in.ClusterName, BaseDomain: in.BaseDomain,
		ClusterNetwork: in.ClusterNetwork, HostPrefix: in.HostPrefix, ServiceNetwork: in.ServiceNetwork,
		MachineNetwork: in.MachineNetwork, Masters: in.Masters, BareMetal: in.BareMetal,
		ImageDigestSources: in.ImageDigestSources, AdditionalTrustBundle: string(in.AdditionalTrustBundle)})
	if err := add(ClusterConfigFile, cc, err); err != nil {
		return nil, err
	}
	ps, err := manifests.PullSecret(bytes.TrimSpace(in.PullSecret))
	if err := add(PullSecretFile, ps, err); err != nil {
		return nil, err
	}
	infra, err := manifests.InfrastructureOn(domain, in.InfraID, in.Masters, in.Workers, in.BareMetal)
	if err := add(InfrastructureFile, infra, err); err != nil {
		return nil, err
	}
	nw, err := manifests.NetworkConfig(in.ClusterNetwork, in.HostPrefix, in.ServiceNetwork)
	if err := add(NetworkFile, nw, err); err != nil {
		return nil, err
	}
	dns, err := manifests.DNS(domain)
	if err := add(DNSFile, dns, err); err != nil {
		return nil, err
	}
	px, err := manifests.Proxy()
	if len(in.AdditionalTrustBundle) > 0 {
		px, err = manifests.ProxyTrustedCA()
		ub, uerr := manifests.UserCABundle(in.AdditionalTrustBundle)
		if err := add(UserCABundleFile, ub, uerr); err != nil {
			return nil, err
		}
	}
	if err := add(ProxyFile, px, err); err != nil {
		return nil, err
	}
	if !bytes.Contains(in.FeatureGate, []byte("kind: FeatureGate")) {
		return nil, errors.New("mco: the FeatureGate is not a FeatureGate manifest (manifests/cluster/featuregate)")
	}
	out = append(out,
		File{Path: FeatureGateFile, Data: in.FeatureGate},
		File{Path: RootCAFile, Data: in.RootCA},
		File{Path: KubeCAFile, Data: in.KubeCA},
		File{Path: ImageReferencesFile, Data: in.ImageReferences},
	)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// CheckImageReferences reports whether b is an ImageStream with every required tag as a
// DockerImage, naming the first missing tag (the operator would die on it later, with a less
// helpful message).
func CheckImageReferences(b []byte, required []string) error {
	var is manifests.ImageStream
	if err := yaml.Unmarshal(b, &is); err != nil || is.Kind != "ImageStream" {
		return fmt.Errorf("mco: image-references is not an ImageStream (release/image-references): %v", err)
	}
	have := map[string]bool{}
	for _, t := range is.Spec.Tags {
		if t.From != nil && t.From.Kind == "DockerImage" && t.From.Name != "" {
			have[t.Name] = true
		}
	}
	for _, tag := range required {
		if !have[tag] {
			return fmt.Errorf("mco: image-references has no tag %q, which machine-config-operator bootstrap requires; the release payload is incomplete", tag)
		}
	}
	return nil
}

// OperatorArgs returns the arguments of `machine-config-operator` for its bootstrap stage, as
// bootkube.sh 4.18 passes them, with paths in workDir (laid out by WorkDir) and output in
// destDir. The Infrastructure/Network/Proxy/DNS files are passed explicitly: their defaults
// are /assets paths.
func OperatorArgs(workDir, destDir, releaseImage, payloadVersion string) []string {
	p := func(rel string) string { return filepath.Join(workDir, filepath.FromSlash(rel)) }
	return []string{
		"bootstrap",
		"--payload-version=" + payloadVersion,
		"--root-ca=" + p(RootCAFile),
		"--kube-ca=" + p(KubeCAFile),
		"--config-file=" + p(ClusterConfigFile),
		"--dest-dir=" + destDir,
		"--pull-secret=" + p(PullSecretFile),
		"--infra-config-file=" + p(InfrastructureFile),
		"--network-config-file=" + p(NetworkFile),
		"--proxy-config-file=" + p(ProxyFile),
		"--dns-config-file=" + p(DNSFile),
		// Without a trust bundle there is no user-ca-bundle: the optional flag names a file that
		// does not exist in workDir rather than the /assets default, which might exist on
		// the host.
		"--additional-trust-bundle-config-file=" + p(UserCABundleFile),
		"--release-image=" + releaseImage,
		"--image-references=" + p(ImageReferencesFile),
	}
}

// ControllerArgs returns the arguments of `machine-config-controller` for its bootstrap stage
// (the bootstrap pod's initContainer, bootstrap-pod-v2.yaml, with --templates made explicit).
func ControllerArgs(templates, manifestDir, destDir, pullSecret, payloadVersion string) []string {
	return []string{
		"bootstrap",
		"--templates=" + templates,
		"--payload-version=" + payloadVersion,
		"--manifest-dir=" + manifestDir,
		"--dest-dir=" + destDir,
		"--pull-secret=" + pullSecret,
	}
}

// Pools are the MachineConfigPools the operator writes and labbuild renders nodes from.
var Pools = []string{"master", "worker"}

// PoolFile is the controller's output path of pool's MachineConfigPool.
func PoolFile(pool string) string { return "machine-pools/" + pool + ".yaml" }

// MachineConfigFile is the controller's output path of MachineConfig name.
func MachineConfigFile(name string) string { return "machine-configs/" + name + ".yaml" }

// RenderedName returns status.configuration.name of a MachineConfigPool document, the
// rendered-<pool>-<hash> MachineConfig the Machine Config Server would serve.
func RenderedName(poolDoc []byte) (string, error) {
	var p struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status struct {
			Configuration struct {
				Name string `json:"name"`
			} `json:"configuration"`
		} `json:"status"`
	}
	if err := yaml.Unmarshal(poolDoc, &p); err != nil {
		return "", fmt.Errorf("mco: machine pool: %w", err)
	}
	if p.Kind != "MachineConfigPool" {
		return "", fmt.Errorf("mco: machine pool document has kind %q, want MachineConfigPool", p.Kind)
	}
	n := p.Status.Configuration.Name
	if !strings.HasPrefix(n, "rendered-"+p.Metadata.Name+"-") {
		return "", fmt.Errorf("mco: pool %s: status.configuration.name %q is not rendered-%s-<hash> (did machine-config-controller bootstrap render it?)", p.Metadata.Name, n, p.Metadata.Name)
	}
	return n, nil
}

// Tail returns the last n lines of b, for an error message about a failed program run (its
// output carries no secrets: the MCO never prints the pull secret).
func Tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
