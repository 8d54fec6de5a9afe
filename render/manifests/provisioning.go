package manifests

// BaremetalProvisioningName is the installer's file name of the Provisioning CR (openshift/
// 99_baremetal-provisioning-config.yaml, openshift-install 4.18 pkg/asset/manifests/openshift.go
// case baremetaltypes.Name).
const BaremetalProvisioningName = "99_baremetal-provisioning-config.yaml"

// provisioning mirrors metal3.io/v1alpha1 Provisioning (cluster-baremetal-operator 4.18
// api/v1alpha1/provisioning_types.go ProvisioningSpec): the fields the installer's template
// sets, every one written even when empty, as the template writes them.
type provisioning struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   objectMeta       `json:"metadata"`
	Spec       provisioningSpec `json:"spec"`
}

type provisioningSpec struct {
	ProvisioningInterface     string `json:"provisioningInterface"`
	ProvisioningIP            string `json:"provisioningIP"`
	ProvisioningNetworkCIDR   string `json:"provisioningNetworkCIDR"`
	ProvisioningNetwork       string `json:"provisioningNetwork"`
	ProvisioningDHCPRange     string `json:"provisioningDHCPRange"`
	ProvisioningOSDownloadURL string `json:"provisioningOSDownloadURL"`
	WatchAllNamespaces        bool   `json:"watchAllNamespaces"`
}

// BaremetalProvisioning renders the cluster-scoped Provisioning provisioning-configuration of
// the in-cluster mode (platform baremetal): what openshift-install 4.18 writes from
// data/data/manifests/openshift/baremetal-provisioning-config.yaml.template for the
// install-config labbuild writes (ClusterConfigV1: provisioningNetwork Disabled, no
// clusterProvisioningIP, no provisioningNetworkInterface). With the network Disabled,
// pkg/types/baremetal/defaults/platform.go SetPlatformDefaults sets no provisioning CIDR, IP or
// DHCP range, so they are empty, and the cluster-baremetal-operator provisions over virtual
// media on the machine network (no PXE). provisioningOSDownloadURL is empty: the installer puts
// the RHCOS stream's OpenStack qcow2 URL there, and labbuild's nodes boot a local image (its
// rhcos config); cluster-baremetal-operator 4.18 api/v1alpha1/provisioning_validation.go
// ValidateBaremetalProvisioningConfig accepts an empty URL in every mode and requires nothing
// else when Disabled, and provisioning.EnsureImageCache then runs no image cache. Without this
// object the operator waits with WaitingForProvisioningCR.
func BaremetalProvisioning() (File, error) {
	o := provisioning{APIVersion: "metal3.io/v1alpha1", Kind: "Provisioning",
		Metadata: objectMeta{Name: "provisioning-configuration"},
		Spec:     provisioningSpec{ProvisioningNetwork: "Disabled"}}
	return newFile(BaremetalProvisioningName, o)
}
