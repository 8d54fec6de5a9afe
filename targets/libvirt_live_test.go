package targets

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/testenv"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/virt"
)

// lvLive is what a running lab's network looks like from inside its namespace: the bridge's
// ifindex (a replaced network gets a new bridge), the network's dnsmasq PID, and each running
// domain's live NICs as libvirt reports them.
type lvLive struct {
	ifindex string
	dnsmasq string
	nics    map[string][]string
}

func lvObserveLive(t *testing.T, d *testenv.Libvirtd, conn *virt.Conn, network string, domains []string) lvLive {
	t.Helper()
	o, err := d.Exec("cat", "/sys/class/net/"+rl.Bridge(network)+"/ifindex")
	if err != nil {
		t.Fatalf("bridge %s: %v: %s", rl.Bridge(network), err, o)
	}
	l := lvLive{ifindex: strings.TrimSpace(string(o)), nics: map[string][]string{}}
	l.dnsmasq = lvDnsmasqPID(t, d, network)
	for _, dom := range domains {
		nics, err := conn.LiveInterfaces(dom)
		if err != nil {
			t.Fatal(err)
		}
		l.nics[dom] = nics
		for _, n := range nics {
			// The kernel agrees with libvirt: the tap device's master is the bridge.
			f := strings.Fields(n)
			if len(f) < 2 {
				t.Fatalf("%s: NIC %q has no bridge or device", dom, n)
			}
			if o, err := d.Exec("ip", "-o", "link", "show", "dev", f[1]); err != nil || !strings.Contains(string(o), "master "+f[0]+" ") {
				t.Errorf("%s: tap %s not on bridge %s: %v %s", dom, f[1], f[0], err, o)
			}
		}
	}
	return l
}

// lvDnsmasqPID finds the network's dnsmasq among the namespace's processes by its
// configuration file (libvirt names it <network>.conf).
func lvDnsmasqPID(t *testing.T, d *testenv.Libvirtd, network string) string {
	t.Helper()
	out, err := d.Pids()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range out {
		b, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if strings.Contains(string(b), "dnsmasq") && strings.Contains(string(b), "/"+network+".conf") {
			return pid
		}
	}
	t.Fatalf("no dnsmasq for network %s among %v", network, out)
	return ""
}

// TestLibvirtLiveEdits changes a running lab (two domains started paused) on a real libvirtd
// in a network namespace: adding worker-2 executes exactly its Ignition, disk and VM and an
// in-place network update; dig answers for it at once, while the bridge (same ifindex), the
// network's dnsmasq (same PID) and the running domains' links (same bridge and tap, checked
// from libvirt and the kernel) stay. A worker's IP edit is a DNS/DHCP update in place too.
func TestLibvirtLiveEdits(t *testing.T) {
	d := testenv.StartLibvirtd(t)
	sr := testenv.StartSampleRelease(t, true)
	testenv.Require(t, "dig")
	ctx := context.Background()
	out := t.TempDir()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	build := func(c *Config, dry bool) *Result {
		t.Helper()
		var log strings.Builder
		r, err := Build(ctx, Options{Config: c, OutDir: out, Goals: []string{"libvirt"}, DryRun: dry, Jobs: 2,
			Now: func() time.Time { return now }, Stdout: &log, Stderr: &log})
		if err != nil {
			t.Fatalf("build (dry %v): %v\n%s", dry, err, log.String())
		}
		return r
	}
	dig := func(name string) string {
		o, err := d.Exec("dig", "@198.18.0.1", "+short", "+time=2", "+tries=2", name, "A")
		if err != nil {
			t.Errorf("dig %s: %v\n%s", name, err, o)
		}
		return strings.TrimSpace(string(o))
	}
	c := lvLab(d, sr)
	build(c, false)
	t.Cleanup(func() { Destroy(ctx, Options{Config: c, OutDir: out}) })
	conn, err := virt.Connect(c.Libvirt.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	running := []string{"lbt-master-0", "lbt-worker-0"}
	for _, dom := range running {
		if err := conn.StartDomain(dom, true); err != nil {
			t.Fatal(err)
		}
		defer conn.StopDomain(dom)
	}
	before := lvObserveLive(t, d, conn, "lbt", running)

	// Add worker-2.
	c2 := lvLab(d, sr)
	c2.Nodes = append(c2.Nodes, Node{Name: "worker-2", Role: RoleWorker, IP: "198.18.0.23"})
	// Besides worker-2's own targets, the worker count reaches the install-config's compute
	// replicas (manifests/cluster/cluster-config-v1), hence the bootstrap Ignition and the
	// bootstrap VM's definition (the same XML: libvirt keeps it as it was); the role readers
	// infrastructure and scheduler rerun and write the same bytes.
	bootstrapChain := []string{"ignition/bootstrap", "libvirt/vm/bootstrap", "manifests/bootstrap", "manifests/cluster/cluster-config-v1",
		"manifests/cluster/infrastructure", "manifests/cluster/scheduler", "mco/controller-bootstrap", "mco/inputs", "mco/operator-bootstrap"}
	want := []string{"ignition/worker-2", "libvirt/dns", "libvirt/volume/worker-2", "libvirt/vm/worker-2"}
	want = append(want, bootstrapChain...)
	sort.Strings(want)
	if got := build(c2, false).Executed; !slices.Equal(got, want) {
		t.Errorf("adding worker-2 executed %v, want %v", got, want)
	}
	if got := dig("worker-2.lbt.example.test"); got != "198.18.0.23" {
		t.Errorf("dig worker-2 right after = %q, want 198.18.0.23", got)
	}
	after := lvObserveLive(t, d, conn, "lbt", running)
	if after.ifindex != before.ifindex {
		t.Errorf("bridge recreated: ifindex %s → %s", before.ifindex, after.ifindex)
	}
	if after.dnsmasq != before.dnsmasq {
		t.Errorf("dnsmasq restarted: PID %s → %s", before.dnsmasq, after.dnsmasq)
	}
	for _, dom := range running {
		if !slices.Equal(after.nics[dom], before.nics[dom]) {
			t.Errorf("%s NICs: %v → %v", dom, before.nics[dom], after.nics[dom])
		}
	}
	if _, _, found, _ := conn.Domain("lbt-worker-2"); !found {
		t.Error("domain lbt-worker-2 not defined")
	}

	// A worker's IP changes: DNS and DHCP in place.
	c3 := lvLab(d, sr)
	c3.Nodes = append(c3.Nodes, Node{Name: "worker-2", Role: RoleWorker, IP: "198.18.0.33"})
	// Its Ignition carries its address, so its VM is redefined (same XML) after it.
	if r := build(c3, false); !slices.Equal(r.Executed, []string{"ignition/worker-2", "libvirt/dns", "libvirt/vm/worker-2"}) {
		t.Errorf("IP edit executed %v", r.Executed)
	}
	if got := dig("worker-2.lbt.example.test"); got != "198.18.0.33" {
		t.Errorf("dig worker-2 after its IP edit = %q, want 198.18.0.33", got)
	}
	again := lvObserveLive(t, d, conn, "lbt", running)
	if again.ifindex != before.ifindex || again.dnsmasq != before.dnsmasq {
		t.Errorf("network recreated by a DNS edit: ifindex %s → %s, dnsmasq PID %s → %s", before.ifindex, again.ifindex, before.dnsmasq, again.dnsmasq)
	}
	for _, dom := range running {
		if !slices.Equal(again.nics[dom], before.nics[dom]) {
			t.Errorf("%s NICs: %v → %v", dom, before.nics[dom], again.nics[dom])
		}
	}
	t.Logf("dnsmasq PID: %s, after add %s, after IP edit %s", before.dnsmasq, after.dnsmasq, again.dnsmasq)
	got, _, _, err := conn.Network("lbt")
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, h := range got.DNS.Host {
		for _, hn := range h.Hostnames {
			if strings.HasPrefix(hn.Hostname, "worker-2.") {
				hosts = append(hosts, h.IP)
			}
		}
	}
	if !slices.Equal(hosts, []string{"198.18.0.33"}) {
		t.Errorf("persistent definition's worker-2 DNS hosts after the edit: %v", hosts)
	}
}
