package virt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/testenv"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"libvirt.org/go/libvirtxml"
)

// TestBootKernel boots a domain rendered by render/libvirt (software emulation, direct kernel
// boot of a Debian kernel with a busybox initramfs) on the lab network inside the test's
// namespace: the guest's init prints a marker on the serial console and powers off, so the
// domain stops by itself. A guest that did not reach init would panic and reboot forever
// (on_reboot=restart), never reaching shutoff.
func TestBootKernel(t *testing.T) {
	kernel := testenv.GuestKernel(t)
	d := testenv.StartLibvirtd(t)
	initrd := testenv.BusyboxInitramfs(t, d.Dir, "/bin/busybox echo LABBUILD-BOOT-OK\n/bin/busybox poweroff -f\n")
	c, err := Connect(d.URI("qemu:///system"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	net, _ := rl.Network(benchSpec("bootnet", "boot"))
	if err := c.CreateNetwork(net); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteNetwork("bootnet")
	pool, _ := rl.Pool(rl.PoolSpec{Name: "boot", Path: filepath.Join(d.Dir, "bootpool")})
	if err := c.CreatePool(pool); err != nil {
		t.Fatal(err)
	}
	defer c.DeletePool("boot")
	vol, _ := rl.Volume(rl.VolumeSpec{Name: rl.VolumeName("boot", "worker-0"), CapacityGiB: 1})
	disk, err := c.CreateVolume("boot", vol)
	if err != nil {
		t.Fatal(err)
	}
	defer c.DeleteVolume("boot", vol.Name)

	dom, err := rl.Domain(rl.DomainSpec{Name: "boot-worker-0", Type: "qemu", VCPUs: 1, MemoryMiB: 256, Disk: disk,
		Network: "bootnet", MAC: rl.MAC("boot", "worker-0"), Kernel: kernel, Initrd: initrd, Cmdline: "console=ttyS0 panic=-1 quiet"})
	if err != nil {
		t.Fatal(err)
	}
	// The test reads the console from a file instead of the rendered pty.
	console := filepath.Join(d.Dir, "console.log")
	dom.Devices.Serials = []libvirtxml.DomainSerial{{
		Source: &libvirtxml.DomainChardevSource{File: &libvirtxml.DomainChardevSourceFile{Path: console}},
		Target: &libvirtxml.DomainSerialTarget{Port: new(uint(0))},
	}}
	dom.Devices.Consoles = nil
	if err := c.DefineDomain(dom); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteDomain("boot-worker-0")
	if err := c.StartDomain("boot-worker-0", false); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "guest to power off", 120*time.Second, func() error {
		_, st, _, err := c.Domain("boot-worker-0")
		if err != nil {
			return err
		}
		if st != DomainShutoff {
			return os.ErrExist
		}
		return nil
	})
	b, _ := os.ReadFile(console)
	if !strings.Contains(string(b), "LABBUILD-BOOT-OK") {
		t.Errorf("console lacks the init's marker; last bytes:\n%s", b[max(0, len(b)-2000):])
	}
}
