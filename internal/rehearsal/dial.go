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
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			// The thread is left locked (and so ends with the goroutine) if switching back
			// fails: it must never run other goroutines in the wrong namespace.
			runtime.LockOSThread()
			orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				ch <- res{nil, err}
				return
			}
			defer unix.Close(orig)
			target, err := unix.Open("/run/netns/"+netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				ch <- res{nil, fmt.Errorf("netns %s: %w", netns, err)}
				return
			}
			defer unix.Close(target)
			if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
				ch <- res{nil, fmt.Errorf("setns %s: %w", netns, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			}
			ch <- res{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// ListenIn opens a TCP listener inside network namespace netns, the way DialIn dials: the
// socket is made on a thread switched into the namespace and stays there. The Metal3 stand-in
// serves its boot images on it, where the lab's BMC (inside the namespace) downloads them.
func ListenIn(netns, addr string) (net.Listener, error) {
	type res struct {
		l   net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open("/run/netns/"+netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			ch <- res{nil, fmt.Errorf("netns %s: %w", netns, err)}
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			ch <- res{nil, fmt.Errorf("setns %s: %w", netns, err)}
			return
		}
		l, err := net.Listen("tcp", addr)
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- res{l, err}
	}()
	r := <-ch
	return r.l, r.err
}
