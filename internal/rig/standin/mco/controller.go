package main

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	configv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/render/ignition"
)

type controllerFlags struct {
	templates, payloadVersion, manifestDir, destDir, pullSecret string
}

func runController(args []string, stdout, stderr io.Writer) error {
	args, err := splitSubcommand("machine-config-controller", args)
	if err != nil {
		return err
	}
	var f controllerFlags
	fs := pflag.NewFlagSet("machine-config-controller bootstrap", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.templates, "templates", "/etc/mcc/templates", "path to the templates tree")
	fs.StringVar(&f.payloadVersion, "payload-version", "", "release version")
	fs.IntP("v", "v", 0, "log level (ignored)")
	fs.StringVar(&f.manifestDir, "manifest-dir", "", "directory of input manifests")
	fs.StringVar(&f.destDir, "dest-dir", "", "output directory")
	fs.StringVar(&f.pullSecret, "pull-secret", "", "pull secret Secret manifest")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.manifestDir == "" {
		return errors.New("--manifest-dir cannot be empty")
	}
	if f.destDir == "" {
		return errors.New("--dest-dir cannot be empty")
	}
	return controllerBootstrap(f, stdout)
}

// inputs is what the controller decoded from --manifest-dir.
type inputs struct {
	pools       []*mcfgv1.MachineConfigPool
	configs     []*mcfgv1.MachineConfig
	cconfig     *mcfgv1.ControllerConfig
	featureGate *configv1.FeatureGate
	apiServer   []byte
	images      imageInputs
}

// readManifests decodes the flat --manifest-dir (subdirectories ignored, multi-document
// files allowed). One undecodable file aborts, as in pkg/controller/bootstrap.
func readManifests(dir string, log io.Writer) (*inputs, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--manifest-dir: %w", err)
	}
	in := &inputs{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		for _, doc := range splitYAML(b) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				return nil, fmt.Errorf("error parsing manifest %s: %w", p, err)
			}
			group := strings.SplitN(tm.APIVersion, "/", 2)[0]
			var decodeErr error
			switch {
			case group == "machineconfiguration.openshift.io" && tm.Kind == "MachineConfigPool":
				o := &mcfgv1.MachineConfigPool{}
				decodeErr = yaml.Unmarshal(doc, o)
				in.pools = append(in.pools, o)
			case group == "machineconfiguration.openshift.io" && tm.Kind == "MachineConfig":
				o := &mcfgv1.MachineConfig{}
				decodeErr = yaml.Unmarshal(doc, o)
				in.configs = append(in.configs, o)
			case group == "machineconfiguration.openshift.io" && tm.Kind == "ControllerConfig":
				o := &mcfgv1.ControllerConfig{}
				decodeErr = yaml.Unmarshal(doc, o)
				in.cconfig = o
			case group == "config.openshift.io" && tm.Kind == "FeatureGate":
				o := &configv1.FeatureGate{}
				decodeErr = yaml.Unmarshal(doc, o)
				if o.Name == "cluster" {
					in.featureGate = o
				}
			case group == "config.openshift.io" && tm.Kind == "ImageDigestMirrorSet":
				o := &configv1.ImageDigestMirrorSet{}
				decodeErr = yaml.Unmarshal(doc, o)
				in.images.idms = append(in.images.idms, o)
			case group == "config.openshift.io" && tm.Kind == "ImageTagMirrorSet":
				o := &configv1.ImageTagMirrorSet{}
				decodeErr = yaml.Unmarshal(doc, o)
				in.images.itms = append(in.images.itms, o)
			case group == "operator.openshift.io" && tm.Kind == "ImageContentSourcePolicy":
				o := &operatorv1alpha1.ImageContentSourcePolicy{}
				decodeErr = yaml.Unmarshal(doc, o)
				in.images.icsp = append(in.images.icsp, o)
			case group == "config.openshift.io" && tm.Kind == "Image":
				o := &configv1.Image{}
				decodeErr = yaml.Unmarshal(doc, o)
				in.images.img = o
			case group == "config.openshift.io" && (tm.Kind == "ClusterImagePolicy" || tm.Kind == "ImagePolicy"):
				in.images.policies++
			case group == "config.openshift.io" && tm.Kind == "APIServer":
				var m metav1.ObjectMeta
				var o struct {
					Metadata *metav1.ObjectMeta `json:"metadata"`
				}
				o.Metadata = &m
				decodeErr = yaml.Unmarshal(doc, &o)
				if m.Name == "cluster" {
					in.apiServer = doc
				}
			case tm.Kind == "":
				if len(bytes.TrimSpace(doc)) > 0 && !strings.HasPrefix(e.Name(), ".") {
					fmt.Fprintf(log, "I skipping %s: no kind\n", p)
				}
			default:
				fmt.Fprintf(log, "I skipping %s: %s %s is not an input of the bootstrap render\n", p, tm.APIVersion, tm.Kind)
			}
			if decodeErr != nil {
				return nil, fmt.Errorf("error parsing manifest %s: %w", p, decodeErr)
			}
		}
	}
	return in, nil
}

func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(b, []byte("\n---")) {
		d = bytes.TrimPrefix(d, []byte("---"))
		if len(bytes.TrimSpace(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

func controllerBootstrap(f controllerFlags, log io.Writer) error {
	in, err := readManifests(f.manifestDir, log)
	if err != nil {
		return err
	}
	if in.cconfig == nil {
		return errors.New("error: no ControllerConfig found in dir: " + f.manifestDir)
	}
	if in.featureGate == nil {
		return fmt.Errorf("error: no FeatureGate named cluster found in dir: %s", f.manifestDir)
	}
	if err := checkFeatureGate(in.featureGate, f.payloadVersion); err != nil {
		return err
	}
	if f.pullSecret == "" {
		return errors.New("--pull-secret is required for the bootstrap render")
	}
	secretRaw, err := os.ReadFile(f.pullSecret)
	if err != nil {
		return fmt.Errorf("--pull-secret: %w", err)
	}
	var secret corev1.Secret
	if err := yaml.Unmarshal(secretRaw, &secret); err != nil {
		return fmt.Errorf("--pull-secret %s: %w", f.pullSecret, err)
	}
	if secret.Type != corev1.SecretTypeDockerConfigJson {
		return fmt.Errorf("expected secret type %s, found: %s", corev1.SecretTypeDockerConfigJson, secret.Type)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, secret.Data[corev1.DockerConfigJsonKey]); err != nil {
		return fmt.Errorf("--pull-secret: .dockerconfigjson is not JSON: %w", err)
	}
	if len(in.pools) == 0 {
		fmt.Fprintln(log, "I no MachineConfigPools in the manifest dir; nothing to render")
		return nil
	}

	rc := &renderConfig{
		ControllerConfigSpec: &in.cconfig.Spec,
		PullSecret:           compact.String(),
		TLSMinVersion:        "VersionTLS12",
		TLSCipherSuites:      intermediateCiphers,
		Constants:            map[string]string{"APIServerURLFile": "/etc/kubernetes/apiserver-url.env"},
	}
	generated, err := renderTemplates(f.templates, rc, log)
	if err != nil {
		return err
	}
	// RunImageBootstrap: 99-<pool>-generated-registries from the mirror sets (registries.go).
	regs, err := runImageBootstrap(in.images, in.pools, generated, &in.cconfig.Spec)
	if err != nil {
		return err
	}
	fmt.Fprintln(log, "I Successfully generated MachineConfigs from image configs.")
	fmt.Fprintln(log, "I stand-in: 97/98-<pool>-generated-* MachineConfigs (node config, feature-gate kubelet config) are not generated")
	configs := append(append(generated, regs...), in.configs...)

	for _, p := range in.pools {
		rendered, err := renderPool(p, configs, in.cconfig)
		if err != nil {
			return err
		}
		p.Status.Configuration = mcfgv1.MachineConfigPoolStatusConfiguration{
			ObjectReference: corev1.ObjectReference{Name: rendered.Name},
		}
		for _, c := range rendered.sources {
			p.Status.Configuration.Source = append(p.Status.Configuration.Source, corev1.ObjectReference{
				APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig", Name: c,
			})
		}
		if err := writeYAML(f.destDir, "machine-configs/"+rendered.Name+".yaml", rendered.MachineConfig); err != nil {
			return err
		}
		if err := writeYAML(f.destDir, "machine-pools/"+p.Name+".yaml", p); err != nil {
			return err
		}
		fmt.Fprintf(log, "I pool %s: %s from %d MachineConfigs\n", p.Name, rendered.Name, len(rendered.sources))
	}
	if err := writeYAML(f.destDir, "controller-config/machine-config-controller.yaml", in.cconfig); err != nil {
		return err
	}
	if in.apiServer != nil {
		if err := writeOut(f.destDir, "api-server/api-server.yaml", in.apiServer); err != nil {
			return err
		}
	}
	return nil
}

// checkFeatureGate enforces what NewHardcodedFeatureGateAccessFromFeatureGate needs: a status
// entry for the payload version with non-empty enabled and disabled lists (an empty list makes
// the real controller panic on SigstoreImageVerification).
func checkFeatureGate(fg *configv1.FeatureGate, version string) error {
	for _, d := range fg.Status.FeatureGates {
		if d.Version == version {
			if len(d.Enabled) == 0 && len(d.Disabled) == 0 {
				return fmt.Errorf("FeatureGate cluster status for version %q lists no gates (the real controller panics)", version)
			}
			return nil
		}
	}
	return fmt.Errorf("unable to determine features: missing desired version %q in featuregates.config.openshift.io/cluster status", version)
}

func writeYAML(dir, rel string, obj any) error {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode %s: %w", rel, err)
	}
	return writeOut(dir, rel, b)
}

type renderedPool struct {
	*mcfgv1.MachineConfig
	sources []string
}

// hashSalt is the stand-in's salt for rendered names (the real MCO has its own fixed 80-byte
// salt in pkg/controller/render/hash.go; names have the real shape, not the real value).
var hashSalt = []byte("labbuild mco stand-in: rendered MachineConfig name salt, 4.18 shape (md5 hex)....")

// renderPool merges every MachineConfig selected by the pool (sorted by name; later ones
// override earlier ones with Ignition's merge, as pkg/controller/common MergeMachineConfigs)
// into rendered-<pool>-<md5>.
func renderPool(p *mcfgv1.MachineConfigPool, configs []*mcfgv1.MachineConfig, cc *mcfgv1.ControllerConfig) (*renderedPool, error) {
	if p.Spec.MachineConfigSelector == nil {
		return nil, fmt.Errorf("pool %s has no machineConfigSelector", p.Name)
	}
	var sel []*mcfgv1.MachineConfig
	for _, c := range configs {
		match := true
		for k, v := range p.Spec.MachineConfigSelector.MatchLabels {
			if c.Labels[k] != v {
				match = false
			}
		}
		if match {
			sel = append(sel, c)
		}
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("no MachineConfigs found matching selector for pool %s", p.Name)
	}
	sort.Slice(sel, func(i, j int) bool { return sel[i].Name < sel[j].Name })
	merged := ignition.New()
	var names []string
	var kargs []string
	for _, c := range sel {
		names = append(names, c.Name)
		kargs = append(kargs, c.Spec.KernelArguments...)
		if len(c.Spec.Config.Raw) == 0 {
			continue
		}
		// Older specs (the installer's 99-<role>-ssh configs are 3.2.0) are translated up to
		// 3.4, as MCO's ctrlcommon.ParseAndConvertConfig does.
		cfg, rpt, err := v34.ParseCompatibleVersion(c.Spec.Config.Raw)
		if err != nil {
			return nil, fmt.Errorf("parsing Ignition config of MachineConfig %s failed with error: %w\nReport: %v", c.Name, err, rpt)
		}
		merged = v34.Merge(merged, cfg)
	}
	raw, err := json.Marshal(merged)
	if err != nil {
		return nil, err
	}
	spec := mcfgv1.MachineConfigSpec{
		OSImageURL:                     cc.Spec.BaseOSContainerImage,
		BaseOSExtensionsContainerImage: cc.Spec.BaseOSExtensionsContainerImage,
		Config:                         runtime.RawExtension{Raw: raw},
		KernelArguments:                kargs,
	}
	specYAML, err := yaml.Marshal(spec)
	if err != nil {
		return nil, err
	}
	h := md5.New()
	h.Write(hashSalt)
	h.Write(specYAML)
	name := fmt.Sprintf("rendered-%s-%s", p.Name, hex.EncodeToString(h.Sum(nil)))
	yes := true
	mc := &mcfgv1.MachineConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Annotations: map[string]string{
				"machineconfiguration.openshift.io/generated-by-controller-version": standinVersion,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfigPool",
				Name: p.Name, Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: spec,
	}
	return &renderedPool{MachineConfig: mc, sources: names}, nil
}

// machineConfigFromIgn wraps cfg as MachineConfig name for role (pkg/controller/common
// MachineConfigFromIgnConfig).
func machineConfigFromIgn(role, name string, cfg types.Config, cc *mcfgv1.ControllerConfigSpec) (*mcfgv1.MachineConfig, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	return &mcfgv1.MachineConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"machineconfiguration.openshift.io/role": role},
			Annotations: map[string]string{"machineconfiguration.openshift.io/generated-by-controller-version": standinVersion},
		},
		Spec: mcfgv1.MachineConfigSpec{Config: runtime.RawExtension{Raw: raw}, OSImageURL: cc.BaseOSContainerImage},
	}, nil
}

// intermediateCiphers is the Intermediate TLS profile's cipher list in IANA names, what MCO
// passes to templates as TLSCipherSuites by default (openshift/api config/v1
// TLSProfiles[Intermediate] via crypto.OpenSSLToIANACipherSuites).
var intermediateCiphers = []string{
	"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}
