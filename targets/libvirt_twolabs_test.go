package targets

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/virt"
)

// lvLabOn is lvLab as cluster name on 198.18.<third>.0/24, with its own network and pool.
func lvLabOn(d *testenv.Libvirtd, sr testenv.SampleRelease, name string, third string) *lab.Config {
	c := lvLab(d, sr)
	c.Cluster.Name = name
	c.Libvirt.Network, c.Libvirt.Pool, c.Libvirt.PoolPath = name, name, filepath.Join(d.Dir, "pool-"+name)
	sub := func(ip string) string { return strings.Replace(ip, "198.18.0.", "198.18."+third+".", 1) }
	c.Network.MachineNetwork = "198.18." + third + ".0/24"
	c.Network.Gateway, c.Network.DNS = sub(c.Network.Gateway), sub(c.Network.DNS)
	c.Network.APIVIP, c.Network.IngressVIP = sub(c.Network.APIVIP), sub(c.Network.IngressVIP)
	c.Network.DHCPStart, c.Network.DHCPEnd = sub(c.Network.DHCPStart), sub(c.Network.DHCPEnd)
	for i := range c.Nodes {
		c.Nodes[i].IP = sub(c.Nodes[i].IP)
	}
	return c
}

// TestLibvirtTwoLabs builds two labs side by side on one real libvirtd (distinct bridges,
// MACs, domains, pools, DNS), refuses a third whose subnet overlaps one of them (seen in
// libvirt, before anything is made), and destroys one: the other's domains, volumes, pool,
// network, bridge and DNS answers stay.
func TestLibvirtTwoLabs(t *testing.T) {
	d, sr := lvHost(t)
	testenv.Require(t, "dig")
	ctx := context.Background()
	build := func(c *lab.Config, out string, dry bool) (*engine.Result, string, error) {
		return lvBuild(ctx, Lab{Config: c}, out, dry, "libvirt")
	}
	a, b := lvLabOn(d, sr, "lba", "0"), lvLabOn(d, sr, "lbb", "1")
	outA, outB := t.TempDir(), t.TempDir()
	for _, l := range []struct {
		c   *lab.Config
		out string
	}{{a, outA}, {b, outB}} {
		if _, log, err := build(l.c, l.out, false); err != nil {
			t.Fatalf("build %s: %v\n%s", l.c.Cluster.Name, err, log)
		}
		t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: l.c}, OutDir: l.out}) })
	}
	conn, err := virt.Connect(a.Libvirt.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dig := func(server, name string) string {
		o, _ := d.Exec("dig", "@"+server, "+short", "+time=2", "+tries=2", name, "A")
		return strings.TrimSpace(string(o))
	}
	if rl.MAC("lba", "master-0") == rl.MAC("lbb", "master-0") {
		t.Error("the two labs' master-0 share a MAC")
	}
	for _, l := range []struct{ name, gw, ip string }{{"lba", "198.18.0.1", "198.18.0.101"}, {"lbb", "198.18.1.1", "198.18.1.101"}} {
		if _, err := d.Exec("ip", "link", "show", rl.Bridge(l.name)); err != nil {
			t.Errorf("bridge %s missing", rl.Bridge(l.name))
		}
		if got := dig(l.gw, "master-0."+l.name+".example.test"); got != l.ip {
			t.Errorf("dig master-0.%s = %q, want %s", l.name, got, l.ip)
		}
	}

	// A third lab on lbb's subnet is refused, naming the field, before its network is made.
	c := lvLabOn(d, sr, "lbc", "1")
	var log strings.Builder
	outC := t.TempDir()
	_, err = engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: outC, Goals: []string{"libvirt/network"}, Stdout: &log, Stderr: &log})
	if log := log.String(); err == nil || !strings.Contains(log, "network.machineNetwork 198.18.1.0/24 overlaps 198.18.1.0/24 of libvirt network lbb") {
		t.Errorf("overlapping lab: err %v, log:\n%s", err, log)
	}
	if _, _, found, _ := conn.Network("lbc"); found {
		t.Error("network lbc made despite the collision")
	}

	if _, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: a}, OutDir: outA}); err != nil {
		t.Fatal(err)
	}
	for _, n := range a.Nodes {
		if _, _, found, _ := conn.Domain("lba-" + n.Name); found {
			t.Errorf("domain lba-%s left after destroying lab lba", n.Name)
		}
		if _, _, found, _ := conn.Domain("lbb-" + n.Name); !found {
			t.Errorf("domain lbb-%s gone with lab lba", n.Name)
		}
		if _, found, _ := conn.Volume("lbb", rl.VolumeName("lbb", n.Name)); !found {
			t.Errorf("volume of lbb-%s gone with lab lba", n.Name)
		}
	}
	if _, active, found, _ := conn.Network("lbb"); !found || !active {
		t.Errorf("network lbb after destroying lba: found %v active %v", found, active)
	}
	if _, active, found, _ := conn.Pool("lbb"); !found || !active {
		t.Errorf("pool lbb after destroying lba: found %v active %v", found, active)
	}
	if _, _, found, _ := conn.Network("lba"); found {
		t.Error("network lba left behind")
	}
	if got := dig("198.18.1.1", "api.lbb.example.test"); got != "198.18.1.10" {
		t.Errorf("lbb's DNS after destroying lba: %q", got)
	}
	if r, log, err := build(b, outB, true); err != nil || len(r.Plan) != 0 {
		t.Errorf("lab lbb's plan after destroying lba: %+v %v\n%s", r.Plan, err, log)
	}
}
