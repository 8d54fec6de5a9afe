package targets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/hostexec"
	"github.com/labbuild/labbuild/targets/virt"
)

// switchProxy forwards TCP connections to target while up is set and refuses them otherwise: a
// libvirt host the test can take down and bring back.
func switchProxy(t *testing.T, target string, up *atomic.Bool) string {
	t.Helper()
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
			if !up.Load() {
				c.Close()
				continue
			}
			go func() {
				defer c.Close()
				r, err := net.Dial("tcp", target)
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
	return ln.Addr().String()
}

// TestLibvirtTwoHosts builds the libvirt and vxlan families for a lab on two real libvirtds,
// each in a network namespace of its own, joined by a veth underlay (198.19.0.1/.2): hv1 at
// libvirt.uri (a unix socket), hv2 over qemu+tcp through a proxy the test can switch off, its
// pool directory a tmpfs of its own (another host's disk). It shows:
//
//   - a lab naming hv2 while hv2's libvirtd is down fails in host/preflight, naming the host
//     and its URI, and nothing is made on hv1;
//   - the plan says where each object lands and states the MTU arithmetic;
//   - hv1 gets the NAT network at MTU 1450, hv2 an isolated network of the same name and
//     bridge with no address; worker-1's disk (over the RHCOS image uploaded once into hv2's
//     pool) and domain (its Ignition uploaded there too) land on hv2, every other node on hv1;
//     a domain started on hv2 gets a tap at MTU 1450 on hv2's bridge, beside the VXLAN device;
//   - moving worker-1 to hv1 is planned as a replace naming both hosts, and afterwards its
//     domain is on hv1 and gone from hv2;
//   - destroy with hv2 down fails naming it and keeps hv2's records; with hv2 back, destroy
//     leaves nothing on either host, and a second does nothing.
func TestLibvirtTwoHosts(t *testing.T) {
	d1, sr := lvHost(t)
	base := t.TempDir()
	d2, tcpURI := testenv.StartRemoteLibvirtdWith(t, testenv.LibvirtdOptions{Private: []string{base}})
	var hv2Up atomic.Bool
	hv2Up.Store(true)
	uri2 := "qemu+tcp://" + switchProxy(t, strings.TrimSuffix(strings.TrimPrefix(tcpURI, "qemu+tcp://"), "/system"), &hv2Up) + "/system"
	if out, err := exec.Command("ip", "link", "add", "ul", "netns", d1.NetNS, "type", "veth", "peer", "name", "ul", "netns", d2.NetNS).CombinedOutput(); err != nil {
		t.Fatalf("underlay: %v: %s", err, out)
	}
	for i, d := range []*testenv.Libvirtd{d1, d2} {
		for _, c := range [][]string{{"addr", "add", fmt.Sprintf("198.19.0.%d/24", i+1), "dev", "ul"}, {"link", "set", "ul", "up"}} {
			if out, err := d.Exec("ip", c...); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
		}
	}
	inNS := func(d *testenv.Libvirtd, remote string) hostexec.Host {
		return hostexec.Host{Remote: remote, Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			if remote != "" && !hv2Up.Load() {
				return []byte("ssh: connect to host hv2 port 22: Connection refused"), errors.New("exit status 255")
			}
			return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", d.NetNS, name}, args...)...).CombinedOutput()
		}}
	}
	oldVX, oldAt := vxHostFor, hostAt
	t.Cleanup(func() { vxHostFor, hostAt = oldVX, oldAt })
	c := lvLab(d1, sr)
	c.Libvirt.PoolPath = filepath.Join(base, "pool")
	c.Hosts = []lab.Host{{Name: "hv1", Underlay: "198.19.0.1"}, {Name: "hv2", URI: uri2, Underlay: "198.19.0.2"}}
	c.VXLAN = &lab.VXLANConfig{VNI: 77, Port: lab.DefaultVXLANPort, UnderlayMTU: lab.DefaultUnderlayMTU}
	c.Nodes[len(c.Nodes)-1].Host = "hv2" // worker-1
	at := func(uri string) (*testenv.Libvirtd, string) {
		if uri == c.Libvirt.URI {
			return d1, ""
		}
		return d2, "hv2"
	}
	vxHostFor = func(uri string) (hostexec.Host, error) { d, r := at(uri); return inNS(d, r), nil }
	hostAt = func(uri string) (HostView, hostexec.Host, error) {
		d, r := at(uri)
		return netnsHost{d: d}, inNS(d, r), nil
	}
	ctx := context.Background()
	conn1, err := virt.Connect(c.Libvirt.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn1.Close()
	conn2, err := virt.Connect(tcpURI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()

	// hv2's libvirtd down: preflight names hv2 and its URI; nothing is made on hv1.
	down := *c
	down.Hosts = []lab.Host{c.Hosts[0], {Name: "hv2", URI: "qemu+tcp://127.0.0.1:1/system", Underlay: "198.19.0.2"}}
	if _, log, err := lvBuild(ctx, Lab{Config: &down}, t.TempDir(), false, "libvirt"); err == nil ||
		!strings.Contains(err.Error()+log, "host hv2: libvirtd at libvirt.uri qemu+tcp://127.0.0.1:1/system") {
		t.Errorf("a lab naming hv2 while its libvirtd is down: %v\n%s", err, log)
	}
	if nets, _ := conn1.Networks(); len(nets) != 0 {
		t.Errorf("networks made on hv1 although hv2 is down: %v", slices.Sorted(mapsKeys(nets)))
	}
	if _, _, found, _ := conn1.Pool("lbt"); found {
		t.Error("a pool made on hv1 although hv2 is down")
	}

	out := t.TempDir()
	t.Cleanup(func() { hv2Up.Store(true); engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}) })
	build := lvBuilder(ctx, t, out, "libvirt")
	if _, log, err := lvBuild(ctx, Lab{Config: c}, out, false, hostPreflight); err != nil {
		t.Fatalf("preflight: %v\n%s", err, log)
	}
	plan := map[string]string{}
	for _, p := range build(c, true).Plan {
		plan[p.Target] = string(p.Action) + ": " + p.Why()
	}
	for target, want := range map[string]string{
		"libvirt/network":    "machine network MTU 1450 = underlay 1500 − 50 (VXLAN), OVN-Kubernetes MTU 1350 = 1450 − 100 (Geneve) (on host hv1)",
		"libvirt/bridge/hv2": "create: isolated network lbt (bridge virbr-lbt, MTU 1450) does not exist (on host hv2)",
		"libvirt/pool/hv2":   "(on host hv2)",
	} {
		if !strings.Contains(plan[target], want) {
			t.Errorf("plan of %s: %q, want it to say %q", target, plan[target], want)
		}
	}

	build(c, false)
	n1, _, _, err := conn1.Network("lbt")
	if err != nil || n1 == nil || n1.MTU == nil || n1.MTU.Size != 1450 {
		t.Errorf("hv1's network: %+v, %v; want MTU 1450", n1, err)
	}
	n2, active, found, err := conn2.Network("lbt")
	if err != nil || !found || !active || len(n2.IPs) != 0 || n2.Forward != nil || n2.Bridge == nil || n2.Bridge.Name != rl.Bridge("lbt") || n2.MTU == nil || n2.MTU.Size != 1450 {
		t.Errorf("hv2's network: %+v active %v found %v, %v; want an isolated virbr-lbt at MTU 1450", n2, active, found, err)
	}
	for _, n := range c.Nodes {
		on, off := conn1, conn2
		if n.Host == "hv2" {
			on, off = conn2, conn1
		}
		if _, _, found, err := on.Domain("lbt-" + n.Name); err != nil || !found {
			t.Errorf("domain lbt-%s not on its host: %v", n.Name, err)
		}
		if _, _, found, _ := off.Domain("lbt-" + n.Name); found {
			t.Errorf("domain lbt-%s also on the other host", n.Name)
		}
	}
	vol, found, err := conn2.Volume("lbt", rl.VolumeName("lbt", "worker-1"))
	if err != nil || !found || vol.BackingStore == nil || !strings.HasPrefix(vol.BackingStore.Path, c.Libvirt.PoolPath+"/rhcos-") {
		t.Errorf("worker-1's disk on hv2: found %v, backing %+v, %v; want the image uploaded into hv2's pool", found, vol.BackingStore, err)
	}
	names, _ := conn2.VolumeNames("lbt")
	if want := []string{"lbt-worker-1.ign", rl.VolumeName("lbt", "worker-1")}; len(names) != 3 || !slices.Contains(names, want[0]) || !slices.Contains(names, want[1]) {
		t.Errorf("hv2's pool holds %v; want worker-1's disk and Ignition and one RHCOS image", names)
	}
	if err := conn2.StartDomain("lbt-worker-1", true); err != nil {
		t.Fatalf("start worker-1 on hv2: %v", err)
	}
	if links, err := inNS(d2, "").Links(ctx); err != nil {
		t.Fatal(err)
	} else {
		var ports []string
		for _, l := range links {
			if l.Master == rl.Bridge("lbt") {
				ports = append(ports, fmt.Sprintf("%s(%s) mtu %d", l.Name, l.Kind, l.MTU))
			}
		}
		if len(ports) != 2 || !strings.Contains(strings.Join(ports, " "), "vx-lbt(vxlan) mtu 1450") || strings.Count(strings.Join(ports, " "), "mtu 1450") != 2 {
			t.Errorf("hv2's bridge ports: %v; want worker-1's tap and vx-lbt, both at MTU 1450", ports)
		}
	}
	if err := conn2.StopDomain("lbt-worker-1"); err != nil {
		t.Fatal(err)
	}
	if r := build(c, false); len(r.Built)+len(r.Restored) != 0 {
		t.Errorf("second build did something: %v %v", r.Built, r.Restored)
	}

	// worker-1 moves to hv1: a replace naming both hosts.
	moved := *c
	moved.Nodes = slices.Clone(c.Nodes)
	moved.Nodes[len(moved.Nodes)-1].Host = ""
	plan = map[string]string{}
	for _, p := range build(&moved, true).Plan {
		plan[p.Target] = string(p.Action) + ": " + p.Why()
	}
	// The disk is probed: a replace naming both hosts. The VM, downstream of it, is planned from
	// its changed reads (the engine probes a target only once its upstreams stand).
	if tg := "libvirt/volume/worker-1"; !strings.HasPrefix(plan[tg], "replace: ") || !strings.Contains(plan[tg], "moves from host hv2 ("+uri2+") to host hv1") {
		t.Errorf("plan of %s after the move: %q", tg, plan[tg])
	}
	if tg := "libvirt/vm/worker-1"; !strings.Contains(plan[tg], "nodes.worker-1.host removed") {
		t.Errorf("plan of %s after the move: %q", tg, plan[tg])
	}
	build(&moved, false)
	if _, _, found, _ := conn1.Domain("lbt-worker-1"); !found {
		t.Error("worker-1 is not on hv1 after the move")
	}
	if _, _, found, _ := conn2.Domain("lbt-worker-1"); found {
		t.Error("worker-1 is still on hv2 after the move")
	}
	if names, _ := conn2.VolumeNames("lbt"); slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "worker-1") }) {
		t.Errorf("hv2's pool after the move: %v", names)
	}

	// hv2 down: destroy names it and keeps its records; back up, destroy removes the rest.
	hv2Up.Store(false)
	rep, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: &moved}, OutDir: out})
	if err == nil || !strings.Contains(err.Error(), "host hv2 is unreachable") {
		t.Errorf("destroy with hv2 down: %v", err)
	}
	if rep != nil && slices.ContainsFunc(rep.Destroyed, func(s string) bool { return strings.HasSuffix(s, "/hv2") }) {
		t.Errorf("destroy with hv2 down says it destroyed %v", rep.Destroyed)
	}
	for _, rec := range []string{"libvirt/pool/hv2", "libvirt/bridge/hv2", "vxlan/hv2"} {
		if !fileExists(filepath.Join(out, rec, "record.json")) {
			t.Errorf("%s's record went while hv2 was down", rec)
		}
	}
	hv2Up.Store(true)
	for round := 0; round < 2; round++ {
		rep, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: &moved}, OutDir: out})
		if err != nil {
			t.Fatalf("destroy round %d: %v", round, err)
		}
		if round == 1 && len(rep.Destroyed) != 0 {
			t.Errorf("second destroy destroyed %v", rep.Destroyed)
		}
	}
	for i, conn := range []*virt.Conn{conn1, conn2} {
		if ds, _ := conn.DomainNames(); len(ds) != 0 {
			t.Errorf("hv%d: domains left %v", i+1, ds)
		}
		if nets, _ := conn.Networks(); len(nets) != 0 {
			t.Errorf("hv%d: networks left %v", i+1, slices.Sorted(mapsKeys(nets)))
		}
		if _, _, found, _ := conn.Pool("lbt"); found {
			t.Errorf("hv%d: pool left", i+1)
		}
	}
	for i, d := range []*testenv.Libvirtd{d1, d2} {
		if o, _ := d.Exec("ip", "-o", "link", "show"); strings.Contains(string(o), "virbr-lbt") || strings.Contains(string(o), "vx-lbt") {
			t.Errorf("hv%d: links left:\n%s", i+1, o)
		}
	}
	if o, err := exec.Command("nsenter", "-t", fmt.Sprint(d2.Pid), "-m", "ls", "-A", base).CombinedOutput(); err != nil || strings.TrimSpace(string(o)) != "" {
		t.Errorf("hv2's disk after destroy: %q %v", o, err)
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func fileExists(p string) bool {
	_, err := exec.Command("test", "-e", p).CombinedOutput()
	return err == nil
}
