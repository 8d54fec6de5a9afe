package targets

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/targets/hostexec"
)

// TestHAProxyConfigTarget builds haproxy/config and haproxy/config-post-pivot for the default
// lab: both configs pass
// `haproxy -c`, the bootstrap is in the pre-pivot backends only, and a worker's IP change
// rebuilds it.
func TestHAProxyConfigTarget(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	c := testLabConfig()
	goals := []string{"haproxy/config", "haproxy/config-post-pivot"}
	r, err := engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: goals})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Built, goals) {
		t.Fatalf("executed %v", r.Built)
	}
	pre, _ := os.ReadFile(filepath.Join(out, "haproxy/config", HAProxyConfigFile))
	post, _ := os.ReadFile(filepath.Join(out, "haproxy/config-post-pivot", HAProxyConfigFile))
	if !strings.Contains(string(pre), "server bootstrap 192.168.126.100:6443") || strings.Contains(string(post), "bootstrap") {
		t.Errorf("bootstrap: pre-pivot has it %v, post-pivot has it %v", strings.Contains(string(pre), "server bootstrap"), strings.Contains(string(post), "bootstrap"))
	}
	if !strings.Contains(string(pre), "server worker-1 192.168.126.111:443") || !strings.Contains(string(pre), "bind 192.168.126.10:6443") {
		t.Errorf("pre-pivot config lacks the worker-1 ingress server or the API VIP bind:\n%s", pre)
	}
	if bin, err := exec.LookPath("haproxy"); err == nil {
		for _, f := range goals {
			if o, err := exec.Command(bin, "-c", "-f", filepath.Join(out, f, HAProxyConfigFile)).CombinedOutput(); err != nil {
				t.Errorf("haproxy -c %s: %v\n%s", f, err, o)
			}
		}
	}
	c = testLabConfig() // a fresh config: a Config caches its lookups
	c.Nodes[5].IP = "192.168.126.112"
	r, err = engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: goals})
	if err != nil || !slices.Equal(r.Built, goals) {
		t.Errorf("after worker-1 ip change: executed %v, err %v", r.Built, err)
	}
}

// TestHAProxyServiceReal runs haproxy/service inside a network namespace with a real libvirt
// network: the VIPs appear on the bridge, haproxy serves its stats page on the API VIP, a
// second build keeps it, a changed config reloads it (new pid), and destroy stops it and
// removes the VIPs.
func TestHAProxyServiceReal(t *testing.T) {
	d, sr := lvHost(t)
	hpInNetns(t, d)
	curl := testenv.Require(t, "curl")

	ctx := context.Background()
	out := t.TempDir()
	c := lvLab(d, sr)
	build := lvBuilder(ctx, t, out, "haproxy/service")
	r := build(c, false)
	for _, want := range []string{"libvirt/network", "haproxy/config", "haproxy/service"} {
		if !slices.Contains(r.Built, want) {
			t.Errorf("first build did not run %s: %v", want, r.Built)
		}
	}
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}) })
	rec := func() hpRecord {
		s := engine.RecordStep(&engine.Target{Name: "haproxy/service"}, filepath.Join(out, "haproxy/service"))
		r, ok, err := hpPrev(s)
		if err != nil || !ok {
			t.Fatalf("record: %v %v", ok, err)
		}
		return r
	}
	first := rec()
	if !hostexec.HAProxyAlive(first.PID) {
		t.Fatalf("haproxy pid %d not running", first.PID)
	}
	stats := func(port string) string {
		o, err := d.Exec(curl, "-s", "--max-time", "3", "http://198.18.0.10:"+port+"/stats;csv")
		if err != nil {
			t.Errorf("stats page on the API VIP: %v\n%s", err, o)
		}
		return string(o)
	}
	testenv.WaitFor(t, "haproxy stats", 5*time.Second, func() error {
		if !strings.Contains(stats("9000"), "kubernetes-api-backend,master-0") {
			return os.ErrNotExist
		}
		return nil
	})
	if r := build(c, false); len(r.Built) != 0 {
		t.Errorf("second build executed %v", r.Built)
	}

	c2 := lvLab(d, sr)
	c2.HAProxy.StatsPort = 9001
	r = build(c2, false)
	if !slices.Contains(r.Built, "haproxy/service") || slices.Contains(r.Built, "libvirt/network") {
		t.Errorf("stats port change executed %v, want haproxy/config and haproxy/service only", r.Built)
	}
	second := rec()
	if second.PID == first.PID || !hostexec.HAProxyAlive(second.PID) {
		t.Errorf("reload: pid %d -> %d (alive %v)", first.PID, second.PID, hostexec.HAProxyAlive(second.PID))
	}
	testenv.WaitFor(t, "old haproxy to exit", 10*time.Second, func() error {
		if hostexec.HAProxyAlive(first.PID) {
			return os.ErrExist
		}
		return nil
	})
	if !strings.Contains(stats("9001"), "kubernetes-api-backend,bootstrap") {
		t.Error("stats not served on the new port, or the bootstrap is not a backend before the pivot")
	}

	// The pivot (cluster/pivot's default balancer): labbuild's haproxy is soft-reloaded with
	// haproxy/config-post-pivot; haproxy/service still sees this lab's haproxy running, and
	// destroy stops the reloaded process.
	if _, err := engine.Build(ctx, engine.Options{Config: Lab{Config: c2}, OutDir: out, Goals: []string{"haproxy/config-post-pivot"}}); err != nil {
		t.Fatal(err)
	}
	if err := (hpReloadBalancer{}).Switch(ctx, filepath.Join(out, "haproxy/config-post-pivot", HAProxyConfigFile)); err != nil {
		t.Fatalf("pivot switch: %v", err)
	}
	testenv.WaitFor(t, "pre-pivot haproxy to exit", 10*time.Second, func() error {
		if hostexec.HAProxyAlive(second.PID) {
			return os.ErrExist
		}
		return nil
	})
	pivoted := hostexec.HAProxyRunningFrom(filepath.Join(out, "haproxy"))
	if len(pivoted) != 1 || pivoted[0] == second.PID {
		t.Fatalf("after the pivot's reload, this lab's haproxy pids are %v (pre-pivot pid %d)", pivoted, second.PID)
	}
	if st := stats("9001"); strings.Contains(st, "kubernetes-api-backend,bootstrap") || !strings.Contains(st, "kubernetes-api-backend,master-0") {
		t.Errorf("post-pivot stats still list the bootstrap, or lost the masters:\n%s", st)
	}
	if r := build(c2, false); len(r.Built) != 0 {
		t.Errorf("build after the pivot executed %v, want haproxy/service kept", r.Built)
	}
	second.PID = pivoted[0]

	// A later haproxy/config edit (a new stats port) reloads the service, with the config of
	// the cluster's phase: the bootstrap never comes back. Nor after haproxy dies and
	// haproxy/service starts it again.
	c3 := lvLab(d, sr)
	c3.HAProxy.StatsPort = 9002
	if r := build(c3, false); !slices.Contains(r.Built, "haproxy/service") {
		t.Errorf("stats port change after the pivot executed %v", r.Built)
	}
	for step := 0; step < 2; step++ {
		var st string
		testenv.WaitFor(t, "haproxy on the new stats port", 10*time.Second, func() error {
			if st = stats("9002"); !strings.Contains(st, "kubernetes-api-backend,master-0") {
				return os.ErrNotExist
			}
			return nil
		})
		if strings.Contains(st, "kubernetes-api-backend,bootstrap") {
			t.Errorf("step %d: after the pivot haproxy/service brought the bootstrap back:\n%s", step, st)
		}
		if r := rec(); r.Phase != hpPhasePostPivot || !strings.Contains(r.Config, "config-post-pivot") {
			t.Errorf("step %d: record %+v, want the post-pivot config", step, r)
		}
		if step == 0 { // haproxy dies (a host reboot): the next build starts it again
			for _, pid := range hostexec.HAProxyRunningFrom(filepath.Join(out, "haproxy")) {
				syscall.Kill(pid, syscall.SIGTERM)
			}
			testenv.WaitFor(t, "haproxy to die", 10*time.Second, func() error {
				if len(hostexec.HAProxyRunningFrom(filepath.Join(out, "haproxy"))) > 0 {
					return os.ErrExist
				}
				return nil
			})
			if r := build(c3, false); !slices.Contains(r.Built, "haproxy/service") {
				t.Errorf("build after haproxy died executed %v", r.Built)
			}
		}
	}
	second.PID = rec().PID
	c2 = c3

	for round := 0; round < 2; round++ {
		rep, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: c2}, OutDir: out})
		if err != nil {
			t.Fatalf("destroy round %d: %v", round, err)
		}
		if got := slices.Contains(rep.Destroyed, "haproxy/service"); got != (round == 0) {
			t.Errorf("destroy round %d: haproxy/service destroyed %v (report %+v)", round, got, rep)
		}
	}
	testenv.WaitFor(t, "haproxy to stop", 10*time.Second, func() error {
		if hostexec.HAProxyAlive(second.PID) {
			return os.ErrExist
		}
		return nil
	})
	if o, err := d.Exec("ip", "-o", "addr"); err != nil || strings.Contains(string(o), "198.18.0.10") {
		t.Errorf("VIP left behind (%v):\n%s", err, o)
	}
	if _, err := os.Stat(filepath.Join(out, "haproxy", hpPivotMarker)); !os.IsNotExist(err) {
		t.Errorf("destroy left the pivot marker (%v)", err)
	}
}
