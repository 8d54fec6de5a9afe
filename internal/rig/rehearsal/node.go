package rehearsal

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Node is one lab node without its OS: a network namespace with one interface (eth0) on the
// lab bridge at the node's IP, and a holder process keeping a private mount and UTS namespace
// in which Root is overlaid on the host's Overlaid directories, /run is a fresh tmpfs and the
// host name is the one in root/etc/hostname. Programs run in it with Start.
type Node struct {
	// Name is the lab node name (master-0); NetNS its network namespace.
	Name, NetNS string
	// Root holds the node's files at their node paths (Place writes them); overlay work
	// directories are beside it (Root+".work").
	Root string
	// LogDir receives one <program>.log per started program.
	LogDir string

	holder *exec.Cmd

	mu      sync.Mutex
	procs   []*exec.Cmd
	stopped chan struct{} // closed by Stop: Keep's loops end
}

// RehearsalLogDir is where a node sees its LogDir.
const RehearsalLogDir = "/var/log/rehearsal"

// NodeNet is how a node is wired: its address and prefix on the lab bridge, the gateway
// (default route), and where the bridge is (network namespace LabNS, device Bridge).
type NodeNet struct {
	IP      string
	Prefix  int
	Gateway string
	LabNS   string
	Bridge  string
	// MTU, when not 0, is eth0's and its lab end's: what the node's keyfile says
	// (NetworkManager sets it on the NIC) and libvirt gives the tap (the network's <mtu>).
	MTU int
	// Hostname is the host name when the root has no /etc/hostname (a DHCP lease's); "" for
	// the node's name.
	Hostname string
}

// run runs a command and returns an error with its output.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// nodeMAC is the MAC address of a node's eth0: locally administered, from its IPv4 address
// (02:00 and the four octets), so a node started again — a single node's reboot into its
// installed system — keeps it, as a VM's NIC does; a new random one left the lab side's
// neighbour entry on the old address and the node unreachable for longer than StartSSHD waits.
func nodeMAC(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return "02:00:00:00:00:01"
	}
	b := a.As4()
	return fmt.Sprintf("02:00:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
}

// StartNode creates the node's network namespace netns wired as n says (a veth pair whose lab
// end, named after the namespace, joins n.Bridge inside n.LabNS: nothing appears in the root
// namespace), and starts the holder. Stop undoes it all.
func StartNode(name, netns, root, logDir string, n NodeNet) (*Node, error) {
	nd := &Node{Name: name, NetNS: netns, Root: root, LogDir: logDir, stopped: make(chan struct{})}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	if err := run("ip", "netns", "add", netns); err != nil {
		return nil, err
	}
	peer := "v" + netns
	if len(peer) > 15 {
		peer = peer[:15]
	}
	// A node started again right after Stop (a single node's reboot) may find the old lab end
	// still there: the kernel frees a deleted namespace, and the veth in it, asynchronously.
	exec.Command("ip", "-n", n.LabNS, "link", "del", peer).Run()
	steps := [][]string{
		{"ip", "-n", n.LabNS, "link", "add", peer, "type", "veth", "peer", "name", "eth0", "address", nodeMAC(n.IP), "netns", netns},
		{"ip", "-n", n.LabNS, "link", "set", peer, "master", n.Bridge, "up"},
		{"ip", "-n", netns, "link", "set", "lo", "up"},
		{"ip", "-n", netns, "addr", "add", n.IP + "/" + strconv.Itoa(n.Prefix), "dev", "eth0"},
		{"ip", "-n", netns, "link", "set", "eth0", "up"},
		{"ip", "-n", netns, "route", "add", "default", "via", n.Gateway},
	}
	if n.MTU > 0 {
		steps = append(steps[:2:2], append([][]string{
			{"ip", "-n", n.LabNS, "link", "set", peer, "mtu", strconv.Itoa(n.MTU)},
			{"ip", "-n", netns, "link", "set", "eth0", "mtu", strconv.Itoa(n.MTU)},
		}, steps[2:]...)...)
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			nd.Stop()
			return nil, err
		}
	}
	hostname := name
	if n.Hostname != "" {
		hostname = n.Hostname
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc", "hostname")); err == nil && len(bytes.TrimSpace(b)) > 0 {
		hostname = string(bytes.TrimSpace(b))
	}
	var sc strings.Builder
	sc.WriteString("set -e\n")
	for _, d := range Overlaid {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		up := filepath.Join(root, d)
		wk := filepath.Join(root+".work", d)
		if err := os.MkdirAll(up, 0o755); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(wk, 0o755); err != nil {
			return nil, err
		}
		fmt.Fprintf(&sc, "mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s %s\n", d, up, wk, d)
	}
	sc.WriteString("mount -t tmpfs tmpfs /run\nmkdir -p /run/lock\n")
	// The node's programs' output (LogDir: static pods, kubelet, sshd) shows on the node at
	// /var/log/rehearsal, where labbuild gather finds it: the rehearsal has no journald and no
	// CRI log directory (/var/log/pods) of a kubelet-run static pod.
	fmt.Fprintf(&sc, "mkdir -p %s && mount --bind %s %s\n", RehearsalLogDir, logDir, RehearsalLogDir)
	fmt.Fprintf(&sc, "hostname %s\n", hostname)
	sc.WriteString("exec sleep 2147483647\n")
	log, err := os.Create(filepath.Join(logDir, "holder.log"))
	if err != nil {
		nd.Stop()
		return nil, err
	}
	defer log.Close()
	// nsenter, not `ip netns exec`: that one mounts a fresh /sys, hiding the host's cgroup
	// mounts under /sys/fs/cgroup, which the kubelet and runc need.
	cmd := exec.Command("nsenter", "--net=/run/netns/"+netns, "--", "unshare", "-m", "-u", "--propagation", "private", "sh", "-c", sc.String())
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		nd.Stop()
		return nil, err
	}
	nd.holder = cmd
	go cmd.Wait()
	// The holder is ready once it is sleep (the exec after the mounts).
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		if strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		if time.Now().After(deadline) || (len(b) == 0) {
			lb, _ := os.ReadFile(log.Name())
			nd.Stop()
			return nil, fmt.Errorf("rehearsal: node %s: holder did not start: %s", name, bytes.TrimSpace(lb))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nd, nil
}

// Command returns a command running argv inside the node (its network, mount and UTS
// namespaces) with env added to the environment, logging to LogDir/<logName>.log. binds maps
// node paths to mount into a private mount namespace of this program only (a static pod's
// volumes: mountPath → hostPath, both node paths).
func (nd *Node) Command(logName string, env []string, binds [][2]string, argv ...string) (*exec.Cmd, error) {
	pid := nd.holder.Process.Pid
	args := []string{"-t", strconv.Itoa(pid), "-m", "-u", "-n", "--"}
	if len(binds) > 0 {
		var sc strings.Builder
		sc.WriteString("set -e\n")
		for _, b := range binds {
			mp, hp := b[0], b[1]
			fmt.Fprintf(&sc, "mkdir -p %q %q\nmount --bind %q %q\n", hp, mp, hp, mp)
		}
		sc.WriteString(`exec "$@"` + "\n")
		args = append(args, "unshare", "-m", "--propagation", "private", "sh", "-c", sc.String(), "sh")
	}
	args = append(args, argv...)
	cmd := exec.Command("nsenter", args...)
	cmd.Env = append(os.Environ(), env...)
	log, err := os.OpenFile(filepath.Join(nd.LogDir, logName+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

// Start starts a Command and keeps it for Stop.
func (nd *Node) Start(logName string, env []string, binds [][2]string, argv ...string) (*exec.Cmd, error) {
	cmd, err := nd.start(logName, env, binds, argv...)
	if err != nil {
		return nil, err
	}
	go cmd.Wait()
	return cmd, nil
}

// start starts a Command and records it for Stop, unless the node is stopped.
func (nd *Node) start(logName string, env []string, binds [][2]string, argv ...string) (*exec.Cmd, error) {
	cmd, err := nd.Command(logName, env, binds, argv...)
	if err != nil {
		return nil, err
	}
	nd.mu.Lock()
	defer nd.mu.Unlock()
	select {
	case <-nd.stopped:
		return nil, fmt.Errorf("rehearsal: node %s: stopped", nd.Name)
	default:
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rehearsal: node %s: start %s: %w", nd.Name, argv[0], err)
	}
	nd.procs = append(nd.procs, cmd)
	return cmd, nil
}

// RestartBackoff is the first wait before Keep restarts a program that exited, doubled after
// each exit up to MaxRestartBackoff: the kubelet's crash-loop back-off (10 s, at most 5 min)
// for a static pod's container, systemd's RestartSec=10 for kubelet.service.
var RestartBackoff, MaxRestartBackoff = 10 * time.Second, 5 * time.Minute

// Keep starts a Command like Start and starts it again whenever it exits, after RestartBackoff
// (doubling, at most MaxRestartBackoff), until Stop: what the kubelet does for a static pod's
// container (restartPolicy Always) and systemd for a Restart=always unit. The bootstrap's
// kube-controller-manager, for one, exits when it starts before kube-apiserver has created the
// RBAC it reads with (extension-apiserver-authentication), and is restarted on a real node.
func (nd *Node) Keep(logName string, env []string, binds [][2]string, argv ...string) error {
	_, err := nd.KeepProgram(logName, env, binds, argv...)
	return err
}

// Kept is a program Keep runs: Stop ends it for good, as the kubelet ends a static pod's
// container when its manifest goes or changes.
type Kept struct {
	stop   chan struct{}
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has exited
}

// KeepProgram is Keep, returning the program's handle.
func (nd *Node) KeepProgram(logName string, env []string, binds [][2]string, argv ...string) (*Kept, error) {
	cmd, err := nd.start(logName, env, binds, argv...)
	if err != nil {
		return nil, err
	}
	k := &Kept{stop: make(chan struct{}), cmd: cmd, exited: make(chan struct{})}
	go func() {
		wait := RestartBackoff
		for {
			k.mu.Lock()
			cmd, exited := k.cmd, k.exited
			k.mu.Unlock()
			err := cmd.Wait()
			close(exited)
			select {
			case <-nd.stopped:
				return
			case <-k.stop:
				return
			case <-time.After(wait):
			}
			if log, e := os.OpenFile(filepath.Join(nd.LogDir, logName+".log"), os.O_WRONLY|os.O_APPEND, 0o644); e == nil {
				fmt.Fprintf(log, "rehearsal: %s exited (%v); restarted after %s\n", argv[0], err, wait)
				log.Close()
			}
			wait = min(2*wait, MaxRestartBackoff)
			next, err := nd.start(logName, env, binds, argv...)
			if err != nil {
				return
			}
			k.mu.Lock()
			k.cmd, k.exited = next, make(chan struct{})
			k.mu.Unlock()
			select {
			case <-k.stop: // stopped while it restarted
				syscall.Kill(-next.Process.Pid, syscall.SIGKILL)
				next.Wait()
				close(k.exited)
				return
			default:
			}
		}
	}()
	return k, nil
}

// Stop ends the program and does not start it again: SIGTERM to its process group, SIGKILL
// after grace (the kubelet's termination grace period), and returns once it has exited.
func (k *Kept) Stop(grace time.Duration) {
	k.mu.Lock()
	select {
	case <-k.stop:
	default:
		close(k.stop)
	}
	cmd, exited := k.cmd, k.exited
	k.mu.Unlock()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
}

// Run runs a Command to completion within ctx.
func (nd *Node) Run(ctx context.Context, logName string, env []string, argv ...string) error {
	cmd, err := nd.Command(logName, env, nil, argv...)
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(nd.LogDir, logName+".log"))
			if len(b) > 2000 {
				b = b[len(b)-2000:]
			}
			return fmt.Errorf("rehearsal: node %s: %s: %w: %s", nd.Name, strings.Join(argv, " "), err, b)
		}
		return nil
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return ctx.Err()
	}
}

// Stop ends every process in the node's network namespace (its programs, containerd's shims
// and containers, the holder) by process id, then deletes the namespace; the lab end of the
// veth pair goes with it. The mount namespace ends with its last process. Idempotent.
func (nd *Node) Stop() {
	nd.mu.Lock()
	if nd.stopped != nil {
		select {
		case <-nd.stopped:
		default:
			close(nd.stopped)
		}
	}
	procs := nd.procs
	nd.procs = nil
	nd.mu.Unlock()
	for _, c := range procs {
		if c.Process != nil {
			syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		}
	}
	if len(procs) > 0 {
		time.Sleep(500 * time.Millisecond)
	}
	for i := 0; i < 3; i++ {
		out, _ := exec.Command("ip", "netns", "pids", nd.NetNS).Output()
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			break
		}
		for _, f := range pids {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if nd.holder != nil && nd.holder.Process != nil {
		syscall.Kill(-nd.holder.Process.Pid, syscall.SIGKILL)
	}
	exec.Command("ip", "netns", "del", nd.NetNS).Run()
}
