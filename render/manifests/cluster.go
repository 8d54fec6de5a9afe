package manifests

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// File is one rendered manifest: Name is its file name under manifests/ (the name sets the
// apply order: bootkube applies the files in byte order, so every name starts with a two-digit
// group); Secret marks files that hold secret material (mode 0600).
type File struct {
	Name   string
	Data   []byte
	Secret bool
}

// The apply order of cluster manifests, by file-name prefix. CRDs (release/crds, named
// 0000_<nn>_...) sort before all of these.
const (
	OrderNamespaces = "01" // Namespaces, before anything namespaced
	OrderConfig     = "02" // config.openshift.io singletons, operator Network, ClusterVersion
	OrderRBAC       = "03" // ClusterRoleBindings
	OrderObjects    = "04" // ConfigMaps and Secrets
)

// StatusKinds are the kinds whose status labbuild writes in the manifest. Applying a file
// drops the status of a kind with a status subresource, so the apply step must also apply
// these files to the status subresource (kubectl apply --server-side --subresource=status).
var StatusKinds = map[string]bool{"Infrastructure": true, "FeatureGate": true}

// newFile serializes o (a local mirror of an API type, types.go) as manifest name. The mirrors
// of OpenShift objects carry only the fields labbuild sets: the github.com/openshift/api module
// is newer than 4.18 and its types wrote zero values of fields the 4.18 CRDs do not declare
// (ClusterVersion spec.signatureStores, Scheduler spec.profileCustomizations), which
// server-side apply refuses ("field not declared in schema").
func newFile(name string, o any) (File, error) {
	b, err := marshal(o)
	if err != nil {
		return File{}, fmt.Errorf("manifests: %s: %w", name, err)
	}
	return File{Name: name, Data: b}, nil
}

// Namespace names, in order, that the bootstrap manifests create (OTHW's 01-namespaces.yaml).
var Namespaces = []string{
	"openshift-config", "openshift-config-managed", "openshift-etcd", "openshift-kube-apiserver",
	"openshift-kube-controller-manager", "openshift-kube-scheduler", "openshift-cluster-version",
	"openshift-machine-config-operator", "openshift-infra", "openshift-node",
}

// NamespaceFiles renders one file per namespace in Namespaces. openshift-etcd carries
// run-level "0" and an empty node selector, as the cluster-etcd-operator's own namespace
// manifest: its pods must start before the SCC admission exists and on any node.
func NamespaceFiles() ([]File, error) {
	var out []File
	for _, ns := range Namespaces {
		o := newNamespace(ns)
		if ns == "openshift-etcd" {
			o.Metadata.Labels = map[string]string{"openshift.io/run-level": "0"}
			o.Metadata.Annotations = map[string]string{"openshift.io/node-selector": ""}
		}
		f, err := newFile(OrderNamespaces+"-namespace-"+ns+".yaml", o)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// RBACFiles renders the ClusterRoleBindings of OTHW's 02-rbac.yaml: the kubelet bootstrap
// identity (User system:bootstrapper) may create node CSRs (system:node-bootstrapper) and run
// kube-proxy (system:node-proxier); system:admin gets system:node-admin.
func RBACFiles() ([]File, error) {
	crb := func(name, role, user string) *clusterRoleBinding {
		return &clusterRoleBinding{
			typeMeta: typeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			Metadata: meta(name, ""),
			RoleRef:  roleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}},
		}
	}
	var out []File
	for _, b := range []*clusterRoleBinding{
		crb("system:bootstrapper", "system:node-bootstrapper", "system:bootstrapper"),
		crb("system:bootstrapper-proxy", "system:node-proxier", "system:bootstrapper"),
		crb("system:node-admin", "system:node-admin", "system:admin"),
	} {
		f, err := newFile(OrderRBAC+"-clusterrolebinding-"+strings.ReplaceAll(b.Metadata.Name, ":", "-")+".yaml", b)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// Topologies returns the control-plane and infrastructure topologies openshift-install 4.18
// derives from the replica counts (pkg/asset/manifests/topologies.go): fewer than 3 masters
// is SingleReplica; no workers means the infrastructure follows the control plane, one worker
// is SingleReplica, more is HighlyAvailable. The values are config/v1 TopologyMode strings.
func Topologies(masters, workers int) (controlPlane, infra string) {
	controlPlane = HighlyAvailableTopologyMode
	if masters < 3 {
		controlPlane = SingleReplicaTopologyMode
	}
	switch {
	case workers == 0:
		infra = controlPlane
	case workers == 1:
		infra = SingleReplicaTopologyMode
	default:
		infra = HighlyAvailableTopologyMode
	}
	return controlPlane, infra
}

// BareMetal is the in-cluster load balancing of platform baremetal (lab option
// network.loadBalancer: in-cluster): keepalived moves the API and ingress VIPs between the
// nodes, haproxy and coredns run as static pods rendered by the MCO from its on-prem
// templates. APIVIPs and IngressVIPs are IPv4 addresses inside one of MachineNetworks (CIDRs).
// A nil *BareMetal means platform None (the host-haproxy mode).
type BareMetal struct {
	APIVIPs, IngressVIPs []string
	MachineNetworks      []string
}

func (b *BareMetal) check(what string) error {
	if len(b.APIVIPs) == 0 || len(b.IngressVIPs) == 0 || len(b.MachineNetworks) == 0 {
		return fmt.Errorf("%s: platform baremetal needs API VIPs, ingress VIPs and machine networks", what)
	}
	for _, ip := range append(append([]string{}, b.APIVIPs...), b.IngressVIPs...) {
		if err := checkIP(what+": VIP", ip); err != nil {
			return err
		}
	}
	for _, n := range b.MachineNetworks {
		if err := checkCIDR(what+": machine network", n); err != nil {
			return err
		}
	}
	return nil
}

// Infrastructure renders Infrastructure `cluster` with spec and status as openshift-install's
// cluster-infrastructure-02-config.yml for platform None: API URLs on domain
// (<name>.<baseDomain>), the infrastructure name infraID (see InfraID) and the topologies of
// Topologies. Its status is applied through the status subresource (StatusKinds).
func Infrastructure(domain, infraID string, masters, workers int) (File, error) {
	return InfrastructureOn(domain, infraID, masters, workers, nil)
}

// InfrastructureOn is Infrastructure on platform None (bm nil) or BareMetal (bm set). For
// BareMetal it writes what openshift-install 4.18 pkg/asset/manifests/infrastructure.go
// (case baremetal.Name) writes: spec.platformSpec.baremetal with apiServerInternalIPs,
// ingressIPs and machineNetworks; status.platformStatus.baremetal with the first VIPs
// (apiServerInternalIP, ingressIP, deprecated but still read), the VIP lists, the machine
// networks and loadBalancer.type OpenShiftManagedDefault (the install-config default, under
// which the MCO renders keepalived, haproxy and coredns: isOpenShiftManagedDefaultLB).
func InfrastructureOn(domain, infraID string, masters, workers int, bm *BareMetal) (File, error) {
	if domain == "" || infraID == "" {
		return File{}, errors.New("infrastructure: empty cluster domain or infrastructure name")
	}
	cp, infra := Topologies(masters, workers)
	o := &infrastructure{typeMeta: configTypeMeta("Infrastructure"), Metadata: objectMeta{Name: "cluster"}}
	o.Spec.PlatformSpec.Type = nonePlatformType
	o.Status = infrastructureStatus{
		InfrastructureName:     infraID,
		Platform:               nonePlatformType,
		PlatformStatus:         &platformStatus{Type: nonePlatformType},
		APIServerURL:           "https://api." + domain + ":6443",
		APIServerInternalURL:   "https://api-int." + domain + ":6443",
		ControlPlaneTopology:   cp,
		InfrastructureTopology: infra,
		CPUPartitioning:        "None", // config/v1 CPUPartitioningNone
	}
	if bm != nil {
		if err := bm.check("infrastructure"); err != nil {
			return File{}, err
		}
		o.Spec.PlatformSpec.Type = bareMetalPlatformType
		o.Spec.PlatformSpec.BareMetal = &baremetalSpec{APIServerInternalIPs: bm.APIVIPs, IngressIPs: bm.IngressVIPs, MachineNetworks: bm.MachineNetworks}
		ps := &platformStatus{Type: bareMetalPlatformType}
		ps.BareMetal = &baremetalStatus{
			APIServerInternalIP: bm.APIVIPs[0], APIServerInternalIPs: bm.APIVIPs,
			IngressIP: bm.IngressVIPs[0], IngressIPs: bm.IngressVIPs,
			MachineNetworks: bm.MachineNetworks,
			LoadBalancer:    &loadBalancer{Type: loadBalancerTypeOpenShiftManagedDefault},
		}
		o.Status.Platform = bareMetalPlatformType
		o.Status.PlatformStatus = ps
	}
	return newFile(OrderConfig+"-config-infrastructure.yaml", o)
}

// NetworkConfig renders config.openshift.io Network `cluster` (cluster-network-02-config.yml):
// one cluster network with its per-node prefix, one service network, OVNKubernetes.
func NetworkConfig(clusterNetwork string, hostPrefix int, serviceNetwork string) (File, error) {
	if err := checkCIDR("network: cluster network", clusterNetwork); err != nil {
		return File{}, err
	}
	if err := checkCIDR("network: service network", serviceNetwork); err != nil {
		return File{}, err
	}
	o := &networkConfig{typeMeta: configTypeMeta("Network"), Metadata: objectMeta{Name: "cluster"}}
	o.Spec.ClusterNetwork = []clusterNetworkEntry{{CIDR: clusterNetwork, HostPrefix: uint32(hostPrefix)}}
	o.Spec.ServiceNetwork = []string{serviceNetwork}
	o.Spec.NetworkType = "OVNKubernetes"
	return newFile(OrderConfig+"-config-network.yaml", o)
}

// OperatorNetwork renders operator.openshift.io Network `cluster`, which the
// cluster-network-operator needs at start ("No networks.operator.openshift.io cluster found"
// otherwise; spec §7.3 #5). managementState Managed: the CRD rejects an empty one.
func OperatorNetwork(clusterNetwork string, hostPrefix int, serviceNetwork string) (File, error) {
	if err := checkCIDR("operator network: cluster network", clusterNetwork); err != nil {
		return File{}, err
	}
	if err := checkCIDR("operator network: service network", serviceNetwork); err != nil {
		return File{}, err
	}
	o := &operatorNetwork{typeMeta: typeMeta{APIVersion: "operator.openshift.io/v1", Kind: "Network"}, Metadata: objectMeta{Name: "cluster"}}
	o.Spec.ManagementState = "Managed"
	o.Spec.ClusterNetwork = []clusterNetworkEntry{{CIDR: clusterNetwork, HostPrefix: uint32(hostPrefix)}}
	o.Spec.ServiceNetwork = []string{serviceNetwork}
	o.Spec.DefaultNetwork.Type = "OVNKubernetes"
	return newFile(OrderConfig+"-operator-network.yaml", o)
}

// DNS renders DNS `cluster` with spec.baseDomain = the cluster domain <name>.<baseDomain>, as
// openshift-install does (OTHW writes the bare baseDomain, so ingress and DNS records land one
// level too high).
func DNS(domain string) (File, error) {
	if domain == "" {
		return File{}, errors.New("dns: empty cluster domain")
	}
	return newFile(OrderConfig+"-config-dns.yaml", newConfig("DNS", "cluster", dnsSpec{BaseDomain: domain}))
}

// Ingress renders Ingress `cluster` with spec.domain apps.<domain>.
func Ingress(domain string) (File, error) {
	if domain == "" {
		return File{}, errors.New("ingress: empty cluster domain")
	}
	return newFile(OrderConfig+"-config-ingress.yaml", newConfig("Ingress", "cluster", ingressSpec{Domain: "apps." + domain}))
}

// Proxy renders the empty Proxy `cluster` (no proxy): operators read it and wait without it.
func Proxy() (File, error) {
	return newFile(OrderConfig+"-config-proxy.yaml", newConfig("Proxy", "cluster", struct{}{}))
}

// Scheduler renders Scheduler `cluster`; masters are schedulable when there are no workers
// (openshift-install: compute replicas sum to 0).
func Scheduler(workers int) (File, error) {
	return newFile(OrderConfig+"-config-scheduler.yaml", newConfig("Scheduler", "cluster", schedulerSpec{MastersSchedulable: workers == 0}))
}

// FeatureSet maps labbuild's cluster.featureSet ("Default" or "") to the API value: Default is
// the empty string in FeatureGate spec.featureSet (config/v1 FeatureSet: Default is "",
// TechPreviewNoUpgrade, DevPreviewNoUpgrade, CustomNoUpgrade, and OKD from 4.22).
func FeatureSet(s string) string {
	if s == "Default" {
		return ""
	}
	return s
}

// ClusterVersion renders ClusterVersion `version` with the release's channel and upstream
// (render/releases Release.CVOChannel, CVOUpstream: installer
// data/data/manifests/bootkube/cvo-overrides.yaml.template, stable-<major>.<minor> for OCP, the
// OKD update service and stable-scos-4 for SCOS) and clusterID (see ClusterID); no
// desiredUpdate, so the CVO installs the payload it runs (spec §7.3 #12).
func ClusterVersion(upstream, channel, clusterID string) (File, error) {
	if channel == "" {
		return File{}, errors.New("clusterversion: empty channel")
	}
	if clusterID == "" {
		return File{}, errors.New("clusterversion: empty cluster ID")
	}
	return newFile(OrderConfig+"-config-clusterversion.yaml", newConfig("ClusterVersion", "version",
		clusterVersionSpec{ClusterID: clusterID, Channel: channel, Upstream: upstream}))
}

// SupportSecret renders Secret openshift-config/support with stringData scaPullDisabled "true",
// which an OKD installer writes so the insights operator does not pull Red Hat subscription
// content (installer data/data/manifests/openshift/90-okd-sca-pull-disable.yaml.template,
// `{{if .IsOKD}}`). It holds no secret.
func SupportSecret() (File, error) {
	sec := newSecret("openshift-config", "support", secretTypeOpaque, nil)
	sec.StringData = map[string]string{"scaPullDisabled": "true"}
	return newFile(OrderObjects+"-openshift-config-secret-support.yaml", sec)
}

// InstallConfig is the part of an install-config labbuild knows (openshift-install's
// types.InstallConfig, apiVersion v1), for kube-system/cluster-config-v1.
type InstallConfig struct {
	Name, BaseDomain               string
	ClusterNetwork                 string
	HostPrefix                     int
	ServiceNetwork, MachineNetwork string
	// Masters is controlPlane.replicas. There is no worker count: compute replicas are always
	// 0 (see ClusterConfigV1).
	Masters int
	// BareMetal, when set, makes the platform baremetal (see BareMetal); nil is platform none.
	BareMetal *BareMetal
	// ImageDigestSources are the release mirror's (targets/mirror.go). AdditionalTrustBundle
	// (PEM) is the lab's trust bundle (targets/shared_trust.go: the mirror CA, the BMC CA): with it
	// additionalTrustBundlePolicy is Always, so the Proxy names the bundle (installer
	// proxy.go). Empty: the fields are absent, as before.
	ImageDigestSources    []MirrorSource
	AdditionalTrustBundle string
}

// installConfig mirrors the YAML shape of openshift-install's install-config after defaulting
// (the fields the cluster-network-operator and the MCO read). Field order is alphabetical in
// the output, as sigs.k8s.io/yaml writes it.
type installConfig struct {
	APIVersion                  string            `json:"apiVersion"`
	AdditionalTrustBundle       string            `json:"additionalTrustBundle,omitempty"`
	AdditionalTrustBundlePolicy string            `json:"additionalTrustBundlePolicy"`
	BaseDomain                  string            `json:"baseDomain"`
	Compute                     []machinePool     `json:"compute"`
	ControlPlane                machinePool       `json:"controlPlane"`
	ImageDigestSources          []MirrorSource    `json:"imageDigestSources,omitempty"`
	Metadata                    map[string]string `json:"metadata"`
	Networking                  icNetworking      `json:"networking"`
	Platform                    map[string]any    `json:"platform"`
	Publish                     string            `json:"publish"`
	PullSecret                  string            `json:"pullSecret"`
}

type machinePool struct {
	Architecture   string         `json:"architecture"`
	Hyperthreading string         `json:"hyperthreading"`
	Name           string         `json:"name"`
	Platform       map[string]any `json:"platform"`
	Replicas       int            `json:"replicas"`
}

type icNetworking struct {
	ClusterNetwork []map[string]any `json:"clusterNetwork"`
	MachineNetwork []map[string]any `json:"machineNetwork"`
	NetworkType    string           `json:"networkType"`
	ServiceNetwork []string         `json:"serviceNetwork"`
}

// ClusterConfigV1 renders ConfigMap kube-system/cluster-config-v1 whose `install-config` key
// is the install-config this lab would have had (platform none, OVNKubernetes), as
// openshift-install's manifests/cluster-config.yaml. pullSecret is "" as the installer writes
// it: the pull secret never goes into this ConfigMap (or a log).
//
// compute[0].replicas is 0 whatever the lab's worker count, as the installer's UPI guides
// direct ("Empty Compute Pools" in openshift/installer docs/user/aws/install_upi.md and
// docs/user/openstack/install_upi.md: the user, not the Machine API, creates the compute
// machines): labbuild creates the workers itself, and no operator reads the number (the
// topologies and mastersSchedulable are rendered from the real count by Infrastructure and
// Scheduler). So adding or removing a worker changes no bootstrap manifest and no bootstrap
// Ignition.
func ClusterConfigV1(ic InstallConfig) (File, error) {
	for field, v := range map[string]string{"cluster network": ic.ClusterNetwork, "service network": ic.ServiceNetwork, "machine network": ic.MachineNetwork} {
		if err := checkCIDR("cluster-config-v1: "+field, v); err != nil {
			return File{}, err
		}
	}
	if ic.Name == "" || ic.BaseDomain == "" {
		return File{}, errors.New("cluster-config-v1: empty cluster.name or cluster.baseDomain")
	}
	pool := func(name string, n int) machinePool {
		return machinePool{Architecture: "amd64", Hyperthreading: "Enabled", Name: name, Platform: map[string]any{}, Replicas: n}
	}
	cfg := installConfig{
		APIVersion: "v1", AdditionalTrustBundlePolicy: "Proxyonly", BaseDomain: ic.BaseDomain,
		Compute: []machinePool{pool("worker", 0)}, ControlPlane: pool("master", ic.Masters),
		Metadata: map[string]string{"name": ic.Name},
		Networking: icNetworking{
			ClusterNetwork: []map[string]any{{"cidr": ic.ClusterNetwork, "hostPrefix": ic.HostPrefix}},
			MachineNetwork: []map[string]any{{"cidr": ic.MachineNetwork}},
			NetworkType:    "OVNKubernetes",
			ServiceNetwork: []string{ic.ServiceNetwork},
		},
		Platform: map[string]any{"none": map[string]any{}},
		Publish:  "External",
	}
	cfg.ImageDigestSources = ic.ImageDigestSources
	if ic.AdditionalTrustBundle != "" {
		cfg.AdditionalTrustBundle = ic.AdditionalTrustBundle
		cfg.AdditionalTrustBundlePolicy = "Always"
	}
	if bm := ic.BareMetal; bm != nil {
		if err := bm.check("cluster-config-v1"); err != nil {
			return File{}, err
		}
		cfg.Platform = map[string]any{"baremetal": baremetalPlatform(bm)}
	}
	y, err := marshal(cfg)
	if err != nil {
		return File{}, err
	}
	cm := newConfigMap("kube-system", "cluster-config-v1", map[string]string{"install-config": string(y)})
	cm.Metadata.Annotations = map[string]string{"kubernetes.io/description": "The install-config content used to create the cluster. The cluster configuration may have changed since installation. This resource will be deleted once it is no longer needed."}
	return newFile(OrderObjects+"-kube-system-configmap-cluster-config-v1.yaml", cm)
}

// baremetalPlatform is install-config platform.baremetal for nodes provisioned by someone else
// (labbuild's VMs), as the agent-based installer writes it: the VIP lists, no hosts (so no
// BareMetalHost objects and no Ironic), provisioningNetwork Disabled, and the defaults
// openshift-install's pkg/types/baremetal/defaults/platform.go SetPlatformDefaults gives a
// config without a provisioning network (libvirtURI, externalBridge) plus loadBalancer
// OpenShiftManagedDefault (pkg/types/baremetal/platform.go LoadBalancer; validation defaults
// an unset type to it). The random MAC defaults (externalMACAddress, provisioningMACAddress)
// are left out: they name bootstrap VM NICs of the IPI flow, which labbuild does not create.
func baremetalPlatform(bm *BareMetal) map[string]any {
	return map[string]any{
		"apiVIPs":             bm.APIVIPs,
		"ingressVIPs":         bm.IngressVIPs,
		"libvirtURI":          "qemu:///system",
		"externalBridge":      "baremetal",
		"provisioningNetwork": "Disabled",
		"loadBalancer":        map[string]any{"type": loadBalancerTypeOpenShiftManagedDefault},
	}
}

// EtcdBootstrapAnnotation is the annotation on openshift-etcd/etcd-endpoints from which the
// cluster-etcd-operator 4.18 reads the bootstrap member's IP (pkg/etcdcli
// BootstrapIPAnnotationKey); OTHW's data.bootstrapIP is never read.
const EtcdBootstrapAnnotation = "alpha.installer.openshift.io/etcd-bootstrap"

// EtcdEndpoints renders ConfigMap openshift-etcd/etcd-endpoints with EtcdBootstrapAnnotation
// set to bootstrapIP and no data, as the operator's bindata/bootkube 00_etcd-endpoints-cm.yaml.
func EtcdEndpoints(bootstrapIP string) (File, error) {
	if err := checkIP("etcd-endpoints: bootstrap IP", bootstrapIP); err != nil {
		return File{}, err
	}
	cm := newConfigMap("openshift-etcd", "etcd-endpoints", nil)
	cm.Metadata.Annotations = map[string]string{EtcdBootstrapAnnotation: bootstrapIP}
	return newFile(OrderObjects+"-openshift-etcd-configmap-etcd-endpoints.yaml", cm)
}

// library-go certrotation annotations: a signer Secret without them is regenerated.
const (
	AnnotationNotBefore = "auth.openshift.io/certificate-not-before"
	AnnotationNotAfter  = "auth.openshift.io/certificate-not-after"
	AnnotationIssuer    = "auth.openshift.io/certificate-issuer"
)

// parseCert returns the first certificate of a PEM block list.
func parseCert(what string, certPEM []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(certPEM)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: tls.crt is not a PEM certificate", what)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: tls.crt: %w", what, err)
	}
	return c, nil
}

// TLSSecret renders a kubernetes.io/tls Secret ns/name with the certrotation annotations
// (not-before, not-after in RFC 3339, issuer CN) taken from certPEM, so the
// cluster-etcd-operator's certrotation keeps it instead of minting a new signer (spec §7.4).
// Used for openshift-etcd/etcd-signer, etcd-metric-signer and etcd-client. The file is
// Secret (it holds keyPEM); errors never include key bytes.
func TLSSecret(ns, name string, certPEM, keyPEM []byte) (File, error) {
	what := ns + "/" + name
	c, err := parseCert(what, certPEM)
	if err != nil {
		return File{}, err
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return File{}, fmt.Errorf("%s: tls.key is not a PEM private key", what)
	}
	sec := newSecret(ns, name, secretTypeTLS, map[string][]byte{tlsCertKey: certPEM, tlsPrivateKeyKey: keyPEM})
	sec.Metadata.Annotations = map[string]string{
		AnnotationNotBefore: c.NotBefore.UTC().Format(time.RFC3339),
		AnnotationNotAfter:  c.NotAfter.UTC().Format(time.RFC3339),
		AnnotationIssuer:    c.Issuer.CommonName,
	}
	f, err := newFile(OrderObjects+"-"+ns+"-secret-"+name+".yaml", sec)
	f.Secret = true
	return f, err
}

// CABundle renders ConfigMap ns/name with key ca-bundle.crt = caPEM (etcd-ca-bundle,
// etcd-metrics-ca-bundle), labelled as certrotation's managed CA bundles.
func CABundle(ns, name string, caPEM []byte) (File, error) {
	if _, err := parseCert(ns+"/"+name, caPEM); err != nil {
		return File{}, err
	}
	cm := newConfigMap(ns, name, map[string]string{"ca-bundle.crt": string(caPEM)})
	cm.Metadata.Labels = map[string]string{"auth.openshift.io/managed-certificate-type": "ca-bundle"}
	return newFile(OrderObjects+"-"+ns+"-configmap-"+name+".yaml", cm)
}

// PullSecret renders Secret openshift-config/pull-secret (kubernetes.io/dockerconfigjson)
// holding dockerConfigJSON, as the installer's openshift-config-secret-pull-secret.yaml.
// The caller validates the content (lab.CheckPullSecret); the file is Secret.
func PullSecret(dockerConfigJSON []byte) (File, error) {
	if len(dockerConfigJSON) == 0 {
		return File{}, errors.New("pull-secret: empty pull secret")
	}
	f, err := newFile(OrderObjects+"-openshift-config-secret-pull-secret.yaml",
		newSecret("openshift-config", "pull-secret", secretTypeDockerConfigJSON, map[string][]byte{dockerConfigJSONKey: dockerConfigJSON}))
	f.Secret = true
	return f, err
}

// KubeadminSecret renders Secret kube-system/kubeadmin whose `kubeadmin` key is bcryptHash
// (the oauth-server checks the kubeadmin password against it), as the installer's
// 99_kubeadmin-password-secret.yaml. It refuses anything that is not a bcrypt hash ($2a$/$2b$/
// $2y$): OTHW falls back to the base64 of the plain password when htpasswd is missing.
func KubeadminSecret(bcryptHash []byte) (File, error) {
	h := string(bcryptHash)
	if len(h) != 60 || !(strings.HasPrefix(h, "$2a$") || strings.HasPrefix(h, "$2b$") || strings.HasPrefix(h, "$2y$")) {
		return File{}, errors.New("kubeadmin: the hash is not a bcrypt hash")
	}
	f, err := newFile(OrderObjects+"-kube-system-secret-kubeadmin.yaml",
		newSecret("kube-system", "kubeadmin", secretTypeOpaque, map[string][]byte{"kubeadmin": bcryptHash}))
	f.Secret = true
	return f, err
}

// BootstrapComplete renders ConfigMap kube-system/bootstrap with status "complete", which the
// installer's report-progress.sh creates once bootkube is done, the API is HA and etcd no
// longer needs the bootstrap member. It is applied at pivot, never with the bootstrap
// manifests: the cluster-etcd-operator removes the etcd-bootstrap member when it sees it.
func BootstrapComplete() (File, error) {
	return newFile("kube-system-configmap-bootstrap.yaml", newConfigMap("kube-system", "bootstrap", map[string]string{"status": "complete"}))
}

// randomString returns n characters of alphabet chosen uniformly with bytes from r (rejection
// sampling, so there is no modulo bias).
func randomString(r io.Reader, alphabet string, n int) (string, error) {
	limit := 256 - 256%len(alphabet)
	out := make([]byte, 0, n)
	var b [1]byte
	for len(out) < n {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return "", fmt.Errorf("random source: %w", err)
		}
		if int(b[0]) < limit {
			out = append(out, alphabet[int(b[0])%len(alphabet)])
		}
	}
	return string(out), nil
}

// InfraID returns the infrastructure name as openshift-install makes it
// (pkg/asset/installconfig/clusterid.go): the cluster name cut to 21 characters without a
// trailing '-', then '-' and 5 characters of k8s.io/apimachinery's utilrand alphabet.
func InfraID(clusterName string, r io.Reader) (string, error) {
	base := clusterName
	if len(base) > 21 {
		base = strings.TrimRight(base[:21], "-")
	}
	suffix, err := randomString(r, "bcdfghjklmnpqrstvwxz2456789", 5)
	if err != nil {
		return "", err
	}
	return base + "-" + suffix, nil
}

// ClusterID returns a random (version 4) UUID from r, the ClusterVersion's spec.clusterID.
func ClusterID(r io.Reader) (string, error) {
	var u [16]byte
	if _, err := io.ReadFull(r, u[:]); err != nil {
		return "", fmt.Errorf("random source: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// KubeadminPassword returns a password as openshift-install generates it
// (pkg/asset/password): 4 groups of 5 characters of [a-zA-Z0-9] joined by '-' (23 characters).
func KubeadminPassword(r io.Reader) (string, error) {
	const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var groups []string
	for i := 0; i < 4; i++ {
		g, err := randomString(r, alnum, 5)
		if err != nil {
			return "", err
		}
		groups = append(groups, g)
	}
	return strings.Join(groups, "-"), nil
}
