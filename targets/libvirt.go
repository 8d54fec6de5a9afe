package targets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/virt"
	"libvirt.org/go/libvirtxml"
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
// All are External: their outputs (the XML labbuild asked for and record.json, naming the URI
// and object) are a record of what exists outside the filesystem. Probe compares the desired
// object with what libvirt reports, semantically (render/libvirt's *Diff), so hand-made drift
// shows in the plan as create / update / replace; Destroy removes exactly the recorded object.
func init() {
	Register(Family{Name: "libvirt", Doc: "libvirt network with DNS, storage pool, node disks and VMs (stage 02)", Targets: libvirtTargets})
}

// lvRecord is what an External libvirt target records of the object it made: enough to find
// and remove it later even after the config changed.
type lvRecord struct {
	URI  string `json:"uri"`
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

const lvRecordFile = "record.json"

func libvirtTargets(c *Config) []*Target {
	var ts []*Target
	netReads := []string{"libvirt.uri", "libvirt.network", "cluster.name", "cluster.baseDomain",
		"network.machineNetwork", "network.gateway", "network.ingressVIP", "network.dhcpStart", "network.dhcpEnd"}
	ts = append(ts, &Target{
		Name: "libvirt/network", Doc: "libvirt NAT network: bridge, domain, DHCP range, *.apps wildcard (records: libvirt/dns)",
		Deps:  []string{hostPreflight},
		Reads: netReads, Version: 2, External: true,
		Run:     func(ctx context.Context, s *Step) error { return lvRun(s, lvNetwork) },
		Probe:   func(ctx context.Context, s *Step) (ProbeResult, error) { return lvProbe(s, lvNetwork) },
		Destroy: lvDestroy,
	})
	// The records are a target of their own so that adding a node or moving an address edits
	// the running network without touching what sits on the bridge: the VMs and haproxy depend
	// on libvirt/network, whose output a record edit leaves alone.
	dnsReads := append(slices.Clone(netReads), "network.apiVIP")
	for _, n := range c.Nodes {
		dnsReads = append(dnsReads, "nodes."+n.Name+".role", "nodes."+n.Name+".ip")
		if n.MAC != "" {
			dnsReads = append(dnsReads, "nodes."+n.Name+".mac")
		}
	}
	ts = append(ts, &Target{
		Name: "libvirt/dns", Doc: "the lab network's records, edited in place: DNS for api/api-int/nodes/etcd, etcd SRV, DHCP reservations",
		Deps: []string{"libvirt/network"}, Reads: dnsReads, Version: 1, External: true,
		Run:     func(ctx context.Context, s *Step) error { return lvRun(s, lvRecords) },
		Probe:   func(ctx context.Context, s *Step) (ProbeResult, error) { return lvProbe(s, lvRecords) },
		Destroy: lvDestroy,
	})
	ts = append(ts, &Target{
		Name: "libvirt/pool", Doc: "libvirt dir storage pool at libvirt.poolPath",
		Deps:  []string{hostPreflight},
		Reads: []string{"libvirt.uri", "libvirt.pool", "libvirt.poolPath"}, Version: 1, External: true,
		Run:     func(ctx context.Context, s *Step) error { return lvRun(s, lvPool) },
		Probe:   func(ctx context.Context, s *Step) (ProbeResult, error) { return lvProbe(s, lvPool) },
		Destroy: lvDestroy,
	})
	ignition := lvFamilyTargets(c, "ignition")
	adminKC := lvFamilyTargets(c, "kubeconfig")[clusterAdminKC]
	for _, n := range c.Nodes {
		node := n.Name // identity only; every value comes through the Step
		role := lvRoleSizes(n.Role)
		volReads := []string{"libvirt.uri", "libvirt.pool", "cluster.name", "nodes." + node + ".role", "sizes." + role + ".diskGiB"}
		if n.DiskGiB != 0 {
			volReads = append(volReads, "nodes."+node+".diskGiB")
		}
		volDeps := []string{"libvirt/pool", "rhcos/image"}
		ts = append(ts, &Target{
			Name: "libvirt/volume/" + node, Doc: "thin qcow2 disk of " + node + " in the lab pool (over the RHCOS image)",
			Deps: volDeps, Reads: volReads, Version: 1, External: true,
			Run:     func(ctx context.Context, s *Step) error { return lvRun(s, lvVolume(node)) },
			Probe:   func(ctx context.Context, s *Step) (ProbeResult, error) { return lvProbe(s, lvVolume(node)) },
			Destroy: lvDestroy,
		})
		// cluster.baseDomain, network.apiVIP and the admin kubeconfig: `--restart` drains the
		// node through the Kubernetes API before power-cycling it (lvRestart).
		vmReads := []string{"libvirt.uri", "libvirt.network", "libvirt.pool", "libvirt.domainType", "cluster.name", "cluster.baseDomain", "network.apiVIP",
			"nodes." + node + ".role", "sizes." + role + ".vcpus", "sizes." + role + ".memoryMiB"}
		if n.VCPUs != 0 {
			vmReads = append(vmReads, "nodes."+node+".vcpus")
		}
		if n.MemoryMiB != 0 {
			vmReads = append(vmReads, "nodes."+node+".memoryMiB")
		}
		if n.MAC != "" {
			vmReads = append(vmReads, "nodes."+node+".mac")
		}
		deps := []string{"libvirt/network", "libvirt/volume/" + node}
		if ignition["ignition/"+node] {
			deps = append(deps, "ignition/"+node)
		}
		if adminKC {
			deps = append(deps, clusterAdminKC)
		}
		ts = append(ts, &Target{
			Name: "libvirt/vm/" + node, Doc: "libvirt domain <cluster>-" + node + " (virtio disk and NIC, serial console, VNC; Ignition via fw_cfg)",
			Deps: deps, Reads: vmReads, Version: 1, External: true,
			Run:     func(ctx context.Context, s *Step) error { return lvRun(s, lvDomain(node)) },
			Probe:   func(ctx context.Context, s *Step) (ProbeResult, error) { return lvProbe(s, lvDomain(node)) },
			Destroy: lvDestroy,
		})
	}
	return ts
}

// lvRoleSizes maps a node role to its sizes.<role> key (unknown roles size as workers, as
// Config.SizeOf does).
func lvRoleSizes(role string) string {
	switch role {
	case RoleBootstrap, RoleMaster:
		return role
	}
	return RoleWorker
}

// lvFamilyTargets returns the names of the targets family name declares for c, or none when it
// is not registered. The ignition family is written in parallel and guards itself while its
// upstreams are missing; until ignition/<node> exists, the VMs are defined without an
// Ignition fw_cfg entry.
func lvFamilyTargets(c *Config, name string) map[string]bool {
	out := map[string]bool{}
	for _, f := range families {
		if f.Name == name {
			for _, t := range f.Targets(c) {
				out[t.Name] = true
			}
		}
	}
	return out
}

// lvConnect opens libvirt at the configured URI.
func lvConnect(s *Step) (*virt.Conn, error) {
	uri, err := s.String("libvirt.uri")
	if err != nil {
		return nil, err
	}
	return virt.Connect(uri)
}

// lvPrev returns the previous run's record, or ok=false when there is none.
func lvPrev(s *Step) (lvRecord, bool, error) {
	b, err := s.Prev(lvRecordFile)
	if errors.Is(err, fs.ErrNotExist) {
		return lvRecord{}, false, nil
	}
	if err != nil {
		return lvRecord{}, false, err
	}
	var r lvRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return lvRecord{}, false, fmt.Errorf("%s: recorded state %s: %w (labbuild destroy cannot use it; remove the object with virsh)", s.Target().Name, lvRecordFile, err)
	}
	return r, true, nil
}

func lvWrite(s *Step, xml []byte, xmlName string, r lvRecord) error {
	r.Config = lvConfig(s)
	if err := s.WriteFile(xmlName, xml, 0o644); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	return s.WriteFile(lvRecordFile, append(b, '\n'), 0o644)
}

// lvNetworkSpec assembles the network from the declared config values.
func lvNetworkSpec(s *Step) (rl.NetworkSpec, error) {
	var sp rl.NetworkSpec
	var cluster, base string
	for _, f := range []struct {
		p string
		v *string
	}{
		{"libvirt.network", &sp.Name}, {"cluster.name", &cluster}, {"cluster.baseDomain", &base},
		{"network.machineNetwork", &sp.MachineNetwork}, {"network.gateway", &sp.Gateway},
		{"network.apiVIP", &sp.APIVIP}, {"network.ingressVIP", &sp.IngressVIP},
		{"network.dhcpStart", &sp.DHCPStart}, {"network.dhcpEnd", &sp.DHCPEnd},
	} {
		if !slices.Contains(s.Target().Reads, f.p) {
			continue // network.apiVIP: only libvirt/dns
		}
		v, err := s.String(f.p)
		if err != nil {
			return sp, err
		}
		*f.v = v
	}
	sp.Domain = cluster + "." + base
	for _, r := range s.Target().Reads {
		name, ok := strings.CutSuffix(strings.TrimPrefix(r, "nodes."), ".ip")
		if !ok || !strings.HasPrefix(r, "nodes.") {
			continue
		}
		n := rl.Node{Name: name}
		var err error
		if n.IP, err = s.String(r); err != nil {
			return sp, err
		}
		if n.Role, err = s.String("nodes." + name + ".role"); err != nil {
			return sp, err
		}
		if n.MAC, err = lvMAC(s, cluster, name); err != nil {
			return sp, err
		}
		sp.Nodes = append(sp.Nodes, n)
	}
	return sp, nil
}

// lvMAC returns the node's configured MAC, or the one derived from cluster and node names.
func lvMAC(s *Step, cluster, node string) (string, error) {
	if p := "nodes." + node + ".mac"; slices.Contains(s.Target().Reads, p) {
		return s.String(p)
	}
	return rl.MAC(cluster, node), nil
}

func lvPoolSpec(s *Step) (rl.PoolSpec, error) {
	var sp rl.PoolSpec
	var err error
	if sp.Name, err = s.String("libvirt.pool"); err != nil {
		return sp, err
	}
	sp.Path, err = s.String("libvirt.poolPath")
	return sp, err
}

// lvSize returns the node's size field (vcpus, memoryMiB, diskGiB): its own when declared,
// its role's otherwise.
func lvSize(s *Step, node, field string) (int, error) {
	var v int
	p := "nodes." + node + "." + field
	if !slices.Contains(s.Target().Reads, p) {
		role, err := s.String("nodes." + node + ".role")
		if err != nil {
			return 0, err
		}
		p = "sizes." + lvRoleSizes(role) + "." + field
	}
	if err := s.Value(p, &v); err != nil {
		return 0, err
	}
	if v <= 0 {
		return 0, fmt.Errorf("%s: %s is %d: want a positive number", s.Target().Name, p, v)
	}
	return v, nil
}

func lvVolumeSpec(s *Step, node string) (pool string, sp rl.VolumeSpec, err error) {
	if pool, err = s.String("libvirt.pool"); err != nil {
		return
	}
	cluster, err := s.String("cluster.name")
	if err != nil {
		return
	}
	sp.Name = rl.VolumeName(cluster, node)
	if sp.CapacityGiB, err = lvSize(s, node, "diskGiB"); err != nil {
		return
	}
	// With rhcos.imageURL the disk overlays the verified RHCOS image (a thin qcow2 on top).
	if slices.Contains(s.Target().Deps, "rhcos/image") {
		var b []byte
		if b, err = s.DepFile("rhcos/image", "image.json"); err != nil {
			return
		}
		var r rhcosRecord
		if err = json.Unmarshal(b, &r); err != nil {
			err = fmt.Errorf("%s: rhcos/image's image.json: %w", s.Target().Name, err)
			return
		}
		sp.BackingFile = r.Path
	}
	return
}

func lvDomainSpec(s *Step, node string) (rl.DomainSpec, error) {
	var sp rl.DomainSpec
	cluster, err := s.String("cluster.name")
	if err != nil {
		return sp, err
	}
	sp.Name = cluster + "-" + node
	if sp.Type, err = s.String("libvirt.domainType"); err != nil {
		return sp, err
	}
	if sp.Network, err = s.String("libvirt.network"); err != nil {
		return sp, err
	}
	if sp.VCPUs, err = lvSize(s, node, "vcpus"); err != nil {
		return sp, err
	}
	if sp.MemoryMiB, err = lvSize(s, node, "memoryMiB"); err != nil {
		return sp, err
	}
	if sp.MAC, err = lvMAC(s, cluster, node); err != nil {
		return sp, err
	}
	b, err := s.DepFile("libvirt/volume/"+node, lvRecordFile)
	if err != nil {
		return sp, err
	}
	var vol lvRecord
	if err := json.Unmarshal(b, &vol); err != nil {
		return sp, fmt.Errorf("%s: libvirt/volume/%s record: %w", s.Target().Name, node, err)
	}
	sp.Disk = vol.Path
	if slices.Contains(s.Target().Deps, "ignition/"+node) {
		// The file is read by QEMU at each start, on the daemon's host: for a remote URI
		// lvDomain uploads it into the pool and points fw_cfg at the volume instead.
		if sp.Ignition, err = s.DepPath("ignition/"+node, node+".ign"); err != nil {
			return sp, err
		}
	}
	return sp, nil
}

// LibvirtRemoteHost returns the host a libvirt URI names ("lab1" for qemu+ssh://root@lab1/system),
// or "" for a local daemon (qemu:///system, qemu+unix:///system?socket=…): as virt.Conn.Remote
// decides, the daemon is then on another machine, with the lab bridge and the VMs.
func LibvirtRemoteHost(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// lvImageMu serializes uploads of the shared RHCOS image into a remote pool.
var lvImageMu sync.Mutex

// lvUpload copies the local file into volume name of pool on the (remote) daemon.
func lvUpload(c *virt.Conn, pool, name, format, local string) error {
	f, err := os.Open(local)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = c.UploadVolume(pool, name, format, f, st.Size())
	return err
}

// lvUploadedImage matches the names lvVolume gives the RHCOS image it uploads into a remote
// pool ("rhcos-" + lvDigestName + ".qcow2").
var lvUploadedImage = regexp.MustCompile(`^rhcos-[0-9a-f]{12}\.qcow2$`)

// lvDigestName names an uploaded image by the first 12 hex digits of the SHA-256 of its
// local path and size (the cache path carries the image's digest already; a new image is a
// new path), so every disk of a lab shares one upload.
func lvDigestName(local string) string {
	var size int64
	if st, err := os.Stat(local); err == nil {
		size = st.Size()
	}
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%d", local, size)))
	return hex.EncodeToString(h[:])[:12]
}

// lvSizeFields are the config fields that size the VM.
func lvSizeFields(s *Step) []string {
	var out []string
	for _, r := range s.Target().Reads {
		if strings.HasSuffix(r, ".vcpus") || strings.HasSuffix(r, ".memoryMiB") {
			out = append(out, r)
		}
	}
	return out
}

// lvPlan is one libvirt object observed once against what the config wants: the action and
// reason a Probe reports, and what Run carries out.
type lvPlan struct {
	rec     lvRecord // the object as it is recorded for destroy
	xml     []byte   // the wanted definition, written as an output
	xmlName string
	action  Action
	reason  string
	// apply brings the object to the wanted state; nil when nothing is to do. It may fill
	// in rec (a volume's path).
	apply func(c *virt.Conn, rec *lvRecord) error
}

// lvObserve builds the plan of one object on an open connection.
type lvObserve func(s *Step, c *virt.Conn) (lvPlan, error)

// lvRun is the Run of every libvirt target: observe, remove an object the config no longer
// names, apply the plan, record what exists.
func lvRun(s *Step, observe lvObserve) error {
	c, err := lvConnect(s)
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := observe(s, c)
	if err != nil {
		return err
	}
	if err := lvForgetMoved(s, p.rec); err != nil {
		return err
	}
	if p.action != Keep {
		s.Logf("%s: %s", p.action, p.reason)
	}
	if p.apply != nil {
		if err := p.apply(c, &p.rec); err != nil {
			return err
		}
	}
	return lvWrite(s, p.xml, p.xmlName, p.rec)
}

// lvProbe is the Probe of every libvirt target: the same observation, nothing changed.
func lvProbe(s *Step, observe lvObserve) (ProbeResult, error) {
	c, err := lvConnect(s)
	if err != nil {
		return ProbeResult{}, err
	}
	defer c.Close()
	p, err := observe(s, c)
	if err != nil {
		return ProbeResult{}, err
	}
	return ProbeResult{Action: p.action, Reason: p.reason}, nil
}

// lvDelete removes a recorded object by its kind; a missing one is not an error.
func lvDelete(c *virt.Conn, r lvRecord) error {
	switch r.Kind {
	case "network":
		return c.DeleteNetwork(r.Name)
	case "records":
		return nil // they go with their network
	case "pool":
		// The RHCOS image a remote lab uploaded into its pool (lvVolume: one per image,
		// shared by the disks, recorded by none of them) goes with the pool: the disks over it
		// are gone by now (they are downstream, destroyed first), and a pool left with it could
		// not be removed (rmdir of a non-empty directory). A local pool holds no such image:
		// the image stays in this machine's cache (~/.cache/labbuild), shared by every lab.
		names, err := c.VolumeNames(r.Name)
		if err != nil {
			return err
		}
		for _, v := range names {
			if lvUploadedImage.MatchString(v) {
				if err := c.DeleteVolume(r.Name, v); err != nil {
					return err
				}
			}
		}
		return c.DeletePool(r.Name)
	case "volume":
		return c.DeleteVolume(r.Pool, r.Name)
	case "domain":
		if err := c.DeleteDomain(r.Name); err != nil || r.Ignition == "" {
			return err
		}
		return c.DeleteVolume(r.Pool, r.Ignition)
	}
	return fmt.Errorf("recorded object %s of unknown kind %q", r.Name, r.Kind)
}

// lvDestroy is the Destroy of every libvirt target: it connects to the recorded URI (not the
// configured one, which may have changed), looks the recorded object up and removes it. No
// record means nothing was made; an object not found is AlreadyAbsent; a libvirtd it cannot
// reach is an error, so the record stays.
func lvDestroy(ctx context.Context, s *Step) (DestroyOutcome, error) {
	r, ok, err := lvPrev(s)
	if err != nil {
		return 0, err
	}
	if !ok {
		return AlreadyAbsent, nil
	}
	c, err := virt.Connect(r.URI)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	exists, err := lvExists(c, r)
	if err != nil {
		return 0, err
	}
	if r.Kind == "records" {
		if !exists {
			return AlreadyAbsent, nil
		}
		return lvDeleteRecords(c, r, s)
	}
	if err := lvDelete(c, r); err != nil {
		return 0, err
	}
	if !exists {
		return AlreadyAbsent, nil
	}
	return Destroyed, nil
}

// lvExists reports whether the recorded object is still there: for libvirt/dns, whether its
// network is.
func lvExists(c *virt.Conn, r lvRecord) (bool, error) {
	switch r.Kind {
	case "network", "records":
		_, _, found, err := c.Network(r.Name)
		return found, err
	case "pool":
		_, _, found, err := c.Pool(r.Name)
		return found, err
	case "volume":
		_, found, err := c.Volume(r.Pool, r.Name)
		return found, err
	case "domain":
		_, _, found, err := c.Domain(r.Name)
		return found, err
	}
	return false, fmt.Errorf("recorded object %s of unknown kind %q", r.Name, r.Kind)
}

// lvForgetMoved removes the previously recorded object when the config now names another one
// (a renamed network, another URI): otherwise it would be left behind, unknown to destroy.
func lvForgetMoved(s *Step, now lvRecord) error {
	prev, ok, err := lvPrev(s)
	if err != nil || !ok || (prev.URI == now.URI && prev.Name == now.Name && prev.Pool == now.Pool) {
		return err
	}
	s.Logf("%s %s moved to %s; removing the old one", prev.Kind, prev.Name, now.Name)
	c, err := virt.Connect(prev.URI)
	if err != nil {
		return fmt.Errorf("remove previous %s %s at %s: %w", prev.Kind, prev.Name, prev.URI, err)
	}
	defer c.Close()
	return lvDelete(c, prev)
}

// lvNetwork observes the lab network without its records: what only a new network can change
// (subnet, gateway, bridge name, forward mode, domain, DHCP range, the *.apps dnsmasq option).
// Such a change replaces it, and the plan names the field; the records are libvirt/dns's.
func lvNetwork(s *Step, c *virt.Conn) (lvPlan, error) {
	sp, err := lvNetworkSpec(s)
	if err != nil {
		return lvPlan{}, err
	}
	want, err := rl.NetworkBase(sp)
	if err != nil {
		return lvPlan{}, err
	}
	x, err := want.Marshal()
	if err != nil {
		return lvPlan{}, err
	}
	p := lvPlan{rec: lvRecord{URI: c.URI(), Kind: "network", Name: sp.Name}, xml: []byte(x + "\n"), xmlName: "network.xml", action: Keep}
	got, active, found, err := c.Network(sp.Name)
	if err != nil {
		return p, err
	}
	if !found {
		// Another lab on this host: refuse what would collide, before anything is made.
		others, err := c.Networks()
		if err != nil {
			return p, err
		}
		prev, _, _ := lvPrev(s)
		for _, name := range slices.Sorted(maps.Keys(others)) {
			if prev.Name == name && prev.URI == c.URI() {
				continue // this lab's network under its old name: Run removes it first
			}
			if why := rl.NetworkCollision(want, others[name]); why != "" {
				return p, fmt.Errorf("%s: %s", s.Target().Name, why)
			}
		}
		p.action, p.reason = Create, "network "+sp.Name+" does not exist"
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.CreateNetwork(want) }
		return p, nil
	}
	_, fixed := rl.NetworkChanges(want, got, rl.DiffOptions{IgnoreDnsmasqOptions: c.IsTest()})
	switch {
	case len(fixed) > 0:
		why := lvChanged(s, lvNetworkFixedFields...)
		if len(why) == 0 { // drift made by hand: say what libvirt has
			why = []string{"network " + sp.Name + ": " + strings.Join(fixed, "; ")}
		} else {
			why[len(why)-1] += " changed"
		}
		p.action, p.reason = Replace, strings.Join(why, "; ")+": every VM loses its link until restarted"
		p.apply = func(c *virt.Conn, _ *lvRecord) error {
			if err := c.DeleteNetwork(sp.Name); err != nil {
				return err
			}
			return c.CreateNetwork(want)
		}
	case !active:
		p.action, p.reason = Update, "network "+sp.Name+" is not running"
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.StartNetwork(sp.Name) }
	}
	return p, nil
}

// lvRecords observes the network's records — DNS hosts, SRV records, DHCP reservations — and
// edits them in place with virNetworkUpdate (live and persistent): the bridge, its dnsmasq
// and every VM's link stay.
func lvRecords(s *Step, c *virt.Conn) (lvPlan, error) {
	sp, err := lvNetworkSpec(s)
	if err != nil {
		return lvPlan{}, err
	}
	want, err := rl.Network(sp)
	if err != nil {
		return lvPlan{}, err
	}
	x, _ := rl.NetworkXML(sp)
	p := lvPlan{rec: lvRecord{URI: c.URI(), Kind: "records", Name: sp.Name}, xml: x, xmlName: "network.xml", action: Keep}
	got, _, found, err := c.Network(sp.Name)
	if err != nil {
		return p, err
	}
	if !found {
		return p, fmt.Errorf("%s: network %s does not exist (labbuild libvirt/network makes it)", s.Target().Name, sp.Name)
	}
	edits, _ := rl.NetworkChanges(want, got, rl.DiffOptions{IgnoreDnsmasqOptions: c.IsTest()})
	if len(edits) > 0 {
		lines := make([]string, len(edits))
		for i, e := range edits {
			lines[i] = e.String()
		}
		p.action, p.reason = Update, "in place: "+strings.Join(lines, "; ")
		if prev, ok, _ := lvPrev(s); !ok || prev.Name != sp.Name {
			p.action = Create // a new network's records
		}
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.UpdateNetwork(sp.Name, edits) }
	}
	return p, nil
}

// lvNetworkFixedFields are the config fields that feed a part of the network libvirt cannot
// change while it runs (bridge, address, prefix, domain, DHCP range, the *.apps option).
var lvNetworkFixedFields = []string{"libvirt.network", "network.machineNetwork", "network.gateway",
	"cluster.name", "cluster.baseDomain", "network.dhcpStart", "network.dhcpEnd", "network.ingressVIP"}

// lvConfig returns the JSON text of every config field the target reads.
func lvConfig(s *Step) map[string]string {
	out := map[string]string{}
	for _, r := range s.Target().Reads {
		var raw json.RawMessage
		if err := s.Value(r, &raw); err == nil {
			out[r] = string(raw)
		}
	}
	return out
}

// lvChanged compares the config the target last ran with (its record) with today's and
// returns "field old → new" for each of fields (all it reads when none are given) that
// changed or appeared, in Reads order. No record: nothing to compare.
func lvChanged(s *Step, fields ...string) []string {
	prev, ok, err := lvPrev(s)
	if err != nil || !ok || prev.Config == nil {
		return nil
	}
	now := lvConfig(s)
	var out []string
	for _, r := range s.Target().Reads {
		if len(fields) > 0 && !slices.Contains(fields, r) {
			continue
		}
		if old, had := prev.Config[r]; !had {
			out = append(out, r+" "+lvShow(now[r])+" (new)")
		} else if old != now[r] {
			out = append(out, r+" "+lvShow(old)+" → "+lvShow(now[r]))
		}
	}
	return out
}

// lvShow prints a JSON config value as a plan shows it: strings without quotes.
func lvShow(v string) string {
	var str string
	if json.Unmarshal([]byte(v), &str) == nil {
		return str
	}
	return v
}

// lvPool observes the storage pool. On replacement the volumes in the old directory stay
// there (labbuild never deletes files it did not make); the volume targets, downstream,
// create new ones in the new place.
func lvPool(s *Step, c *virt.Conn) (lvPlan, error) {
	sp, err := lvPoolSpec(s)
	if err != nil {
		return lvPlan{}, err
	}
	want, err := rl.Pool(sp)
	if err != nil {
		return lvPlan{}, err
	}
	x, _ := rl.PoolXML(sp)
	p := lvPlan{rec: lvRecord{URI: c.URI(), Kind: "pool", Name: sp.Name}, xml: x, xmlName: "pool.xml", action: Keep}
	got, active, found, err := c.Pool(sp.Name)
	if err != nil {
		return p, err
	}
	var diff []string
	if found {
		diff = rl.PoolDiff(want, got)
	}
	switch {
	case !found:
		p.action, p.reason = Create, "pool "+sp.Name+" does not exist (at "+sp.Path+")"
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.CreatePool(want) }
	case len(diff) > 0:
		p.action, p.reason = Replace, "pool "+sp.Name+": "+strings.Join(diff, "; ")
		p.apply = func(c *virt.Conn, _ *lvRecord) error {
			if err := c.DeletePool(sp.Name); err != nil {
				return err
			}
			return c.CreatePool(want)
		}
	case !active:
		p.action, p.reason = Update, "pool "+sp.Name+" is not running"
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.StartPool(sp.Name) }
	}
	return p, nil
}

// lvVolume observes a node's disk. A disk of another size is a new, empty disk: the node is
// reinstalled anyway. The record keeps the path libvirt reports.
func lvVolume(node string) lvObserve {
	return func(s *Step, c *virt.Conn) (lvPlan, error) {
		pool, sp, err := lvVolumeSpec(s, node)
		if err != nil {
			return lvPlan{}, err
		}
		// A remote daemon cannot open this machine's image cache: the image goes into its pool
		// once (named by its digest, shared by every node's disk) and the disks overlay that.
		var upload func(c *virt.Conn) error
		if c.Remote() && sp.BackingFile != "" {
			local := sp.BackingFile
			dir, err := c.PoolPath(pool)
			if err != nil {
				return lvPlan{}, err
			}
			img := "rhcos-" + lvDigestName(local) + ".qcow2"
			sp.BackingFile = path.Join(dir, img)
			if _, found, err := c.Volume(pool, img); err != nil {
				return lvPlan{}, err
			} else if !found {
				upload = func(c *virt.Conn) error {
					// Every node's disk wants the same image: one upload, the others wait.
					lvImageMu.Lock()
					defer lvImageMu.Unlock()
					if _, found, err := c.Volume(pool, img); err != nil || found {
						return err
					}
					return lvUpload(c, pool, img, "qcow2", local)
				}
			}
		}
		want, err := rl.Volume(sp)
		if err != nil {
			return lvPlan{}, err
		}
		x, _ := rl.VolumeXML(sp)
		p := lvPlan{rec: lvRecord{URI: c.URI(), Kind: "volume", Name: sp.Name, Pool: pool}, xml: x, xmlName: "volume.xml", action: Keep}
		got, found, err := c.Volume(pool, sp.Name)
		if err != nil {
			return p, err
		}

		noPath := fmt.Errorf("%s: libvirt reported no path for volume %s/%s", s.Target().Name, pool, sp.Name)
		create := func(c *virt.Conn, rec *lvRecord) error {
			path, err := c.CreateVolume(pool, want)
			if err == nil && path == "" {
				err = noPath
			}
			rec.Path = path
			return err
		}
		var diff []string
		if found {
			diff = rl.VolumeDiff(want, got)
		}
		switch {
		case !found:
			p.action, p.reason = Create, fmt.Sprintf("volume %s/%s (%d GiB) does not exist", pool, sp.Name, sp.CapacityGiB)
			p.apply = create
		case len(diff) > 0:
			p.action, p.reason = Replace, "volume "+sp.Name+": "+strings.Join(diff, "; ")
			p.apply = func(c *virt.Conn, rec *lvRecord) error {
				if err := c.DeleteVolume(pool, sp.Name); err != nil {
					return err
				}
				return create(c, rec)
			}
		case got.Target == nil || got.Target.Path == "":
			p.apply = func(*virt.Conn, *lvRecord) error { return noPath }
		default:
			p.rec.Path = got.Target.Path
		}
		if apply := p.apply; upload != nil && apply != nil {
			p.apply = func(c *virt.Conn, rec *lvRecord) error {
				if err := upload(c); err != nil {
					return err
				}
				return apply(c, rec)
			}
		}
		return p, nil
	}
}

// lvDomain observes a node's VM. A change that needs a new domain (disk, NIC, firmware)
// replaces it; a size change updates the persistent definition, applied at its next start.
// Run always (re)defines: the same XML changes nothing.
func lvDomain(node string) lvObserve {
	return func(s *Step, c *virt.Conn) (lvPlan, error) {
		sp, err := lvDomainSpec(s, node)
		if err != nil {
			return lvPlan{}, err
		}
		// A remote daemon's QEMU reads fw_cfg files on its own host: the Ignition goes into the
		// pool as a raw volume (virStorageVolUpload) and fw_cfg names that volume's path.
		rec := lvRecord{URI: c.URI(), Kind: "domain", Name: sp.Name}
		var upload func(c *virt.Conn) error
		var ignMissing bool
		if c.Remote() && sp.Ignition != "" {
			local := sp.Ignition
			if rec.Pool, err = s.String("libvirt.pool"); err != nil {
				return lvPlan{}, err
			}
			dir, err := c.PoolPath(rec.Pool)
			if err != nil {
				return lvPlan{}, err
			}
			rec.Ignition = sp.Name + ".ign"
			sp.Ignition = path.Join(dir, rec.Ignition)
			_, found, err := c.Volume(rec.Pool, rec.Ignition)
			if err != nil {
				return lvPlan{}, err
			}
			ignMissing = !found
			pool, vol := rec.Pool, rec.Ignition
			upload = func(c *virt.Conn) error { return lvUpload(c, pool, vol, "raw", local) }
		}
		want, err := rl.Domain(sp)
		if err != nil {
			return lvPlan{}, err
		}
		x, _ := rl.DomainXML(sp)
		p := lvPlan{rec: rec, xml: x, xmlName: "domain.xml", action: Keep}
		got, _, found, err := c.Domain(sp.Name)
		if err != nil {
			return p, err
		}
		var replace, resized bool
		if !found {
			p.action, p.reason = Create, "domain "+sp.Name+" does not exist"
		} else if diff := rl.DomainDiff(want, got); rl.DomainNeedsReplace(diff) {
			p.action, p.reason, replace = Replace, "domain "+sp.Name+": "+strings.Join(diff, "; "), true
		} else {
			// Redefining keeps the domain's identity only with its UUID; without it libvirt
			// refuses ("already exists with uuid ...").
			want.UUID = got.UUID
			if len(diff) > 0 {
				why := lvChanged(s, lvSizeFields(s)...)
				if len(why) == 0 { // drift made by hand: say what libvirt has
					why = []string{"domain " + sp.Name + ": " + strings.Join(diff, "; ")}
				}
				resized = true
				p.action, p.reason = Update, strings.Join(why, "; ")+"; takes effect at the next power cycle"
				if st := lvState(c, sp.Name); RestartResized && (st == virt.DomainRunning || st == virt.DomainPaused) {
					p.reason = strings.Join(why, "; ") + "; --restart: drain " + node + " (when the cluster answers), power-cycle, uncordon"
				}
			}
		}
		if ignMissing && p.action == Keep {
			p.action, p.reason = Update, "Ignition volume "+rec.Pool+"/"+rec.Ignition+" is missing on the remote host"
		}
		p.apply = func(c *virt.Conn, _ *lvRecord) error {
			if upload != nil {
				if err := upload(c); err != nil {
					return err
				}
			}
			if replace {
				if err := c.DeleteDomain(sp.Name); err != nil {
					return err
				}
			}
			if err := c.DefineDomain(want); err != nil {
				return err
			}
			if resized && RestartResized {
				return lvRestart(s, c, node, sp.Name)
			}
			return nil
		}
		return p, nil
	}
}

// lvState is a domain's run state, DomainNoState when it cannot be read.
func lvState(c *virt.Conn, name string) virt.DomainState {
	_, st, _, err := c.Domain(name)
	if err != nil {
		return virt.DomainNoState
	}
	return st
}

// lvRestart power-cycles the running (or paused) domain name of node so that its new
// definition takes effect (`labbuild --restart`): first, when the cluster answers, the Node is
// cordoned and drained through the Eviction API (what could not be drained is logged), then
// the domain is stopped and started in the state it had (a paused domain starts paused), then
// the Node is uncordoned. A stopped domain is left stopped: its next start uses the new size.
func lvRestart(s *Step, c *virt.Conn, node, name string) error {
	st := lvState(c, name)
	if st != virt.DomainRunning && st != virt.DomainPaused {
		s.Logf("%s is not running: the new size applies at its next start", name)
		return nil
	}
	ctx := s.Context()
	domain, err := clusterDomain(s)
	if err != nil {
		return err
	}
	fqdn := clusterNodeName(node, domain)
	dyn, why := clusterNodeClient(s)
	drained := false
	if dyn == nil {
		s.Logf("cannot ask the cluster (%s): %s power-cycled without a drain", why, fqdn)
	} else {
		reachable, found, err := clusterEvacuate(ctx, s.Logf, dyn, fqdn)
		if err != nil {
			return err
		}
		if !reachable {
			s.Logf("%s power-cycled without a drain", fqdn)
		}
		drained = reachable && found
	}
	if err := c.StopDomain(name); err != nil {
		return err
	}
	if err := c.StartDomain(name, st == virt.DomainPaused); err != nil {
		return err
	}
	s.Logf("power-cycled %s: the new size is live", name)
	if drained {
		if _, err := kube.Uncordon(ctx, dyn, fqdn); err != nil {
			return fmt.Errorf("uncordon %s after its power cycle: %w (oc adm uncordon %s)", fqdn, err, fqdn)
		}
		s.Logf("uncordoned %s", fqdn)
	}
	return nil
}

// lvDeleteRecords removes from the running network the records libvirt/dns added (its
// recorded network.xml), and only those: records added by hand stay. None left is
// AlreadyAbsent. Destroying the network afterwards takes the rest with it.
func lvDeleteRecords(c *virt.Conn, r lvRecord, s *Step) (DestroyOutcome, error) {
	b, err := s.Prev("network.xml")
	if err != nil {
		return 0, fmt.Errorf("%s: recorded network.xml: %w", s.Target().Name, err)
	}
	var mine libvirtxml.Network
	if err := mine.Unmarshal(string(b)); err != nil {
		return 0, fmt.Errorf("%s: recorded network.xml: %w", s.Target().Name, err)
	}
	got, _, found, err := c.Network(r.Name)
	if err != nil || !found {
		return AlreadyAbsent, err
	}
	bare := *got
	if got.DNS != nil {
		dns := *got.DNS
		dns.Host, dns.SRVs = nil, nil
		bare.DNS = &dns
	}
	bare.IPs = slices.Clone(got.IPs)
	for i := range bare.IPs {
		if d := bare.IPs[i].DHCP; d != nil {
			dd := *d
			dd.Hosts = nil
			bare.IPs[i].DHCP = &dd
		}
	}
	opts := rl.DiffOptions{IgnoreDnsmasqOptions: true}
	recorded, _ := rl.NetworkChanges(&bare, &mine, opts)
	ours := map[string]bool{}
	for _, e := range recorded {
		ours[e.Section+" "+e.Key] = true
	}
	present, _ := rl.NetworkChanges(&bare, got, opts)
	var dels []rl.NetworkEdit
	for _, e := range present {
		if e.Command == rl.EditDelete && ours[e.Section+" "+e.Key] {
			dels = append(dels, e)
		}
	}
	if len(dels) == 0 {
		return AlreadyAbsent, nil
	}
	return Destroyed, c.UpdateNetwork(r.Name, dels)
}
