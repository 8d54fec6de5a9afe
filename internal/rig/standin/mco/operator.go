package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

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

// Image flag name -> image-references tag (bootstrap.go: "Failed to find %s in image references").
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
	{"baseos-image", "rhel-coreos"},
	{"baseos-extensions-image", "rhel-coreos-extensions"},
}

// requiredTags must all be in --image-references (MCO fatals otherwise).
var requiredTags = []string{"machine-config-operator", "keepalived-ipfailover", "coredns", "baremetal-runtimecfg", "oauth-proxy", "kube-rbac-proxy", "pod", "haproxy-router"}

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
	if err := yaml.Unmarshal(b, into); err != nil {
		return fmt.Errorf("--%s %s: %w", flag, path, err)
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

	images := map[string]string{}
	for _, im := range imageFlags {
		images[im.tag] = *f.images[im.flag]
	}
	if f.imageReferences != "" {
		var is imagev1.ImageStream
		b, err := readRequired("image-references", f.imageReferences)
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(b, &is); err != nil || is.Kind != "ImageStream" {
			return fmt.Errorf("--image-references %s: not an ImageStream: %v", f.imageReferences, err)
		}
		found := map[string]string{}
		for _, t := range is.Spec.Tags {
			if t.From != nil && t.From.Kind == "DockerImage" {
				found[t.Name] = t.From.Name
			}
		}
		for _, tag := range requiredTags {
			if found[tag] == "" {
				return fmt.Errorf("Failed to find %s in image references", tag)
			}
			images[tag] = found[tag]
		}
		for _, tag := range []string{"rhel-coreos", "rhel-coreos-extensions"} {
			if found[tag] == "" {
				fmt.Fprintf(log, "W Base OS image %s not found in image references\n", tag)
			}
			images[tag] = found[tag]
		}
	}

	if len(network.Spec.ServiceNetwork) == 0 {
		return fmt.Errorf("--network-config-file: Network spec.serviceNetwork is empty")
	}
	dnsIP, err := clusterDNSIP(network.Spec.ServiceNetwork[0])
	if err != nil {
		return err
	}
	ipFamilies := mcfgv1.IPFamiliesIPv4
	if p, err := netip.ParsePrefix(network.Spec.ServiceNetwork[0]); err == nil && p.Addr().Is6() {
		ipFamilies = mcfgv1.IPFamiliesIPv6
	}
	networkType := network.Spec.NetworkType
	if networkType == "" {
		networkType = network.Status.NetworkType
	}
	platform := ""
	if infra.Status.PlatformStatus != nil {
		platform = strings.ToLower(string(infra.Status.PlatformStatus.Type))
	}
	// An empty Proxy status leaves spec.proxy unset, so the templates' {{if .Proxy}} branches
	// go as in a real render (MCO 4.18 pkg/operator/render.go createDiscoveredControllerConfigSpec:
	// "Not setting proxy config because Proxy status is empty").
	var proxyStatus *configv1.ProxyStatus
	if proxy.Status != (configv1.ProxyStatus{}) {
		proxyStatus = &proxy.Status
	}
	cc := mcfgv1.ControllerConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "ControllerConfig"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "machine-config-controller",
			Annotations: map[string]string{
				"machineconfiguration.openshift.io/generated-by-version": standinVersion,
			},
		},
		Spec: mcfgv1.ControllerConfigSpec{
			ClusterDNSIP:               dnsIP,
			Platform:                   platform,
			EtcdDiscoveryDomain:        dns.Spec.BaseDomain,
			KubeAPIServerServingCAData: kubeCA,
			RootCAData:                 rootCA,
			CloudProviderCAData:        cloudCA,
			AdditionalTrustBundle:      trustBundle,
			Images: map[string]string{
				"machineConfigOperator":    images["machine-config-operator"],
				"apiServerWatcherKey":      images["machine-config-operator"],
				"infraImageKey":            images["pod"],
				"keepalivedImage":          images["keepalived-ipfailover"],
				"corednsImage":             images["coredns"],
				"haproxyImage":             images["haproxy-router"],
				"baremetalRuntimeCfgImage": images["baremetal-runtimecfg"],
				"kubeRbacProxyImage":       images["kube-rbac-proxy"],
			},
			BaseOSContainerImage:           images["rhel-coreos"],
			BaseOSExtensionsContainerImage: images["rhel-coreos-extensions"],
			ReleaseImage:                   f.releaseImage,
			Proxy:                          proxyStatus,
			Infra:                          &infra,
			DNS:                            &dns,
			IPFamilies:                     ipFamilies,
			NetworkType:                    networkType,
		},
	}

	out := map[string]any{
		"bootstrap/manifests/machineconfigcontroller-controllerconfig.yaml": cc,
		"bootstrap/manifests/master.machineconfigpool.yaml":                 pool("master"),
		"bootstrap/manifests/worker.machineconfigpool.yaml":                 pool("worker"),
		"bootstrap/machineconfigoperator-bootstrap-pod.yaml":                bootstrapPod(images["machine-config-operator"], f.payloadVersion),
		"manifests/csr-bootstrap-role-binding.yaml":                         csrRoleBinding(),
		"manifests/kube-apiserver-serving-ca-configmap.yaml":                servingCAConfigMap(kubeCA),
	}
	for rel, obj := range out {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encode %s: %w", rel, err)
		}
		if err := writeOut(f.destDir, rel, b); err != nil {
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
	fmt.Fprintf(log, "I mco-standin: operator bootstrap wrote %s (platform %q, clusterDNSIP %s)\n", f.destDir, platform, dnsIP)
	return nil
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

func pool(role string) *mcfgv1.MachineConfigPool {
	return &mcfgv1.MachineConfigPool{
		TypeMeta:   metav1.TypeMeta{APIVersion: "machineconfiguration.openshift.io/v1", Kind: "MachineConfigPool"},
		ObjectMeta: metav1.ObjectMeta{Name: role, Labels: map[string]string{"machineconfiguration.openshift.io/mco-built-in": "", "pools.operator.machineconfiguration.openshift.io/" + role: ""}},
		Spec: mcfgv1.MachineConfigPoolSpec{
			MachineConfigSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"machineconfiguration.openshift.io/role": role}},
			NodeSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"node-role.kubernetes.io/" + role: ""}},
		},
	}
}

func bootstrapPod(image, version string) map[string]any {
	hostPath := func(name, path string) map[string]any {
		return map[string]any{"name": name, "hostPath": map[string]any{"path": path}}
	}
	mount := func(name, path string) map[string]any { return map[string]any{"name": name, "mountPath": path} }
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "bootstrap-machine-config-operator", "namespace": "kube-system"},
		"spec": map[string]any{
			"hostNetwork": true,
			"initContainers": []any{map[string]any{
				"name": "machine-config-controller", "image": image,
				"command":      []string{"/usr/bin/machine-config-controller"},
				"args":         []string{"bootstrap", "--manifest-dir=/etc/mcc/bootstrap", "--dest-dir=/etc/mcs/bootstrap", "--pull-secret=/etc/mcc/bootstrap/machineconfigcontroller-pull-secret", "--payload-version=" + version},
				"volumeMounts": []any{mount("bootstrap-manifests", "/etc/mcc/bootstrap"), mount("server-basedir", "/etc/mcs/bootstrap")},
			}},
			"containers": []any{map[string]any{
				"name": "machine-config-server", "image": image,
				"command":      []string{"/usr/bin/machine-config-server"},
				"args":         []string{"bootstrap", "--payload-version=" + version},
				"volumeMounts": []any{mount("server-certs", "/etc/ssl/mcs"), mount("bootstrap-kubeconfig", "/etc/kubernetes/kubeconfig"), mount("server-basedir", "/etc/mcs/bootstrap")},
			}},
			"volumes": []any{hostPath("server-certs", "/etc/ssl/mcs"), hostPath("bootstrap-kubeconfig", "/etc/mcs/kubeconfig"), hostPath("server-basedir", "/etc/mcs/bootstrap"), hostPath("bootstrap-manifests", "/etc/mcc/bootstrap")},
		},
	}
}

func csrRoleBinding() map[string]any {
	return map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
		"metadata": map[string]any{"name": "system-bootstrap-node-bootstrapper"},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-bootstrapper"},
		"subjects": []any{map[string]any{"kind": "User", "name": "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"}},
	}
}

func servingCAConfigMap(ca []byte) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "initial-kube-apiserver-server-ca", "namespace": "openshift-config"},
		"data":     map[string]any{"ca-bundle.crt": string(ca)},
	}
}
