package targets

import (
	"context"
	"errors"
	"io/fs"
	"slices"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// The libvirt family makes the lab's libvirt objects (stage 02: create-network.sh,
// create-pool.sh, create-vms.sh) over libvirt's RPC protocol at libvirt.uri:
//
//	libvirt/network          NAT network, bridge virbr-<network>, DNS (api, api-int, nodes,
//	                         etcd-N, SRV, *.apps wildcard) and DHCP reservations
//	libvirt/pool             dir storage pool at libvirt.poolPath
//	libvirt/volume/<node>    thin qcow2 disk <cluster>-<node>.qcow2
//	libvirt/vm/<node>        domain <cluster>-<node> (defined, not started: cluster/* starts it)
//
// On a lab spread over several hosts (lab.yaml hosts:), the network, its records and the host
// load balancer stay on the first host, and each other host gets
//
//	libvirt/bridge/<host>    an isolated network of the same name: bridge virbr-<network>, no
//	                         address, DNS or DHCP (the first host's serve every node through
//	                         the VXLAN tunnel, targets/vxlan.go)
//	libvirt/pool/<host>      the dir pool at libvirt.poolPath on that host
//
// and each node's disk and VM land on its host (nodes[].host) through the same adapter.
//
// All are External: their outputs (the XML labbuild asked for and record.json, naming the URI
// and object) are a record of what exists outside the filesystem. Probe compares the desired
// object with what libvirt reports, semantically (render/libvirt's *Diff), so hand-made drift
// shows in the plan as create / update / replace; Destroy removes exactly the recorded object.
func init() {
	Register(Family{Name: "libvirt", Doc: "libvirt network with DNS, storage pool, node disks and VMs (stage 02)", Targets: func(l Lab) []*engine.Target { return libvirtTargets(l.Config, l.Restart) }})
}

// lvRecord is what an External libvirt target records of the object it made: enough to find
// and remove it later even after the config changed.
type lvRecord struct {
	URI string `json:"uri"`
	// Host is the host's name on a lab spread over several (hosts[].name), for the plan and
	// for destroy's messages; empty on a one-host lab, whose records are as before.
	Host string `json:"host,omitempty"`
	Kind string `json:"kind"` // network | records (libvirt/dns) | pool | volume | domain
	Name string `json:"name"`
	Pool string `json:"pool,omitempty"` // volumes
	Path string `json:"path,omitempty"` // volumes: the file libvirt reported
	// Ignition is a domain's uploaded Ignition volume in Pool (remote libvirt only): it goes
	// with the domain.
	Ignition string `json:"ignition,omitempty"`
	// Config is the value of every config field the target read when it ran, as JSON text
	// (`"198.18.0.0/24"`, `8192`): the next plan names each changed field old → new. The
	// libvirt targets read no secrets (access.* are paths, and not among their Reads).
	Config map[string]string `json:"config,omitempty"`
}

// libvirtTargets declares the family for c; restart is Lab.Restart (--restart), which the VMs'
// Run and Probe apply to a resize.
func libvirtTargets(c *lab.Config, restart bool) []*engine.Target {
	var ts []*engine.Target
	netReads := []string{lab.LibvirtURI, lab.LibvirtNetwork, lab.ClusterName, lab.ClusterBaseDomain,
		lab.NetworkMachineNetwork, lab.NetworkGateway, lab.NetworkIngressVIP, lab.NetworkDHCPStart, lab.NetworkDHCPEnd}
	first := c.FirstHost()
	// On several hosts: the first host's name (plans and records say where) and the tunnel's MTU.
	netReads = append(append(netReads, multiHostReads(c, lab.HostPath(first.Name, lab.HostName))...), mtuReads(c)...)
	ts = append(ts, &engine.Target{
		Name: "libvirt/network", Doc: "libvirt NAT network: bridge, domain, DHCP range, *.apps wildcard (records: libvirt/dns)",
		Deps:  []string{hostPreflight},
		Reads: netReads, Version: 2, External: true,
		Run:     func(ctx context.Context, s *engine.Step) error { return lvRun(s, lvNetwork) },
		Probe:   func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) { return lvProbe(s, lvNetwork) },
		Destroy: lvDestroy,
	})
	// The records are a target of their own so that adding a node or moving an address edits
	// the running network without touching what sits on the bridge: the VMs and haproxy depend
	// on libvirt/network, whose output a record edit leaves alone.
	dnsReads := append(slices.Clone(netReads), lab.NetworkAPIVIP)
	nodes := lab.NodeNames(c.Nodes)
	for _, n := range c.Nodes {
		dnsReads = append(dnsReads, lab.NodePath(n.Name, lab.NodeRole), lab.NodePath(n.Name, lab.NodeIP))
		if n.MAC != "" {
			dnsReads = append(dnsReads, lab.NodePath(n.Name, lab.NodeMAC))
		}
	}
	ts = append(ts, &engine.Target{
		Name: "libvirt/dns", Doc: "the lab network's records, edited in place: DNS for api/api-int/nodes/etcd, etcd SRV, DHCP reservations",
		Deps: []string{"libvirt/network"}, Reads: dnsReads, Version: 1, External: true,
		Run: func(ctx context.Context, s *engine.Step) error { return lvRun(s, lvRecords(nodes)) },
		Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
			return lvProbe(s, lvRecords(nodes))
		},
		Destroy: lvDestroy,
	})
	ts = append(ts, &engine.Target{
		Name: "libvirt/pool", Doc: "libvirt dir storage pool at libvirt.poolPath",
		Deps:  []string{hostPreflight},
		Reads: append([]string{lab.LibvirtURI, lab.LibvirtPool, lab.LibvirtPoolPath}, multiHostReads(c, lab.HostPath(first.Name, lab.HostName))...), Version: 1, External: true,
		Run:     func(ctx context.Context, s *engine.Step) error { return lvRun(s, lvPool) },
		Probe:   func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) { return lvProbe(s, lvPool) },
		Destroy: lvDestroy,
	})
	if c.MultiHost() {
		for _, h := range c.Hosts[1:] {
			at := hostReads(c, h, lab.Node{})
			ts = append(ts, &engine.Target{
				Name: "libvirt/bridge/" + h.Name, Doc: "isolated network on host " + h.Name + ": bridge virbr-<network>, no address, DNS or DHCP (the first host's serve through the VXLAN tunnel)",
				Deps: []string{hostPreflight}, Reads: append(at, lab.LibvirtNetwork, lab.DerivedMachineMTU), Version: 1, External: true,
				Run:     func(ctx context.Context, s *engine.Step) error { return lvRun(s, lvBridge) },
				Probe:   func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) { return lvProbe(s, lvBridge) },
				Destroy: lvDestroy,
			}, &engine.Target{
				Name: "libvirt/pool/" + h.Name, Doc: "libvirt dir storage pool at libvirt.poolPath on host " + h.Name,
				Deps: []string{hostPreflight}, Reads: append(at, lab.LibvirtPool, lab.LibvirtPoolPath), Version: 1, External: true,
				Run:     func(ctx context.Context, s *engine.Step) error { return lvRun(s, lvPool) },
				Probe:   func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) { return lvProbe(s, lvPool) },
				Destroy: lvDestroy,
			})
		}
	}
	ignition := lvFamilyTargets(c, "ignition")
	adminKC := lvFamilyTargets(c, "kubeconfig")[adminKubeconfig]
	for _, n := range c.Nodes {
		node := n.Name // identity only; every value comes through the Step
		role := lvRoleSizes(n.Role)
		// Where the node lands: libvirt.uri, or on several hosts its host's URI and name.
		at := nodeHostReads(c, n)
		pool, network := "libvirt/pool", "libvirt/network"
		if h := c.HostOf(n); c.MultiHost() && !c.IsFirstHost(h) {
			pool, network = "libvirt/pool/"+h.Name, "libvirt/bridge/"+h.Name
		}
		// release.version: the release a disk was installed with, kept in its record, so that a
		// later release.image is refused on a lab whose disks exist (lvReleaseSwitch).
		volReads := append(slices.Clone(at), lab.LibvirtPool, lab.ClusterName, lab.NodePath(node, lab.NodeRole), lab.SizePath(role, lab.NodeDiskGiB), lab.ReleaseVersion)
		if n.DiskGiB != 0 {
			volReads = append(volReads, lab.NodePath(node, lab.NodeDiskGiB))
		}
		// Platform baremetal hands the workers to Metal3, which writes RHCOS and the user data
		// to the disk itself (virtual media, coreos-installer): their disk is empty and their
		// domain has no Ignition (openshift-install likewise creates only the masters; the
		// workers are BareMetalHosts). docs/baremetal.md.
		metal3 := c.Baremetal() && n.Role == lab.RoleWorker
		// A single node installs RHCOS to an empty disk from its live ISO (docs/sno.md).
		sno := c.SNO() && n.Role == lab.RoleMaster
		volDeps := []string{pool}
		volDoc := "thin qcow2 disk of " + node + " in the lab pool (over the RHCOS image)"
		switch {
		case metal3:
			volReads = append(volReads, lab.Platform)
		case sno:
			volDoc = "empty thin qcow2 disk of " + node + " in the lab pool (the single node installs RHCOS to it from the live ISO)"
		default:
			volDeps = append(volDeps, "rhcos/image")
		}
		ts = append(ts, &engine.Target{
			Name: "libvirt/volume/" + node, Doc: volDoc,
			Deps: volDeps, Reads: volReads, Version: 1, External: true,
			Run: func(ctx context.Context, s *engine.Step) error { return lvRun(s, lvVolume(node)) },
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				return lvProbe(s, lvVolume(node))
			},
			Destroy: lvDestroy,
		})
		// cluster.baseDomain, network.apiVIP and the admin kubeconfig: `--restart` drains the
		// node through the Kubernetes API before power-cycling it (lvRestart).
		vmReads := append(slices.Clone(at), lab.LibvirtNetwork, lab.LibvirtPool, lab.LibvirtDomainType, lab.ClusterName, lab.ClusterBaseDomain, lab.NetworkAPIVIP,
			lab.NodePath(node, lab.NodeRole), lab.SizePath(role, lab.NodeVCPUs), lab.SizePath(role, lab.NodeMemoryMiB))
		if n.VCPUs != 0 {
			vmReads = append(vmReads, lab.NodePath(node, lab.NodeVCPUs))
		}
		if n.MemoryMiB != 0 {
			vmReads = append(vmReads, lab.NodePath(node, lab.NodeMemoryMiB))
		}
		if n.MAC != "" {
			vmReads = append(vmReads, lab.NodePath(node, lab.NodeMAC))
		}
		if c.Baremetal() {
			vmReads = append(vmReads, lab.Platform) // the domain's UUID (rl.UUID)
		}
		deps := []string{network, "libvirt/volume/" + node}
		if c.MultiHost() {
			// The VM's link reaches the lab network (DNS, DHCP, the VIPs) through the tunnel.
			deps = append(deps, "vxlan/"+c.HostOf(n).Name)
		}
		vmDoc := "libvirt domain <cluster>-" + node + " (virtio disk and NIC, serial console, VNC; Ignition via fw_cfg)"
		switch {
		case sno:
			// The live ISO in a CD-ROM behind the empty disk (boot order hd, cdrom): the first
			// boot falls through to the ISO, every boot after the install starts from the disk.
			deps = append(deps, IgnBootstrapInPlace, "rhcos/live-iso")
			vmDoc = "libvirt domain <cluster>-" + node + " (virtio disk and NIC, serial console, VNC; the live ISO behind the disk, the bootstrap-in-place Ignition via fw_cfg)"
		case ignition["ignition/"+node] && !metal3:
			deps = append(deps, "ignition/"+node)
		}
		if adminKC {
			deps = append(deps, adminKubeconfig)
		}
		// With the mirror, every node pulls the release from network.gateway:mirror.port (the
		// ImageDigestMirrorSet and registries.conf the nodes get, manifests/cluster/mirror):
		// the registry must serve and hold the payload before a node boots, so every VM —
		// Metal3's workers too, whose ironic-python-agent and RHCOS pull from it — waits for
		// mirror/release (which waits for mirror/registry) and for mirror/listener, the
		// registry on the bridge address where the nodes pull. Issue 38 #11.
		if c.MirrorOn() {
			deps = append(deps, "mirror/release", "mirror/listener")
		}
		ts = append(ts, &engine.Target{
			Name: "libvirt/vm/" + node, Doc: vmDoc,
			Deps: deps, Reads: vmReads, Version: 1, External: true,
			Run: func(ctx context.Context, s *engine.Step) error { return lvRun(s, lvDomain(node, restart)) },
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				// A dry run does not lay out a disk's record that the store could restore (a
				// node removed and added back, a lab turned into a single node and back): the
				// domain is made once its disk is.
				if _, err := s.DepFile("libvirt/volume/"+node, recordFile); errors.Is(err, fs.ErrNotExist) {
					return engine.ProbeResult{Action: engine.Create, Reason: "its disk libvirt/volume/" + node + " is made first"}, nil
				}
				return lvProbe(s, lvDomain(node, restart))
			},
			Destroy: lvDestroy,
		})
	}
	return ts
}

// lvRoleSizes maps a node role to its sizes.<role> key (unknown roles size as workers, as
// Config.SizeOf does).
func lvRoleSizes(role string) string {
	switch role {
	case lab.RoleBootstrap, lab.RoleMaster:
		return role
	}
	return lab.RoleWorker
}

// lvFamilyTargets returns the names of the targets family name declares for c, or none when it
// is not registered. The ignition family is written in parallel and guards itself while its
// upstreams are missing; until ignition/<node> exists, the VMs are defined without an
// Ignition fw_cfg entry.
func lvFamilyTargets(c *lab.Config, name string) map[string]bool {
	out := map[string]bool{}
	for _, f := range families {
		if f.Name == name {
			for _, t := range f.Targets(Lab{Config: c}) {
				out[t.Name] = true
			}
		}
	}
	return out
}
