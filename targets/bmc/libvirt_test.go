package bmc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/stmcginnis/gofish/redfish"
	"libvirt.org/go/libvirtxml"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// realLab starts libvirtd in a network namespace and defines n lab-like domains (QEMU, 128
// MiB, a qcow2 disk, boot from hd, ACPI, no CD-ROM), returning the BMC's hypervisor over
// go-libvirt, a second, independent go-libvirt connection for the test's own reads, and the
// domains' UUIDs.
func realLab(t *testing.T, n int) (*testenv.Libvirtd, *Libvirt, *golibvirt.Libvirt, []string) {
	t.Helper()
	d := testenv.StartLibvirtd(t)
	qemuImg := testenv.Require(t, "qemu-img")
	hv, err := DialLibvirt(d.URI("qemu:///system"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hv.Close() })
	u, _ := url.Parse(d.URI("qemu:///system"))
	obs, err := golibvirt.ConnectToURI(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { obs.Disconnect() })
	var uuids []string
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("bmc-worker-%d", i)
		disk := filepath.Join(d.Dir, name+".qcow2")
		if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", disk, "64M").CombinedOutput(); err != nil {
			t.Fatalf("qemu-img: %v: %s", err, out)
		}
		dom := &libvirtxml.Domain{
			Type: "qemu", Name: name,
			Memory:   &libvirtxml.DomainMemory{Value: 128, Unit: "MiB"},
			VCPU:     &libvirtxml.DomainVCPU{Value: 1},
			OS:       &libvirtxml.DomainOS{Type: &libvirtxml.DomainOSType{Arch: "x86_64", Type: "hvm"}, BootDevices: []libvirtxml.DomainBootDevice{{Dev: "hd"}}},
			Features: &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}},
			Devices: &libvirtxml.DomainDeviceList{Disks: []libvirtxml.DomainDisk{{
				Device: "disk", Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "qcow2"},
				Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			}}},
		}
		x, _ := dom.Marshal()
		h, err := obs.DomainDefineXML(x)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			obs.DomainDestroy(h)
			obs.DomainUndefineFlags(h, golibvirt.DomainUndefineNvram)
		})
		uuids = append(uuids, formatUUID(h.UUID))
	}
	return d, hv, obs, uuids
}

func obsDomain(t *testing.T, obs *golibvirt.Libvirt, uuid string) (golibvirt.Domain, golibvirt.DomainState) {
	t.Helper()
	u, _ := parseUUID(uuid)
	h, err := obs.DomainLookupByUUID(u)
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := obs.DomainGetState(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	return h, golibvirt.DomainState(st)
}

func obsLive(t *testing.T, obs *golibvirt.Libvirt, uuid string) *libvirtxml.Domain {
	t.Helper()
	h, _ := obsDomain(t, obs, uuid)
	x, err := obs.DomainGetXMLDesc(h, 0)
	if err != nil {
		t.Fatal(err)
	}
	return liveDomain(t, x)
}

// qemuCD asks the running QEMU itself (QMP query-block through libvirt) which file its CD-ROM
// holds ("" for an empty tray): libvirt's XML is what libvirt believes, this is what the guest
// would read.
func qemuCD(t *testing.T, obs *golibvirt.Libvirt, uuid string) string {
	t.Helper()
	h, _ := obsDomain(t, obs, uuid)
	out, err := obs.QEMUDomainMonitorCommand(h, `{"execute":"query-block"}`, 0)
	if err != nil {
		t.Fatalf("query-block: %v", err)
	}
	var r struct {
		Return []struct {
			Device    string `json:"device"`
			QDev      string `json:"qdev"`
			Removable bool   `json:"removable"`
			Inserted  *struct {
				File string `json:"file"`
			} `json:"inserted"`
		} `json:"return"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("query-block: %v: %s", err, out)
	}
	for _, b := range r.Return {
		if b.Removable {
			if b.Inserted == nil {
				return ""
			}
			return b.Inserted.File
		}
	}
	t.Fatalf("QEMU has no removable drive: %s", out)
	return ""
}

// TestIronicSequenceLibvirt is the must-show: gofish performs Ironic's redfish-virtualmedia
// boot sequence (ironicVirtualMediaBoot: eject all, insert an ISO served over HTTP on
// loopback, one-time boot from Cd, On or ForceRestart, read back) against the BMC over a real
// libvirtd in a network namespace. Afterwards the domain's live XML, read on a connection of
// the test's own, has the CD-ROM with the downloaded ISO and cdrom first in its boot order,
// and QEMU itself reports the ISO in its CD drive; the persistent boot order is the disk again
// (Once spent). A ForceOff is seen by libvirt (shut off); an eject on the running domain
// empties the live CD-ROM in libvirt and in QEMU. It is done twice, from off and from on.
func TestIronicSequenceLibvirt(t *testing.T) {
	d, hv, obs, uuids := realLab(t, 1)
	uuid := uuids[0]
	media := filepath.Join(d.Dir, "media")
	b := startBMC(t, hv, []string{"bmc-worker-0"}, media)
	isoBytes := bytes.Repeat([]byte("CD001 labbuild test image\n"), 4096)
	isoBase := isoServer(t, isoBytes)
	c := b.gofish(t, testUser, testPass)

	for i, from := range []string{"off", "on"} {
		iso := fmt.Sprintf("%s/images/ipa-%d.iso", isoBase, i)
		sys := ironicVirtualMediaBoot(t, c, uuid, iso)
		if sys.PowerState != redfish.OnPowerState || sys.Boot.BootSourceOverrideEnabled != "Disabled" {
			t.Errorf("from %s: read back PowerState %s, BootSourceOverrideEnabled %s; want On, Disabled", from, sys.PowerState, sys.Boot.BootSourceOverrideEnabled)
		}
		if _, st := obsDomain(t, obs, uuid); st != golibvirt.DomainRunning {
			t.Errorf("from %s: libvirt state %d, want running", from, st)
		}
		live := obsLive(t, obs, uuid)
		if got := bootOrder(live); len(got) == 0 || got[0] != "cdrom" {
			t.Errorf("from %s: live boot order %v, want cdrom first", from, got)
		}
		f := diskFile(cdrom(live))
		if got, err := os.ReadFile(f); err != nil || !bytes.Equal(got, isoBytes) {
			t.Errorf("from %s: live CD-ROM %q does not hold the ISO served at %s (%v)", from, f, iso, err)
		}
		if q := qemuCD(t, obs, uuid); q != f {
			t.Errorf("from %s: QEMU's CD drive holds %q, libvirt says %q", from, q, f)
		}
		h, _ := obsDomain(t, obs, uuid)
		px, _ := obs.DomainGetXMLDesc(h, golibvirt.DomainXMLInactive)
		if got := bootOrder(liveDomain(t, px)); !slices.Equal(got, []string{"hd"}) {
			t.Errorf("from %s: persistent boot order %v after the one-time boot, want [hd]", from, got)
		}
		if vm := mediaOf(t, c, uuid); !vm.Inserted || vm.Image != iso {
			t.Errorf("from %s: VirtualMedia Inserted %v Image %q, want %s", from, vm.Inserted, vm.Image, iso)
		}
	}

	// An eject while running empties the tray in libvirt and in QEMU.
	if err := mediaOf(t, c, uuid).EjectMedia(); err != nil {
		t.Fatal(err)
	}
	if f := diskFile(cdrom(obsLive(t, obs, uuid))); f != "" {
		t.Errorf("after eject the live CD-ROM holds %q", f)
	}
	if q := qemuCD(t, obs, uuid); q != "" {
		t.Errorf("after eject QEMU's CD drive holds %q", q)
	}
	if ents, _ := os.ReadDir(media); len(ents) != 0 {
		t.Errorf("after eject the media directory holds %d files", len(ents))
	}
	// A re-insert while running changes the media live (no restart).
	iso := isoBase + "/images/again.iso"
	if err := mediaOf(t, c, uuid).InsertMedia(iso, true, true); err != nil {
		t.Fatal(err)
	}
	if q, f := qemuCD(t, obs, uuid), diskFile(cdrom(obsLive(t, obs, uuid))); q == "" || q != f {
		t.Errorf("insert while running: QEMU %q, libvirt %q", q, f)
	}

	// A power off is seen by libvirt.
	sys, _ := redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+uuid)
	if err := sys.Reset(redfish.ForceOffResetType); err != nil {
		t.Fatal(err)
	}
	if _, st := obsDomain(t, obs, uuid); st != golibvirt.DomainShutoff {
		t.Errorf("after ForceOff libvirt state %d, want shut off (%d)", st, golibvirt.DomainShutoff)
	}
	if sys, _ = redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+uuid); sys.PowerState != "Off" {
		t.Errorf("after ForceOff PowerState %s", sys.PowerState)
	}

	// Errors over the real daemon: a wrong password, an unknown system.
	if st, body, _ := b.do(t, "GET", "/redfish/v1/Systems/"+uuid, testUser, testPass+"x", ""); st != 401 || !strings.Contains(fmt.Sprint(body), "NoValidSession") {
		t.Errorf("wrong password: %d %v", st, body)
	}
	if st, body, _ := b.do(t, "GET", "/redfish/v1/Systems/"+strings.Repeat("0", 8)+"-0000-0000-0000-"+strings.Repeat("0", 12), testUser, testPass, ""); st != 404 || !strings.Contains(fmt.Sprint(body), "ResourceMissingAtURI") {
		t.Errorf("unknown system: %d %v", st, body)
	}
}

// TestConcurrentClientsLibvirt: 20 gofish clients at once (insert, eject, boot overrides,
// power) against two real domains; afterwards each domain's persistent and live definitions,
// metadata and media directory agree (checkWhole), and a running domain's QEMU holds the file
// libvirt names.
func TestConcurrentClientsLibvirt(t *testing.T) {
	d, hv, obs, uuids := realLab(t, 2)
	media := filepath.Join(d.Dir, "media")
	b := startBMC(t, hv, nil, media)
	isoBase := isoServer(t, bytes.Repeat([]byte("iso"), 100000))
	start := time.Now()
	concurrentClients(t, b, uuids, isoBase)
	t.Logf("20 clients x 4 requests on 2 domains: %s", time.Since(start).Round(time.Millisecond))
	for _, u := range uuids {
		pers, live, on, err := hv.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		checkWhole(t, b, u, pers, live, on, media)
		if on && cdrom(liveDomain(t, live)) != nil {
			if q, f := qemuCD(t, obs, u), diskFile(cdrom(obsLive(t, obs, u))); q != f {
				t.Errorf("%s: QEMU's CD holds %q, libvirt says %q", u, q, f)
			}
		}
	}
}
