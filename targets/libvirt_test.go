package targets

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/virt"
)

// TestLibvirtTargetsDeclared checks the family's shape on the default lab: one network, its
// records and one pool, a volume and a VM per node, all External with Probe and Destroy; and that a node's
// size override is read only by that node's VM.
func TestLibvirtTargetsDeclared(t *testing.T) {
	c := testLabConfig()
	ts := libvirtTargets(c, false)
	if len(ts) != 3+2*len(c.Nodes) {
		t.Fatalf("%d targets, want %d", len(ts), 3+2*len(c.Nodes))
	}
	for _, tg := range ts {
		if !tg.External || tg.Probe == nil || tg.Destroy == nil {
			t.Errorf("%s: External %v, Probe %v, Destroy %v: want all set", tg.Name, tg.External, tg.Probe != nil, tg.Destroy != nil)
		}
		if err := tg.Check(); err != nil {
			t.Error(err)
		}
	}
	c.Nodes[5].MemoryMiB = 12288 // worker-1
	for _, tg := range libvirtTargets(c, false) {
		has := slices.Contains(tg.Reads, "nodes.worker-1.memoryMiB")
		if has != (tg.Name == "libvirt/vm/worker-1") {
			t.Errorf("%s reads nodes.worker-1.memoryMiB: %v", tg.Name, has)
		}
	}
}

// lvLab is a small lab on 198.18.0.0/24 (RFC 2544 benchmarking range), used only inside the
// test's network namespace, with VMs of 128 MiB and 1 GiB disks in software emulation. The
// VMs boot from ignition/<node>, so the release payload is the offline sample sr.
func lvLab(d *testenv.Libvirtd, sr testenv.SampleRelease) *lab.Config {
	c := testLabConfig()
	c.Release.Image, c.Release.Version, c.Release.Mirrors = sr.Image, sr.Version, sr.Mirrors
	c.Access.PullSecretFile, c.Access.SSHKeyFile = sr.PullSecretFile, sr.SSHKeyFile
	c.Cluster.Name, c.Cluster.BaseDomain = "lbt", "example.test"
	c.Network.MachineNetwork, c.Network.Gateway, c.Network.DNS = "198.18.0.0/24", "198.18.0.1", "198.18.0.1"
	c.Network.APIVIP, c.Network.IngressVIP = "198.18.0.10", "198.18.0.11"
	c.Network.DHCPStart, c.Network.DHCPEnd = "198.18.0.200", "198.18.0.254"
	for i := range c.Nodes {
		c.Nodes[i].IP = strings.Replace(c.Nodes[i].IP, "192.168.126.", "198.18.0.", 1)
	}
	small := lab.Size{VCPUs: 1, MemoryMiB: 128, DiskGiB: 1}
	c.Sizes = lab.RoleSizes{Bootstrap: small, Master: small, Worker: small}
	c.Libvirt = lab.LibvirtConfig{URI: d.URI("qemu:///system"), Network: "lbt", Pool: "lbt", PoolPath: filepath.Join(d.Dir, "pool"), DomainType: "qemu"}
	return c
}

// lvHost starts a real libvirtd in a network namespace of its own, makes it the host the
// targets see (useNetnsHost), and serves the offline sample release with the MCO for lvLab.
func lvHost(t *testing.T) (*testenv.Libvirtd, testenv.SampleRelease) {
	t.Helper()
	d := testenv.StartLibvirtd(t)
	useNetnsHost(t, d)
	return d, testenv.StartSampleRelease(t, true)
}

// lvNow is the libvirt tests' build clock: fixed, so a rerun's records equal the first's.
var lvNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// lvBuild builds goals of c into out (-j 2, the clock lvNow; dry: the plan only) and returns
// the result with the build's log (stdout and stderr as they came) for a failure message.
func lvBuild(ctx context.Context, l Lab, out string, dry bool, goals ...string) (*engine.Result, string, error) {
	var log strings.Builder
	r, err := engine.Build(ctx, engine.Options{Config: l, OutDir: out, Goals: goals, DryRun: dry, Jobs: 2,
		Now: func() time.Time { return lvNow }, Stdout: &log, Stderr: &log})
	return r, log.String(), err
}

// lvBuilder is lvBuild of goals into out as a test step: a failed build fails t with its log.
func lvBuilder(ctx context.Context, t *testing.T, out string, goals ...string) func(c *lab.Config, dry bool) *engine.Result {
	return lvBuilderWith(ctx, t, out, Lab{}, goals...)
}

// lvBuilderWith is lvBuilder with run's run options (Restart) on every build.
func lvBuilderWith(ctx context.Context, t *testing.T, out string, run Lab, goals ...string) func(c *lab.Config, dry bool) *engine.Result {
	return func(c *lab.Config, dry bool) *engine.Result {
		t.Helper()
		run.Config = c
		r, log, err := lvBuild(ctx, run, out, dry, goals...)
		if err != nil {
			t.Fatalf("build %v (dry %v): %v\n%s", goals, dry, err, log)
		}
		return r
	}
}

// TestLibvirtFamilyReal builds the family against a real libvirtd in a network namespace:
// everything is created and the network's dnsmasq answers; a second build changes nothing;
// one worker's memory edit plans and applies exactly that VM; a domain removed by hand shows
// in the plan as create; destroy leaves nothing and is safe to rerun.
func TestLibvirtFamilyReal(t *testing.T) {
	d, sr := lvHost(t)
	testenv.Require(t, "dig")
	ctx := context.Background()
	out := t.TempDir()
	build := lvBuilder(ctx, t, out, "libvirt")
	c := lvLab(d, sr)
	r := build(c, false)
	if got := lvOwn(r.Built); len(got) != 3+2*len(c.Nodes) {
		t.Fatalf("first build executed %v", got)
	}
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}) }) // if the test stops early

	dig := func(name, typ string) string {
		o, err := d.Exec("dig", "@198.18.0.1", "+short", "+time=2", "+tries=2", name, typ)
		if err != nil {
			t.Errorf("dig %s: %v\n%s", name, err, o)
		}
		return strings.TrimSpace(string(o))
	}
	for name, want := range map[string]string{
		"api.lbt.example.test": "198.18.0.10", "api-int.lbt.example.test": "198.18.0.10",
		"master-2.lbt.example.test": "198.18.0.103", "foo.apps.lbt.example.test": "198.18.0.11",
	} {
		if got := dig(name, "A"); got != want {
			t.Errorf("dig %s = %q, want %q", name, got, want)
		}
	}
	if srv := dig("_etcd-server-ssl._tcp.lbt.example.test", "SRV"); strings.Count(srv, " 2380 etcd-") != 3 {
		t.Errorf("SRV answer:\n%s", srv)
	}

	// VMs start (paused) and stop.
	conn, err := virt.Connect(c.Libvirt.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.StartDomain("lbt-master-0", true); err != nil {
		t.Fatal(err)
	}
	if err := conn.StopDomain("lbt-master-0"); err != nil {
		t.Fatal(err)
	}

	if r := build(c, false); len(r.Built)+len(r.Restored) != 0 {
		t.Errorf("second build did something: executed %v reused %v", r.Built, r.Restored)
	}

	c2 := lvLab(d, sr)
	c2.Nodes[5].MemoryMiB = 256
	// host/preflight checks the host's memory again (it reads every node's size).
	var planned []string
	for _, it := range build(c2, true).Plan {
		planned = append(planned, string(it.Action)+" "+it.Target)
	}
	if !slices.Equal(planned, []string{"build host/preflight", "update libvirt/vm/worker-1"}) {
		t.Errorf("plan after a memory edit: %v, want the preflight and an update of libvirt/vm/worker-1", planned)
	}
	if r := build(c2, false); !slices.Equal(lvOwn(r.Built), []string{"libvirt/vm/worker-1"}) {
		t.Errorf("apply after a memory edit executed %v", r.Built)
	}
	if dom, _, _, err := conn.Domain("lbt-worker-1"); err != nil || dom.Memory.Value != 256*1024 {
		t.Errorf("worker-1 memory after apply: %+v, %v", dom.Memory, err)
	}

	// Drift made by hand: a deleted domain and a deleted DNS-bearing network show in the plan.
	if err := conn.DeleteDomain("lbt-worker-0"); err != nil {
		t.Fatal(err)
	}
	p := build(c2, true)
	if len(p.Plan) != 1 || p.Plan[0].Target != "libvirt/vm/worker-0" || p.Plan[0].Action != engine.Create {
		t.Errorf("plan after deleting a domain by hand: %+v", p.Plan)
	}
	if r := build(c2, false); !slices.Equal(r.Built, []string{"libvirt/vm/worker-0"}) {
		t.Errorf("repair executed %v", r.Built)
	}

	// Destroying libvirt/dns alone takes the lab's records out of the running dnsmasq.
	rep, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: c2}, OutDir: out, Goals: []string{"libvirt/dns"}})
	if err != nil || !slices.Equal(rep.Destroyed, []string{"libvirt/dns"}) {
		t.Fatalf("destroy libvirt/dns: %+v, %v", rep, err)
	}
	if o, _ := d.Exec("dig", "@198.18.0.1", "+short", "+time=2", "+tries=2", "master-2.lbt.example.test", "A"); strings.TrimSpace(string(o)) != "" {
		t.Errorf("master-2 still resolves after destroying libvirt/dns: %s", o)
	}
	for round := 0; round < 2; round++ {
		if _, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: c2}, OutDir: out}); err != nil {
			t.Fatalf("destroy round %d: %v", round, err)
		}
	}
	for _, n := range c.Nodes {
		if _, _, found, _ := conn.Domain("lbt-" + n.Name); found {
			t.Errorf("domain lbt-%s left behind", n.Name)
		}
	}
	if _, _, found, _ := conn.Pool("lbt"); found {
		t.Error("pool left behind")
	}
	if _, _, found, _ := conn.Network("lbt"); found {
		t.Error("network left behind")
	}
	if o, err := d.Exec("ip", "link", "show", rl.Bridge("lbt")); err == nil {
		t.Errorf("bridge left behind: %s", o)
	}
	if ents, _ := os.ReadDir(filepath.Join(d.Dir, "pool")); len(ents) != 0 {
		t.Errorf("pool directory not empty: %v", ents)
	}
}

// TestLibvirtFamilyTestDriver runs the family against libvirt's test driver (objects only, no
// processes): hand-made drift in the network's DNS is planned as an in-place update and repaired, and a
// renamed network removes the old one instead of leaving it behind.
func TestLibvirtFamilyTestDriver(t *testing.T) {
	d, sr := lvHost(t)
	ctx := context.Background()
	out := t.TempDir()
	newLab := func(network string) *lab.Config {
		c := lvLab(d, sr)
		c.Libvirt.URI, c.Libvirt.DomainType, c.Libvirt.Network = d.URI("test:///default"), "test", network
		return c
	}
	// The test driver keeps its state only while a connection is open.
	conn, err := virt.Connect(d.URI("test:///default"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	build := lvBuilder(ctx, t, out, "libvirt")
	c := newLab("lbt")
	if got := lvOwn(build(c, false).Built); len(got) != 3+2*len(c.Nodes) {
		t.Fatalf("first build executed %v", got)
	}

	// Drift: someone redefines the network without master-2's DNS entry.
	got, _, _, err := conn.Network("lbt")
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range got.DNS.Host {
		if h.IP == "198.18.0.103" {
			got.DNS.Host = slices.Delete(got.DNS.Host, i, i+1)
			break
		}
	}
	got.UUID = ""
	if err := conn.DeleteNetwork("lbt"); err != nil {
		t.Fatal(err)
	}
	if err := conn.CreateNetwork(got); err != nil {
		t.Fatal(err)
	}
	p := build(c, true)
	if len(p.Plan) != 1 || p.Plan[0].Target != "libvirt/dns" || p.Plan[0].Action != engine.Update ||
		!strings.Contains(p.Plan[0].Why(), "in place: add dns-host 198.18.0.103 etcd-2.lbt.example.test,master-2.lbt.example.test") {
		t.Errorf("plan after DNS drift: %+v", p.Plan)
	}
	if r := build(c, false); !slices.Equal(r.Built, []string{"libvirt/dns"}) {
		t.Errorf("repair executed %v", r.Built)
	}
	if r := build(c, false); len(r.Built) != 0 {
		t.Errorf("build after repair executed %v", r.Built)
	}

	// Rename: the old network goes, the VMs follow the new one.
	c2 := newLab("lbt2")
	r := build(c2, false)
	if !slices.Contains(r.Built, "libvirt/network") || !slices.Contains(r.Built, "libvirt/vm/master-0") {
		t.Errorf("rename executed %v", r.Built)
	}
	if _, _, found, _ := conn.Network("lbt"); found {
		t.Error("the renamed network's old definition was left behind")
	}

	// Destroy says "destroyed" only for what existed: worker-0's VM, removed by hand, is
	// already absent. Destroying libvirt/dns removes exactly the lab's records from the
	// running network; the network itself goes with the second destroy.
	if err := conn.DeleteDomain("lbt-worker-0"); err != nil {
		t.Fatal(err)
	}
	var vms, rest []string
	for _, tg := range libvirtTargets(c2, false) {
		switch {
		case strings.HasPrefix(tg.Name, "libvirt/vm/") && tg.Name != "libvirt/vm/worker-0":
			vms = append(vms, tg.Name)
		case !strings.HasPrefix(tg.Name, "libvirt/vm/") && tg.Name != "libvirt/dns":
			rest = append(rest, tg.Name)
		}
	}
	rep, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: c2}, OutDir: out, Goals: []string{"libvirt/dns"}})
	if err != nil {
		t.Fatal(err)
	}
	eqSet(t, "destroyed (dns)", rep.Destroyed, []string{"libvirt/dns"})
	n, _, found, err := conn.Network("lbt2")
	if err != nil || !found {
		t.Fatalf("network lbt2 after destroying libvirt/dns: found %v, %v", found, err)
	}
	if n.DNS != nil && len(n.DNS.Host)+len(n.DNS.SRVs) != 0 || n.IPs[0].DHCP != nil && len(n.IPs[0].DHCP.Hosts) != 0 {
		t.Errorf("records left after destroying libvirt/dns: %+v %+v", n.DNS, n.IPs[0].DHCP)
	}
	rep, err = engine.Destroy(ctx, engine.Options{Config: Lab{Config: c2}, OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	eqSet(t, "destroyed (rest)", rep.Destroyed, append(vms, rest...))
	eqSet(t, "absent (rest)", rep.Absent, []string{"libvirt/vm/worker-0"})
	if _, _, found, _ := conn.Network("lbt2"); found {
		t.Error("network left after destroy")
	}
	if _, _, found, _ := conn.Domain("lbt-master-0"); found {
		t.Error("domain left after destroy")
	}
	if rep, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: c2}, OutDir: out}); err != nil || len(rep.Destroyed)+len(rep.Absent)+len(rep.Failed) != 0 {
		t.Errorf("a third destroy found %+v (%v)", rep, err)
	}
}

// eqSet fails the test unless got and want hold the same names.
func eqSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s: got %v, want %v", what, g, w)
	}
}

// lvOwn keeps the libvirt/* names of executed: a first build also makes the VMs' Ignition
// and everything upstream of it.
func lvOwn(executed []string) []string {
	var own []string
	for _, n := range executed {
		if strings.HasPrefix(n, "libvirt/") {
			own = append(own, n)
		}
	}
	return own
}
