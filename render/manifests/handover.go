package manifests

import (
	"encoding/pem"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Past the pivot: the objects openshift-install hands the operators and labbuild hands over too
// (docs/past-the-pivot.md has the decision table, with the operator code each row rests on).
// Every renderer here is pure: PEM in, one manifest out.

// KubeAPIServerOperatorNamespace is the kube-apiserver-operator's namespace, where its signer
// Secrets live (cluster-kube-apiserver-operator pkg/operator/operatorclient OperatorNamespace).
const KubeAPIServerOperatorNamespace = "openshift-kube-apiserver-operator"

// ServingSignerSecrets are the kube-apiserver-operator's serving-signer Secret names, in the
// order of targets' pkiServingSigners (lb, localhost, service-network). Its certrotation
// controllers (pkg/operator/certrotationcontroller) read them with 10-year validity "from the
// installer" and mint a signer of their own when one is missing.
var ServingSignerSecrets = []string{"loadbalancer-serving-signer", "localhost-serving-signer", "service-network-serving-signer"}

// Namespace renders the Namespace name as an OrderNamespaces file of its own, for an object
// whose namespace the bootstrap's Namespaces list does not create.
func Namespace(name string) (File, error) {
	if name == "" {
		return File{}, errors.New("namespace: empty name")
	}
	return newFile(OrderNamespaces+"-namespace-"+name+".yaml", newNamespace(name))
}

// checkBundle checks that pemBundle is one or more PEM certificates and nothing else.
func checkBundle(what string, pemBundle []byte) error {
	rest, n := pemBundle, 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			return fmt.Errorf("%s: PEM block %q is not a certificate", what, b.Type)
		}
		if _, err := parseCert(what, pem.EncodeToMemory(b)); err != nil {
			return err
		}
		n++
	}
	if n == 0 || strings.TrimSpace(string(rest)) != "" {
		return fmt.Errorf("%s: not a PEM certificate bundle", what)
	}
	return nil
}

// CAConfigMap renders ConfigMap ns/name whose key holds caPEM (one or more certificates), as
// the installer's and the kube-apiserver-operator's bootkube CA ConfigMaps are: no labels, the
// owning component annotated when component is not empty. Used for kube-system/root-ca
// (key ca.crt), openshift-config/initial-kube-apiserver-server-ca,
// openshift-config/admin-kubeconfig-client-ca and
// openshift-config-managed/kubelet-bootstrap-kubeconfig (key ca-bundle.crt).
func CAConfigMap(ns, name, key, component string, caPEM []byte) (File, error) {
	what := ns + "/" + name
	if key == "" {
		return File{}, fmt.Errorf("%s: empty data key", what)
	}
	if err := checkBundle(what, caPEM); err != nil {
		return File{}, err
	}
	cm := newConfigMap(ns, name, map[string]string{key: string(caPEM)})
	if component != "" {
		cm.Metadata.Annotations = map[string]string{"openshift.io/owning-component": component}
	}
	return newFile(OrderObjects+"-"+ns+"-configmap-"+name+".yaml", cm)
}

// MCSTLSSecret renders Secret openshift-machine-config-operator/machine-config-server-tls as
// the 4.18 installer's bootkube/machine-config-server-tls-secret.yaml.template
// (../shared/fixtures/installer/manifests/bootkube/): type Opaque, tls.crt and tls.key, owned by
// the Machine Config Operator. The MCS DaemonSet mounts it after the pivot. The file is Secret.
func MCSTLSSecret(certPEM, keyPEM []byte) (File, error) {
	const ns, name = "openshift-machine-config-operator", "machine-config-server-tls"
	if _, err := parseCert(ns+"/"+name, certPEM); err != nil {
		return File{}, err
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return File{}, fmt.Errorf("%s/%s: tls.key is not a PEM private key", ns, name)
	}
	sec := newSecret(ns, name, secretTypeOpaque, map[string][]byte{tlsCertKey: certPEM, tlsPrivateKeyKey: keyPEM})
	sec.Metadata.Annotations = map[string]string{"openshift.io/owning-component": "Machine Config Operator"}
	f, err := newFile(OrderObjects+"-"+ns+"-secret-"+name+".yaml", sec)
	f.Secret = true
	return f, err
}

// MCS CA and TLS from 4.19 (render/releases Release.MCSCA, MCSTLSSecretTLS): the MCO owns the
// machine-config-server CA and rotates the MCS certificate (machine-config-operator
// release-4.20 pkg/controller/certrotation/certrotation_controller.go: RotatedSigningCASecret
// machine-config-server-ca, CABundleConfigMap of the same name, RotatedSelfSignedCertKeySecret
// machine-config-server-tls), so the installer hands over the CA with its key, and the TLS
// Secret in the shape certrotation recognises (installer 13a5f6b9
// pkg/asset/manifests/operators.go generateBootKubeManifests and its templates,
// ../shared/fixtures/versions/4.20/installer/manifests/bootkube/). A CA it did not recognise
// would be replaced by a new one, which nodes' pointer Ignition does not trust.

const (
	mcoNamespace     = "openshift-machine-config-operator"
	mcoComponent     = "Machine Config Operator"
	mcsCAName        = "machine-config-server-ca"
	mcsTLSName       = "machine-config-server-tls"
	managedCertType  = "auth.openshift.io/managed-certificate-type"
	annotationHosts  = "auth.openshift.io/certificate-hostnames"
	annotationDescr  = "openshift.io/description"
	annotationOwning = "openshift.io/owning-component"
)

// MCSTLSSecretTLS renders Secret openshift-machine-config-operator/machine-config-server-tls as
// the 4.19+ installer's machine-config-server-tls-secret.yaml.template: type kubernetes.io/tls,
// the certificate's hostnames (IP addresses and DNS names, sorted, comma-joined), issuer and
// validity as auth.openshift.io annotations, and label managed-certificate-type: target. The
// file is Secret.
func MCSTLSSecretTLS(certPEM, keyPEM []byte) (File, error) {
	what := mcoNamespace + "/" + mcsTLSName
	c, err := parseCert(what, certPEM)
	if err != nil {
		return File{}, err
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return File{}, fmt.Errorf("%s: tls.key is not a PEM private key", what)
	}
	var hosts []string
	for _, ip := range c.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	hosts = append(hosts, c.DNSNames...)
	sort.Strings(hosts)
	sec := newSecret(mcoNamespace, mcsTLSName, secretTypeTLS, map[string][]byte{tlsCertKey: certPEM, tlsPrivateKeyKey: keyPEM})
	sec.Metadata.Annotations = map[string]string{
		annotationDescr:     "Secret containing the MachineConfigServer TLS certificate and key",
		annotationOwning:    mcoComponent,
		annotationHosts:     strings.Join(hosts, ","),
		AnnotationIssuer:    c.Issuer.CommonName,
		AnnotationNotAfter:  c.NotAfter.UTC().Format(time.RFC3339),
		AnnotationNotBefore: c.NotBefore.UTC().Format(time.RFC3339),
	}
	sec.Metadata.Labels = map[string]string{managedCertType: "target"}
	f, err := newFile(OrderObjects+"-"+mcoNamespace+"-secret-"+mcsTLSName+".yaml", sec)
	f.Secret = true
	return f, err
}

// MCSCA renders what the 4.19+ installer hands over of the machine-config-server CA (the lab's
// root CA): Secret machine-config-server-ca (type kubernetes.io/tls, the CA certificate and
// key, label managed-certificate-type: signer; machine-config-server-ca-secret.yaml.template)
// and ConfigMap machine-config-server-ca (ca-bundle.crt, label managed-certificate-type:
// ca-bundle; machine-config-server-ca-configmap.yaml.template at installer 13a5f6b9), which
// the operator's sync reads for ControllerConfig rootCAData (getMCSCABundle). The Secret's
// file is Secret: it holds the root CA key.
func MCSCA(certPEM, keyPEM []byte) ([]File, error) {
	what := mcoNamespace + "/" + mcsCAName
	c, err := parseCert(what, certPEM)
	if err != nil {
		return nil, err
	}
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return nil, fmt.Errorf("%s: tls.key is not a PEM private key", what)
	}
	sec := newSecret(mcoNamespace, mcsCAName, secretTypeTLS, map[string][]byte{tlsCertKey: certPEM, tlsPrivateKeyKey: keyPEM})
	sec.Metadata.Annotations = map[string]string{
		annotationOwning:    mcoComponent,
		annotationDescr:     "CA used to sign the MachineConfigServer TLS certificate",
		AnnotationIssuer:    c.Issuer.CommonName,
		AnnotationNotAfter:  c.NotAfter.UTC().Format(time.RFC3339),
		AnnotationNotBefore: c.NotBefore.UTC().Format(time.RFC3339),
	}
	sec.Metadata.Labels = map[string]string{managedCertType: "signer"}
	sf, err := newFile(OrderObjects+"-"+mcoNamespace+"-secret-"+mcsCAName+".yaml", sec)
	if err != nil {
		return nil, err
	}
	sf.Secret = true
	cm := newConfigMap(mcoNamespace, mcsCAName, map[string]string{"ca-bundle.crt": string(certPEM)})
	cm.Metadata.Annotations = map[string]string{
		annotationDescr:  "CA bundle that stores all valid CAs for the MachineConfigServer TLS certificate",
		annotationOwning: mcoComponent,
	}
	cm.Metadata.Labels = map[string]string{managedCertType: "ca-bundle"}
	cf, err := newFile(OrderObjects+"-"+mcoNamespace+"-configmap-"+mcsCAName+".yaml", cm)
	return []File{cf, sf}, err
}

// SSHMachineConfig renders MachineConfig 99-<role>-ssh as the installer's
// openshift/99_openshift-machineconfig_99-<role>-ssh.yaml (pkg/asset/machines MachineConfig for
// SSH): role label, Ignition 3.2.0, user core with the authorized key. The
// machine-config-daemon manages the core user's keys from MachineConfigs only, so an Ignition
// user entry alone is lost on the first rendered-config update. role is "master" or "worker";
// sshKey is one authorized_keys line.
func SSHMachineConfig(role, sshKey string) (File, error) {
	if role != "master" && role != "worker" {
		return File{}, fmt.Errorf("ssh MachineConfig: role %q is not master or worker", role)
	}
	key := strings.TrimSpace(sshKey)
	if key == "" || strings.Contains(key, "\n") {
		return File{}, fmt.Errorf("ssh MachineConfig %s: want exactly one authorized key line", role)
	}
	name := "99-" + role + "-ssh"
	o := map[string]any{
		"apiVersion": "machineconfiguration.openshift.io/v1",
		"kind":       "MachineConfig",
		"metadata": map[string]any{
			"name":   name,
			"labels": map[string]any{"machineconfiguration.openshift.io/role": role},
		},
		"spec": map[string]any{
			"config": map[string]any{
				"ignition": map[string]any{"version": "3.2.0"},
				"passwd": map[string]any{"users": []any{
					map[string]any{"name": "core", "sshAuthorizedKeys": []any{key}},
				}},
			},
		},
	}
	return newFile(OrderObjects+"-machineconfig-"+name+".yaml", o)
}

// Issue 24: what the kube-apiserver-, kube-controller-manager- and cluster-version operators
// read at the pivot, which openshift-install hands them through the operators' bootkube renders.

// KubeControllerManagerOperatorNamespace is the kube-controller-manager-operator's namespace
// (cluster-kube-controller-manager-operator pkg/operator/operatorclient OperatorNamespace),
// where its CSR signer's signer lives.
const KubeControllerManagerOperatorNamespace = "openshift-kube-controller-manager-operator"

// checkKey checks that keyPEM is one PEM private key.
func checkKey(what string, keyPEM []byte) error {
	if b, _ := pem.Decode(keyPEM); b == nil || !strings.Contains(b.Type, "PRIVATE KEY") {
		return fmt.Errorf("%s: not a PEM private key", what)
	}
	return nil
}

// ServiceAccountFiles renders the three objects that carry the service-account signing key
// across the pivot, from keyPEM (the private key, PEM) and pubPEM (its PKIX public key, PEM):
//
//   - ConfigMap openshift-config-managed/sa-token-signing-certs, key service-account-001.pub:
//     cluster-kube-apiserver-operator bindata/bootkube/manifests/configmap-sa-token-signing-certs.yaml.
//     The operator's resourcesynccontroller.go copies it to openshift-kube-apiserver, and
//     starter.go RevisionConfigMaps lists sa-token-signing-certs, so without it library-go
//     revision_controller.go createNewRevision fails NotFound and no revision is made.
//   - Secret openshift-config/initial-service-account-private-key, key service-account.key:
//     cluster-kube-controller-manager-operator
//     bindata/bootkube/manifests/secret-initial-kube-controller-manager-service-account-private-key.yaml.
//     Its certrotationcontroller/satokensigner_controller.go syncWorker copies it to
//     openshift-kube-controller-manager/service-account-private-key, which starter.go
//     deploymentSecrets requires.
//   - Secret openshift-kube-apiserver-operator/next-bound-service-account-signing-key, keys
//     service-account.key and service-account.pub: cluster-kube-apiserver-operator
//     bindata/bootkube/manifests/secret-bound-sa-token-signing-key.yaml, read by
//     boundsatokensignercontroller/controller.go ensureNextOperatorSigningSecret, which mints a
//     new key pair when it is missing. labbuild's bootstrap kube-apiserver signs bound tokens
//     with the same sticky key (--service-account-signing-key-file), so tokens it issued keep
//     verifying after the pivot.
//
// Both Secrets are Secret files (0600).
func ServiceAccountFiles(keyPEM, pubPEM []byte) ([]File, error) {
	if err := checkKey("service-account key", keyPEM); err != nil {
		return nil, err
	}
	if b, _ := pem.Decode(pubPEM); b == nil || b.Type != "PUBLIC KEY" {
		return nil, errors.New("service-account public key: not a PEM PUBLIC KEY")
	}
	cm := newConfigMap("openshift-config-managed", "sa-token-signing-certs", map[string]string{"service-account-001.pub": string(pubPEM)})
	a, err := newFile(OrderObjects+"-openshift-config-managed-configmap-sa-token-signing-certs.yaml", cm)
	if err != nil {
		return nil, err
	}
	b, err := newFile(OrderObjects+"-openshift-config-secret-initial-service-account-private-key.yaml",
		newSecret("openshift-config", "initial-service-account-private-key", "", map[string][]byte{"service-account.key": keyPEM}))
	if err != nil {
		return nil, err
	}
	c, err := newFile(OrderObjects+"-"+KubeAPIServerOperatorNamespace+"-secret-next-bound-service-account-signing-key.yaml",
		newSecret(KubeAPIServerOperatorNamespace, "next-bound-service-account-signing-key", "",
			map[string][]byte{"service-account.key": keyPEM, "service-account.pub": pubPEM}))
	b.Secret, c.Secret = true, true
	return []File{a, b, c}, err
}

// KubeletSignerFiles renders the kubelet signer's handover from its CA certificate and key
// (caPEM, keyPEM) and the CSR signer labbuild minted from it (csrPEM, csrKeyPEM):
//
//   - Namespace openshift-kube-controller-manager-operator, which the Secrets need before the
//     operator's own manifests exist;
//   - Secret openshift-kube-controller-manager-operator/csr-signer-signer (kubernetes.io/tls,
//     certrotation annotations): cluster-kube-controller-manager-operator
//     bindata/bootkube/manifests/secret-csr-signer-signer.yaml, the installer's kubelet-signer.
//     certrotationcontroller.go's "CSRSigningCert" rotation (RotatedSigningCASecret
//     csr-signer-signer) keeps it in csr-controller-signer-ca, which
//     targetconfigcontroller.go ManageCSRCABundle merges into csr-controller-ca;
//   - Secret openshift-kube-controller-manager-operator/csr-signer (kubernetes.io/tls,
//     certrotation annotations, issuer kubelet-signer): the same rotation's target
//     (RotatedSelfSignedCertKeySecret csr-signer), which the operator would otherwise mint in
//     the cluster. library-go certrotation target.go needNewTargetCertKeyPair keeps it while it
//     is inside its validity and refresh and its issuer is in csr-controller-signer-ca, and
//     targetconfigcontroller.go ManageCSRSigner copies it to the masters'
//     kube-controller-manager. The installer hands over no csr-signer; labbuild does, so the
//     bootstrap kube-apiserver can trust it (pki/cert/csr-signer says why);
//   - ConfigMap openshift-config-managed/csr-controller-ca, key ca-bundle.crt: the
//     kube-apiserver-operator's bindata/bootkube/manifests/configmap-csr-controller-ca.yaml (the
//     installer's kubelet-client-ca-bundle.crt, which is the kubelet signer alone, installer
//     pkg/asset/tls/kubelet.go KubeletClientCABundle), plus the csr-signer, as ManageCSRCABundle
//     later writes it. The kube-apiserver-operator's ManageClientCABundle (client CA) and its
//     kubelet-serving-ca (kubelet-certificate-authority) read it, so kubelets whose
//     certificates the bootstrap or a master signed stay trusted after the pivot.
func KubeletSignerFiles(caPEM, keyPEM, csrPEM, csrKeyPEM []byte) ([]File, error) {
	ns, err := Namespace(KubeControllerManagerOperatorNamespace)
	if err != nil {
		return nil, err
	}
	sec, err := TLSSecret(KubeControllerManagerOperatorNamespace, "csr-signer-signer", caPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	csr, err := TLSSecret(KubeControllerManagerOperatorNamespace, "csr-signer", csrPEM, csrKeyPEM)
	if err != nil {
		return nil, err
	}
	cm, err := CAConfigMap("openshift-config-managed", "csr-controller-ca", "ca-bundle.crt", "kube-controller-manager", append(append([]byte{}, caPEM...), csrPEM...))
	return []File{ns, sec, csr, cm}, err
}

// KubeAPIServerRBACFiles renders ClusterRole and ClusterRoleBinding kube-apiserver as
// cluster-kube-apiserver-operator bindata/bootkube/manifests/cluster-role-kube-apiserver.yaml
// and cluster-role-binding-kube-apiserver.yaml: get and create on nodes/proxy for users
// kube-apiserver and system:kube-apiserver, the identity the post-pivot kube-apiserver presents
// to kubelets (kubelet-client, CN system:kube-apiserver). The kubelet authorizes logs, exec and
// port-forward with a SubjectAccessReview on nodes/proxy; nothing else in 4.18 creates them.
func KubeAPIServerRBACFiles() ([]File, error) {
	role := &clusterRole{
		typeMeta: typeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		Metadata: meta("kube-apiserver", ""),
		Rules:    []policyRule{{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get", "create"}}},
	}
	a, err := newFile(OrderRBAC+"-clusterrole-kube-apiserver.yaml", role)
	if err != nil {
		return nil, err
	}
	b, err := newFile(OrderRBAC+"-clusterrolebinding-kube-apiserver.yaml", &clusterRoleBinding{
		typeMeta: typeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		Metadata: meta("kube-apiserver", ""),
		RoleRef:  roleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "kube-apiserver"},
		Subjects: []subject{
			{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "kube-apiserver"},
			{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "system:kube-apiserver"},
		},
	})
	return []File{a, b}, err
}

// InstallManifests renders ConfigMap openshift-config/openshift-install-manifests with data keys
// invoker and version, as installer pkg/asset/openshiftinstall/openshiftinstall.go
// CreateInstallConfigMap writes it (invoker from OPENSHIFT_INSTALL_INVOKER, "user" by default;
// version the installer's). The cluster-version-operator's cluster_installer metric reads it.
// labbuild is the invoker; version is what it installs (release.version), since labbuild has no
// release of its own in the payload's numbering.
func InstallManifests(invoker, version string) (File, error) {
	if invoker == "" || version == "" {
		return File{}, errors.New("openshift-config/openshift-install-manifests: empty invoker or version")
	}
	return newFile(OrderObjects+"-openshift-config-configmap-openshift-install-manifests.yaml",
		newConfigMap("openshift-config", "openshift-install-manifests", map[string]string{"invoker": invoker, "version": version}))
}
