package bmc

import (
	"fmt"
	"sync"
	"time"

	"libvirt.org/go/libvirtxml"
)

// fakeHV is a Hypervisor in memory that behaves as libvirt does for the calls the BMC makes:
// Start copies the persistent definition to the live one, Define changes only the persistent
// one, ChangeMedia only the live CD-ROM (and fails without one, as libvirt does), and a
// Shutdown is obeyed at once (a cooperative guest).
type fakeHV struct {
	mu   sync.Mutex
	doms map[string]*fakeDom
	// calls counts calls by name, for assertions on what the BMC did.
	calls map[string]int
	// delay, when set, is slept before each call, so that concurrent requests interleave
	// between the BMC's calls as they do against a real libvirtd (which answers in ms).
	delay time.Duration
}

type fakeDom struct {
	name, pers, live, meta string
	on                     bool
}

func newFakeHV() *fakeHV { return &fakeHV{doms: map[string]*fakeDom{}, calls: map[string]int{}} }

// add defines a lab-like domain (boot from hd, a virtio disk, no CD-ROM).
func (f *fakeHV) add(uuid, name string) {
	d := &libvirtxml.Domain{
		Type: "qemu", Name: name, UUID: uuid,
		Memory: &libvirtxml.DomainMemory{Value: 8192, Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 2},
		OS:     &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Arch: "x86_64", Type: "hvm"}, BootDevices: []libvirtxml.DomainBootDevice{{Dev: "hd"}}},
		Devices: &libvirtxml.DomainDeviceList{Disks: []libvirtxml.DomainDisk{{
			Device: "disk", Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: "/pool/" + name + ".qcow2"}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
		}}},
	}
	x, err := d.Marshal()
	if err != nil {
		panic(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.doms[uuid] = &fakeDom{name: name, pers: x}
}

func (f *fakeHV) count(name string) { f.calls[name]++ }

func (f *fakeHV) wait() {
	if f.delay > 0 {
		time.Sleep(f.delay)
	}
}

func (f *fakeHV) List() ([]DomainRef, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []DomainRef
	for u, d := range f.doms {
		out = append(out, DomainRef{UUID: u, Name: d.name})
	}
	return out, nil
}

func (f *fakeHV) dom(uuid string) (*fakeDom, error) {
	d, ok := f.doms[uuid]
	if !ok {
		return nil, ErrNoDomain
	}
	return d, nil
}

func (f *fakeHV) Get(uuid string) (string, string, bool, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.dom(uuid)
	if err != nil {
		return "", "", false, err
	}
	if !d.on {
		return d.pers, "", false, nil
	}
	return d.pers, d.live, true, nil
}

func (f *fakeHV) Define(x string) error {
	f.wait()
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("Define")
	fd, err := f.dom(d.UUID)
	if err != nil {
		return err
	}
	fd.pers = x
	return nil
}

func (f *fakeHV) Start(uuid string) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("Start")
	d, err := f.dom(uuid)
	if err != nil {
		return err
	}
	if d.on {
		return fmt.Errorf("Requested operation is not valid: domain is already running")
	}
	d.on, d.live = true, d.pers
	return nil
}

func (f *fakeHV) ForceOff(uuid string) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("ForceOff")
	d, err := f.dom(uuid)
	if err != nil {
		return err
	}
	d.on, d.live = false, ""
	return nil
}

func (f *fakeHV) Shutdown(uuid string) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("Shutdown")
	d, err := f.dom(uuid)
	if err != nil {
		return err
	}
	d.on, d.live = false, ""
	return nil
}

func (f *fakeHV) ChangeMedia(uuid, diskXML string) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count("ChangeMedia")
	d, err := f.dom(uuid)
	if err != nil {
		return err
	}
	if !d.on {
		return fmt.Errorf("Requested operation is not valid: domain is not running")
	}
	var disk libvirtxml.DomainDisk
	if err := disk.Unmarshal(diskXML); err != nil {
		return err
	}
	var live libvirtxml.Domain
	if err := live.Unmarshal(d.live); err != nil {
		return err
	}
	for i := range live.Devices.Disks {
		k := &live.Devices.Disks[i]
		if k.Device == "cdrom" && k.Target.Dev == disk.Target.Dev {
			k.Source = disk.Source
			x, err := live.Marshal()
			d.live = x
			return err
		}
	}
	return fmt.Errorf("Operation not supported: no cdrom %s", disk.Target.Dev)
}

func (f *fakeHV) Metadata(uuid string) (string, error) {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.dom(uuid)
	if err != nil {
		return "", err
	}
	return d.meta, nil
}

func (f *fakeHV) SetMetadata(uuid, x string) error {
	f.wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	d, err := f.dom(uuid)
	if err != nil {
		return err
	}
	d.meta = x
	return nil
}
