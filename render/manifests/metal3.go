package manifests

import (
	"fmt"
	"net"
	"strconv"
)

// Platform baremetal's machine objects, written as openshift-install 4.18 writes them for
// platform baremetal (pkg/asset/machines/baremetal/hosts.go Hosts, createSecret,
// createBaremetalHost; machinesets.go MachineSets; machines.go provider; the file names of
// pkg/asset/machines/master.go and worker.go): one BMC credentials Secret and one
// BareMetalHost (metal3.io/v1alpha1) per worker host in openshift-machine-api, and the worker
// MachineSet whose BareMetalMachineProviderSpec deploys RHCOS with install_coreos and the
// worker-user-data-managed Ignition. docs/baremetal.md names the fields.

// MachineAPINamespace is where the installer writes the hosts, their Secrets and MachineSets.
const MachineAPINamespace = "openshift-machine-api"

// BMCHost is one bare-metal host handed to Metal3.
type BMCHost struct {
	// Name is the BareMetalHost's name (the node name: "worker-0").
	Name string
	// BMCAddress is spec.bmc.address ("redfish-virtualmedia+https://198.18.0.1:8000/redfish/v1/Systems/<uuid>").
	BMCAddress string
	// BootMAC is spec.bootMACAddress: the NIC the host boots and provisions from.
	BootMAC string
	// Username and Password are the BMC credentials (the Secret <name>-bmc-secret).
	Username, Password string
	// BootMode is spec.bootMode: UEFI (the installer's default), UEFISecureBoot or legacy.
	BootMode string
	// ControlPlane marks a master: provisioned by labbuild, not by Metal3 (below).
	ControlPlane bool
}

// bmhBMC is spec.bmc. disableCertificateVerification is never set: Ironic verifies labbuild's
// BMC against the cluster's trust bundle (cbo-trusted-ca), which holds the BMC CA
// (targets/shared_trust.go).
type bmhBMC struct {
	Address         string `json:"address"`
	CredentialsName string `json:"credentialsName"`
}

type bmhSpec struct {
	Online          bool   `json:"online"`
	BMC             bmhBMC `json:"bmc"`
	BootMACAddress  string `json:"bootMACAddress"`
	HardwareProfile string `json:"hardwareProfile,omitempty"`
	BootMode        string `json:"bootMode,omitempty"`
	// ExternallyProvisioned: the host runs an OS Metal3 did not write; it manages the power
	// only (metal3 BareMetalHostSpec.ExternallyProvisioned).
	ExternallyProvisioned bool `json:"externallyProvisioned,omitempty"`
}

type bareMetalHost struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       bmhSpec    `json:"spec"`
}

type bmcSecret struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   objectMeta        `json:"metadata"`
	Data       map[string][]byte `json:"data"`
}

// BMHPausedAnnotation pauses Metal3's reconciliation of a host (metal3 apis
// baremetalhost_types.go PausedAnnotation; BMO's Reconcile: "host is paused, no work to do"):
// the installer sets it on the worker hosts ("Pause workers until the real control plane is
// up", hosts.go).
const BMHPausedAnnotation = "baremetalhost.metal3.io/paused"

// BMHRoleLabel marks the control plane's hosts (hosts.go: installer.openshift.io/role:
// control-plane; the bootstrap's master-bmh-update.sh selects them by it).
const BMHRoleLabel = "installer.openshift.io/role"

// BareMetalHosts renders, for each host, the BMC Secret (0600: Secret) and the BareMetalHost,
// one file each, named as the installer names them (99_openshift-cluster-api_host-bmc-secrets-N.yaml,
// 99_openshift-cluster-api_hosts-N.yaml, N in the hosts' order: masters first as in an
// install-config). A worker is online and paused until the control plane is up, as hosts.go
// writes one. A master (ControlPlane) carries the control-plane role label as hosts.go writes
// it, but labbuild, not the bootstrap's Ironic, provisioned it: it is externallyProvisioned,
// as the installer wrote its masters when Terraform provisioned them (hosts.go before 4.6:
// "Setting ExternallyProvisioned to true ... associates the host with a machine without
// triggering provisioning"), with no customDeploy, userData or consumerRef (labbuild writes no
// master Machines), and not paused.
func BareMetalHosts(hosts []BMCHost) ([]File, error) {
	var out []File
	for i, h := range hosts {
		switch {
		case h.Name == "":
			return nil, fmt.Errorf("manifests: bare-metal host %d: no name", i)
		case h.BMCAddress == "":
			return nil, fmt.Errorf("manifests: bare-metal host %s: no BMC address", h.Name)
		case h.Username == "" || h.Password == "":
			return nil, fmt.Errorf("manifests: bare-metal host %s: no BMC credentials", h.Name)
		}
		if _, err := net.ParseMAC(h.BootMAC); err != nil {
			return nil, fmt.Errorf("manifests: bare-metal host %s: boot MAC %q: %w", h.Name, h.BootMAC, err)
		}
		mode := h.BootMode
		if mode == "" {
			mode = "UEFI" // pkg/types/baremetal/defaults.go: hosts' bootMode defaults to UEFI
		}
		secret := bmcSecret{APIVersion: "v1", Kind: "Secret",
			Metadata: objectMeta{Name: h.Name + "-bmc-secret", Namespace: MachineAPINamespace},
			Data:     map[string][]byte{"username": []byte(h.Username), "password": []byte(h.Password)}}
		sf, err := newFile("99_openshift-cluster-api_host-bmc-secrets-"+strconv.Itoa(i)+".yaml", secret)
		if err != nil {
			return nil, err
		}
		sf.Secret = true
		md := objectMeta{Name: h.Name, Namespace: MachineAPINamespace, Annotations: map[string]string{BMHPausedAnnotation: ""}}
		if h.ControlPlane {
			md = objectMeta{Name: h.Name, Namespace: MachineAPINamespace, Labels: map[string]string{BMHRoleLabel: "control-plane"}}
		}
		host := bareMetalHost{APIVersion: "metal3.io/v1alpha1", Kind: "BareMetalHost", Metadata: md,
			Spec: bmhSpec{Online: true, BootMACAddress: h.BootMAC, BootMode: mode, ExternallyProvisioned: h.ControlPlane,
				// install-config's hardwareProfile defaults to "default", which hosts.go maps to
				// the baremetal-operator's DefaultProfileName, "unknown".
				HardwareProfile: "unknown",
				BMC:             bmhBMC{Address: h.BMCAddress, CredentialsName: secret.Metadata.Name}}}
		hf, err := newFile("99_openshift-cluster-api_hosts-"+strconv.Itoa(i)+".yaml", host)
		if err != nil {
			return nil, err
		}
		out = append(out, sf, hf)
	}
	return out, nil
}

type msProviderSpec struct {
	APIVersion   string            `json:"apiVersion"`
	Kind         string            `json:"kind"`
	CustomDeploy map[string]string `json:"customDeploy"`
	UserData     map[string]string `json:"userData"`
}

type msMachineSpec struct {
	ProviderSpec struct {
		Value msProviderSpec `json:"value"`
	} `json:"providerSpec"`
}

type machineSet struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Replicas int `json:"replicas"`
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec msMachineSpec `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// WorkerUserDataSecret is the Secret with the workers' pointer Ignition that the
// BareMetalMachineProviderSpec names (the installer's worker pool: "worker-user-data-managed",
// which the MCO keeps; pkg/asset/machines/worker.go workerUserDataSecretName + "-managed").
const WorkerUserDataSecret = "worker-user-data-managed"

// WorkerMachineSet renders the worker MachineSet (99_openshift-cluster-api_worker-machineset-0.yaml)
// for infraID (Infrastructure status.infrastructureName) with replicas workers: named
// <infraID>-worker-0, labelled for the cluster and the worker role, with the
// BareMetalMachineProviderSpec the installer writes (customDeploy install_coreos, userData).
// `oc scale machineset` then adds and removes workers through Metal3.
func WorkerMachineSet(infraID string, replicas int) (File, error) {
	if infraID == "" {
		return File{}, fmt.Errorf("manifests: worker MachineSet: empty infrastructure name")
	}
	name := infraID + "-worker-0"
	var ms machineSet
	ms.APIVersion, ms.Kind = "machine.openshift.io/v1beta1", "MachineSet"
	ms.Metadata = objectMeta{Name: name, Namespace: MachineAPINamespace, Labels: map[string]string{
		"machine.openshift.io/cluster-api-cluster":      infraID,
		"machine.openshift.io/cluster-api-machine-role": "worker",
		"machine.openshift.io/cluster-api-machine-type": "worker",
	}}
	ms.Spec.Replicas = replicas
	ms.Spec.Selector.MatchLabels = map[string]string{
		"machine.openshift.io/cluster-api-machineset": name,
		"machine.openshift.io/cluster-api-cluster":    infraID,
	}
	ms.Spec.Template.Metadata.Labels = map[string]string{
		"machine.openshift.io/cluster-api-machineset":   name,
		"machine.openshift.io/cluster-api-cluster":      infraID,
		"machine.openshift.io/cluster-api-machine-role": "worker",
		"machine.openshift.io/cluster-api-machine-type": "worker",
	}
	ms.Spec.Template.Spec.ProviderSpec.Value = msProviderSpec{APIVersion: "baremetal.cluster.k8s.io/v1alpha1", Kind: "BareMetalMachineProviderSpec",
		CustomDeploy: map[string]string{"method": "install_coreos"}, UserData: map[string]string{"name": WorkerUserDataSecret}}
	return newFile("99_openshift-cluster-api_worker-machineset-0.yaml", ms)
}
