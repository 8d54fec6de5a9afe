package main

import (
	"bytes"
	"crypto/md5"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	configv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1alpha1 "github.com/openshift/api/operator/v1alpha1"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
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
			case group == "machineconfiguration.openshift.io" && refusedKinds[tm.Kind] != "":
				return nil, fmt.Errorf("stand-in: %s in %s: the stand-in does not render %s", tm.Kind, p, refusedKinds[tm.Kind])
			case group == "config.openshift.io" && tm.Kind == "Node":
				decodeErr = nodeConfigRefused(doc)
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

	b, err := current()
	if err != nil {
		return err
	}
	tls, err := tlsProfileOf(in.apiServer)
	if err != nil {
		return err
	}
	// The controller refuses a ControllerConfig from another operator version
	// (generateRenderedMachineConfig: "Ignoring controller config generated from ...").
	if v := in.cconfig.Annotations["machineconfiguration.openshift.io/generated-by-version"]; v != versionRaw {
		return fmt.Errorf("Ignoring controller config generated from %s (my version: %s)", v, versionRaw)
	}

	// The generators, in pkg/controller/bootstrap Run's order; configs keeps the order in which
	// they were appended, which is the pools' source list.
	rc := &renderConfig{
		ControllerConfigSpec: &in.cconfig.Spec,
		PullSecret:           compact.String(),
		TLSMinVersion:        tls.minVersion,
		TLSCipherSuites:      tls.ciphers,
	}
	generated, err := renderTemplates(b, f.templates, rc, log)
	if err != nil {
		return err
	}
	fmt.Fprintln(log, "I Successfully generated MachineConfigs from templates.")
	configs := append(append([]*mcfgv1.MachineConfig{}, in.configs...), generated...)
	regs, err := runImageBootstrap(b, in.images, in.pools, generated)
	if err != nil {
		return err
	}
	configs = append(configs, regs...)
	fmt.Fprintln(log, "I Successfully generated MachineConfigs from image configs.")
	if b.defaultUlimits {
		ul, err := defaultUlimitsConfigs(b, in.pools)
		if err != nil {
			return err
		}
		configs = append(configs, ul...)
	}
	kubelet, err := kubeletConfigs(b, f.templates, in.cconfig, in.pools, gatesFor(in.featureGate, f.payloadVersion), tls)
	if err != nil {
		return err
	}
	configs = append(configs, kubelet...)
	fmt.Fprintln(log, "I Successfully generated MachineConfigs from feature gates and node.Configs.")

	// render.RunBootstrap: every pool's rendered config; each pool's source list names every
	// config the bootstrap had (getMachineConfigRefs(configs), all pools' alike).
	var refs []corev1.ObjectReference
	for _, c := range configs {
		refs = append(refs, corev1.ObjectReference{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig", Name: c.Name})
	}
	for _, p := range in.pools {
		rendered, err := renderPool(b, p, configs, in.cconfig)
		if err != nil {
			return err
		}
		p.Spec.Configuration.Name = rendered.Name
		p.Spec.Configuration.Source = refs
		p.Status.Configuration.Name = rendered.Name
		p.Status.Configuration.Source = refs
		if err := writeObject(b, f.destDir, "machine-configs/"+rendered.Name+".yaml", rendered); err != nil {
			return err
		}
		if err := writeObject(b, f.destDir, "machine-pools/"+p.Name+".yaml", p); err != nil {
			return err
		}
		fmt.Fprintf(log, "I pool %s: %s\n", p.Name, rendered.Name)
	}
	if in.apiServer != nil {
		if err := writeOut(f.destDir, "api-server/api-server.yaml", in.apiServer); err != nil {
			return err
		}
	}
	return writeObject(b, f.destDir, "controller-config/machine-config-controller.yaml", in.cconfig)
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

// hashSalt is the 80-byte salt of rendered MachineConfig names (pkg/controller/render/hash.go
// salt, "Do not change it"): with the real salt and the real spec bytes, the names are the real
// ones.
var hashSalt = []byte{
	16, 124, 206, 228, 139, 56, 175, 175, 79, 229, 134, 118, 157, 154, 211, 110,
	25, 93, 47, 253, 172, 106, 37, 7, 174, 13, 160, 185, 110, 17, 87, 52,
	219, 131, 12, 206, 218, 141, 116, 135, 188, 181, 192, 151, 233, 62, 126, 165,
	64, 83, 179, 119, 15, 168, 208, 197, 146, 107, 58, 227, 133, 188, 238, 26,
	33, 26, 235, 202, 32, 173, 31, 234, 41, 144, 148, 79, 6, 206, 23, 22,
}

// renderPool is render_controller.go generateRenderedMachineConfig for the bootstrap: the
// pool's configs (its machineConfigSelector over every config), merged by
// ctrlcommon.MergeMachineConfigs, named rendered-<pool>-<md5(salt + YAML of the spec)>
// (getMachineConfigHashedName), owned by the pool.
func renderPool(b behaviour, p *mcfgv1.MachineConfigPool, configs []*mcfgv1.MachineConfig, cc *mcfgv1.ControllerConfig) (*mcfgv1.MachineConfig, error) {
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.MachineConfigSelector)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector: %w", err)
	}
	var pcs []*mcfgv1.MachineConfig
	if !sel.Empty() {
		for _, c := range configs {
			if sel.Matches(labels.Set(c.Labels)) {
				pcs = append(pcs, c)
			}
		}
	}
	if len(pcs) == 0 {
		return nil, fmt.Errorf("couldn't find any MachineConfigs for pool: %v", p.Name)
	}
	for _, c := range pcs {
		if v := c.Annotations["machineconfiguration.openshift.io/generated-by-controller-version"]; v != "" && v != versionHash {
			return nil, fmt.Errorf("Ignoring MC %s generated by older version %s (my version: %s)", c.Name, v, versionHash)
		}
	}
	spec, err := mergeMachineConfigs(b, pcs, cc)
	if err != nil {
		return nil, err
	}
	specYAML, err := yaml.Marshal(spec)
	if err != nil {
		return nil, err
	}
	h := md5.New()
	h.Write(hashSalt)
	h.Write(specYAML)
	yes := true
	return &mcfgv1.MachineConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfig"},
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("rendered-%s-%x", p.Name, h.Sum(nil)),
			Annotations: map[string]string{
				"machineconfiguration.openshift.io/generated-by-controller-version": versionHash,
				"machineconfiguration.openshift.io/release-image-version":           cc.Annotations["machineconfiguration.openshift.io/release-image-version"],
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfigPool",
				Name: p.Name, UID: p.UID, Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: *spec,
	}, nil
}

// mergeMachineConfigs is ctrlcommon.MergeMachineConfigs: worker-role configs first, then the
// others, each sorted by name; the Ignition configs merged in that order (4.20+ keeping no
// compression ""); overwrite defaulted on; kernel arguments and extensions concatenated;
// kernelType default unless one sets realtime or 64k-pages; osImageURL and the extensions image
// from the ControllerConfig unless a config sets them (4.22: only user configs can).
func mergeMachineConfigs(b behaviour, configs []*mcfgv1.MachineConfig, cc *mcfgv1.ControllerConfig) (*mcfgv1.MachineConfigSpec, error) {
	var workers, others []*mcfgv1.MachineConfig
	for _, c := range configs {
		if c.Labels == nil {
			return nil, fmt.Errorf("Cannot find label in MachineConfig %s", c.Name)
		}
		if c.Labels["machineconfiguration.openshift.io/role"] == "worker" {
			workers = append(workers, c)
		} else {
			others = append(others, c)
		}
	}
	sort.SliceStable(workers, func(i, j int) bool { return workers[i].Name < workers[j].Name })
	sort.SliceStable(others, func(i, j int) bool { return others[i].Name < others[j].Name })
	configs = append(workers, others...)

	var out types.Config
	if configs[0].Spec.Config.Raw == nil {
		out = newIgnConfig(b)
	} else {
		var err error
		if out, err = parseIgn(b, configs[0].Spec.Config.Raw); err != nil {
			return nil, fmt.Errorf("parsing Ignition config of MachineConfig %s: %w", configs[0].Name, err)
		}
	}
	for _, c := range configs[1:] {
		if c.Spec.Config.Raw == nil {
			continue
		}
		cfg, err := parseIgn(b, c.Spec.Config.Raw)
		if err != nil {
			return nil, fmt.Errorf("parsing Ignition config of MachineConfig %s: %w", c.Name, err)
		}
		if b.mergeUnsetsEmptyCompression {
			defaultCompression(&cfg)
		}
		out = v35.Merge(out, cfg)
		if b.mergeUnsetsEmptyCompression {
			unsetEmptyCompression(&out)
		}
	}
	for i := range out.Storage.Files {
		if out.Storage.Files[i].Overwrite == nil {
			yes := true
			out.Storage.Files[i].Overwrite = &yes
		}
	}
	raw, err := marshalIgn(b, out)
	if err != nil {
		return nil, err
	}
	spec := &mcfgv1.MachineConfigSpec{
		OSImageURL:                     cc.Spec.BaseOSContainerImage,
		BaseOSExtensionsContainerImage: cc.Spec.BaseOSExtensionsContainerImage,
		Config:                         runtime.RawExtension{Raw: raw},
		KernelArguments:                []string{},
		Extensions:                     []string{},
		KernelType:                     "default",
	}
	for _, c := range configs {
		spec.FIPS = spec.FIPS || c.Spec.FIPS
		if c.Spec.KernelType == "realtime" || c.Spec.KernelType == "64k-pages" {
			spec.KernelType = c.Spec.KernelType
		}
		spec.KernelArguments = append(spec.KernelArguments, c.Spec.KernelArguments...)
		spec.Extensions = append(spec.Extensions, c.Spec.Extensions...)
		generated := c.Annotations["machineconfiguration.openshift.io/generated-by-controller-version"] != ""
		if b.templateOSImageURL || !generated {
			if c.Spec.OSImageURL != "" {
				spec.OSImageURL = c.Spec.OSImageURL
			}
			if c.Spec.BaseOSExtensionsContainerImage != "" {
				spec.BaseOSExtensionsContainerImage = c.Spec.BaseOSExtensionsContainerImage
			}
		}
	}
	if spec.KernelType != "default" && slices.Contains(spec.Extensions, "kernel-devel") {
		return nil, fmt.Errorf("installing kernel-devel extension is not supported with kernelType: %s", spec.KernelType)
	}
	return spec, nil
}

// defaultCompression is ignitionMergeSetFilesDefaultCompression: a nil compression becomes "",
// so a merged file's compression always comes with its contents.
func defaultCompression(cfg *types.Config) {
	for i := range cfg.Storage.Files {
		if c := &cfg.Storage.Files[i].Contents; c.Compression == nil {
			empty := ""
			c.Compression = &empty
		}
	}
}

// unsetEmptyCompression is ignitionMergeUnsetFilesDefaultCompression: compression "" becomes nil.
func unsetEmptyCompression(cfg *types.Config) {
	for i := range cfg.Storage.Files {
		if c := &cfg.Storage.Files[i].Contents; c.Compression != nil && *c.Compression == "" {
			c.Compression = nil
		}
	}
}
