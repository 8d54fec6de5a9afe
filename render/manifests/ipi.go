package manifests

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// IPIConfig is what `labbuild ipi/install-config` needs to write the install-config.yaml of
// openshift-install's bare-metal IPI for this host: the seed-001 flow with the real installer
// instead of labbuild's bring-up (its bootstrap VM on ExternalBridge, the hosts behind
// labbuild's BMC, no provisioning network).
type IPIConfig struct {
	Name, BaseDomain                               string
	MachineNetwork, ClusterNetwork, ServiceNetwork string
	HostPrefix                                     int
	APIVIP, IngressVIP                             string
	// LibvirtURI is platform.baremetal.libvirtURI: where the installer creates its bootstrap VM.
	LibvirtURI string
	// ExternalBridge is platform.baremetal.externalBridge: the host bridge on the machine
	// network the bootstrap VM is attached to.
	ExternalBridge string
	// Hosts are the masters and workers, in config order.
	Hosts []IPIHost
	// PullSecret and SSHKey are the file contents (the pull secret is a secret: the file is 0600).
	PullSecret, SSHKey string
	// AdditionalTrustBundle is additionalTrustBundle (PEM): the lab's BMC CA (and its mirror
	// CA, if any), written with additionalTrustBundlePolicy Always so that the installer
	// names it in the Proxy's trustedCA (pkg/asset/manifests/proxy.go) whether or not a proxy
	// is set, and the cluster-network-operator copies it into Metal3's cbo-trusted-ca. Empty:
	// both fields are absent.
	AdditionalTrustBundle string
}

// IPIHost is one platform.baremetal.hosts entry (pkg/types/baremetal/platform.go Host).
type IPIHost struct {
	Name, Role, BMCAddress, BootMAC string
	Username, Password              string
}

// IPIBMCDoc is a host's bmc in the install-config (pkg/types/baremetal/platform.go BMC).
// disableCertificateVerification is not written: the installer puts additionalTrustBundle
// in the cluster's trust (user-ca-bundle, the Proxy's trustedCA), which is what Metal3's
// Ironic verifies the BMC against.
type IPIBMCDoc struct {
	Address  string `json:"address"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// IPIHostDoc is one of platform.baremetal.hosts (pkg/types/baremetal/platform.go Host).
type IPIHostDoc struct {
	Name           string    `json:"name"`
	Role           string    `json:"role"`
	BMC            IPIBMCDoc `json:"bmc"`
	BootMACAddress string    `json:"bootMACAddress"`
}

// IPIPlatformDoc is platform.baremetal (pkg/types/baremetal/platform.go Platform).
type IPIPlatformDoc struct {
	APIVIPs             []string     `json:"apiVIPs"`
	IngressVIPs         []string     `json:"ingressVIPs"`
	LibvirtURI          string       `json:"libvirtURI"`
	ExternalBridge      string       `json:"externalBridge"`
	ProvisioningNetwork string       `json:"provisioningNetwork"`
	Hosts               []IPIHostDoc `json:"hosts"`
}

// IPIPoolDoc is a machine pool: controlPlane, or one of compute.
type IPIPoolDoc struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
}

// IPIInstallConfigDoc is the install-config IPIInstallConfig writes, field for field; tests
// read the file back into it.
type IPIInstallConfigDoc struct {
	APIVersion string `json:"apiVersion"`
	// AdditionalTrustBundle and AdditionalTrustBundlePolicy: pkg/types/installconfig.go
	// InstallConfig (PolicyType "Proxyonly", the default, or "Always").
	AdditionalTrustBundle       string            `json:"additionalTrustBundle,omitempty"`
	AdditionalTrustBundlePolicy string            `json:"additionalTrustBundlePolicy,omitempty"`
	BaseDomain                  string            `json:"baseDomain"`
	Metadata                    map[string]string `json:"metadata"`
	Networking                  icNetworking      `json:"networking"`
	ControlPlane                IPIPoolDoc        `json:"controlPlane"`
	Compute                     []IPIPoolDoc      `json:"compute"`
	Platform                    struct {
		BareMetal IPIPlatformDoc `json:"baremetal"`
	} `json:"platform"`
	PullSecret string `json:"pullSecret"`
	SSHKey     string `json:"sshKey"`
}

// IPIInstallConfig renders install-config.yaml for `openshift-install create cluster` on
// platform baremetal, following openshift-install 4.18's types: pkg/types/installconfig.go
// (InstallConfig: baseDomain, metadata.name, networking, controlPlane, compute, pullSecret,
// sshKey), pkg/types/baremetal/platform.go (Platform: apiVIPs, ingressVIPs, libvirtURI,
// externalBridge, provisioningNetwork "Disabled", hosts; Host: name, role, bmc {address,
// username, password}, bootMACAddress), and additionalTrustBundle with policy Always. Fields
// the installer defaults (pkg/types/baremetal/defaults/platform.go) are left to it.
func IPIInstallConfig(c IPIConfig) ([]byte, error) {
	for field, v := range map[string]string{"machine network": c.MachineNetwork, "cluster network": c.ClusterNetwork, "service network": c.ServiceNetwork} {
		if err := checkCIDR("install-config: "+field, v); err != nil {
			return nil, err
		}
	}
	for field, v := range map[string]string{"API VIP": c.APIVIP, "ingress VIP": c.IngressVIP} {
		if err := checkIP("install-config: "+field, v); err != nil {
			return nil, err
		}
	}
	if c.Name == "" || c.BaseDomain == "" || c.ExternalBridge == "" || c.LibvirtURI == "" {
		return nil, errors.New("install-config: empty cluster name, base domain, external bridge or libvirt URI")
	}
	if c.PullSecret == "" || c.SSHKey == "" {
		return nil, errors.New("install-config: empty pull secret or SSH key")
	}
	var hosts []IPIHostDoc
	masters, workers := 0, 0
	for _, h := range c.Hosts {
		switch h.Role {
		case "master":
			masters++
		case "worker":
			workers++
		default:
			return nil, fmt.Errorf("install-config: host %s: role %q, want master or worker", h.Name, h.Role)
		}
		if _, err := net.ParseMAC(h.BootMAC); err != nil {
			return nil, fmt.Errorf("install-config: host %s: boot MAC %q: %w", h.Name, h.BootMAC, err)
		}
		if h.BMCAddress == "" || h.Username == "" || h.Password == "" {
			return nil, fmt.Errorf("install-config: host %s: no BMC address or credentials", h.Name)
		}
		hosts = append(hosts, IPIHostDoc{Name: h.Name, Role: h.Role, BootMACAddress: h.BootMAC,
			BMC: IPIBMCDoc{Address: h.BMCAddress, Username: h.Username, Password: h.Password}})
	}
	ic := IPIInstallConfigDoc{
		APIVersion: "v1", BaseDomain: c.BaseDomain, Metadata: map[string]string{"name": c.Name},
		Networking: icNetworking{
			ClusterNetwork: []map[string]any{{"cidr": c.ClusterNetwork, "hostPrefix": c.HostPrefix}},
			MachineNetwork: []map[string]any{{"cidr": c.MachineNetwork}},
			NetworkType:    "OVNKubernetes",
			ServiceNetwork: []string{c.ServiceNetwork},
		},
		ControlPlane: IPIPoolDoc{Name: "master", Replicas: masters},
		Compute:      []IPIPoolDoc{{Name: "worker", Replicas: workers}},
		PullSecret:   c.PullSecret, SSHKey: c.SSHKey,
	}
	if c.AdditionalTrustBundle != "" {
		if !strings.Contains(c.AdditionalTrustBundle, "-----BEGIN CERTIFICATE-----") {
			return nil, errors.New("install-config: additionalTrustBundle holds no PEM certificate")
		}
		ic.AdditionalTrustBundle, ic.AdditionalTrustBundlePolicy = c.AdditionalTrustBundle, "Always"
	}
	ic.Platform.BareMetal = IPIPlatformDoc{APIVIPs: []string{c.APIVIP}, IngressVIPs: []string{c.IngressVIP},
		LibvirtURI: c.LibvirtURI, ExternalBridge: c.ExternalBridge, ProvisioningNetwork: "Disabled", Hosts: hosts}
	return marshal(ic)
}
