package libvirt

import (
	"fmt"
	"path"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// PoolSpec is the lab's dir storage pool (create-pool.sh: pool-define-as NAME dir --target PATH).
type PoolSpec struct {
	Name string // libvirt.pool
	Path string // libvirt.poolPath, absolute
}

// Pool returns the dir pool of s, or an error naming the bad field.
func Pool(s PoolSpec) (*libvirtxml.StoragePool, error) {
	if s.Name == "" {
		return nil, fmt.Errorf("libvirt.pool is empty: name the storage pool")
	}
	if !path.IsAbs(s.Path) || path.Clean(s.Path) != s.Path {
		return nil, fmt.Errorf("libvirt.poolPath %q: want a clean absolute directory", s.Path)
	}
	return &libvirtxml.StoragePool{
		Type:   "dir",
		Name:   s.Name,
		Target: &libvirtxml.StoragePoolTarget{Path: s.Path, Permissions: &libvirtxml.StoragePoolTargetPermissions{Mode: "0755"}},
	}, nil
}

// PoolXML returns Pool(s) as XML.
func PoolXML(s PoolSpec) ([]byte, error) {
	p, err := Pool(s)
	if err != nil {
		return nil, err
	}
	return marshal(p)
}

// GiB is the number of bytes in a GiB; volume capacities are rendered in bytes, as libvirt
// reports them back.
const GiB = 1 << 30

// VolumeSpec is one node's disk: a thin qcow2 (create-vms.sh: qemu-img create -f qcow2), with
// an optional backing file (the RHCOS QEMU image, so the node boots without an installer).
type VolumeSpec struct {
	Name        string // file name inside the pool: "<cluster>-<node>.qcow2"
	CapacityGiB int
	// BackingFile, when set, is the absolute path of a qcow2 image the volume overlays.
	BackingFile string
}

// VolumeName returns a node's volume name, "<cluster>-<node>.qcow2" as create-vms.sh names the
// disk; the cluster prefix keeps clusters sharing a pool apart.
func VolumeName(cluster, node string) string { return cluster + "-" + node + ".qcow2" }

// Volume returns the qcow2 volume of s (allocation 0: thin).
func Volume(s VolumeSpec) (*libvirtxml.StorageVolume, error) {
	if s.Name == "" || strings.Contains(s.Name, "/") {
		return nil, fmt.Errorf("volume name %q: want a file name", s.Name)
	}
	if s.CapacityGiB <= 0 {
		return nil, fmt.Errorf("volume %s: diskGiB %d: want a positive size in GiB (sizes.<role>.diskGiB)", s.Name, s.CapacityGiB)
	}
	v := &libvirtxml.StorageVolume{
		Name:       s.Name,
		Allocation: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 0},
		Capacity:   &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: uint64(s.CapacityGiB) * GiB},
		Target:     &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}},
	}
	if s.BackingFile != "" {
		if !path.IsAbs(s.BackingFile) {
			return nil, fmt.Errorf("volume %s: backing file %q must be absolute", s.Name, s.BackingFile)
		}
		v.BackingStore = &libvirtxml.StorageVolumeBackingStore{Path: s.BackingFile, Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}}
	}
	return v, nil
}

// VolumeXML returns Volume(s) as XML.
func VolumeXML(s VolumeSpec) ([]byte, error) {
	v, err := Volume(s)
	if err != nil {
		return nil, err
	}
	return marshal(v)
}

// IgnitionFWCfgName is the QEMU fw_cfg key from which Ignition's QEMU platform reads the config
// (coreos/ignition internal/providers/qemu: "opt/com.coreos/config").
const IgnitionFWCfgName = "opt/com.coreos/config"

// DomainSpec is one node's VM.
type DomainSpec struct {
	// Name is the domain name, "<cluster>-<node>" (create-vms.sh: ocp4-master-0).
	Name string
	// Type is the libvirt domain type: "kvm" on hardware with virtualization, "qemu" (software
	// emulation) where KVM cannot run guests, "test" for libvirt's test driver.
	Type      string
	VCPUs     int
	MemoryMiB int
	// Disk is the absolute path of the node's volume (virtio, vda, qcow2).
	Disk string
	// Network is the libvirt network of the NIC (virtio) and MAC its address.
	Network string
	MAC     string
	// Ignition, when set, is the absolute path of the node's Ignition config, handed to the guest
	// through fw_cfg (IgnitionFWCfgName): RHCOS booting the QEMU image reads it on first boot.
	Ignition string
	// ISO, when set, is a boot CD-ROM (the live ISO path); boot order is then hd, cdrom, as
	// create-vms.sh sets it, so an empty disk falls through to the ISO.
	ISO string
	// Kernel, Initrd and Cmdline, when Kernel is set, boot the guest directly (tests).
	Kernel, Initrd, Cmdline string
	// UUID, when set, is the domain's libvirt UUID (UUID(cluster, node) on platform
	// baremetal: the BMC's System id); libvirt picks a random one otherwise.
	UUID string
}

// Domain returns the libvirt domain of s: x86_64 hvm with ACPI (a guest needs it to power off),
// vCPUs, memory in MiB, a virtio disk and NIC, a serial console on a pty and VNC on 127.0.0.1
// (stage 02 listened on 0.0.0.0; loopback keeps the console off the LAN: use an SSH tunnel).
func Domain(s DomainSpec) (*libvirtxml.Domain, error) {
	switch {
	case s.Name == "":
		return nil, fmt.Errorf("domain name is empty")
	case s.Type == "":
		return nil, fmt.Errorf("domain %s: libvirt.domainType is empty: want kvm, qemu or test", s.Name)
	case s.VCPUs <= 0 || s.MemoryMiB <= 0:
		return nil, fmt.Errorf("domain %s: vcpus %d, memoryMiB %d: want positive sizes (sizes.<role> or the node's own)", s.Name, s.VCPUs, s.MemoryMiB)
	case !path.IsAbs(s.Disk):
		return nil, fmt.Errorf("domain %s: disk %q must be an absolute path", s.Name, s.Disk)
	case s.Network == "":
		return nil, fmt.Errorf("domain %s: no network", s.Name)
	}
	if _, err := parseMAC(s.MAC); err != nil {
		return nil, fmt.Errorf("domain %s: mac %q: %v", s.Name, s.MAC, err)
	}
	d := &libvirtxml.Domain{
		Type:   s.Type,
		Name:   s.Name,
		UUID:   s.UUID,
		Memory: &libvirtxml.DomainMemory{Value: uint(s.MemoryMiB), Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: uint(s.VCPUs)},
		OS: &libvirtxml.DomainOS{
			Type: &libvirtxml.DomainOSType{Arch: "x86_64", Type: "hvm"},
		},
		Features:   &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		OnCrash:    "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Disks: []libvirtxml.DomainDisk{{
				Device: "disk",
				Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
				Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.Disk}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			}},
			Interfaces: []libvirtxml.DomainInterface{{
				MAC:    &libvirtxml.DomainInterfaceMAC{Address: strings.ToLower(s.MAC)},
				Source: &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: s.Network}},
				Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
			}},
			Serials: []libvirtxml.DomainSerial{{
				Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
				Target: &libvirtxml.DomainSerialTarget{Port: new(uint(0))},
			}},
			Consoles: []libvirtxml.DomainConsole{{
				Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
				Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: new(uint(0))},
			}},
			Graphics: []libvirtxml.DomainGraphic{{
				VNC: &libvirtxml.DomainGraphicVNC{Port: -1, AutoPort: "yes", Listen: "127.0.0.1"},
			}},
		},
	}
	if s.Type == "test" {
		// The test driver has no pty or VNC backends worth modelling; keep its domains minimal.
		d.Devices.Serials, d.Devices.Consoles, d.Devices.Graphics = nil, nil, nil
	}
	if s.Kernel != "" {
		d.OS.Kernel, d.OS.Initrd, d.OS.Cmdline = s.Kernel, s.Initrd, s.Cmdline
	} else {
		d.OS.BootDevices = []libvirtxml.DomainBootDevice{{Dev: "hd"}}
	}
	if s.ISO != "" {
		d.Devices.Disks = append(d.Devices.Disks, libvirtxml.DomainDisk{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.ISO}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "sata"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		})
		if s.Kernel == "" {
			d.OS.BootDevices = append(d.OS.BootDevices, libvirtxml.DomainBootDevice{Dev: "cdrom"})
		}
	}
	if s.Ignition != "" {
		if !path.IsAbs(s.Ignition) {
			return nil, fmt.Errorf("domain %s: ignition %q must be an absolute path", s.Name, s.Ignition)
		}
		d.SysInfo = []libvirtxml.DomainSysInfo{{FWCfg: &libvirtxml.DomainSysInfoFWCfg{
			Entry: []libvirtxml.DomainSysInfoEntry{{Name: IgnitionFWCfgName, File: s.Ignition}},
		}}}
	}
	return d, nil
}

// DomainXML returns Domain(s) as XML.
func DomainXML(s DomainSpec) ([]byte, error) {
	d, err := Domain(s)
	if err != nil {
		return nil, err
	}
	return marshal(d)
}
