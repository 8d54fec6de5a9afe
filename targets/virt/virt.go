// Package virt is labbuild's adapter to libvirt: it talks libvirt's RPC protocol in pure Go
// (github.com/digitalocean/go-libvirt, no cgo, no virsh) at a connection URI —
// qemu:///system, qemu+ssh://host/system, qemu+unix:///system?socket=PATH, test:///default —
// and defines, starts, inspects and removes networks, pools, volumes and domains from
// libvirtxml objects. Every removal treats "not found" as done, so `labbuild destroy` can be
// rerun.
package virt

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"libvirt.org/go/libvirtxml"
)

// Conn is one connection to a libvirt daemon.
type Conn struct {
	l   *golibvirt.Libvirt
	uri string
}

// Connect opens a connection to uri. Unix sockets (the default, or ?socket=PATH), tcp, tls and
// ssh transports work as go-libvirt's dialers implement them. The error names the URI and
// the usual fix.
func Connect(uri string) (*Conn, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("libvirt.uri %q: not a libvirt URI such as qemu:///system", uri)
	}
	l, err := golibvirt.ConnectToURI(u)
	if err != nil {
		return nil, fmt.Errorf("connect to libvirt at %s: %w (is libvirtd running, and may this user open its socket?)", uri, err)
	}
	return &Conn{l: l, uri: uri}, nil
}

// Close disconnects.
func (c *Conn) Close() error { return c.l.Disconnect() }

// RPC returns the connection's go-libvirt client, for the adapter that drives libvirt calls
// this package does not wrap: the BMC's power, boot and media by domain UUID (targets/bmc).
func (c *Conn) RPC() *golibvirt.Libvirt { return c.l }

// URI returns the URI the connection was opened with.
func (c *Conn) URI() string { return c.uri }

// IsTest reports whether the connection is to libvirt's test driver, which keeps objects in
// memory, runs nothing, and drops <dnsmasq:options>.
func (c *Conn) IsTest() bool { return strings.HasPrefix(c.uri, "test") }

// notFound reports a libvirt "no such object" error.
func notFound(err error) bool {
	if err == nil {
		return false
	}
	if golibvirt.IsNotFound(err) {
		return true
	}
	var e golibvirt.Error
	if errors.As(err, &e) {
		switch golibvirt.ErrorNumber(e.Code) {
		case golibvirt.ErrNoDomain, golibvirt.ErrNoNetwork, golibvirt.ErrNoStoragePool, golibvirt.ErrNoStorageVol:
			return true
		}
	}
	return false
}

// notActive reports libvirt's "is not running/active" refusal of a stop on a stopped object.
func notActive(err error) bool {
	var e golibvirt.Error
	return errors.As(err, &e) && golibvirt.ErrorNumber(e.Code) == golibvirt.ErrOperationInvalid
}

// Network returns the named network as libvirt reports it (inactive definition, so what was
// defined rather than live runtime state), whether it exists, and whether it is active.
func (c *Conn) Network(name string) (n *libvirtxml.Network, active, found bool, err error) {
	h, err := c.l.NetworkLookupByName(name)
	if notFound(err) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, fmt.Errorf("look up network %s: %w", name, err)
	}
	flags := uint32(golibvirt.NetworkXMLInactive)
	if c.IsTest() {
		flags = 0 // the test driver refuses the flag; its networks have no live state anyway
	}
	x, err := c.l.NetworkGetXMLDesc(h, flags)
	if err != nil {
		return nil, false, true, fmt.Errorf("network %s XML: %w", name, err)
	}
	n = &libvirtxml.Network{}
	if err := n.Unmarshal(x); err != nil {
		return nil, false, true, fmt.Errorf("network %s XML: %w", name, err)
	}
	a, err := c.l.NetworkIsActive(h)
	return n, a == 1, true, err
}

// CreateNetwork defines n, marks it autostart and starts it (create-network.sh: net-define,
// net-autostart, net-start). Starting creates the bridge and the network's dnsmasq.
func (c *Conn) CreateNetwork(n *libvirtxml.Network) error {
	x, err := n.Marshal()
	if err != nil {
		return err
	}
	h, err := c.l.NetworkDefineXML(x)
	if err != nil {
		return fmt.Errorf("define network %s: %w", n.Name, err)
	}
	if err := c.l.NetworkSetAutostart(h, 1); err != nil {
		return fmt.Errorf("autostart network %s: %w", n.Name, err)
	}
	return c.StartNetwork(n.Name)
}

// StartNetwork starts a defined network; starting an active one is not an error.
func (c *Conn) StartNetwork(name string) error {
	h, err := c.l.NetworkLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up network %s: %w", name, err)
	}
	if a, err := c.l.NetworkIsActive(h); err == nil && a == 1 {
		return nil
	}
	if err := c.l.NetworkCreate(h); err != nil {
		return fmt.Errorf("start network %s: %w", name, err)
	}
	return nil
}

// DeleteNetwork stops and undefines the named network. A missing network is not an error.
func (c *Conn) DeleteNetwork(name string) error {
	h, err := c.l.NetworkLookupByName(name)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up network %s: %w", name, err)
	}
	if err := c.l.NetworkDestroy(h); err != nil && !notActive(err) && !notFound(err) {
		return fmt.Errorf("stop network %s: %w", name, err)
	}
	if err := c.l.NetworkUndefine(h); err != nil && !notFound(err) {
		return fmt.Errorf("undefine network %s: %w", name, err)
	}
	return nil
}

// Pool returns the named storage pool, whether it is active, and whether it exists.
func (c *Conn) Pool(name string) (p *libvirtxml.StoragePool, active, found bool, err error) {
	h, err := c.l.StoragePoolLookupByName(name)
	if notFound(err) {
		return nil, false, false, nil
	}
	if err != nil {
		return nil, false, false, fmt.Errorf("look up pool %s: %w", name, err)
	}
	flags := golibvirt.StorageXMLInactive
	if c.IsTest() {
		flags = 0
	}
	x, err := c.l.StoragePoolGetXMLDesc(h, flags)
	if err != nil {
		return nil, false, true, fmt.Errorf("pool %s XML: %w", name, err)
	}
	p = &libvirtxml.StoragePool{}
	if err := p.Unmarshal(x); err != nil {
		return nil, false, true, fmt.Errorf("pool %s XML: %w", name, err)
	}
	a, err := c.l.StoragePoolIsActive(h)
	return p, a == 1, true, err
}

// CreatePool defines p, builds it (a dir pool: mkdir of its target), marks it autostart and
// starts it (create-pool.sh: pool-define-as, pool-build, pool-autostart, pool-start).
func (c *Conn) CreatePool(p *libvirtxml.StoragePool) error {
	x, err := p.Marshal()
	if err != nil {
		return err
	}
	h, err := c.l.StoragePoolDefineXML(x, 0)
	if err != nil {
		return fmt.Errorf("define pool %s: %w", p.Name, err)
	}
	if err := c.l.StoragePoolBuild(h, 0); err != nil {
		return fmt.Errorf("build pool %s (mkdir %s): %w", p.Name, p.Target.Path, err)
	}
	if err := c.l.StoragePoolSetAutostart(h, 1); err != nil {
		return fmt.Errorf("autostart pool %s: %w", p.Name, err)
	}
	return c.StartPool(p.Name)
}

// StartPool starts a defined pool; an active pool is left alone.
func (c *Conn) StartPool(name string) error {
	h, err := c.l.StoragePoolLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up pool %s: %w", name, err)
	}
	if a, err := c.l.StoragePoolIsActive(h); err == nil && a == 1 {
		return nil
	}
	if err := c.l.StoragePoolCreate(h, 0); err != nil {
		return fmt.Errorf("start pool %s: %w", name, err)
	}
	return nil
}

// DeletePool stops the pool, removes its directory when empty (pool-delete refuses a
// non-empty one: labbuild never removes files it did not make) and undefines it. A missing
// pool is not an error.
func (c *Conn) DeletePool(name string) error {
	h, err := c.l.StoragePoolLookupByName(name)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up pool %s: %w", name, err)
	}
	if a, _ := c.l.StoragePoolIsActive(h); a == 1 {
		if err := c.l.StoragePoolDestroy(h); err != nil && !notActive(err) {
			return fmt.Errorf("stop pool %s: %w", name, err)
		}
	}
	_ = c.l.StoragePoolDelete(h, golibvirt.StoragePoolDeleteNormal) // rmdir; fails when not empty
	if err := c.l.StoragePoolUndefine(h); err != nil && !notFound(err) {
		return fmt.Errorf("undefine pool %s: %w", name, err)
	}
	return nil
}

// Volume returns volume name of pool as libvirt reports it (capacity in bytes, its path) and
// whether it exists.
func (c *Conn) Volume(pool, name string) (*libvirtxml.StorageVolume, bool, error) {
	ph, err := c.l.StoragePoolLookupByName(pool)
	if notFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("look up pool %s: %w", pool, err)
	}
	_ = c.l.StoragePoolRefresh(ph, 0) // files made or removed behind libvirt's back
	var x string
	for attempt := 0; ; attempt++ {
		vh, err := c.l.StorageVolLookupByName(ph, name)
		if notFound(err) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("look up volume %s/%s: %w", pool, name, err)
		}
		x, err = c.l.StorageVolGetXMLDesc(vh, 0)
		// Another target's pool refresh (-j) between the lookup and the read replaces the
		// pool's volume objects, and the handle reads as "not found": look it up again, after
		// a pause that grows, since under -j the other volume targets refresh the same pool
		// one after another (three immediate retries lost that race once in a full test run).
		if err != nil && notFound(err) && attempt < 10 {
			time.Sleep(time.Duration(attempt+1) * 20 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, true, fmt.Errorf("volume %s/%s XML: %w", pool, name, err)
		}
		break
	}
	v := &libvirtxml.StorageVolume{}
	if err := v.Unmarshal(x); err != nil {
		return nil, true, fmt.Errorf("volume %s/%s XML: %w", pool, name, err)
	}
	return v, true, nil
}

// CreateVolume creates v in pool and returns its path.
func (c *Conn) CreateVolume(pool string, v *libvirtxml.StorageVolume) (string, error) {
	ph, err := c.l.StoragePoolLookupByName(pool)
	if err != nil {
		return "", fmt.Errorf("look up pool %s (build libvirt/pool first): %w", pool, err)
	}
	x, err := v.Marshal()
	if err != nil {
		return "", err
	}
	vh, err := c.l.StorageVolCreateXML(ph, x, 0)
	if err != nil {
		return "", fmt.Errorf("create volume %s/%s: %w", pool, v.Name, err)
	}
	p, err := c.l.StorageVolGetPath(vh)
	if err != nil {
		return "", fmt.Errorf("volume %s/%s path: %w", pool, v.Name, err)
	}
	return p, nil
}

// DeleteVolume deletes volume name from pool. A missing volume or pool is not an error.
func (c *Conn) DeleteVolume(pool, name string) error {
	ph, err := c.l.StoragePoolLookupByName(pool)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up pool %s: %w", pool, err)
	}
	vh, err := c.l.StorageVolLookupByName(ph, name)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up volume %s/%s: %w", pool, name, err)
	}
	if err := c.l.StorageVolDelete(vh, golibvirt.StorageVolDeleteNormal); err != nil && !notFound(err) {
		return fmt.Errorf("delete volume %s/%s: %w", pool, name, err)
	}
	return nil
}

// VolumeNames returns the names of pool's volumes, sorted; none when the pool does not exist.
func (c *Conn) VolumeNames(pool string) ([]string, error) {
	ph, err := c.l.StoragePoolLookupByName(pool)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up pool %s: %w", pool, err)
	}
	_ = c.l.StoragePoolRefresh(ph, 0)
	vols, _, err := c.l.StoragePoolListAllVolumes(ph, 1, 0)
	if err != nil {
		return nil, fmt.Errorf("list volumes of pool %s: %w", pool, err)
	}
	out := make([]string, 0, len(vols))
	for _, v := range vols {
		out = append(out, v.Name)
	}
	sort.Strings(out)
	return out, nil
}

// DomainState is a domain's run state as libvirt names it (virDomainState).
type DomainState int32

// States labbuild looks at.
const (
	DomainNoState  DomainState = DomainState(golibvirt.DomainNostate)
	DomainRunning  DomainState = DomainState(golibvirt.DomainRunning)
	DomainPaused   DomainState = DomainState(golibvirt.DomainPaused)
	DomainShutoff  DomainState = DomainState(golibvirt.DomainShutoff)
	DomainShutdown DomainState = DomainState(golibvirt.DomainShutdown)
)

// Domain returns the named domain's inactive (persistent) definition, its state, and whether it
// exists.
func (c *Conn) Domain(name string) (*libvirtxml.Domain, DomainState, bool, error) {
	h, err := c.l.DomainLookupByName(name)
	if notFound(err) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("look up domain %s: %w", name, err)
	}
	flags := golibvirt.DomainXMLInactive
	if c.IsTest() {
		flags = 0
	}
	x, err := c.l.DomainGetXMLDesc(h, flags)
	if err != nil {
		return nil, 0, true, fmt.Errorf("domain %s XML: %w", name, err)
	}
	d := &libvirtxml.Domain{}
	if err := d.Unmarshal(x); err != nil {
		return nil, 0, true, fmt.Errorf("domain %s XML: %w", name, err)
	}
	st, _, err := c.l.DomainGetState(h, 0)
	if err != nil {
		return d, 0, true, fmt.Errorf("domain %s state: %w", name, err)
	}
	return d, DomainState(st), true, nil
}

// DefineDomain defines (or redefines) d. A running domain keeps running; the new definition
// applies at its next start, as `virsh define` does.
func (c *Conn) DefineDomain(d *libvirtxml.Domain) error {
	x, err := d.Marshal()
	if err != nil {
		return err
	}
	if _, err := c.l.DomainDefineXML(x); err != nil {
		return fmt.Errorf("define domain %s: %w", d.Name, err)
	}
	return nil
}

// StartDomain starts a defined domain, paused when paused is set (its CPUs wait for a resume).
func (c *Conn) StartDomain(name string, paused bool) error {
	h, err := c.l.DomainLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	var flags uint32
	if paused {
		flags = uint32(golibvirt.DomainStartPaused)
	}
	if _, err := c.l.DomainCreateWithFlags(h, flags); err != nil {
		return fmt.Errorf("start domain %s: %w", name, err)
	}
	return nil
}

// StopDomain powers the domain off at once (virsh destroy); a stopped domain is left alone.
func (c *Conn) StopDomain(name string) error {
	h, err := c.l.DomainLookupByName(name)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	if err := c.l.DomainDestroy(h); err != nil && !notActive(err) && !notFound(err) {
		return fmt.Errorf("stop domain %s: %w", name, err)
	}
	return nil
}

// DeleteDomain stops and undefines the domain with its managed save image, snapshot and
// checkpoint metadata and NVRAM, so nothing of it is left in libvirt. Its disk volume is the
// volume target's to delete. A missing domain is not an error.
func (c *Conn) DeleteDomain(name string) error {
	if err := c.StopDomain(name); err != nil {
		return err
	}
	h, err := c.l.DomainLookupByName(name)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	flags := golibvirt.DomainUndefineManagedSave | golibvirt.DomainUndefineSnapshotsMetadata |
		golibvirt.DomainUndefineNvram | golibvirt.DomainUndefineCheckpointsMetadata
	if c.IsTest() {
		flags = golibvirt.DomainUndefineManagedSave | golibvirt.DomainUndefineSnapshotsMetadata // all it supports
	}
	if err := c.l.DomainUndefineFlags(h, flags); err != nil && !notFound(err) {
		return fmt.Errorf("undefine domain %s: %w", name, err)
	}
	return nil
}

// UpdateNetwork applies edits (render/libvirt's NetworkChanges) to the named network with
// virNetworkUpdate, to its persistent definition and, when it runs, to the live network: the
// bridge stays and libvirt has the network's dnsmasq re-read its hosts files (SIGHUP) or
// restarts it, so no VM loses its link. It stops at the first refused edit and says which.
func (c *Conn) UpdateNetwork(name string, edits []rl.NetworkEdit) error {
	h, err := c.l.NetworkLookupByName(name)
	if err != nil {
		return fmt.Errorf("look up network %s: %w", name, err)
	}
	flags := golibvirt.NetworkUpdateAffectConfig
	if a, err := c.l.NetworkIsActive(h); err == nil && a == 1 {
		flags |= golibvirt.NetworkUpdateAffectLive
	}
	sections := map[string]golibvirt.NetworkUpdateSection{
		rl.SectionDNSHost: golibvirt.NetworkSectionDNSHost, rl.SectionDNSSRV: golibvirt.NetworkSectionDNSSrv,
		rl.SectionDHCPHost: golibvirt.NetworkSectionIPDhcpHost,
	}
	commands := map[string]golibvirt.NetworkUpdateCommand{
		rl.EditDelete: golibvirt.NetworkUpdateCommandDelete, rl.EditAdd: golibvirt.NetworkUpdateCommandAddLast,
	}
	for _, e := range edits {
		sec, ok1 := sections[e.Section]
		cmd, ok2 := commands[e.Command]
		if !ok1 || !ok2 {
			return fmt.Errorf("network %s: unknown edit %s %s", name, e.Command, e.Section)
		}
		// parentIndex -1: the first <ip> (the lab network has one) for DHCP hosts.
		if err := c.l.NetworkUpdateCompat(h, cmd, sec, -1, e.XML, flags); err != nil {
			return fmt.Errorf("network %s: %s: %w", name, e, err)
		}
	}
	return nil
}

// LiveDomain returns the running domain's live definition (what QEMU runs with now, which
// differs from the persistent one after a resize until the next power cycle).
func (c *Conn) LiveDomain(name string) (*libvirtxml.Domain, error) {
	h, err := c.l.DomainLookupByName(name)
	if err != nil {
		return nil, fmt.Errorf("look up domain %s: %w", name, err)
	}
	x, err := c.l.DomainGetXMLDesc(h, 0)
	if err != nil {
		return nil, fmt.Errorf("domain %s XML: %w", name, err)
	}
	d := &libvirtxml.Domain{}
	if err := d.Unmarshal(x); err != nil {
		return nil, fmt.Errorf("domain %s XML: %w", name, err)
	}
	return d, nil
}

// LiveInterfaces returns the running domain's NICs as libvirt reports them live, one
// "<bridge> <tap device> <mac>" each: what a VM is really attached to right now (a replaced
// network leaves a running domain's tap outside the new bridge).
func (c *Conn) LiveInterfaces(name string) ([]string, error) {
	d, err := c.LiveDomain(name)
	if err != nil {
		return nil, err
	}
	var out []string
	if d.Devices != nil {
		for _, i := range d.Devices.Interfaces {
			var br, dev, mac string
			if i.Source != nil && i.Source.Network != nil {
				br = i.Source.Network.Bridge
			}
			if i.Target != nil {
				dev = i.Target.Dev
			}
			if i.MAC != nil {
				mac = i.MAC.Address
			}
			out = append(out, br+" "+dev+" "+mac)
		}
	}
	return out, nil
}

// Networks returns every network libvirt knows (active or not), by name, as their persistent
// definitions: what another lab on the same host has made.
func (c *Conn) Networks() (map[string]*libvirtxml.Network, error) {
	nets, _, err := c.l.ConnectListAllNetworks(1, 0)
	if err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	out := make(map[string]*libvirtxml.Network, len(nets))
	for _, h := range nets {
		n, _, found, err := c.Network(h.Name)
		if err != nil {
			return nil, err
		}
		if found {
			out[h.Name] = n
		}
	}
	return out, nil
}

// DomainNames returns the names of every domain defined or running on the connection, sorted.
func (c *Conn) DomainNames() ([]string, error) {
	ds, _, err := c.l.ConnectListAllDomains(1, 0) // 1: return the domains (go-libvirt's NeedResults)
	if err != nil {
		return nil, fmt.Errorf("list domains: %w", err)
	}
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Name)
	}
	sort.Strings(out)
	return out, nil
}

// Remote reports whether the daemon is on another machine: the URI names a host
// (qemu+ssh://host/system, qemu+tcp://host:16509/system). Files on this machine — Ignition,
// the RHCOS image — are then not paths the daemon's QEMU can open: they are uploaded into its
// pool (UploadVolume) and referred to by the volume's path there.
func (c *Conn) Remote() bool {
	u, err := url.Parse(c.uri)
	return err == nil && u.Host != ""
}

// UploadVolume copies size bytes from r into volume name of pool (virStorageVolUpload over
// the RPC stream), replacing a volume of that name, and returns its path on the daemon's
// host. format is the volume's format ("raw" for Ignition, "qcow2" for a disk image).
func (c *Conn) UploadVolume(pool, name, format string, r io.Reader, size int64) (string, error) {
	if err := c.DeleteVolume(pool, name); err != nil {
		return "", err
	}
	v := &libvirtxml.StorageVolume{
		Name:     name,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: uint64(size)},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: format}},
	}
	path, err := c.CreateVolume(pool, v)
	if err != nil {
		return "", err
	}
	ph, err := c.l.StoragePoolLookupByName(pool)
	if err != nil {
		return "", fmt.Errorf("look up pool %s: %w", pool, err)
	}
	vh, err := c.l.StorageVolLookupByName(ph, name)
	if err != nil {
		return "", fmt.Errorf("look up volume %s/%s: %w", pool, name, err)
	}
	if err := c.l.StorageVolUpload(vh, r, 0, uint64(size), 0); err != nil {
		return "", fmt.Errorf("upload volume %s/%s (%d bytes): %w", pool, name, size, err)
	}
	return path, nil
}

// PoolPath returns the directory of a dir pool on the daemon's host.
func (c *Conn) PoolPath(pool string) (string, error) {
	p, _, found, err := c.Pool(pool)
	if err != nil {
		return "", err
	}
	if !found || p.Target == nil || p.Target.Path == "" {
		return "", fmt.Errorf("pool %s has no path (build libvirt/pool first)", pool)
	}
	return p.Target.Path, nil
}
