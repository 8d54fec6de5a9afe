package rehearsal

import (
	"context"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// DialIn returns a DialContext that opens TCP connections from inside network namespace netns
// (/run/netns/<netns>): the socket is made on an OS thread switched into that namespace and
// keeps it after the thread switches back. The test process so talks to a lab's addresses
// without any route from the root namespace.
func DialIn(netns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNetNS(netns, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// ListenIn opens a TCP listener inside network namespace netns, the way DialIn dials: the
// socket is made in the namespace and stays there. The Metal3 stand-in serves its boot images
// on it, where the lab's BMC (inside the namespace) downloads them.
func ListenIn(netns, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNetNS(netns, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// inNetNS runs f on an OS thread switched into network namespace netns, in a goroutine of its
// own. The thread is left locked (and so ends with the goroutine) if switching back fails: it
// must never run other goroutines in the wrong namespace.
func inNetNS(netns string, f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- err
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/run/netns/"+netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- fmt.Errorf("netns %s: %w", netns, err)
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			ch <- fmt.Errorf("setns %s: %w", netns, err)
			return
		}
		err = f()
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}
