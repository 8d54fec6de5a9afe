// Package manifests renders the bootstrap control plane's static pods and the cluster manifests
// applied before the cluster-version operator starts (openshift-the-hard-way stage 07,
// ../shared/spec/stages.md §7, with the 4.18 fixes of §7.4). Every function is pure: config
// values and upstream bytes in, YAML bytes out, built from local mirrors of the k8s.io/api and
// github.com/openshift/api types (types.go: only the fields labbuild writes, so the package
// links no typed API package and adds nothing to labbuild's start-up) and serialized with
// sigs.k8s.io/yaml (alphabetical keys, as openshift-install's typed manifests are).
package manifests

import "io/fs"

// Node paths the bootstrap static pods refer to. The bootstrap Ignition places files there; the
// pods mount the directories read-only.
const (
	// BootstrapSecretsDir holds the bootstrap's certificates and keys on the node (mode 0700).
	BootstrapSecretsDir = "/etc/kubernetes/bootstrap-secrets"
	// SecretsMountPath is where pods see BootstrapSecretsDir.
	SecretsMountPath = "/etc/kubernetes/secrets"
	// KubeconfigsDir holds the control plane's kubeconfigs on the bootstrap node and is mounted
	// at the same path in the pods (mode 0700).
	KubeconfigsDir = "/etc/kubernetes/kubeconfigs"
	// StaticPodDir is the kubelet's --pod-manifest-path: static-pods/<file> goes there.
	StaticPodDir = "/etc/kubernetes/manifests"
	// ManifestsDir is where manifests/<file> goes on the bootstrap; bootkube applies the files
	// in name order.
	ManifestsDir = "/opt/openshift/manifests"
	// CRIOPausePath is the CRI-O drop-in naming the pause image (crio/00-pause.conf).
	CRIOPausePath = "/etc/crio/crio.conf.d/00-pause.conf"
	// MasterKubeconfigPath is the kubelet bootstrap kubeconfig on masters and workers
	// (kubeconfig/kubelet-bootstrap).
	MasterKubeconfigPath = "/etc/kubernetes/kubeconfig"
	// KubeProxyKubeconfigPath is the masters' kube-proxy kubeconfig (kubeconfig/kube-proxy,
	// user system:kube-proxy, a pki.certDays certificate): the kube-proxy static pod's identity,
	// which outlives the 24 h kubelet bootstrap certificate of MasterKubeconfigPath.
	KubeProxyKubeconfigPath = "/etc/kubernetes/kube-proxy.kubeconfig"
)

// NodeFile maps one file on the bootstrap node to the labbuild target output that provides it.
type NodeFile struct {
	// Path is the absolute path on the node.
	Path string
	// Target is the labbuild target ("pki/cert/etcd-server") and File its output ("tls.crt").
	Target, File string
	// Mode is the file mode on the node: 0600 for private keys and kubeconfigs.
	Mode fs.FileMode
}

// secret returns the NodeFile of a file in BootstrapSecretsDir.
func secret(name, target, file string, mode fs.FileMode) NodeFile {
	return NodeFile{Path: BootstrapSecretsDir + "/" + name, Target: target, File: file, Mode: mode}
}

// BootstrapTLSPaths lists every certificate and key the bootstrap static pods read, by node
// path (names as OTHW's build-bootstrap.sh, spec §8.2). The bootstrap Ignition target must
// place exactly these; a pod sees each at SecretsMountPath + "/" + base name.
//
// Not listed (no static pod reads them): root-ca.{crt,key}, etcd-ca.key, front-proxy-ca.key
// (OTHW ships some for parity only) and admin.{crt,key}.
var BootstrapTLSPaths = []NodeFile{
	secret("etcd-ca.crt", "pki/ca/etcd-signer", "tls.crt", 0o644),
	secret(KubeAPIServerServerCABundle, "pki/bundle/kube-apiserver-server-ca", "ca-bundle.crt", 0o644),
	secret("kubelet-signer.crt", "pki/ca/kubelet-signer", "tls.crt", 0o644),
	secret("kubelet-signer.key", "pki/key/kubelet-signer", "tls.key", 0o600),
	secret("kube-apiserver-client-ca-bundle.crt", "pki/bundle/kube-apiserver-client-ca", "ca-bundle.crt", 0o644),
	secret(KubeletServingCABundle, "pki/bundle/kubelet-serving-ca", "ca-bundle.crt", 0o644),
	secret("front-proxy-ca.crt", "pki/ca/front-proxy", "tls.crt", 0o644),
	secret("etcd-peer.crt", "pki/cert/etcd-peer", "tls.crt", 0o644),
	secret("etcd-peer.key", "pki/key/etcd-peer", "tls.key", 0o600),
	secret("etcd-server.crt", "pki/cert/etcd-server", "tls.crt", 0o644),
	secret("etcd-server.key", "pki/key/etcd-server", "tls.key", 0o600),
	secret("etcd-client.crt", "pki/cert/etcd-client", "tls.crt", 0o644),
	secret("etcd-client.key", "pki/key/etcd-client", "tls.key", 0o600),
	secret("kube-apiserver.crt", "pki/cert/kube-apiserver", "tls.crt", 0o644),
	secret("kube-apiserver.key", "pki/key/kube-apiserver", "tls.key", 0o600),
	secret("kube-apiserver-kubelet-client.crt", "pki/cert/kube-apiserver-kubelet-client", "tls.crt", 0o644),
	secret("kube-apiserver-kubelet-client.key", "pki/key/kube-apiserver-kubelet-client", "tls.key", 0o600),
	secret("front-proxy-client.crt", "pki/cert/front-proxy-client", "tls.crt", 0o644),
	secret("front-proxy-client.key", "pki/key/front-proxy-client", "tls.key", 0o600),
	secret("service-account.pub", "pki/sa", "sa.pub", 0o644),
	secret("service-account.key", "pki/key/service-account", "tls.key", 0o600),
}

// KubeAPIServerServerCABundle is the bootstrap kube-controller-manager's --root-ca-file, named
// as the installer's (/etc/kubernetes/secrets/kube-apiserver-complete-server-ca-bundle.crt in
// cluster-kube-controller-manager-operator bindata/bootkube/config/bootstrap-config-overrides.yaml):
// the kube-apiserver's serving signers and labbuild's bootstrap serving CA.
const KubeAPIServerServerCABundle = "kube-apiserver-complete-server-ca-bundle.crt"

// KubeletServingCABundle is the bootstrap kube-apiserver's --kubelet-certificate-authority,
// named as the installer's (/etc/kubernetes/secrets/kubelet-client-ca-bundle.crt in
// cluster-kube-apiserver-operator bindata/bootkube/config/bootstrap-config-overrides.yaml): the
// kubelet signer and the kube-controller-manager-operator's csr-signer (pki/bundle/kubelet-serving-ca).
const KubeletServingCABundle = "kubelet-client-ca-bundle.crt"

// BootstrapKubeconfigPaths lists the kubeconfigs the bootstrap static pods read, by node path.
var BootstrapKubeconfigPaths = []NodeFile{
	{Path: KubeconfigsDir + "/localhost.kubeconfig", Target: "kubeconfig/localhost", File: "kubeconfig", Mode: 0o600},
	{Path: KubeconfigsDir + "/kube-controller-manager.kubeconfig", Target: "kubeconfig/kube-controller-manager", File: "kubeconfig", Mode: 0o600},
	{Path: KubeconfigsDir + "/kube-scheduler.kubeconfig", Target: "kubeconfig/kube-scheduler", File: "kubeconfig", Mode: 0o600},
}

// inPod returns the path a pod sees for secret file name (a base name in BootstrapSecretsDir).
func inPod(name string) string { return SecretsMountPath + "/" + name }

// NodePathOf maps a path as a bootstrap pod sees it (under SecretsMountPath or KubeconfigsDir)
// back to its NodeFile, so a test or a checker can find the file a pod flag names. ok is false
// for any other path.
func NodePathOf(podPath string) (NodeFile, bool) {
	for _, f := range BootstrapTLSPaths {
		if podPath == inPod(f.Path[len(BootstrapSecretsDir)+1:]) {
			return f, true
		}
	}
	for _, f := range BootstrapKubeconfigPaths {
		if podPath == f.Path {
			return f, true
		}
	}
	return NodeFile{}, false
}
