package targets

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/hostexec"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
	"github.com/labbuild/labbuild/targets/virt"
)

var updatePlans = flag.Bool("update", false, "rewrite the plan golden files in testdata/plans/")

// lvPlanText prints a plan as `labbuild -n` does (action, target, reasons; then the
// Terraform-style summary line), keeping the lines of the targets keep selects.
func lvPlanText(plan []engine.PlanItem, keep func(string) bool) []byte {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, p := range plan {
		if keep(p.Target) {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", p.Action, p.Target, p.Why())
		}
	}
	tw.Flush()
	var ext []engine.PlanItem
	for _, p := range plan {
		if keep(p.Target) {
			ext = append(ext, p)
		}
	}
	fmt.Fprintln(&b, engine.CountPlan(ext).Terraform())
	return b.Bytes()
}

// lvGolden compares got with testdata/plans/name (rewritten with -update).
func lvGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", "plans", name)
	if *updatePlans {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("plan %s:\n--- got\n%s--- want\n%s", name, got, want)
	}
}

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

func lvSorted(xs []string) []string { sort.Strings(xs); return xs }

// hpInNetns runs haproxy/service's commands (ip, haproxy) inside d's network namespace for
// the rest of the test.
func hpInNetns(t *testing.T, d *testenv.Libvirtd) {
	t.Helper()
	testenv.Require(t, "haproxy")
	orig := hpCommand
	hpCommand = func(name string, args ...string) *exec.Cmd {
		return orig("ip", append([]string{"netns", "exec", d.NetNS, name}, args...)...)
	}
	t.Cleanup(func() { hpCommand = orig })
}

// TestLibvirtLiveEdits changes a running lab (two domains started paused, labbuild's haproxy
// serving) on a real libvirtd in a network namespace: adding worker-2 executes exactly its
// Ignition, disk and VM, an in-place network update and the haproxy config with its ingress
// backend, soft-reloaded (haproxy -sf: a new master process, the old one exits after handing
// over; the stats page lists worker-2 in the ingress backends) — no bootstrap manifest, no
// bootstrap Ignition, no other VM. dig answers for it at once, while the bridge (same
// ifindex), the network's dnsmasq (same PID) and the running domains' links (same bridge and
// tap, checked from libvirt and the kernel) stay. A worker's IP edit is a DNS/DHCP update in
// place too.
func TestLibvirtLiveEdits(t *testing.T) {
	d, sr := lvHost(t)
	hpInNetns(t, d)
	testenv.Require(t, "dig")
	curl := testenv.Require(t, "curl")
	ctx := context.Background()
	out := t.TempDir()
	build := lvBuilder(ctx, t, out, "libvirt", "haproxy/service")
	dig := func(name string) string {
		o, err := d.Exec("dig", "@198.18.0.1", "+short", "+time=2", "+tries=2", name, "A")
		if err != nil {
			t.Errorf("dig %s: %v\n%s", name, err, o)
		}
		return strings.TrimSpace(string(o))
	}
	c := lvLab(d, sr)
	build(c, false)
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}) })
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
	hpPID := func() int {
		t.Helper()
		r, ok, err := hpPrev(engine.RecordStep(&engine.Target{Name: "haproxy/service"}, filepath.Join(out, "haproxy/service")))
		if err != nil || !ok || !hostexec.HAProxyAlive(r.PID) {
			t.Fatalf("haproxy/service record %+v (found %v, %v): not a running haproxy", r, ok, err)
		}
		return r.PID
	}
	stats := func() string {
		o, _ := d.Exec(curl, "-s", "--max-time", "3", "http://198.18.0.10:9000/stats;csv")
		return string(o)
	}
	hpFirst := hpPID()

	// Add worker-2. The install-config labbuild hands the cluster has compute replicas 0 (as
	// the installer's UPI guides), and the bootstrap manifests read the worker count only up to
	// 2, so nothing of the bootstrap chain runs: exactly worker-2's Ignition, volume and VM, the
	// network's records in place, and the haproxy configs with worker-2 in the ingress backends
	// (haproxy/service soft-reloads). host/preflight is the host gate: it checks the host's
	// memory and disk against every node's size again, and changes nothing.
	c2 := lvLab(d, sr)
	c2.Nodes = append(c2.Nodes, lab.Node{Name: "worker-2", Role: lab.RoleWorker, IP: "198.18.0.23"})
	hpSet := []string{"haproxy/config", "haproxy/config-post-pivot", "haproxy/service"}
	want := append([]string{"host/preflight", "ignition/worker-2", "libvirt/dns", "libvirt/volume/worker-2", "libvirt/vm/worker-2"}, hpSet...)
	sort.Strings(want)
	own := func(n string) bool {
		return strings.HasPrefix(n, "libvirt/") || strings.HasPrefix(n, "haproxy/") || n == "ignition/worker-2"
	}
	lvGolden(t, "add-worker-2.txt", lvPlanText(build(c2, true).Plan, own))
	if got := build(c2, false).Built; !slices.Equal(got, want) {
		t.Errorf("adding worker-2 executed %v, want exactly %v", got, want)
	}
	// The soft reload: a new haproxy serves the new config, the old one exits.
	hpSecond := hpPID()
	if hpSecond == hpFirst {
		t.Errorf("haproxy not reloaded: pid %d", hpFirst)
	}
	testenv.WaitFor(t, "the old haproxy to exit after -sf", 10*time.Second, func() error {
		if hostexec.HAProxyAlive(hpFirst) {
			return os.ErrExist
		}
		return nil
	})
	testenv.WaitFor(t, "worker-2 in the ingress backends", 10*time.Second, func() error {
		if st := stats(); !strings.Contains(st, "ingress-https-backend,worker-2,") || !strings.Contains(st, "ingress-http-backend,worker-2,") {
			return fmt.Errorf("stats:\n%s", st)
		}
		return nil
	})
	if log := clusterLog(t, out, "haproxy/service"); !strings.Contains(log, fmt.Sprintf("reload haproxy (old pids [%d])", hpFirst)) {
		t.Errorf("haproxy/service did not log a soft reload of pid %d:\n%s", hpFirst, log)
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
	c3.Nodes = append(c3.Nodes, lab.Node{Name: "worker-2", Role: lab.RoleWorker, IP: "198.18.0.33"})
	// Its Ignition carries its address, so its VM is redefined (same XML) after it.
	lvGolden(t, "worker-ip.txt", lvPlanText(build(c3, true).Plan, own))
	if r := build(c3, false); !slices.Equal(r.Built, lvSorted(append([]string{"host/preflight", "ignition/worker-2", "libvirt/dns", "libvirt/vm/worker-2"}, hpSet...))) {
		t.Errorf("IP edit executed %v", r.Built)
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

	// Remove worker-2: its domain and disk are destroyed from their records, its records leave
	// the running network in place; nothing else of the lab executes.
	lvGolden(t, "remove-worker-2.txt", lvPlanText(build(c, true).Plan, own))
	r := build(c, false)
	// The haproxy configs of six nodes (and host/preflight's check) are restored from the store,
	// not run; haproxy/service sees its running process loaded the seven-node config and
	// soft-reloads it.
	wantRm := []string{"haproxy/service", "libvirt/dns"}
	if !slices.Equal(r.Built, wantRm) || !slices.Equal(r.Destroyed, []string{"libvirt/vm/worker-2", "libvirt/volume/worker-2"}) {
		t.Errorf("removing worker-2 executed %v, destroyed %v; want %v and its VM and volume", r.Built, r.Destroyed, wantRm)
	}
	if _, _, found, _ := conn.Domain("lbt-worker-2"); found {
		t.Error("domain lbt-worker-2 left behind")
	}
	if _, found, _ := conn.Volume("lbt", rl.VolumeName("lbt", "worker-2")); found {
		t.Error("volume of worker-2 left behind")
	}
	if got := dig("worker-2.lbt.example.test"); got != "" {
		t.Errorf("dig worker-2 after its removal = %q, want no answer", got)
	}
	testenv.WaitFor(t, "worker-2 out of the ingress backends", 10*time.Second, func() error {
		if st := stats(); strings.Contains(st, ",worker-2,") || !strings.Contains(st, "ingress-https-backend,worker-1,") {
			return fmt.Errorf("stats:\n%s", st)
		}
		return nil
	})
	gone := lvObserveLive(t, d, conn, "lbt", running)
	if gone.ifindex != before.ifindex || gone.dnsmasq != before.dnsmasq {
		t.Errorf("network recreated by a removal: ifindex %s → %s, dnsmasq PID %s → %s", before.ifindex, gone.ifindex, before.dnsmasq, gone.dnsmasq)
	}
	if r := build(c, false); len(r.Built)+len(r.Destroyed) != 0 {
		t.Errorf("build after the removal executed %v, destroyed %v", r.Built, r.Destroyed)
	}

	// Resize with --restart: the persistent definitions change; the running worker-0 is
	// drained through a real kube-apiserver (its Node cordoned, its pod evicted), power-cycled
	// (paused as it was) so the new size is live, and uncordoned; worker-1, not running, keeps
	// the new size for its next start.
	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{})
	oldEnv, oldWait, oldPoll := clusterEnv, clusterDrainWait, clusterDrainPoll
	clusterEnv.restConfig = func(kc, vip string) (*kube.RESTConfig, error) {
		if vip != "198.18.0.10" || !strings.HasSuffix(kc, "kubeconfig/admin/kubeconfig") {
			return nil, fmt.Errorf("asked for %s through %s; want the admin kubeconfig through the API VIP", kc, vip)
		}
		return kubedyn.Config(cp.Admin), nil // the lab's API VIP is this loopback apiserver
	}
	clusterDrainWait, clusterDrainPoll = 20*time.Second, 100*time.Millisecond
	t.Cleanup(func() { clusterEnv, clusterDrainWait, clusterDrainPoll = oldEnv, oldWait, oldPoll })
	build = lvBuilderWith(ctx, t, out, Lab{Restart: true}, "libvirt", "haproxy/service")
	kdyn, err := dynamic.NewForConfig(cp.Admin)
	if err != nil {
		t.Fatal(err)
	}
	cnWorkload(t, ctx, kdyn, "worker-0.lbt.example.test", false)
	c4 := lvLab(d, sr)
	c4.Sizes.Worker.MemoryMiB = 192
	lvGolden(t, "resize-workers.txt", lvPlanText(build(c4, true).Plan, own))
	if r := build(c4, false); !slices.Equal(r.Built, []string{"host/preflight", "libvirt/vm/worker-0", "libvirt/vm/worker-1"}) {
		t.Errorf("resize executed %v", r.Built)
	}
	if dom, _, _, err := conn.Domain("lbt-worker-0"); err != nil || dom.Memory.Value != 192*1024 {
		t.Errorf("worker-0's persistent memory after the resize: %+v %v", dom.Memory, err)
	}
	if live, err := conn.LiveDomain("lbt-worker-0"); err != nil || live.Memory.Value != 192*1024 {
		t.Errorf("worker-0's live memory after --restart: %+v %v; want 192 MiB", live, err)
	}
	if _, st, _, _ := conn.Domain("lbt-worker-0"); st != virt.DomainPaused {
		t.Errorf("worker-0 after its power cycle is in state %d, want paused as before", st)
	}
	vlog := clusterLog(t, out, "libvirt/vm/worker-0")
	for _, want := range []string{"cordoned and drained worker-0.lbt.example.test: evicted 1 pods", "power-cycled lbt-worker-0", "uncordoned worker-0.lbt.example.test"} {
		if !strings.Contains(vlog, want) {
			t.Errorf("libvirt/vm/worker-0 log lacks %q:\n%s", want, vlog)
		}
	}
	if n, err := kdyn.Resource(cnNodes).Get(ctx, "worker-0.lbt.example.test", metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if u, _, _ := unstructured.NestedBool(n.Object, "spec", "unschedulable"); u {
		t.Error("Node worker-0 still cordoned after its power cycle")
	}
	if _, err := kdyn.Resource(cnPods).Namespace("apps").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("apps/web on worker-0 after the drain: %v", err)
	}
	if !strings.Contains(clusterLog(t, out, "libvirt/vm/worker-1"), "not running: the new size applies at its next start") {
		t.Errorf("worker-1's log:\n%s", clusterLog(t, out, "libvirt/vm/worker-1"))
	}

	// A subnet edit replaces the network, and the plan says so first.
	c5 := lvLab(d, sr)
	c5.Sizes.Worker.MemoryMiB = 192
	c5.Network.MachineNetwork = "198.18.0.0/23"
	lvGolden(t, "subnet.txt", lvPlanText(build(c5, true).Plan, own))
	r = build(c5, false)
	if !slices.Contains(r.Built, "libvirt/network") || !slices.Contains(r.Built, "libvirt/dns") {
		t.Errorf("subnet edit executed %v", r.Built)
	}
	if o, err := d.Exec("cat", "/sys/class/net/"+rl.Bridge("lbt")+"/ifindex"); err != nil || strings.TrimSpace(string(o)) == before.ifindex {
		t.Errorf("subnet edit kept the bridge (ifindex %s): %v", o, err)
	}
	if got := dig("worker-1.lbt.example.test"); got != "198.18.0.111" {
		t.Errorf("dig worker-1 after the subnet edit = %q", got)
	}
}
