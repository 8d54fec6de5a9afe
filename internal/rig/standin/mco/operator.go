package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	configv1 "github.com/openshift/api/config/v1"
	imagev1 "github.com/openshift/api/image/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// operatorFlags are `machine-config-operator bootstrap`'s flags with the real defaults
// (cmd/machine-config-operator/bootstrap.go, release-4.18).
type operatorFlags struct {
	payloadVersion, operatorImage                                     string
	rootCA, kubeCA, pullSecret, destDir, configFile                   string
	infraConfig, networkConfig, proxyConfig, dnsConfig                string
	additionalTrustBundle, cloudConfig, cloudProviderCA, releaseImage string
	imageReferences                                                   string
	images                                                            map[string]*string
}

// imageFlags are the operator's image flags, by the image-references tag they stand for
// (cmd/machine-config-operator/bootstrap.go: with --image-references the tags win). The base OS
// tags depend on the build (baseOSTag).
var imageFlags = []struct{ flag, tag string }{
	{"machine-config-operator-image", "machine-config-operator"},
	{"machine-config-oscontent-image", ""},
	{"infra-image", "pod"},
	{"keepalived-image", "keepalived-ipfailover"},
	{"coredns-image", "coredns"},
	{"haproxy-image", "haproxy-router"},
	{"baremetal-runtimecfg-image", "baremetal-runtimecfg"},
	{"oauth-proxy-image", "oauth-proxy"},
	{"kube-rbac-proxy-image", "kube-rbac-proxy"},
	{"baseos-image", "baseos"},
	{"baseos-extensions-image", "baseos-extensions"},
}

func runOperator(args []string, stdout, stderr io.Writer) error {
	args, err := splitSubcommand("machine-config-operator", args)
	if err != nil {
		return err
	}
	f := operatorFlags{images: map[string]*string{}}
	fs := pflag.NewFlagSet("machine-config-operator bootstrap", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.payloadVersion, "payload-version", "", "release version")
	fs.StringVar(&f.operatorImage, "operator-image", "", "unused")
	fs.IntP("v", "v", 0, "log level (ignored)")
	fs.StringVar(&f.rootCA, "root-ca", "/etc/ssl/kubernetes/ca.crt", "root CA")
	fs.StringVar(&f.kubeCA, "kube-ca", "", "kube-apiserver serving CA bundle")
	fs.StringVar(&f.pullSecret, "pull-secret", "/assets/manifests/pull.json", "pull secret Secret manifest")
	fs.StringVar(&f.destDir, "dest-dir", "", "output directory")
	fs.StringVar(&f.configFile, "config-file", "", "cluster-config-v1 ConfigMap")
	fs.StringVar(&f.infraConfig, "infra-config-file", "/assets/manifests/cluster-infrastructure-02-config.yml", "Infrastructure")
	fs.StringVar(&f.networkConfig, "network-config-file", "/assets/manifests/cluster-network-02-config.yml", "Network")
	fs.StringVar(&f.proxyConfig, "proxy-config-file", "/assets/manifests/cluster-proxy-01-config.yaml", "Proxy")
	fs.StringVar(&f.dnsConfig, "dns-config-file", "/assets/manifests/cluster-dns-02-config.yml", "DNS")
	fs.StringVar(&f.additionalTrustBundle, "additional-trust-bundle-config-file", "/assets/manifests/user-ca-bundle-config.yaml", "optional ConfigMap")
	fs.StringVar(&f.cloudConfig, "cloud-config-file", "", "cloud config ConfigMap")
	fs.StringVar(&f.cloudProviderCA, "cloud-provider-ca-file", "", "cloud provider CA")
	fs.StringVar(&f.releaseImage, "release-image", "", "release image")
	fs.StringVar(&f.imageReferences, "image-references", "", "release image-references ImageStream")
	for _, im := range imageFlags {
		f.images[im.flag] = fs.String(im.flag, "", "image")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.destDir == "" || f.configFile == "" {
		return errors.New(`required flag(s) "config-file", "dest-dir" not set`)
	}
	return operatorBootstrap(f, stdout)
}

func readRequired(flag, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	return b, nil
}

func decodeFile(flag, path, kind string, into any) error {
	b, err := readRequired(flag, path)
	if err != nil {
		return err
	}
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(b, &meta); err != nil || meta.Kind != kind {
		return fmt.Errorf("--%s %s: could not decode as %s (kind %q): %v", flag, path, kind, meta.Kind, err)
	}
	// Strict: a field this module's openshift/api (4.18) does not know would be dropped from the
	// ControllerConfig and the templates, where the real release's types keep it.
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("--%s %s: %w (the stand-in's openshift/api types do not know a field of it)", flag, path, err)
	}
	return nil
}

func operatorBootstrap(f operatorFlags, log io.Writer) error {
	rootCA, err := readRequired("root-ca", f.rootCA)
	if err != nil {
		return err
	}
	var kubeCA []byte
	if f.kubeCA != "" {
		if kubeCA, err = readRequired("kube-ca", f.kubeCA); err != nil {
			return err
		}
	}
	pullSecret, err := readRequired("pull-secret", f.pullSecret)
	if err != nil {
		return err
	}
	if _, err := readRequired("config-file", f.configFile); err != nil {
		return err
	}
	var infra configv1.Infrastructure
	var network configv1.Network
	var proxy configv1.Proxy
	var dns configv1.DNS
	for _, d := range []struct {
		flag, path, kind string
		into             any
	}{
		{"infra-config-file", f.infraConfig, "Infrastructure", &infra},
		{"network-config-file", f.networkConfig, "Network", &network},
		{"proxy-config-file", f.proxyConfig, "Proxy", &proxy},
		{"dns-config-file", f.dnsConfig, "DNS", &dns},
	} {
		if err := decodeFile(d.flag, d.path, d.kind, d.into); err != nil {
			return err
		}
	}
	var trustBundle []byte
	if b, err := os.ReadFile(f.additionalTrustBundle); err == nil {
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal(b, &cm); err != nil {
			return fmt.Errorf("--additional-trust-bundle-config-file: %w", err)
		}
		trustBundle = []byte(cm.Data["ca-bundle.crt"])
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("--additional-trust-bundle-config-file: %w", err)
	}
	var cloudCA []byte
	if f.cloudProviderCA != "" {
		if cloudCA, err = readRequired("cloud-provider-ca-file", f.cloudProviderCA); err != nil {
			return err
		}
	}

	b, err := current()
	if err != nil {
		return err
	}
	images := map[string]string{}
	for _, im := range imageFlags {
		images[im.tag] = *f.images[im.flag]
	}
	if f.imageReferences != "" {
		var is imagev1.ImageStream
		raw, err := readRequired("image-references", f.imageReferences)
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(raw, &is); err != nil || is.Kind != "ImageStream" {
			return fmt.Errorf("--image-references %s: not an ImageStream: %v", f.imageReferences, err)
		}
		found := map[string]string{}
		for _, t := range is.Spec.Tags {
			if _, ok := found[t.Name]; !ok && t.From != nil && t.From.Kind == "DockerImage" {
				found[t.Name] = t.From.Name // findImage: the first tag of that name
			}
		}
		for _, tag := range b.requiredTags {
			if found[tag] == "" {
				return fmt.Errorf("Failed to find %s in image references", tag)
			}
			images[tag] = found[tag]
		}
		for key, tag := range map[string]string{"baseos": baseOSTag(), "baseos-extensions": baseOSTag() + "-extensions"} {
			if found[tag] == "" {
				fmt.Fprintf(log, "W Base OS container not found: could not find %s in images\n", tag)
			}
			images[key] = found[tag]
		}
	}

	spec, err := discoveredControllerConfigSpec(&infra, &network, &proxy, &dns)
	if err != nil {
		return err
	}
	spec.AdditionalTrustBundle = trustBundle
	if infra.Spec.CloudConfig.Name != "" {
		return fmt.Errorf("stand-in: Infrastructure spec.cloudConfig names %q: the stand-in does not load cloud provider configs", infra.Spec.CloudConfig.Name)
	}
	spec.KubeAPIServerServingCAData = kubeCA
	spec.CloudProviderCAData = cloudCA
	spec.RootCAData = rootCA
	spec.BaseOSContainerImage = images["baseos"]
	spec.BaseOSExtensionsContainerImage = images["baseos-extensions"]
	spec.ReleaseImage = f.releaseImage
	spec.Images = map[string]string{
		"machineConfigOperator":    images["machine-config-operator"],
		"apiServerWatcherKey":      images["machine-config-operator"],
		"infraImageKey":            images["pod"],
		"keepalivedImage":          images["keepalived-ipfailover"],
		"corednsImage":             images["coredns"],
		"haproxyImage":             images["haproxy-router"],
		"baremetalRuntimeCfgImage": images["baremetal-runtimecfg"],
		"kubeRbacProxyImage":       images["kube-rbac-proxy"],
	}
	if slices.Contains(b.requiredTags, "docker-registry") {
		spec.Images["dockerRegistryImage"] = images["docker-registry"] // templatectrl.DockerRegistryKey (4.22)
	}

	specYAML, err := marshalObject(b, spec) // render.go toYAML (the spec, not the object)
	if err != nil {
		return fmt.Errorf("encode ControllerConfig: %w", err)
	}
	data := operatorTextData{
		Image:                images["machine-config-operator"],
		ReleaseVersion:       f.payloadVersion,
		Version:              versionRaw,
		ControllerConfigYAML: indent(2, string(specYAML)),
		ServingCA:            indent(4, string(kubeCA)),
	}
	for _, m := range []struct{ rel, text string }{
		{"bootstrap/manifests/machineconfigcontroller-controllerconfig.yaml", controllerConfigText},
		{"bootstrap/manifests/master.machineconfigpool.yaml", masterPoolText},
		{"bootstrap/manifests/worker.machineconfigpool.yaml", workerPoolText},
		{"bootstrap/machineconfigoperator-bootstrap-pod.yaml", bootstrapPodText},
		{"manifests/csr-bootstrap-role-binding.yaml", csrRoleBindingText},
		{"manifests/kube-apiserver-serving-ca-configmap.yaml", servingCAConfigMapText},
	} {
		t, err := template.New(m.rel).Parse(m.text)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := t.Execute(&out, data); err != nil {
			return fmt.Errorf("render %s: %w", m.rel, err)
		}
		if err := writeOut(f.destDir, m.rel, out.Bytes()); err != nil {
			return err
		}
	}
	// The bootstrap's on-prem static pods and their templates (platform BareMetal).
	onPrem, err := onPremBootstrapFiles(&infra, &dns, images)
	if err != nil {
		return err
	}
	for rel, b := range onPrem {
		if err := writeOut(f.destDir, rel, b); err != nil {
			return err
		}
	}
	// The pull secret Secret is copied verbatim (pkg/operator/bootstrap.go).
	if err := writeOut(f.destDir, "bootstrap/manifests/machineconfigcontroller-pull-secret", pullSecret); err != nil {
		return err
	}
	fmt.Fprintf(log, "I mco-standin %s: operator bootstrap wrote %s (platform %q, clusterDNSIP %s)\n", b.name, f.destDir, spec.Platform, spec.ClusterDNSIP)
	return nil
}

// discoveredControllerConfigSpec is pkg/operator/render.go createDiscoveredControllerConfigSpec:
// the cluster DNS IP and IP families from the service network, the platform (an Infrastructure
// without a platform status gets one, None unless status.platform says otherwise, and the
// ControllerConfig's embedded Infrastructure shows it), the network type from the Network's
// status or, at install time, its spec, and the proxy only when the Proxy has a status
// ("Not setting proxy config because Proxy status is empty"), so the templates' {{if .Proxy}}
// branches go as in a real render.
func discoveredControllerConfigSpec(infra *configv1.Infrastructure, network *configv1.Network, proxy *configv1.Proxy, dns *configv1.DNS) (*mcfgv1.ControllerConfigSpec, error) {
	if len(network.Spec.ServiceNetwork) == 0 {
		return nil, fmt.Errorf("service cidr is empty in Network")
	}
	dnsIP, err := clusterDNSIP(network.Spec.ServiceNetwork[0])
	if err != nil {
		return nil, err
	}
	families, err := ipFamilies(network.Spec.ServiceNetwork)
	if err != nil {
		return nil, err
	}
	//nolint:staticcheck // status.platform, as the real code reads it
	if infra.Status.PlatformStatus == nil && infra.Status.Platform != "" {
		infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: infra.Status.Platform} //nolint:staticcheck
	} else if infra.Status.PlatformStatus == nil || infra.Status.PlatformStatus.Type == "" {
		infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: configv1.NonePlatformType}
	}
	spec := &mcfgv1.ControllerConfigSpec{
		ClusterDNSIP:        dnsIP,
		IPFamilies:          families,
		EtcdDiscoveryDomain: infra.Status.EtcdDiscoveryDomain,
		Platform:            strings.ToLower(string(infra.Status.PlatformStatus.Type)),
		Infra:               infra,
		DNS:                 dns,
	}
	switch {
	case network.Status.NetworkType == "":
		spec.NetworkType = network.Spec.NetworkType
	case network.Status.Migration != nil:
		spec.NetworkType = network.Status.Migration.NetworkType
		if network.Status.Migration.MTU != nil {
			spec.Network = &mcfgv1.NetworkInfo{MTUMigration: network.Status.Migration.MTU}
		}
	default:
		spec.NetworkType = network.Status.NetworkType
	}
	if proxy.Status != (configv1.ProxyStatus{}) {
		spec.Proxy = &proxy.Status
	}
	return spec, nil
}

// ipFamilies is pkg/operator/render.go ipFamilies: IPv4, IPv6, or dual stack with the first
// service network's family primary.
func ipFamilies(cidrs []string) (mcfgv1.IPFamiliesType, error) {
	var v4, v6, v6primary bool
	for i, c := range cidrs {
		p, err := netip.ParsePrefix(c)
		if err == nil && p.Addr().Is6() {
			v6 = true
			v6primary = v6primary || i == 0
		} else {
			v4 = true
		}
	}
	switch {
	case v4 && v6 && v6primary:
		return mcfgv1.IPFamiliesDualStackIPv6Primary, nil
	case v4 && v6:
		return mcfgv1.IPFamiliesDualStack, nil
	case v4:
		return mcfgv1.IPFamiliesIPv4, nil
	case v6:
		return mcfgv1.IPFamiliesIPv6, nil
	}
	return "", fmt.Errorf("could not determine cluster IP families from config")
}

// indent is sprig's indent as MCO copies it (pkg/controller/common/helpers.go indent): n spaces
// before the text and after every newline, the last one included.
func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

func writeOut(dir, rel string, data []byte) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// clusterDNSIP is the 10th address of the service network (MCO pkg/operator/sync.go
// clusterDNSIP: 172.30.0.0/16 -> 172.30.0.10).
func clusterDNSIP(cidr string) (string, error) {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("service network %q: %w", cidr, err)
	}
	a := p.Masked().Addr()
	for range 10 {
		a = a.Next()
	}
	if !p.Contains(a) {
		return "", fmt.Errorf("service network %q is too small for the cluster DNS IP", cidr)
	}
	return a.String(), nil
}
