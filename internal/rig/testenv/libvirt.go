package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Libvirtd is a libvirtd a test started inside a network namespace of its own
// (../shared/notes/real-tools.md, "Full lab inside a network namespace"): networks, bridges,
// dnsmasq and iptables rules it makes exist only in that namespace, and its state directories
// are tmpfs mounts private to it, so nothing appears in the root namespace or in /etc.
type Libvirtd struct {
	// NetNS is the network namespace name; run programs in it with Exec.
	NetNS string
	// Socket is the read-write RPC socket, reachable from the test process.
	Socket string
	// Dir is a scratch directory visible both to the test and to libvirtd (pool paths, disks).
	Dir string
	// Pid is the daemon's process id: nsenter -t Pid -m enters its mount namespace, where
	// LibvirtdOptions.Private directories are its own.
	Pid int
}

// LibvirtdOptions shape a daemon StartLibvirtdWith starts.
type LibvirtdOptions struct {
	// TCP also listens on TCP port 16509 on the namespace's loopback (StartRemoteLibvirtd).
	TCP bool
	// Private are directories that get a tmpfs of their own (128 GiB) in the daemon's mount
	// namespace: another host's disk at the same path (a lab's libvirt.poolPath is one path for
	// every host).
	Private []string
}

// URI returns the connection URI for driver ("qemu:///system" → "qemu+unix:///system?socket=…",
// "test:///default" → the test driver hosted by this daemon).
func (l *Libvirtd) URI(driver string) string {
	scheme, rest, _ := strings.Cut(driver, "://")
	return scheme + "+unix://" + rest + "?socket=" + l.Socket
}

// Exec runs name with args inside the daemon's network namespace and returns its combined
// output.
func (l *Libvirtd) Exec(name string, args ...string) ([]byte, error) {
	return exec.Command("ip", append([]string{"netns", "exec", l.NetNS, name}, args...)...).CombinedOutput()
}

var netnsSeq atomic.Int32

// StartLibvirtd starts libvirtd in a new network namespace for the test's lifetime and waits
// until its socket accepts connections. It needs root, the libvirt-qemu user and the Debian
// libvirt packages (.ci/install-libvirt.sh); without them it skips (fails under CI=true).
// Cleanup kills the daemon and every process left in the namespace (the network driver's
// dnsmasq), by process id, then deletes the namespace.
func StartLibvirtd(t testing.TB) *Libvirtd {
	t.Helper()
	return startLibvirtd(t, LibvirtdOptions{})
}

// StartLibvirtdWith is StartLibvirtd with options.
func StartLibvirtdWith(t testing.TB, o LibvirtdOptions) *Libvirtd {
	t.Helper()
	return startLibvirtd(t, o)
}

// StartRemoteLibvirtd is StartLibvirtd with the daemon also listening on TCP port 16509 on
// its namespace's loopback (listen_tcp, no auth: nothing outside the namespace reaches it),
// and returns, besides, a qemu+tcp:// URI to it as to another host: a proxy on 127.0.0.1
// (this namespace) dials into the daemon's namespace for each connection. labbuild sees a URI
// with a host part, so it treats the daemon as remote (uploads instead of local paths).
func StartRemoteLibvirtd(t testing.TB) (*Libvirtd, string) {
	t.Helper()
	return StartRemoteLibvirtdWith(t, LibvirtdOptions{})
}

// StartRemoteLibvirtdWith is StartRemoteLibvirtd with options (TCP is implied).
func StartRemoteLibvirtdWith(t testing.TB, o LibvirtdOptions) (*Libvirtd, string) {
	t.Helper()
	o.TCP = true
	l := startLibvirtd(t, o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r, err := l.dialInNS("127.0.0.1:16509")
				if err != nil {
					return
				}
				defer r.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(r, c); done <- struct{}{} }()
				go func() { io.Copy(c, r); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	// Wait until the daemon answers on TCP.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := l.dialInNS("127.0.0.1:16509")
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("libvirtd TCP listener not ready: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return l, "qemu+tcp://" + ln.Addr().String() + "/system"
}

// dialInNS opens a TCP connection from inside the daemon's network namespace: on an OS
// thread of its own that joins the namespace (setns) and is discarded afterwards.
func (l *Libvirtd) dialInNS(addr string) (net.Conn, error) {
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open(filepath.Join("/var/run/netns", l.NetNS))
		if err != nil {
			ch <- res{nil, err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{nil, fmt.Errorf("setns %s: %v", l.NetNS, err)}
			return
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		ch <- res{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

func startLibvirtd(t testing.TB, o LibvirtdOptions) *Libvirtd {
	t.Helper()
	bin := Require(t, "libvirtd")
	Require(t, "ip")
	Require(t, "unshare")
	if os.Geteuid() != 0 {
		Missing(t, "libvirtd in a network namespace needs root")
	}
	if _, err := user.Lookup("libvirt-qemu"); err != nil {
		Missing(t, "user libvirt-qemu is missing (bash .ci/install-libvirt.sh creates it)")
	}
	// Short paths: a unix socket path is limited to 108 bytes and t.TempDir() can be long.
	dir, err := os.MkdirTemp("", "lbvirt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l := &Libvirtd{
		NetNS:  fmt.Sprintf("lbt%d-%d", os.Getpid(), netnsSeq.Add(1)),
		Socket: filepath.Join(dir, "run", "libvirt-sock"),
		Dir:    dir,
	}
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "libvirtd.conf")
	qconf := filepath.Join(dir, "qemu.conf")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	confText := fmt.Sprintf("unix_sock_dir = %q\nauth_unix_ro = \"none\"\nauth_unix_rw = \"none\"\nunix_sock_rw_perms = \"0700\"\n", filepath.Join(dir, "run"))
	listen := ""
	if o.TCP {
		confText += "listen_tls = 0\nlisten_tcp = 1\nauth_tcp = \"none\"\nlisten_addr = \"127.0.0.1\"\ntcp_port = \"16509\"\n"
		listen = " --listen"
	}
	write(conf, confText)
	write(qconf, "user = \"root\"\ngroup = \"root\"\ndynamic_ownership = 0\nsecurity_driver = \"none\"\nstdio_handler = \"file\"\n")
	state := []string{"/run/libvirt", "/var/lib/libvirt", "/etc/libvirt/qemu", "/etc/libvirt/storage", "/var/log/libvirt", "/var/cache/libvirt"}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, d := range state {
		fmt.Fprintf(&script, "mkdir -p %s && mount -t tmpfs tmpfs %s\n", d, d)
	}
	// A private directory is a disk with room for a lab's thin disks (tmpfs takes memory only
	// for what is written; preflight reads its free space).
	for _, d := range o.Private {
		fmt.Fprintf(&script, "mkdir -p %s && mount -t tmpfs -o size=128g,mode=0755 tmpfs %s\n", d, d)
	}
	fmt.Fprintf(&script, "touch /etc/libvirt/qemu.conf 2>/dev/null || true\nmount --bind %s /etc/libvirt/qemu.conf\n", qconf)
	script.WriteString("ip link set lo up\n")
	// Its own pid file: the default /run/libvirtd.pid is outside the tmpfs mounts and would
	// stop a second daemon (another test package running in parallel) from starting.
	fmt.Fprintf(&script, "exec %s%s --config %s --pid-file %s\n", bin, listen, conf, filepath.Join(dir, "libvirtd.pid"))

	if out, err := exec.Command("ip", "netns", "add", l.NetNS).CombinedOutput(); err != nil {
		Missing(t, fmt.Sprintf("ip netns add: %v: %s", err, out))
	}
	logf, err := os.Create(filepath.Join(dir, "libvirtd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", l.NetNS, "unshare", "-m", "--propagation", "private", "sh", "-c", script.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		exec.Command("ip", "netns", "del", l.NetNS).Run()
		t.Fatalf("start libvirtd: %v", err)
	}
	l.Pid = cmd.Process.Pid // ip netns exec, unshare and sh exec into libvirtd: one process
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		// The network driver's dnsmasq daemonizes out of libvirtd's process group.
		out, _ := exec.Command("ip", "netns", "pids", l.NetNS).Output()
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 && pid != os.Getpid() { // not this test: dialInNS threads joined the namespace
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		exec.Command("ip", "netns", "del", l.NetNS).Run()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 4096 {
				b = b[len(b)-4096:]
			}
			t.Logf("libvirtd log (tail):\n%s", b)
		}
		logf.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", l.Socket)
		if err == nil {
			c.Close()
			return l
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("libvirtd exited at start: %s", bytes.TrimSpace(b))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("libvirtd socket %s not ready after 30s: %v", l.Socket, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// GuestKernel returns the path of the x86_64 guest kernel .ci/install-libvirt.sh unpacks
// ($LABBUILD_CACHE or ~/.cache/labbuild, test/kernel/vmlinuz), or skips (fails in CI).
func GuestKernel(t testing.TB) string {
	t.Helper()
	base := os.Getenv("LABBUILD_CACHE")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache", "labbuild")
	}
	p := filepath.Join(base, "test", "kernel", "vmlinuz")
	if st, err := os.Stat(p); err != nil || st.Size() == 0 {
		Missing(t, "guest kernel "+p+" is missing (bash .ci/install-libvirt.sh unpacks one)")
	}
	return p
}

// BusyboxInitramfs writes, into dir, a newc cpio initramfs whose /init is the shell script
// init run by a static busybox (/bin/busybox), and returns its path. It needs busybox-static
// and cpio.
func BusyboxInitramfs(t testing.TB, dir, init string) string {
	t.Helper()
	bb := Require(t, "busybox")
	Require(t, "cpio")
	if out, err := exec.Command("file", "-L", bb).Output(); err == nil && bytes.Contains(out, []byte("dynamically")) {
		Missing(t, bb+" is not static (install busybox-static)")
	}
	root := filepath.Join(dir, "initramfs-root")
	for _, d := range []string{"bin", "dev", "proc", "sys"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "init"), []byte("#!/bin/busybox sh\n"+init), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "initramfs.cpio")
	cmd := exec.Command("sh", "-c", "find . | cpio -o -H newc --quiet > "+out)
	cmd.Dir = root
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio: %v: %s", err, o)
	}
	return out
}

// Pids returns the process IDs of everything running in the daemon's network namespace
// (libvirtd, the network's dnsmasq, QEMU), as `ip netns pids` lists them.
func (l *Libvirtd) Pids() ([]string, error) {
	out, err := exec.Command("ip", "netns", "pids", l.NetNS).Output()
	return strings.Fields(string(out)), err
}

// DialContext opens a TCP connection from inside the daemon's network namespace, with the
// signature of net.Dialer.DialContext (an http.Transport's dialer): a test's client reaches a
// server bound to an address of that namespace (the lab bridge's).
func (l *Libvirtd) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return l.dialInNS(addr)
}
