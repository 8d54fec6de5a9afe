package targets

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
)

// Past the pivot (docs/past-the-pivot.md): the cluster manifests that hand the operators what
// openshift-install hands them, so that after the pivot they keep the lab's CAs instead of
// minting their own, and the machine-config operator can sync at all. They are
// manifests/cluster/<name> targets like the others and go through the collector into
// /opt/openshift/manifests:
//
//	kube-apiserver-signers     openshift-kube-apiserver-operator/{loadbalancer,localhost,
//	                           service-network}-serving-signer (and that namespace)
//	client-cas                 openshift-config/admin-kubeconfig-client-ca and
//	                           openshift-config-managed/kubelet-bootstrap-kubeconfig: the
//	                           kubernetes CA, which signs the lab's admin, kubelet bootstrap and
//	                           node client certificates
//	mco-cas                    kube-system/root-ca (root CA) and
//	                           openshift-config/initial-kube-apiserver-server-ca (kubernetes CA)
//	machine-config-server-tls  openshift-machine-config-operator/machine-config-server-tls (from
//	                           4.19 kubernetes.io/tls with certrotation's annotations)
//	machine-config-server-ca   from 4.19: Secret and ConfigMap
//	                           openshift-machine-config-operator/machine-config-server-ca (the
//	                           root CA and its key), which the MCO owns; nothing before 4.19
//	ssh                        MachineConfigs 99-master-ssh and 99-worker-ssh
//	service-account            openshift-config-managed/sa-token-signing-certs,
//	                           openshift-config/initial-service-account-private-key and
//	                           openshift-kube-apiserver-operator/next-bound-service-account-signing-key:
//	                           the sticky service-account key (issue 24)
//	kubelet-signer             openshift-kube-controller-manager-operator/csr-signer-signer and
//	                           csr-signer (pki/cert/csr-signer), and
//	                           openshift-config-managed/csr-controller-ca (and that namespace)
//	kube-apiserver-rbac        ClusterRole and ClusterRoleBinding kube-apiserver (nodes/proxy)
//	install-manifests          openshift-config/openshift-install-manifests
//	kube-apiserver-client-signers
//	                           openshift-kube-apiserver-operator/aggregator-client-signer (the
//	                           front-proxy CA) and kube-apiserver-to-kubelet-signer: the signers
//	                           of the post-pivot kube-apiserver's client certificates
//
// Each reads only the PKI outputs (or the SSH key file) it carries, so an unrelated edit
// rebuilds none of them, and none of them issues a certificate: they copy the pki family's.

// hoClusterNames are the manifests/cluster/<name> targets of this file (the collector's list
// takes them).
var hoClusterNames = []string{"kube-apiserver-signers", "client-cas", "mco-cas", "machine-config-server-tls", "machine-config-server-ca", "ssh",
	"service-account", "kubelet-signer", "kube-apiserver-rbac", "install-manifests", "kube-apiserver-client-signers"}

// hoInvoker is the invoker labbuild writes into openshift-install-manifests (the installer's
// OPENSHIFT_INSTALL_INVOKER, "user" when unset).
const hoInvoker = "labbuild"

// hoCA reads pki/ca/<id>'s certificate.
func hoCA(s *engine.Step, id string) ([]byte, error) { return s.DepFile("pki/ca/"+id, "tls.crt") }

func handoverTargets() []*engine.Target {
	var signerDeps []string
	for _, id := range pkiServingSigners {
		signerDeps = append(signerDeps, "pki/ca/"+id, "pki/key/"+id)
	}
	return []*engine.Target{
		mfCluster("kube-apiserver-signers", "the kube-apiserver-operator's serving signers (lb, localhost, service-network) as its Secrets, so it keeps the CAs the kubeconfigs trust",
			signerDeps, nil, func(s *engine.Step) ([]manifests.File, error) {
				ns, err := manifests.Namespace(manifests.KubeAPIServerOperatorNamespace)
				if err != nil {
					return nil, err
				}
				out := []manifests.File{ns}
				for i, id := range pkiServingSigners {
					crt, err := hoCA(s, id)
					if err != nil {
						return nil, err
					}
					key, err := s.DepFile("pki/key/"+id, "tls.key")
					if err != nil {
						return nil, err
					}
					f, err := manifests.TLSSecret(manifests.KubeAPIServerOperatorNamespace, manifests.ServingSignerSecrets[i], crt, key)
					if err != nil {
						return nil, err
					}
					out = append(out, f)
				}
				return out, nil
			}),
		// cluster-kube-apiserver-operator pkg/operator/certrotationcontroller/certrotationcontroller.go
		// NewCertRotationController reads Secrets aggregator-client-signer (→ aggregator-client,
		// the front-proxy client, and openshift-config-managed/kube-apiserver-aggregator-client-ca,
		// the --requestheader-client-ca-file) and kube-apiserver-to-kubelet-signer (→
		// kubelet-client and kube-apiserver-to-kubelet-client-ca), and mints a new signer when one
		// is missing (library-go certrotation RotatedSigningCASecret EnsureSigningCertKeyPair).
		// The installer hands both over (the operator's bindata/bootkube/manifests
		// secret-aggregator-client-signer.yaml, secret-kube-apiserver-to-kubelet-signer.yaml);
		// labbuild hands over its front-proxy CA, which the bootstrap kube-apiserver already
		// trusts for requestheader, and the kube-apiserver-to-kubelet signer the kubelets trust.
		mfCluster("kube-apiserver-client-signers", "the kube-apiserver-operator's client signers (aggregator-client-signer: the front-proxy CA; kube-apiserver-to-kubelet-signer) as its Secrets",
			[]string{"pki/ca/front-proxy", "pki/key/front-proxy", "pki/ca/kube-apiserver-to-kubelet-signer", "pki/key/kube-apiserver-to-kubelet-signer"}, nil,
			func(s *engine.Step) ([]manifests.File, error) {
				var out []manifests.File
				for _, sg := range []struct{ id, secret string }{
					{"front-proxy", "aggregator-client-signer"},
					{"kube-apiserver-to-kubelet-signer", "kube-apiserver-to-kubelet-signer"},
				} {
					crt, err := hoCA(s, sg.id)
					if err != nil {
						return nil, err
					}
					key, err := s.DepFile("pki/key/"+sg.id, "tls.key")
					if err != nil {
						return nil, err
					}
					f, err := manifests.TLSSecret(manifests.KubeAPIServerOperatorNamespace, sg.secret, crt, key)
					if err != nil {
						return nil, err
					}
					out = append(out, f)
				}
				return out, nil
			}),
		// kubelet-bootstrap-kubeconfig also holds the kubelet bootstrap signer, as the
		// installer's (KubeletBootstrapCertSigner): the nodes' bootstrap credential keeps
		// authenticating after the pivot, for a node added on day 2 (issue 38 #10).
		mfCluster("client-cas", "openshift-config/admin-kubeconfig-client-ca (kubernetes CA) and openshift-config-managed/kubelet-bootstrap-kubeconfig (kubernetes CA + kubelet bootstrap signer): the post-pivot kube-apiserver keeps trusting the lab's client certificates",
			[]string{"pki/ca/kubernetes", "pki/ca/kubelet-bootstrap-signer"}, nil, func(s *engine.Step) ([]manifests.File, error) {
				ca, err := hoCA(s, "kubernetes")
				if err != nil {
					return nil, err
				}
				boot, err := hoCA(s, "kubelet-bootstrap-signer")
				if err != nil {
					return nil, err
				}
				a, err := manifests.CAConfigMap("openshift-config", "admin-kubeconfig-client-ca", "ca-bundle.crt", "kube-apiserver", ca)
				if err != nil {
					return nil, err
				}
				b, err := manifests.CAConfigMap("openshift-config-managed", "kubelet-bootstrap-kubeconfig", "ca-bundle.crt", "kube-apiserver", append(slices.Clone(ca), boot...))
				return []manifests.File{a, b}, err
			}),
		mfCluster("mco-cas", "kube-system/root-ca (root CA) and openshift-config/initial-kube-apiserver-server-ca (kubernetes CA), which the machine-config operator's sync requires",
			[]string{"pki/ca/root", "pki/ca/kubernetes"}, nil, func(s *engine.Step) ([]manifests.File, error) {
				root, err := hoCA(s, "root")
				if err != nil {
					return nil, err
				}
				kube, err := hoCA(s, "kubernetes")
				if err != nil {
					return nil, err
				}
				a, err := manifests.CAConfigMap("kube-system", "root-ca", "ca.crt", "", root)
				if err != nil {
					return nil, err
				}
				b, err := manifests.CAConfigMap("openshift-config", "initial-kube-apiserver-server-ca", "ca-bundle.crt", "", kube)
				return []manifests.File{a, b}, err
			}),
		// Version 2: the release decides the shape (issue 37).
		mfVersion(2, mfCluster("machine-config-server-tls", "Secret openshift-machine-config-operator/machine-config-server-tls (the MCS serving cert for api-int, root CA; from 4.19 kubernetes.io/tls)",
			[]string{"pki/cert/machine-config-server", "pki/key/machine-config-server"}, releaseRowReads, func(s *engine.Step) ([]manifests.File, error) {
				row, err := releaseRow(s)
				if err != nil {
					return nil, err
				}
				crt, err := s.DepFile("pki/cert/machine-config-server", "tls.crt")
				if err != nil {
					return nil, err
				}
				key, err := s.DepFile("pki/key/machine-config-server", "tls.key")
				if err != nil {
					return nil, err
				}
				if row.MCSTLSSecretTLS {
					return mfOne(manifests.MCSTLSSecretTLS(crt, key))
				}
				return mfOne(manifests.MCSTLSSecret(crt, key))
			})),
		mfCluster("machine-config-server-ca", "from 4.19, Secret and ConfigMap openshift-machine-config-operator/machine-config-server-ca: the root CA (and key) the MCO then owns; nothing before",
			[]string{"pki/ca/root", "pki/key/root"}, releaseRowReads, func(s *engine.Step) ([]manifests.File, error) {
				row, err := releaseRow(s)
				if err != nil || !row.MCSCA {
					return nil, err
				}
				crt, err := hoCA(s, "root")
				if err != nil {
					return nil, err
				}
				key, err := s.DepFile("pki/key/root", "tls.key")
				if err != nil {
					return nil, err
				}
				return manifests.MCSCA(crt, key)
			}),
		mfCluster("service-account", "the sticky service-account key as the operators read it: sa-token-signing-certs, initial-service-account-private-key, next-bound-service-account-signing-key",
			[]string{"pki/key/service-account", "pki/sa"}, nil, func(s *engine.Step) ([]manifests.File, error) {
				key, err := s.DepFile("pki/key/service-account", "tls.key")
				if err != nil {
					return nil, err
				}
				pub, err := s.DepFile("pki/sa", "sa.pub")
				if err != nil {
					return nil, err
				}
				return manifests.ServiceAccountFiles(key, pub)
			}),
		mfCluster("kubelet-signer", "the kubelet signer as the kube-controller-manager-operator's csr-signer-signer, its csr-signer, and both in openshift-config-managed/csr-controller-ca",
			[]string{"pki/ca/kubelet-signer", "pki/key/kubelet-signer", "pki/cert/csr-signer", "pki/key/csr-signer"}, nil, func(s *engine.Step) ([]manifests.File, error) {
				var in [4][]byte
				for i, f := range [][2]string{{"pki/ca/kubelet-signer", "tls.crt"}, {"pki/key/kubelet-signer", "tls.key"}, {"pki/cert/csr-signer", "tls.crt"}, {"pki/key/csr-signer", "tls.key"}} {
					b, err := s.DepFile(f[0], f[1])
					if err != nil {
						return nil, err
					}
					in[i] = b
				}
				return manifests.KubeletSignerFiles(in[0], in[1], in[2], in[3])
			}),
		mfCluster("kube-apiserver-rbac", "ClusterRole and ClusterRoleBinding kube-apiserver: nodes/proxy for system:kube-apiserver (logs, exec through kubelets)",
			nil, nil, func(s *engine.Step) ([]manifests.File, error) { return manifests.KubeAPIServerRBACFiles() }),
		mfCluster("install-manifests", "ConfigMap openshift-config/openshift-install-manifests (invoker labbuild, version release.version), read by the CVO's metrics",
			nil, []string{lab.ReleaseVersion}, func(s *engine.Step) ([]manifests.File, error) {
				v, err := s.String(lab.ReleaseVersion)
				if err != nil {
					return nil, err
				}
				return mfOne(manifests.InstallManifests(hoInvoker, v))
			}),
		{
			Name:    "manifests/cluster/ssh",
			Doc:     "MachineConfigs 99-master-ssh and 99-worker-ssh with access.sshKeyFile, so the machine-config-daemon keeps the key",
			Files:   []string{lab.AccessSSHKeyFile},
			Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				b, err := s.File(lab.AccessSSHKeyFile)
				if err != nil {
					return err
				}
				if err := lab.CheckSSHKey(b, lab.AccessSSHKeyFile); err != nil {
					return err
				}
				var fs []manifests.File
				for _, role := range []string{lab.RoleMaster, lab.RoleWorker} {
					f, err := manifests.SSHMachineConfig(role, strings.TrimSpace(string(b)))
					if err != nil {
						return fmt.Errorf("%s: %w", s.Target().Name, err)
					}
					fs = append(fs, f)
				}
				return writeManifests(s, fs...)
			},
		},
	}
}
