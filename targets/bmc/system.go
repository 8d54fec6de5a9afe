package bmc

import (
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"libvirt.org/go/libvirtxml"
)

// Redfish's values for ComputerSystem.Boot and ComputerSystem.Reset (DMTF DSP8010 schema
// ComputerSystem.v1_x: BootSource, BootSourceOverrideEnabled, BootSourceOverrideMode;
// Resource.ResetType), as gofish (redfish/computersystem.go) and sushy (sushy/resources/
// system/constants.py) spell them.
var (
	// BootTargets are the BootSourceOverrideTarget values offered; libvirt's <os><boot dev>
	// has one device class for each (BootDevs). None means no override: the disk.
	BootTargets = []string{"None", "Pxe", "Cd", "Hdd"}
	// BootEnabled are the BootSourceOverrideEnabled values: Once applies to the next power-on
	// started by the BMC and then reverts to Disabled, Continuous until changed.
	BootEnabled = []string{"Disabled", "Once", "Continuous"}
	// BootModes are the BootSourceOverrideMode values: UEFI is <os firmware='efi'> (libvirt's
	// firmware auto-selection), Legacy is BIOS.
	BootModes = []string{"UEFI", "Legacy"}
	// ResetTypes are the ComputerSystem.Reset types offered.
	ResetTypes = []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PushPowerButton"}
)

// BootDevs returns the libvirt boot order a BootSourceOverrideTarget sets: the target's device
// class first, then the disk, as sushy-tools' libvirt driver maps them (libvirtdriver.py
// BOOT_DEVICE_MAP: Pxe→network, Cd→cdrom, Hdd→hd). (A function, not a map: no package
// initializer in labbuild's binary.)
func BootDevs(target string) []string {
	switch target {
	case "Pxe":
		return []string{"network", "hd"}
	case "Cd":
		return []string{"cdrom", "hd"}
	}
	return []string{"hd"}
}

// state is the BMC's per-domain state, kept in the domain's persistent <metadata> (MetadataNS):
// the boot override and the image that virtual media holds.
type state struct {
	XMLName     xml.Name `xml:"bmc"`
	BootEnabled string   `xml:"bootEnabled,attr,omitempty"`
	BootTarget  string   `xml:"bootTarget,attr,omitempty"`
	// BaseBoot is the domain's own boot order (space-separated libvirt devices) before the BMC
	// first changed it; Disabled and a spent Once restore it.
	BaseBoot string `xml:"baseBoot,attr,omitempty"`
	// Image is the URL InsertMedia was given, File the local copy attached as the CD-ROM.
	Image string `xml:"image,attr,omitempty"`
	File  string `xml:"file,attr,omitempty"`
	// VerifyCertificate is the virtual CD's VerifyCertificate (PATCHed; false by default).
	VerifyCertificate bool `xml:"verifyCertificate,attr,omitempty"`
}

// system is one domain as the BMC sees it, read under the domain's lock.
type system struct {
	ref        DomainRef
	on         bool
	persistent *libvirtxml.Domain
	live       *libvirtxml.Domain
	st         state
}

func (s *Server) load(ref DomainRef) (*system, error) {
	pers, live, on, err := s.hv.Get(ref.UUID)
	if err != nil {
		return nil, err
	}
	sys := &system{ref: ref, on: on, persistent: &libvirtxml.Domain{}}
	if err := sys.persistent.Unmarshal(pers); err != nil {
		return nil, fmt.Errorf("domain %s XML: %w", ref.Name, err)
	}
	if live != "" {
		sys.live = &libvirtxml.Domain{}
		if err := sys.live.Unmarshal(live); err != nil {
			return nil, fmt.Errorf("domain %s live XML: %w", ref.Name, err)
		}
	}
	m, err := s.hv.Metadata(ref.UUID)
	if err != nil {
		return nil, fmt.Errorf("domain %s metadata: %w", ref.Name, err)
	}
	if m != "" {
		if err := xml.Unmarshal([]byte(m), &sys.st); err != nil {
			return nil, fmt.Errorf("domain %s: BMC metadata: %w", ref.Name, err)
		}
	}
	return sys, nil
}

// save defines the persistent XML, then the metadata (Define keeps the old <metadata> of the
// XML it is given; SetMetadata then replaces the BMC's element).
func (s *Server) save(sys *system, define bool) error {
	if define {
		x, err := sys.persistent.Marshal()
		if err != nil {
			return err
		}
		if err := s.hv.Define(x); err != nil {
			return fmt.Errorf("define domain %s: %w", sys.ref.Name, err)
		}
	}
	b, err := xml.Marshal(sys.st)
	if err != nil {
		return err
	}
	if err := s.hv.SetMetadata(sys.ref.UUID, string(b)); err != nil {
		return fmt.Errorf("domain %s metadata: %w", sys.ref.Name, err)
	}
	return nil
}

func bootOrder(d *libvirtxml.Domain) []string {
	if d == nil || d.OS == nil {
		return nil
	}
	var out []string
	for _, b := range d.OS.BootDevices {
		out = append(out, b.Dev)
	}
	return out
}

func setBootOrder(d *libvirtxml.Domain, devs []string) {
	if d.OS == nil {
		d.OS = &libvirtxml.DomainOS{}
	}
	d.OS.BootDevices = nil
	for _, dev := range devs {
		d.OS.BootDevices = append(d.OS.BootDevices, libvirtxml.DomainBootDevice{Dev: dev})
	}
	// <os><boot> and per-device <boot order> exclude each other in libvirt.
	if d.Devices != nil {
		for i := range d.Devices.Disks {
			d.Devices.Disks[i].Boot = nil
		}
		for i := range d.Devices.Interfaces {
			d.Devices.Interfaces[i].Boot = nil
		}
	}
}

// targetOf is the Redfish target of a libvirt boot order: its first device.
func targetOf(devs []string) string {
	if len(devs) == 0 {
		return "Hdd"
	}
	switch devs[0] {
	case "network":
		return "Pxe"
	case "cdrom":
		return "Cd"
	}
	return "Hdd"
}

// boot reports the system's Boot: the override the BMC holds, or Disabled with the target of
// the domain's own boot order.
func (sys *system) boot() (target, enabled, mode string) {
	enabled, target = sys.st.BootEnabled, sys.st.BootTarget
	if enabled == "" {
		enabled = "Disabled"
	}
	if target == "" || enabled == "Disabled" {
		target = "None"
	}
	mode = "Legacy"
	if sys.persistent.OS != nil && (sys.persistent.OS.Firmware == "efi" || (sys.persistent.OS.Loader != nil && sys.persistent.OS.Loader.Type == "pflash")) {
		mode = "UEFI"
	}
	return
}

// setBoot applies a PATCH of Boot (fields "" are left as they are).
func (sys *system) setBoot(target, enabled, mode string) {
	if sys.st.BootEnabled == "" && sys.st.BaseBoot == "" {
		base := bootOrder(sys.persistent)
		if len(base) == 0 {
			base = []string{"hd"}
		}
		sys.st.BaseBoot = strings.Join(base, " ")
	}
	curTarget, curEnabled, _ := sys.boot()
	if target == "" {
		target = curTarget
	}
	if enabled == "" {
		enabled = curEnabled
		if enabled == "Disabled" && target != "None" {
			// A target without Enabled on a system with no override asks for one boot.
			enabled = "Once"
		}
	}
	if target == "None" {
		enabled = "Disabled"
	}
	if enabled == "Disabled" {
		sys.st.BootEnabled, sys.st.BootTarget = "", ""
		setBootOrder(sys.persistent, strings.Fields(sys.st.BaseBoot))
	} else {
		sys.st.BootEnabled, sys.st.BootTarget = enabled, target
		setBootOrder(sys.persistent, BootDevs(target))
	}
	if mode != "" {
		if sys.persistent.OS == nil {
			sys.persistent.OS = &libvirtxml.DomainOS{}
		}
		if mode == "UEFI" {
			sys.persistent.OS.Firmware = "efi"
		} else {
			sys.persistent.OS.Firmware = ""
			sys.persistent.OS.Loader, sys.persistent.OS.NVRam, sys.persistent.OS.FirmwareInfo = nil, nil, nil
		}
	}
}

// cdrom returns the domain's first CD-ROM device, or nil.
func cdrom(d *libvirtxml.Domain) *libvirtxml.DomainDisk {
	if d == nil || d.Devices == nil {
		return nil
	}
	for i := range d.Devices.Disks {
		if d.Devices.Disks[i].Device == "cdrom" {
			return &d.Devices.Disks[i]
		}
	}
	return nil
}

func diskFile(d *libvirtxml.DomainDisk) string {
	if d == nil || d.Source == nil || d.Source.File == nil {
		return ""
	}
	return d.Source.File.File
}

// media reports the virtual CD: the image URL (the inserted file's URL when labbuild did not
// insert it) and whether one is inserted.
func (sys *system) media() (image string, inserted bool) {
	f := diskFile(cdrom(sys.persistent))
	if f == "" {
		return "", false
	}
	if f == sys.st.File && sys.st.Image != "" {
		return sys.st.Image, true
	}
	return "file://" + f, true
}

// attach points the persistent CD-ROM at file (adding a SATA CD-ROM when the domain has none,
// as sushy-tools' libvirt driver adds one on insert) or empties it (file ""). It returns the
// live CD-ROM to update when the domain runs and has one; a CD-ROM added to a running domain
// appears at its next start (SATA does not hot-plug), which the reset Ironic does next is.
func (sys *system) attach(file string) *libvirtxml.DomainDisk {
	var src *libvirtxml.DomainDiskSource
	if file != "" {
		src = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: file}}
	}
	if d := cdrom(sys.persistent); d != nil {
		d.Source = src
	} else if file != "" {
		if sys.persistent.Devices == nil {
			sys.persistent.Devices = &libvirtxml.DomainDeviceList{}
		}
		sys.persistent.Devices.Disks = append(sys.persistent.Devices.Disks, libvirtxml.DomainDisk{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source:   src,
			Target:   &libvirtxml.DomainDiskTarget{Dev: freeDev(sys.persistent), Bus: "sata"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		})
	}
	if !sys.on {
		return nil
	}
	l := cdrom(sys.live)
	if l == nil {
		return nil
	}
	c := *l
	c.Source = src
	if src == nil {
		// An empty tray: a source-less <disk> ejects (virDomainUpdateDeviceFlags).
		c.Driver = nil
	}
	c.Alias, c.Address, c.BackingStore = nil, nil, nil
	return &c
}

// freeDev returns the first sdX target no disk of d uses.
func freeDev(d *libvirtxml.Domain) string {
	used := map[string]bool{}
	for _, k := range d.Devices.Disks {
		if k.Target != nil {
			used[k.Target.Dev] = true
		}
	}
	for c := 'a'; c <= 'z'; c++ {
		if n := "sd" + string(c); !used[n] {
			return n
		}
	}
	return "sdz"
}

// powerOn starts the domain from its persistent definition and spends a Once override: the
// persistent boot order goes back to the domain's own, so the boot after this one is from disk
// (Redfish: BootSourceOverrideEnabled Once reverts to Disabled after the boot), while the live
// definition keeps the override's order.
func (s *Server) powerOn(sys *system) error {
	if err := s.hv.Start(sys.ref.UUID); err != nil {
		return fmt.Errorf("start domain %s: %w", sys.ref.Name, err)
	}
	sys.on = true
	if sys.st.BootEnabled != "Once" {
		return nil
	}
	sys.st.BootEnabled, sys.st.BootTarget = "", ""
	setBootOrder(sys.persistent, strings.Fields(sys.st.BaseBoot))
	return s.save(sys, true)
}

// reset performs a ComputerSystem.Reset. ForceRestart is a cold cycle (ForceOff, then On) and
// not virDomainReset, so that a boot override set since the last start applies, as a real
// BMC's firmware reads it on reset; GracefulRestart asks the guest to shut down and starts it
// again once it is off (the wait runs in the background, bounded by Config.GracefulTimeout).
func (s *Server) reset(sys *system, typ string) error {
	switch typ {
	case "On":
		if !sys.on {
			return s.powerOn(sys)
		}
	case "ForceOff":
		if sys.on {
			return s.hv.ForceOff(sys.ref.UUID)
		}
	case "GracefulShutdown":
		if sys.on {
			return s.hv.Shutdown(sys.ref.UUID)
		}
	case "PushPowerButton":
		if sys.on {
			return s.hv.Shutdown(sys.ref.UUID)
		}
		return s.powerOn(sys)
	case "ForceRestart":
		if sys.on {
			if err := s.hv.ForceOff(sys.ref.UUID); err != nil {
				return err
			}
		}
		return s.powerOn(sys)
	case "GracefulRestart":
		if !sys.on {
			return s.powerOn(sys)
		}
		if err := s.hv.Shutdown(sys.ref.UUID); err != nil {
			return err
		}
		s.bg.Add(1)
		go s.restartWhenOff(sys.ref)
	default:
		return fmt.Errorf("reset type %q", typ)
	}
	return nil
}

func (s *Server) restartWhenOff(ref DomainRef) {
	defer s.bg.Done()
	deadline := time.Now().Add(s.cfg.GracefulTimeout)
	for time.Now().Before(deadline) {
		time.Sleep(s.cfg.PollInterval)
		done, err := func() (bool, error) {
			unlock := s.lock(ref.UUID)
			defer unlock()
			sys, err := s.load(ref)
			if err != nil {
				return true, err
			}
			if sys.on {
				return false, nil
			}
			return true, s.powerOn(sys)
		}()
		if done {
			if err != nil {
				s.logf("GracefulRestart %s: %v", ref.Name, err)
			}
			return
		}
	}
	s.logf("GracefulRestart %s: the guest did not shut down within %s; left running", ref.Name, s.cfg.GracefulTimeout)
}

// removeMedia deletes a downloaded image the BMC no longer uses; only files in MediaDir.
func (s *Server) removeMedia(f string) {
	if f == "" || !strings.HasPrefix(f, s.cfg.MediaDir+string(os.PathSeparator)) {
		return
	}
	if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.logf("remove %s: %v", f, err)
	}
}

func validValue(v string, allowed []string) bool { return slices.Contains(allowed, v) }
