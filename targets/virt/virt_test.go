package virt

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	rl "github.com/labbuild/labbuild/render/libvirt"
)

// benchSpec is a lab network on 198.18.0.0/24 (the benchmarking range, RFC 2544), used only
// inside the test's network namespace.
func benchSpec(name, cluster string) rl.NetworkSpec {
	s := rl.NetworkSpec{
		Name: name, Domain: cluster + ".example.test", MachineNetwork: "198.18.0.0/24",
		Gateway: "198.18.0.1", APIVIP: "198.18.0.10", IngressVIP: "198.18.0.11",
		DHCPStart: "198.18.0.200", DHCPEnd: "198.18.0.254",
	}
	for _, n := range []struct{ name, role, ip string }{
		{"bootstrap", rl.RoleBootstrap, "198.18.0.100"},
		{"master-0", rl.RoleMaster, "198.18.0.101"}, {"master-1", rl.RoleMaster, "198.18.0.102"}, {"master-2", rl.RoleMaster, "198.18.0.103"},
		{"worker-0", rl.RoleWorker, "198.18.0.110"},
	} {
		s.Nodes = append(s.Nodes, rl.Node{Name: n.name, Role: n.role, IP: n.ip, MAC: rl.MAC(cluster, n.name)})
	}
	return s
}

func TestConnectErrors(t *testing.T) {
	for _, uri := range []string{"", "no-scheme", "qemu+unix:///system?socket=/nonexistent/sock"} {
		if c, err := Connect(uri); err == nil {
			c.Close()
			t.Errorf("Connect(%q) succeeded", uri)
		}
	}
}

// TestLibvirt runs the adapter against a real libvirtd in a network namespace: first through
// its test driver (objects only), then through the QEMU driver and the real network driver.
func TestLibvirt(t *testing.T) {
	d := testenv.StartLibvirtd(t)

	t.Run("test driver", func(t *testing.T) {
		c, err := Connect(d.URI("test:///default"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !c.IsTest() {
			t.Error("IsTest false for the test driver")
		}
		lifecycle(t, c, d, "tdrv", "domtest", "test")
	})

	t.Run("qemu driver", func(t *testing.T) {
		c, err := Connect(d.URI("qemu:///system"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		lifecycle(t, c, d, "lbnet", "labq", "qemu")
	})
}

// lifecycle creates a network, pool, volume and domain, checks what libvirt reports matches
// semantically, starts and stops the domain, then deletes everything twice (the second time
// must be a no-op) and checks nothing is left.
func lifecycle(t *testing.T, c *Conn, d *testenv.Libvirtd, netName, cluster, domType string) {
	spec := benchSpec(netName, cluster)
	want, err := rl.Network(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := c.Network(netName); err != nil || found {
		t.Fatalf("network before create: found %v err %v", found, err)
	}
	if err := c.CreateNetwork(want); err != nil {
		t.Fatal(err)
	}
	got, active, found, err := c.Network(netName)
	if err != nil || !found || !active {
		t.Fatalf("network after create: found %v active %v err %v", found, active, err)
	}
	if diff := rl.NetworkDiff(want, got, rl.DiffOptions{IgnoreDnsmasqOptions: c.IsTest()}); len(diff) != 0 {
		t.Errorf("network as libvirt reports it differs: %v", diff)
	}

	if !c.IsTest() {
		dnsChecks(t, d, spec)
	}

	poolPath := filepath.Join(d.Dir, "pool-"+cluster)
	pool, _ := rl.Pool(rl.PoolSpec{Name: cluster, Path: poolPath})
	if err := c.CreatePool(pool); err != nil {
		t.Fatal(err)
	}
	gp, active, found, err := c.Pool(cluster)
	if err != nil || !found || !active || len(rl.PoolDiff(pool, gp)) != 0 {
		t.Fatalf("pool: found %v active %v err %v diff %v", found, active, err, rl.PoolDiff(pool, gp))
	}
	vol, _ := rl.Volume(rl.VolumeSpec{Name: rl.VolumeName(cluster, "worker-0"), CapacityGiB: 1})
	path, err := c.CreateVolume(cluster, vol)
	if err != nil {
		t.Fatal(err)
	}
	gv, found, err := c.Volume(cluster, vol.Name)
	if err != nil || !found {
		t.Fatalf("volume: found %v err %v", found, err)
	}
	if diff := rl.VolumeDiff(vol, gv); len(diff) != 0 {
		t.Errorf("volume differs: %v", diff)
	}
	if !c.IsTest() {
		out, err := exec.Command("qemu-img", "info", path).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "file format: qcow2") || !strings.Contains(string(out), "virtual size: 1 GiB") {
			t.Errorf("qemu-img info %s: %v\n%s", path, err, out)
		}
	}

	ds := rl.DomainSpec{Name: cluster + "-worker-0", Type: domType, VCPUs: 1, MemoryMiB: 128, Disk: path, Network: netName, MAC: rl.MAC(cluster, "worker-0")}
	dom, _ := rl.Domain(ds)
	if err := c.DefineDomain(dom); err != nil {
		t.Fatal(err)
	}
	gd, st, found, err := c.Domain(ds.Name)
	if err != nil || !found || st != DomainShutoff {
		t.Fatalf("domain: found %v state %v err %v", found, st, err)
	}
	if diff := rl.DomainDiff(dom, gd); len(diff) != 0 {
		t.Errorf("domain differs: %v", diff)
	}
	if err := c.StartDomain(ds.Name, !c.IsTest()); err != nil { // the test driver cannot start paused
		t.Fatal(err)
	}
	if _, st, _, _ := c.Domain(ds.Name); st != DomainPaused && st != DomainRunning {
		t.Errorf("after start paused: state %v", st)
	}
	if err := c.StopDomain(ds.Name); err != nil {
		t.Fatal(err)
	}
	if _, st, _, _ := c.Domain(ds.Name); st != DomainShutoff {
		t.Errorf("after stop: state %v", st)
	}

	for round := 0; round < 2; round++ {
		for _, err := range []error{c.DeleteDomain(ds.Name), c.DeleteVolume(cluster, vol.Name), c.DeletePool(cluster), c.DeleteNetwork(netName)} {
			if err != nil {
				t.Fatalf("delete round %d: %v", round, err)
			}
		}
	}
	if _, _, found, _ := c.Domain(ds.Name); found {
		t.Error("domain left behind")
	}
	if _, _, found, _ := c.Pool(cluster); found {
		t.Error("pool left behind")
	}
	if _, _, found, _ := c.Network(netName); found {
		t.Error("network left behind")
	}
	if !c.IsTest() {
		if out, err := d.Exec("ip", "link", "show", rl.Bridge(netName)); err == nil {
			t.Errorf("bridge left behind:\n%s", out)
		}
	}
}

// dnsChecks queries the network's dnsmasq inside the namespace: api, api-int, a node, the
// three etcd SRV records and a name under the *.apps wildcard.
func dnsChecks(t *testing.T, d *testenv.Libvirtd, s rl.NetworkSpec) {
	testenv.Require(t, "dig")
	dig := func(args ...string) string {
		out, err := d.Exec("dig", append([]string{"@" + s.Gateway, "+short", "+time=2", "+tries=2"}, args...)...)
		if err != nil {
			t.Errorf("dig %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for _, tc := range []struct{ name, want string }{
		{"api." + s.Domain, s.APIVIP},
		{"api-int." + s.Domain, s.APIVIP},
		{"master-1." + s.Domain, "198.18.0.102"},
		{"etcd-2." + s.Domain, "198.18.0.103"},
		{"foo.apps." + s.Domain, s.IngressVIP},
		{"console-openshift-console.apps." + s.Domain, s.IngressVIP},
	} {
		if got := dig(tc.name, "A"); got != tc.want {
			t.Errorf("dig %s = %q, want %q", tc.name, got, tc.want)
		}
	}
	srv := dig("_etcd-server-ssl._tcp."+s.Domain, "SRV")
	for i := 0; i < 3; i++ {
		if !strings.Contains(srv, "2380 etcd-"+string(rune('0'+i))+"."+s.Domain+".") {
			t.Errorf("SRV answer lacks etcd-%d:\n%s", i, srv)
		}
	}
	if got := dig("nosuch." + s.Domain); got != "" {
		t.Errorf("unknown name answered %q", got)
	}
}
