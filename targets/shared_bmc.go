package targets

import (
	"encoding/json"
	"fmt"
	"net"
	"strconv"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/bmc"
)

// Shared by the bmc family and the ipi family: the lab's hosts as the virtual BMC serves
// them (address, boot MAC, credentials), and the BMC's port, which host/firewall opens.

// BMCPort is the BMC's TCP port on the lab bridge: sushy-tools' default, the seed's
// 192.168.122.1:8000.
const BMCPort = 8000

// BMCAddress is the Redfish virtual-media address of a lab VM, as a BareMetalHost's
// spec.bmc.address and install-config's hosts[].bmc.address take it (metal3
// baremetal-operator pkg/hardwareutils/bmc/redfish.go: scheme redfish-virtualmedia+https, the
// System's path).
func BMCAddress(gateway, uuid string) string {
	return "redfish-virtualmedia+https://" + net.JoinHostPort(gateway, strconv.Itoa(BMCPort)) + "/redfish/v1/Systems/" + uuid
}

// bmcEachHost calls f, for each of nodes (whose fields the target declared: NodeName, the
// MAC when set), with the node's host behind the lab's BMC: its BMC address (network.gateway
// and the domain's derived UUID), boot MAC and bmc/credentials. Certificate verification
// stays on: the BMC's CA is in the cluster's trust bundle (targets/shared_trust.go).
func bmcEachHost(s *engine.Step, cluster string, nodes []string, f func(node string, h manifests.BMCHost) error) error {
	gw, err := s.String(lab.NetworkGateway)
	if err != nil {
		return err
	}
	b, err := s.DepFile("bmc/credentials", "credentials.json")
	if err != nil {
		return err
	}
	var creds bmc.Credentials
	if err := json.Unmarshal(b, &creds); err != nil {
		return fmt.Errorf("%s: bmc/credentials: %w", s.Target().Name, err)
	}
	for _, node := range nodes {
		mac, err := nodeMAC(s, cluster, node)
		if err != nil {
			return err
		}
		if err := f(node, manifests.BMCHost{Name: node, BMCAddress: BMCAddress(gw, rl.UUID(cluster, node)), BootMAC: mac,
			Username: creds.Username, Password: creds.Password}); err != nil {
			return err
		}
	}
	return nil
}
