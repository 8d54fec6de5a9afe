package targets

// host/preflight on a lab spread over several hosts (lab.yaml hosts:): every host is checked
// for the nodes placed on it — libvirtd at its URI, KVM, memory and disk — and for the tunnel
// that joins them — the underlay address on one of its interfaces with an MTU that carries
// vxlan.underlayMTU, every other host's underlay reachable, the VXLAN port free. A host whose
// libvirtd is down fails here, naming the host and its URI, before anything is made anywhere.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/hostexec"
)

// hostAt reaches one host of a multi-host lab: its HostView (the machine labbuild runs on
// through hostView, another through commands over ssh) and a command runner. Tests replace it.
var hostAt = func(uri string) (HostView, hostexec.Host, error) {
	h, err := hostexec.ForURI(uri)
	if err != nil {
		return nil, h, err
	}
	if h.Remote == "" {
		return hostView, h, nil
	}
	return cmdView{h}, h, nil
}

// hostChecksMulti runs the checks of every host of a multi-host lab; base carries what every
// host shares (network, cluster, sizes, the domain type, the pool path).
func hostChecksMulti(s *engine.Step, base hostOne, nodes []lab.Node, ok func(string), fail func(what, fix string), warns *[]string) error {
	var hosts []lab.Host
	if err := s.Value(lab.Hosts, &hosts); err != nil {
		return err
	}
	var vx lab.VXLANConfig
	if err := s.Value(lab.VXLAN, &vx); err != nil {
		return err
	}
	first, err := s.String(lab.LibvirtURI)
	if err != nil {
		return err
	}
	if len(hosts) > 0 && hosts[0].URI == "" {
		hosts[0].URI = first
	}
	for i, h := range hosts {
		label := "host " + h.Name + ": "
		var on []lab.Node
		for _, n := range nodes {
			if n.Host == h.Name || (n.Host == "" && i == 0) {
				on = append(on, n)
			}
		}
		view, run, err := hostAt(h.URI)
		if err != nil {
			fail(fmt.Sprintf("%s%s: %v", label, h.URI, err), "give hosts."+h.Name+".uri a qemu+ssh://user@host/system URI whose user may run ip(8)")
			continue
		}
		one := base
		one.view, one.label, one.uri, one.nodes = view, label, h.URI, on
		one.kvm, one.nat = true, i == 0
		*warns = append(*warns, hostCheckOne(s, one, ok, fail)...)
		hostCheckUnderlay(h, hosts, vx, run, ok, fail)
	}
	return nil
}

// hostCheckUnderlay checks host h's side of the tunnel through its command runner.
func hostCheckUnderlay(h lab.Host, hosts []lab.Host, vx lab.VXLANConfig, run hostexec.Host, ok func(string), fail func(what, fix string)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	label := "host " + h.Name + ": "
	links, err := run.Links(ctx)
	if err != nil {
		fail(label+err.Error(), "labbuild runs ip(8) on "+h.Name+" as the user of "+h.URI+": check ssh to it in batch mode (a key, no password) and that ip is installed")
		return
	}
	var up *hostexec.Link
	for i := range links {
		for _, a := range links[i].Addrs {
			if a == h.Underlay {
				up = &links[i]
			}
		}
	}
	if up == nil {
		fail(fmt.Sprintf("%sno interface has the underlay address %s (hosts.%s.underlay)", label, h.Underlay, h.Name),
			"set hosts."+h.Name+".underlay to the host's address on the network between the hosts (ip -4 addr on "+h.Name+")")
		return
	}
	if up.MTU < vx.UnderlayMTU {
		fail(fmt.Sprintf("%sthe underlay interface %s (%s) has MTU %d; vxlan.underlayMTU is %d, so the machine network's %d-byte frames would not fit the tunnel", label, up.Name, h.Underlay, up.MTU, vx.UnderlayMTU, vx.UnderlayMTU-lab.VXLANOverhead),
			fmt.Sprintf("set vxlan.underlayMTU: %d (the machine network gets %d, OVN-Kubernetes %d), or raise %s's MTU on every host", up.MTU, up.MTU-lab.VXLANOverhead, up.MTU-lab.VXLANOverhead-lab.GeneveOverhead, up.Name))
	} else {
		ok(h.Name + ":underlay-mtu")
	}
	for _, p := range hosts {
		if p.Name == h.Name {
			continue
		}
		out, err := run.Run(ctx, "ping", "-c", "1", "-W", "2", "-I", h.Underlay, p.Underlay)
		if err != nil {
			fail(fmt.Sprintf("%scannot reach host %s's underlay address %s from %s: %v: %s", label, p.Name, p.Underlay, h.Underlay, err, lastLine(out)),
				"the VXLAN tunnel rides the network between the hosts: check the route and the hosts' firewalls for ICMP (ping -I "+h.Underlay+" "+p.Underlay+" on "+h.Name+")")
		} else {
			ok(h.Name + ":underlay-to-" + p.Name)
		}
	}
	out, err := run.Run(ctx, "ss", "-Hulnp", "sport = :"+strconv.Itoa(vx.Port))
	switch {
	case err != nil:
		fail(fmt.Sprintf("%sss -Hulnp: %v: %s", label, err, lastLine(out)), "install iproute2's ss on "+h.Name)
	case strings.Contains(string(out), "users:"):
		// A kernel VXLAN socket has no owning process; a program's does.
		fail(fmt.Sprintf("%sUDP port %d (vxlan.port) is taken by a program: %s", label, vx.Port, strings.TrimSpace(string(out))),
			"stop it, or choose another vxlan.port (the same on every host)")
	default:
		ok(h.Name + ":vxlan-port")
	}
}

// lastLine is the last non-empty line of out.
func lastLine(out []byte) string {
	ls := strings.Split(strings.TrimSpace(string(out)), "\n")
	return ls[len(ls)-1]
}

// cmdView is the HostView of a host reached over ssh (hostexec.ForURI): libvirt through its
// URI, the rest through commands run there.
type cmdView struct{ h hostexec.Host }

func (v cmdView) run(name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := v.h.Run(ctx, name, args...)
	if err != nil {
		return out, fmt.Errorf("on %s: %s %s: %w: %s", v.h.Remote, name, strings.Join(args, " "), err, lastLine(out))
	}
	return out, nil
}

func (v cmdView) Libvirt(uri, network string) ([]string, bool, error) {
	return realHost{}.Libvirt(uri, network)
}

func (v cmdView) KVM() error {
	_, err := v.run("test", "-r", "/dev/kvm", "-a", "-w", "/dev/kvm")
	return err
}

func (v cmdView) MemAvailableMiB() (int64, error) {
	b, err := v.run("cat", "/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return memAvailable(b)
}

func (v cmdView) FreeGiB(path string) (float64, error) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		out, err := v.run("stat", "-f", "-c", "%a %S", p)
		if err == nil {
			var avail, bsize float64
			if _, err := fmt.Sscan(string(out), &avail, &bsize); err != nil {
				return 0, fmt.Errorf("on %s: stat -f %s: %q", v.h.Remote, p, out)
			}
			return avail * bsize / (1 << 30), nil
		}
		if p == filepath.Dir(p) {
			return 0, err
		}
	}
}

func (v cmdView) IPForward() (bool, error) {
	b, err := v.run("cat", "/proc/sys/net/ipv4/ip_forward")
	return strings.TrimSpace(string(b)) == "1", err
}

// memAvailable reads MemAvailable from /proc/meminfo's text, in MiB.
func memAvailable(b []byte) (int64, error) {
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable")
}
