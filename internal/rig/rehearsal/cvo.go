package rehearsal

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// OperatorNetworkCRDFile is the networks.operator.openshift.io CRD as openshift/api generates
// it and the cluster-network-operator ships it in the release payload (release-manifests
// 0000_70_cluster-network-operator_01_crd: same schema). The CVO applies it; bootkube.sh's
// 02-operator-network.yaml (labbuild's operator.openshift.io Network `cluster`) waits for it.
const OperatorNetworkCRDFile = "operator/v1/zz_generated.crd-manifests/0000_70_network_01_networks-Default.crd.yaml"

// ProvisioningCRDFile is the stand-in for the cluster-baremetal-operator's Provisioning CRD
// (crds/metal3.io_provisionings.crd.yaml, written from its upstream schema): the CVO applies
// it from the payload, and bootkube.sh's 99_baremetal-provisioning-config.yaml (platform
// BareMetal: network.loadBalancer in-cluster) waits for it.
const ProvisioningCRDFile = "0000_31_cluster-baremetal-operator_02_metal3provisioning.crd.yaml"

//go:embed crds/metal3.io_provisionings.crd.yaml
var provisioningCRD []byte

// CVOStandinCRDs are the CRDs the rehearsal's CVO stand-in applies, by file name, adapted for
// kube-apiserver 1.30 (DropCEL131): the ones a bootstrap manifest labbuild writes needs and
// that only the CVO would create from the release payload (its image cannot run here, and the
// sample payload carries no operator manifests), and the Provisioning CRD (ProvisioningCRDFile).
// The network CRD comes from github.com/openshift/api in
// the module cache (labbuild's own dependency), found with `go list -m` from repoRoot.
func CVOStandinCRDs(repoRoot string) (map[string][]byte, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api")
	cmd.Dir = repoRoot
	dir, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("rehearsal: CVO stand-in: go list -m github.com/openshift/api: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), filepath.FromSlash(OperatorNetworkCRDFile)))
	if err != nil {
		return nil, fmt.Errorf("rehearsal: CVO stand-in: %w", err)
	}
	b, _, err = DropCEL131(b)
	if err != nil {
		return nil, fmt.Errorf("rehearsal: CVO stand-in: %s: %w", OperatorNetworkCRDFile, err)
	}
	return map[string][]byte{filepath.Base(OperatorNetworkCRDFile): b, ProvisioningCRDFile: provisioningCRD}, nil
}

// CBOTrustedCAFile is the cluster-baremetal-operator's manifest of ConfigMap
// openshift-machine-api/cbo-trusted-ca (release-4.18
// manifests/0000_31_cluster-baremetal-operator_01_trusted-ca-configmap.yaml), and CBOTrustedCA
// its content as written there: empty, labelled for the network operator's trusted-CA
// injection (TrustedCAInjector), create-only. The CVO stand-in applies it with the
// cluster-baremetal-operator's CRDs; the CBO mounts its ca-bundle.crt as Ironic's
// /etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem (provisioning/baremetal_pod.go
// trustedCAVolume, mountsWithTrustedCA), which Metal3Standin reads.
const CBOTrustedCAFile = "0000_31_cluster-baremetal-operator_01_trusted-ca-configmap.yaml"

// CBOTrustedCA is CBOTrustedCAFile's content.
var CBOTrustedCA = []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  annotations:
    capability.openshift.io/name: baremetal
    include.release.openshift.io/ibm-cloud-managed: "true"
    include.release.openshift.io/self-managed-high-availability: "true"
    include.release.openshift.io/single-node-developer: "true"
    release.openshift.io/create-only: "true"
  labels:
    ` + TrustedCALabel + `: "true"
  name: ` + CBOTrustedCAName + `
  namespace: ` + MachineAPINamespace + `
`)
