package targets

// The libvirt family's inputs: the connection, the previous record, and the network, pool,
// volume and domain specs read from the config (libvirt.go declares the targets).

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sync"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/virt"
)

// lvConnect opens libvirt at the URI the target's Reads place it at (libvirt.uri, or its
// host's on a lab spread over several) and returns the host's name ("" on a one-host lab).
func lvConnect(s *engine.Step) (*virt.Conn, string, error) {
	uri, host, err := stepHost(s)
	if err != nil {
		return nil, "", err
	}
	c, err := virt.Connect(uri)
	if err != nil && host != "" {
		return nil, host, fmt.Errorf("%s: host %s: %w", s.Target().Name, host, err)
	}
	return c, host, err
}

// lvPrev returns the previous run's record, or ok=false when there is none.
func lvPrev(s *engine.Step) (lvRecord, bool, error) {
	r, ok, err := readRecord[lvRecord](s, recordFile)
	if err != nil {
		return r, false, fmt.Errorf("%w (labbuild destroy cannot use it; remove the object with virsh)", err)
	}
	return r, ok, nil
}

func lvWrite(s *engine.Step, xml []byte, xmlName string, r lvRecord) error {
	r.Config = lvConfig(s)
	if err := s.WriteFile(xmlName, xml, 0o644); err != nil {
		return err
	}
	return writeRecord(s, recordFile, r)
}

// lvNetworkSpec assembles the network from the declared config values, with the records of
// nodes (the names libvirt/dns declared; none for libvirt/network).
func lvNetworkSpec(s *engine.Step, nodes []string) (rl.NetworkSpec, error) {
	var sp rl.NetworkSpec
	var cluster, base string
	for _, f := range []struct {
		p string
		v *string
	}{
		{lab.LibvirtNetwork, &sp.Name}, {lab.ClusterName, &cluster}, {lab.ClusterBaseDomain, &base},
		{lab.NetworkMachineNetwork, &sp.MachineNetwork}, {lab.NetworkGateway, &sp.Gateway},
		{lab.NetworkAPIVIP, &sp.APIVIP}, {lab.NetworkIngressVIP, &sp.IngressVIP},
		{lab.NetworkDHCPStart, &sp.DHCPStart}, {lab.NetworkDHCPEnd, &sp.DHCPEnd},
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
	var err error
	if sp.MTU, err = stepInt(s, lab.DerivedMachineMTU); err != nil {
		return sp, err
	}
	for _, name := range nodes {
		n := rl.Node{Name: name}
		var err error
		if n.IP, err = s.String(lab.NodePath(name, lab.NodeIP)); err != nil {
			return sp, err
		}
		if n.Role, err = s.String(lab.NodePath(name, lab.NodeRole)); err != nil {
			return sp, err
		}
		if n.MAC, err = nodeMAC(s, cluster, name); err != nil {
			return sp, err
		}
		sp.Nodes = append(sp.Nodes, n)
	}
	return sp, nil
}

func lvPoolSpec(s *engine.Step) (rl.PoolSpec, error) {
	var sp rl.PoolSpec
	var err error
	if sp.Name, err = s.String(lab.LibvirtPool); err != nil {
		return sp, err
	}
	sp.Path, err = s.String(lab.LibvirtPoolPath)
	return sp, err
}

// lvSize returns the node's size field f (NodeVCPUs, NodeMemoryMiB, NodeDiskGiB): its own
// when declared, its role's otherwise.
func lvSize(s *engine.Step, node string, f lab.NodeField) (int, error) {
	var v int
	p := lab.NodePath(node, f)
	if !slices.Contains(s.Target().Reads, p) {
		role, err := s.String(lab.NodePath(node, lab.NodeRole))
		if err != nil {
			return 0, err
		}
		p = lab.SizePath(lvRoleSizes(role), f)
	}
	if err := s.Value(p, &v); err != nil {
		return 0, err
	}
	if v <= 0 {
		return 0, fmt.Errorf("%s: %s is %d: want a positive number", s.Target().Name, p, v)
	}
	return v, nil
}

func lvVolumeSpec(s *engine.Step, node string) (pool string, sp rl.VolumeSpec, err error) {
	if pool, err = s.String(lab.LibvirtPool); err != nil {
		return
	}
	cluster, err := s.String(lab.ClusterName)
	if err != nil {
		return
	}
	sp.Name = rl.VolumeName(cluster, node)
	if sp.CapacityGiB, err = lvSize(s, node, lab.NodeDiskGiB); err != nil {
		return
	}
	// With rhcos.imageURL the disk overlays the verified RHCOS image (a thin qcow2 on top).
	if slices.Contains(s.Target().Deps, "rhcos/image") {
		var r rhcosRecord
		if r, err = depRecord[rhcosRecord](s, "rhcos/image", rhcosRecordFile); err != nil {
			return
		}
		sp.BackingFile = r.Path
	}
	return
}

// DomainName is node's libvirt domain: <cluster.name>-<node> (rehearsal-master-0), as kcli and
// dev-scripts name theirs, so two labs on one host do not collide.
func DomainName(cluster, node string) string { return cluster + "-" + node }

func lvDomainSpec(s *engine.Step, node string) (rl.DomainSpec, error) {
	var sp rl.DomainSpec
	cluster, err := s.String(lab.ClusterName)
	if err != nil {
		return sp, err
	}
	sp.Name = DomainName(cluster, node)
	if slices.Contains(s.Target().Reads, lab.Platform) {
		if p, err := s.String(lab.Platform); err != nil {
			return sp, err
		} else if p == lab.PlatformBaremetal {
			sp.UUID = rl.UUID(cluster, node) // the BMC's System id, known before the domain exists
		}
	}
	if sp.Type, err = s.String(lab.LibvirtDomainType); err != nil {
		return sp, err
	}
	if sp.Network, err = s.String(lab.LibvirtNetwork); err != nil {
		return sp, err
	}
	if sp.VCPUs, err = lvSize(s, node, lab.NodeVCPUs); err != nil {
		return sp, err
	}
	if sp.MemoryMiB, err = lvSize(s, node, lab.NodeMemoryMiB); err != nil {
		return sp, err
	}
	if sp.MAC, err = nodeMAC(s, cluster, node); err != nil {
		return sp, err
	}
	vol, err := depRecord[lvRecord](s, "libvirt/volume/"+node, recordFile)
	if err != nil {
		return sp, err
	}
	sp.Disk = vol.Path
	if slices.Contains(s.Target().Deps, "ignition/"+node) {
		// The file is read by QEMU at each start, on the daemon's host: for a remote URI
		// lvDomain uploads it into the pool and points fw_cfg at the volume instead.
		if sp.Ignition, err = s.DepPath("ignition/"+node, node+".ign"); err != nil {
			return sp, err
		}
	}
	if slices.Contains(s.Target().Deps, IgnBootstrapInPlace) {
		// A single node: the live system reads the bootstrap-in-place config from fw_cfg (its
		// ISO's kernel arguments name the qemu platform, rhcos/live-iso); the installed system
		// reads the master Ignition coreos-installer put on the disk, and ignores fw_cfg
		// (platform metal).
		if sp.Ignition, err = s.DepPath(IgnBootstrapInPlace, ignition.BootstrapInPlaceFile); err != nil {
			return sp, err
		}
		live, err := depRecord[rhcosLiveRecord](s, "rhcos/live-iso", rhcosLiveRecordFile)
		if err != nil {
			return sp, err
		}
		sp.ISO = live.Path
	}
	return sp, nil
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

// lvSizeFields are the config fields that size node's VM, as libvirt/vm/<node> declares them:
// its role's vCPUs and memory, then its own where it sets them.
func lvSizeFields(s *engine.Step, node string) ([]string, error) {
	role, err := s.String(lab.NodePath(node, lab.NodeRole))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range []string{
		lab.SizePath(lvRoleSizes(role), lab.NodeVCPUs), lab.SizePath(lvRoleSizes(role), lab.NodeMemoryMiB),
		lab.NodePath(node, lab.NodeVCPUs), lab.NodePath(node, lab.NodeMemoryMiB),
	} {
		if slices.Contains(s.Target().Reads, p) {
			out = append(out, p)
		}
	}
	return out, nil
}
