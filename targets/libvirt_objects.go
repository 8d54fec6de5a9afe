package targets

// The observations of each libvirt object (network, DNS records, pool, volume, domain): what
// the config wants against what libvirt reports, as an lvPlan (libvirt.go declares the targets).

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/virt"
)

// lvNetwork observes the lab network without its records: what only a new network can change
// (subnet, gateway, bridge name, forward mode, domain, DHCP range, the *.apps dnsmasq option).
// Such a change replaces it, and the plan names the field; the records are libvirt/dns's.
func lvNetwork(s *engine.Step, c *virt.Conn) (lvPlan, error) {
	sp, err := lvNetworkSpec(s, nil)
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
	p := lvPlan{rec: lvRecord{URI: c.URI(), Kind: "network", Name: sp.Name}, xml: []byte(x + "\n"), xmlName: "network.xml", action: engine.Keep}
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
		p.action, p.reason = engine.Create, "network "+sp.Name+" does not exist"
		if m, err := mtuSummary(s); err != nil {
			return p, err
		} else if m != "" {
			p.reason += "; " + m // a lab on several hosts: the MTU its tunnel leaves
		}
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
		p.action, p.reason = engine.Replace, strings.Join(why, "; ")+": every VM loses its link until restarted"
		p.apply = func(c *virt.Conn, _ *lvRecord) error {
			if err := c.DeleteNetwork(sp.Name); err != nil {
				return err
			}
			return c.CreateNetwork(want)
		}
	case !active:
		p.action, p.reason = engine.Update, "network "+sp.Name+" is not running"
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.StartNetwork(sp.Name) }
	}
	return p, nil
}

// lvBridge observes the isolated network a lab's other host gets (rl.IsolatedNetwork): the
// bridge virbr-<network> the host's domains join and the VXLAN device joins to the first host's.
// Another network of the host with that bridge is refused before anything is made.
func lvBridge(s *engine.Step, c *virt.Conn) (lvPlan, error) {
	name, err := s.String(lab.LibvirtNetwork)
	if err != nil {
		return lvPlan{}, err
	}
	mtu, err := stepInt(s, lab.DerivedMachineMTU)
	if err != nil {
		return lvPlan{}, err
	}
	want := rl.IsolatedNetwork(name, mtu)
	x, err := rl.IsolatedNetworkXML(name, mtu)
	if err != nil {
		return lvPlan{}, err
	}
	p := lvPlan{rec: lvRecord{URI: c.URI(), Kind: "network", Name: name}, xml: x, xmlName: "network.xml", action: engine.Keep}
	got, active, found, err := c.Network(name)
	if err != nil {
		return p, err
	}
	switch {
	case !found:
		others, err := c.Networks()
		if err != nil {
			return p, err
		}
		for _, o := range slices.Sorted(maps.Keys(others)) {
			if why := rl.NetworkCollision(want, others[o]); why != "" {
				return p, fmt.Errorf("%s: %s", s.Target().Name, why)
			}
		}
		p.action, p.reason = engine.Create, fmt.Sprintf("isolated network %s (bridge %s, MTU %d) does not exist", name, rl.Bridge(name), mtu)
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.CreateNetwork(want) }
	case len(rl.NetworkDiff(want, got, rl.DiffOptions{IgnoreDnsmasqOptions: true})) > 0:
		d := rl.NetworkDiff(want, got, rl.DiffOptions{IgnoreDnsmasqOptions: true})
		p.action, p.reason = engine.Replace, "isolated network "+name+": "+strings.Join(d, "; ")+": the host's VMs lose their link until restarted"
		p.apply = func(c *virt.Conn, _ *lvRecord) error {
			if err := c.DeleteNetwork(name); err != nil {
				return err
			}
			return c.CreateNetwork(want)
		}
	case !active:
		p.action, p.reason = engine.Update, "network "+name+" is not running"
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.StartNetwork(name) }
	}
	return p, nil
}

// lvRecords observes the network's records of nodes — DNS hosts, SRV records, DHCP
// reservations — and edits them in place with virNetworkUpdate (live and persistent): the
// bridge, its dnsmasq and every VM's link stay.
func lvRecords(nodes []string) lvObserve {
	return func(s *engine.Step, c *virt.Conn) (lvPlan, error) {
		sp, err := lvNetworkSpec(s, nodes)
		if err != nil {
			return lvPlan{}, err
		}
		want, err := rl.Network(sp)
		if err != nil {
			return lvPlan{}, err
		}
		x, _ := rl.NetworkXML(sp)
		p := lvPlan{rec: lvRecord{URI: c.URI(), Kind: "records", Name: sp.Name}, xml: x, xmlName: "network.xml", action: engine.Keep}
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
			p.action, p.reason = engine.Update, "in place: "+strings.Join(lines, "; ")
			if prev, ok, _ := lvPrev(s); !ok || prev.Name != sp.Name {
				p.action = engine.Create // a new network's records
			}
			p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.UpdateNetwork(sp.Name, edits) }
		}
		return p, nil
	}
}

// lvNetworkFixedFields are the config fields that feed a part of the network libvirt cannot
// change while it runs (bridge, address, prefix, domain, DHCP range, the *.apps option).
var lvNetworkFixedFields = []string{lab.LibvirtNetwork, lab.NetworkMachineNetwork, lab.NetworkGateway,
	lab.ClusterName, lab.ClusterBaseDomain, lab.NetworkDHCPStart, lab.NetworkDHCPEnd, lab.NetworkIngressVIP}

// lvConfig returns the JSON text of every config field the target reads.
func lvConfig(s *engine.Step) map[string]string {
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
func lvChanged(s *engine.Step, fields ...string) []string {
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
func lvPool(s *engine.Step, c *virt.Conn) (lvPlan, error) {
	sp, err := lvPoolSpec(s)
	if err != nil {
		return lvPlan{}, err
	}
	want, err := rl.Pool(sp)
	if err != nil {
		return lvPlan{}, err
	}
	x, _ := rl.PoolXML(sp)
	p := lvPlan{rec: lvRecord{URI: c.URI(), Kind: "pool", Name: sp.Name}, xml: x, xmlName: "pool.xml", action: engine.Keep}
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
		p.action, p.reason = engine.Create, "pool "+sp.Name+" does not exist (at "+sp.Path+")"
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.CreatePool(want) }
	case len(diff) > 0:
		p.action, p.reason = engine.Replace, "pool "+sp.Name+": "+strings.Join(diff, "; ")
		p.apply = func(c *virt.Conn, _ *lvRecord) error {
			if err := c.DeletePool(sp.Name); err != nil {
				return err
			}
			return c.CreatePool(want)
		}
	case !active:
		p.action, p.reason = engine.Update, "pool "+sp.Name+" is not running"
		p.apply = func(c *virt.Conn, _ *lvRecord) error { return c.StartPool(sp.Name) }
	}
	return p, nil
}

// lvVolume observes a node's disk. A disk of another size is a new, empty disk: the node is
// reinstalled anyway. The record keeps the path libvirt reports.
func lvVolume(node string) lvObserve {
	return func(s *engine.Step, c *virt.Conn) (lvPlan, error) {
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
		p := lvPlan{rec: lvRecord{URI: c.URI(), Kind: "volume", Name: sp.Name, Pool: pool}, xml: x, xmlName: "volume.xml", action: engine.Keep}
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
			if err := lvReleaseSwitch(s, pool, sp.Name); err != nil {
				return p, err
			}
			diff = rl.VolumeDiff(want, got)
		}
		switch {
		case !found:
			p.action, p.reason = engine.Create, fmt.Sprintf("volume %s/%s (%d GiB) does not exist", pool, sp.Name, sp.CapacityGiB)
			p.apply = create
		case len(diff) > 0:
			p.action, p.reason = engine.Replace, "volume "+sp.Name+": "+strings.Join(diff, "; ")+lvShapeChange(s, sp, got)
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

// lvReleaseSwitch refuses a disk that exists and was installed with another release than the
// payload's (release.version in its record against today's): Ignition runs only on a disk's
// first boot, so a node kept with a new release's Ignition would half-apply the switch, and
// labbuild does not upgrade a running cluster (its CVO does: `oc adm upgrade`). The error
// names both versions and the ways on; the plan shows the volume, and everything made from it,
// blocked, before anything runs. A record from before release.version was kept (no value)
// is not refused.
func lvReleaseSwitch(s *engine.Step, pool, name string) error {
	prev, ok, err := lvPrev(s)
	if err != nil || !ok {
		return nil
	}
	old, had := prev.Config[lab.ReleaseVersion]
	if !had {
		return nil
	}
	now := lvConfig(s)[lab.ReleaseVersion]
	if old == now {
		return nil
	}
	return fmt.Errorf("%s: volume %s/%s was installed with release %s, and release.image now names %s: labbuild does not switch the release of a lab whose disks exist (Ignition runs only on a new disk; a running cluster is upgraded by its CVO, `oc adm upgrade`). Run `labbuild destroy` and then `labbuild cluster` to install %s anew, or set release.image back",
		s.Target().Name, pool, name, lvShow(old), lvShow(now), lvShow(now))
}

// lvShapeChange says why a node's disk changes from overlaying the QEMU image to empty or
// back, when the lab turned into a single node or back: the node is installed anew ("" for any
// other change). A platform baremetal worker's disk is empty too, but never changes this way.
func lvShapeChange(s *engine.Step, want rl.VolumeSpec, got *libvirtxml.StorageVolume) string {
	had := got.BackingStore != nil && got.BackingStore.Path != ""
	switch {
	case slices.Contains(s.Target().Reads, lab.Platform):
		return ""
	case want.BackingFile == "" && had:
		return " (the lab is a single node now: it installs RHCOS from its live ISO onto an empty disk, so the node is installed anew)"
	case want.BackingFile != "" && !had:
		return " (the lab is no longer a single node: the node's disk overlays the QEMU image, so the node is installed anew)"
	}
	return ""
}

// lvDomain observes a node's VM. A change that needs a new domain (disk, NIC, firmware)
// replaces it; a size change updates the persistent definition, applied at its next start,
// or now when restart (Lab.Restart) power-cycles a running VM. Run always (re)defines: the
// same XML changes nothing.
func lvDomain(node string, restart bool) lvObserve {
	return func(s *engine.Step, c *virt.Conn) (lvPlan, error) {
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
			if rec.Pool, err = s.String(lab.LibvirtPool); err != nil {
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
		p := lvPlan{rec: rec, xml: x, xmlName: "domain.xml", action: engine.Keep}
		got, _, found, err := c.Domain(sp.Name)
		if err != nil {
			return p, err
		}
		bmc := slices.Contains(s.Target().Reads, lab.Platform) // platform baremetal: behind bmc/service
		var replace, resized bool
		if !found {
			p.action, p.reason = engine.Create, "domain "+sp.Name+" does not exist"
		} else if diff := lvNotBMCOwned(rl.DomainDiff(want, got), bmc); rl.DomainNeedsReplace(diff) {
			p.action, p.reason, replace = engine.Replace, "domain "+sp.Name+": "+strings.Join(diff, "; "), true
		} else {
			// Redefining keeps the domain's identity only with its UUID; without it libvirt
			// refuses ("already exists with uuid ...").
			want.UUID = got.UUID
			if len(diff) > 0 {
				fields, err := lvSizeFields(s, node)
				if err != nil {
					return p, err
				}
				why := lvChanged(s, fields...)
				if len(why) == 0 { // drift made by hand: say what libvirt has
					why = []string{"domain " + sp.Name + ": " + strings.Join(diff, "; ")}
				}
				resized = true
				p.action, p.reason = engine.Update, strings.Join(why, "; ")+"; takes effect at the next power cycle"
				if st := lvState(c, sp.Name); restart && (st == virt.DomainRunning || st == virt.DomainPaused) {
					p.reason = strings.Join(why, "; ") + "; --restart: drain " + node + " (when the cluster answers), power-cycle, uncordon"
				}
			}
		}
		if ignMissing && p.action == engine.Keep {
			p.action, p.reason = engine.Update, "Ignition volume "+rec.Pool+"/"+rec.Ignition+" is missing on the remote host"
		}
		p.apply = func(c *virt.Conn, rec *lvRecord) error {
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
				if found || !lvDefinedMeanwhile(err) {
					return err
				}
				// The domain was absent when looked up and is there now: a define that was still
				// in flight, such as a killed labbuild's (libvirtd finishes an RPC whose client
				// has gone, and a first define waits for QEMU's capabilities). Look again and
				// treat it as found: kept, updated with its UUID, or replaced.
				again, oerr := lvDomain(node, restart)(s, c)
				if oerr != nil {
					return oerr
				}
				if again.action == engine.Create || again.apply == nil {
					return err
				}
				s.Logf("domain %s was defined meanwhile (an interrupted run's define); looked again: %s %s", sp.Name, again.action, again.reason)
				return again.apply(c, rec)
			}
			if resized && restart {
				return lvRestart(s, c, node, sp.Name)
			}
			return nil
		}
		return p, nil
	}
}

// lvDefinedMeanwhile reports whether err is libvirt refusing a define because a domain of that
// name exists with another UUID (virDomainObjListAddLocked: "domain '%s' already exists with
// uuid %s", VIR_ERR_OPERATION_FAILED, which carries no more specific code).
func lvDefinedMeanwhile(err error) bool {
	return strings.Contains(err.Error(), "already exists with uuid")
}

// lvNotBMCOwned drops from a domain's diff what the lab's BMC changes on platform baremetal
// (bmc true): the virtual-media CD-ROM its InsertMedia adds to the persistent definition and
// the boot order its overrides set (targets/bmc: Cd → <boot dev='cdrom'/> first). They are
// Metal3's to drive; replacing the domain for them would take its media away while Metal3
// provisions the host. Everything else still counts.
func lvNotBMCOwned(diff []string, bmc bool) []string {
	if !bmc {
		return diff
	}
	var out []string
	for _, l := range diff {
		if strings.HasPrefix(l, "boot: ") || strings.HasPrefix(l, "disk: unexpected cdrom ") {
			continue
		}
		out = append(out, l)
	}
	return out
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
func lvRestart(s *engine.Step, c *virt.Conn, node, name string) error {
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
