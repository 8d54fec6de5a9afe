package manifests

import (
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
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
