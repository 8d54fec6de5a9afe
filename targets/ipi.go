package targets

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/render/manifests"
)

// The ipi family (platform baremetal) hands this host to the real installer: seed 001's flow.
//
//	ipi/install-config  install-config.yaml for `openshift-install create cluster` (bare-metal
//	                    IPI): the masters and workers as hosts behind labbuild's BMC, their
//	                    boot MACs and BMC credentials, the BMC CA as additionalTrustBundle
//	                    (targets/shared_trust.go), provisioningNetwork Disabled, the VIPs,
//	                    the lab bridge as externalBridge (0600: it holds the pull secret and
//	                    the BMC password)
//
// Build bmc/service and the VMs (libvirt), then copy the file into an empty directory and run
// openshift-install there; see docs/baremetal.md.
func init() {
	Register(Family{Name: "ipi", Doc: "platform baremetal: install-config.yaml for openshift-install's bare-metal IPI on this host (seed 001)", Targets: fromConfig(ipiTargets)})
}

func ipiTargets(c *lab.Config) []*engine.Target {
	if !c.Baremetal() {
		return nil
	}
	reads := []string{lab.ClusterName, lab.ClusterBaseDomain, lab.NetworkMachineNetwork, lab.NetworkClusterNetwork, lab.NetworkHostPrefix,
		lab.NetworkServiceNetwork, lab.NetworkAPIVIP, lab.NetworkIngressVIP, lab.NetworkGateway, lab.LibvirtURI, lab.LibvirtNetwork}
	var hosts []string // the installer makes its own bootstrap VM
	for _, n := range c.Nodes {
		if n.Role == lab.RoleBootstrap {
			continue
		}
		hosts = append(hosts, n.Name)
		reads = append(reads, lab.NodePath(n.Name, lab.NodeName), lab.NodePath(n.Name, lab.NodeRole))
		if n.MAC != "" {
			reads = append(reads, lab.NodePath(n.Name, lab.NodeMAC))
		}
	}
	if c.Network.ExternalBridge != "" {
		reads = append(reads, lab.NetworkExternalBridge)
	}
	return []*engine.Target{{
		Name: "ipi/install-config", Doc: "install-config.yaml for openshift-install's bare-metal IPI: hosts behind labbuild's BMC, its CA as additionalTrustBundle, provisioningNetwork Disabled (0600)",
		Deps: append([]string{"bmc/credentials"}, trustDeps(c)...), Reads: reads, Files: []string{lab.AccessPullSecretFile, lab.AccessSSHKeyFile}, Version: 1,
		Run: func(ctx context.Context, s *engine.Step) error { return ipiInstallConfigRun(s, c, hosts) },
	}}
}

func ipiInstallConfigRun(s *engine.Step, cfg *lab.Config, hosts []string) error {
	name := s.Target().Name
	var c manifests.IPIConfig
	for _, f := range []struct {
		p string
		v *string
	}{
		{lab.ClusterName, &c.Name}, {lab.ClusterBaseDomain, &c.BaseDomain}, {lab.NetworkMachineNetwork, &c.MachineNetwork},
		{lab.NetworkClusterNetwork, &c.ClusterNetwork}, {lab.NetworkServiceNetwork, &c.ServiceNetwork},
		{lab.NetworkAPIVIP, &c.APIVIP}, {lab.NetworkIngressVIP, &c.IngressVIP}, {lab.LibvirtURI, &c.LibvirtURI},
	} {
		v, err := s.String(f.p)
		if err != nil {
			return err
		}
		*f.v = v
	}
	if err := s.Value(lab.NetworkHostPrefix, &c.HostPrefix); err != nil {
		return err
	}
	network, err := s.String(lab.LibvirtNetwork)
	if err != nil {
		return err
	}
	// The bootstrap VM joins the lab network's own bridge: a plain Linux bridge that libvirt's
	// network keeps up, with the network's DHCP and DNS (the seed's veth pair joined a second
	// bridge to it only because its installer looked for one by name).
	c.ExternalBridge = rl.Bridge(network)
	if slices.Contains(s.Target().Reads, lab.NetworkExternalBridge) {
		if c.ExternalBridge, err = s.String(lab.NetworkExternalBridge); err != nil { // bridge/external's
			return err
		}
	}
	err = bmcEachHost(s, c.Name, hosts, func(node string, h manifests.BMCHost) error {
		role, err := s.String(lab.NodePath(node, lab.NodeRole))
		if err != nil {
			return err
		}
		c.Hosts = append(c.Hosts, manifests.IPIHost{Name: node, Role: role, BMCAddress: h.BMCAddress, BootMAC: h.BootMAC,
			Username: h.Username, Password: h.Password})
		return nil
	})
	if err != nil {
		return err
	}
	// The BMC CA (and the mirror CA, if any) as additionalTrustBundle: the installer puts it in
	// user-ca-bundle and the Proxy's trustedCA, from which Metal3's cbo-trusted-ca is filled.
	tb, err := trustBundle(cfg, s)
	if err != nil {
		return err
	}
	c.AdditionalTrustBundle = string(tb)
	ps, err := s.File(lab.AccessPullSecretFile)
	if err != nil {
		return err
	}
	key, err := s.File(lab.AccessSSHKeyFile)
	if err != nil {
		return err
	}
	c.PullSecret, c.SSHKey = strings.TrimSpace(string(ps)), strings.TrimSpace(string(key))
	out, err := manifests.IPIInstallConfig(c)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return s.WriteFile("install-config.yaml", out, 0o600)
}
