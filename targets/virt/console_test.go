package virt

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// syncBuffer is a bytes.Buffer safe for the console's writer and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestConsole boots a domain as render/libvirt renders it (its serial console a pty, as every
// lab VM's) with a busybox init that prints a known line on the console each second and echoes
// what it reads, inside libvirtd in a network namespace; Console attaches over the libvirt
// stream, shows the line, carries a typed line to the guest and back, and returns once its
// input ends (labbuild console's Ctrl-]).
func TestConsole(t *testing.T) {
	kernel := testenv.GuestKernel(t)
	d := testenv.StartLibvirtd(t)
	initrd := testenv.BusyboxInitramfs(t, d.Dir, `/bin/busybox mount -t devtmpfs dev /dev
exec </dev/ttyS0 >/dev/ttyS0 2>&1
while true; do
  /bin/busybox echo LABBUILD-CONSOLE-TICK
  if read -t 1 line; then /bin/busybox echo "GOT:$line"; fi
done
`)
	c, err := Connect(d.URI("qemu:///system"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // after kernelDomain's removals (cleanups run last first)
	dom := kernelDomain(t, c, d, "con", "master-0", kernel, initrd)
	if len(dom.Devices.Serials) == 0 || dom.Devices.Serials[0].Source == nil || dom.Devices.Serials[0].Source.Pty == nil {
		t.Fatalf("render/libvirt's domain has no pty serial console: %+v", dom.Devices.Serials)
	}
	if err := c.DefineDomain(dom); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteDomain("con-master-0")
	if err := c.StartDomain("con-master-0", false); err != nil {
		t.Fatal(err)
	}
	cc, err := Connect(d.URI("qemu:///system")) // Console closes its connection
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- cc.Console(context.Background(), "con-master-0", inR, &out, false) }()
	wait := func(what string, limit time.Duration) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !strings.Contains(out.String(), what) {
			select {
			case err := <-done:
				t.Fatalf("console ended before %q: %v; output:\n%s", what, err, out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %q on the console after %s; output:\n%s", what, limit, out.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	start := time.Now()
	wait("LABBUILD-CONSOLE-TICK", 240*time.Second) // a loaded 2-core machine under TCG: 9 s to over a minute
	t.Logf("first console line %s after the start", time.Since(start).Round(time.Second))
	io.WriteString(inW, "hello-from-labbuild\r")
	wait("GOT:hello-from-labbuild", 30*time.Second)
	inW.Close() // the user's Ctrl-]
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Console after its input ended: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Console did not return after its input ended")
	}
	if _, st, _, err := c.Domain("con-master-0"); err != nil || st != DomainRunning {
		t.Errorf("after leaving the console the domain is %v (%v), want running", st, err)
	}
}
