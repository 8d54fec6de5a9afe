package virt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/rig/testenv"
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
	t.Cleanup(func() { c.Close() }) // after kernelDomain's removals (cleanups run last first)
	dom := kernelDomain(t, c, d, "boot", "worker-0", kernel, initrd)
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

// kernelDomain creates network <prefix>net, pool <prefix> and node's volume in it (removed when
// the test ends) and returns node's domain as render/libvirt renders it (software emulation,
// direct boot of kernel and initrd, console=ttyS0), not yet defined.
func kernelDomain(t *testing.T, c *Conn, d *testenv.Libvirtd, prefix, node, kernel, initrd string) *libvirtxml.Domain {
	t.Helper()
	net, _ := rl.Network(benchSpec(prefix+"net", prefix))
	if err := c.CreateNetwork(net); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteNetwork(prefix + "net") })
	pool, _ := rl.Pool(rl.PoolSpec{Name: prefix, Path: filepath.Join(d.Dir, prefix+"pool")})
	if err := c.CreatePool(pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeletePool(prefix) })
	vol, _ := rl.Volume(rl.VolumeSpec{Name: rl.VolumeName(prefix, node), CapacityGiB: 1})
	disk, err := c.CreateVolume(prefix, vol)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteVolume(prefix, vol.Name) })
	dom, err := rl.Domain(rl.DomainSpec{Name: prefix + "-" + node, Type: "qemu", VCPUs: 1, MemoryMiB: 256, Disk: disk,
		Network: prefix + "net", MAC: rl.MAC(prefix, node), Kernel: kernel, Initrd: initrd, Cmdline: "console=ttyS0 panic=-1 quiet"})
	if err != nil {
		t.Fatal(err)
	}
	return dom
}
