package targets

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
)

// TestExternalBridgeAndDestroy builds bridge/external and bmc/service for a platform:
// baremetal lab with network.externalBridge on a real libvirtd in a network namespace (every
// link is made inside it): the named bridge exists without an address, the veth pair joins it
// to the lab bridge, a second plan keeps it and a veth removed by hand is planned as an
// update; then `labbuild destroy` (every recorded External target) removes the BMC, the bridge
// and the veth pair, and a second destroy does nothing.
func TestExternalBridgeAndDestroy(t *testing.T) {
	d := testenv.StartLibvirtd(t)
	useNetnsHost(t, d)
	bin := bmcBinary(t)
	origB, origC := bmcCommand, brCommand
	bmcCommand = func(cfg string) ([]string, string, error) {
		return []string{"ip", "netns", "exec", d.NetNS, bin, BMCServeVerb, cfg}, "labbuild-full", nil
	}
	brCommand = func(name string, args ...string) *exec.Cmd {
		return exec.Command("ip", append([]string{"netns", "exec", d.NetNS, name}, args...)...)
	}
	t.Cleanup(func() { bmcCommand, brCommand = origB, origC })
	ctx := context.Background()
	out := t.TempDir()
	c := lvLab(d, testenv.StartSampleRelease(t, false))
	c.Platform, c.Network.LoadBalancer, c.Network.ExternalBridge = lab.PlatformBaremetal, lab.LoadBalancerInCluster, "baremetal"
	build := func(dry bool) *engine.Result {
		t.Helper()
		var log strings.Builder
		r, err := engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"bridge/external", "bmc/service"}, DryRun: dry, Jobs: 2, Stdout: &log, Stderr: &log})
		if err != nil {
			t.Fatalf("build: %v\n%s", err, log.String())
		}
		return r
	}
	build(false)
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}) })
	link := func(dev string) string {
		o, err := d.Exec("ip", "-o", "addr", "show", "dev", dev)
		if err != nil {
			return ""
		}
		l, _ := d.Exec("ip", "-o", "link", "show", "dev", dev)
		return string(l) + string(o)
	}
	var rec brRecord
	if b, err := os.ReadFile(filepath.Join(out, "bridge", "external", "record.json")); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Bridge != "baremetal" || rec.Lab != "virbr-lbt" {
		t.Fatalf("record %+v", rec)
	}
	if l := link("baremetal"); l == "" || strings.Contains(l, " inet ") {
		t.Errorf("bridge baremetal: %q (want it, with no IPv4 address)", l)
	}
	if l := link(rec.VethLab); !strings.Contains(l, "master virbr-lbt ") || !strings.Contains(l, "state UP") && !strings.Contains(l, "LOWER_UP") {
		t.Errorf("%s: %q, want on virbr-lbt and up", rec.VethLab, l)
	}
	if l := link(rec.VethBr); !strings.Contains(l, "master baremetal ") {
		t.Errorf("%s: %q, want on baremetal", rec.VethBr, l)
	}
	if out, err := exec.Command("ip", "link", "show", "dev", "baremetal").CombinedOutput(); err == nil {
		t.Errorf("bridge baremetal in the root namespace: %s", out)
	}
	plan := func() map[string]string {
		m := map[string]string{}
		for _, p := range build(true).Plan {
			m[p.Target] = string(p.Action) + " " + p.Why()
		}
		return m
	}
	// A plan lists what would change; kept targets are not in it.
	if p := plan(); p["bridge/external"] != "" && !strings.HasPrefix(p["bridge/external"], "keep") || p["bmc/service"] != "" && !strings.HasPrefix(p["bmc/service"], "keep") {
		t.Errorf("second plan: %v", p)
	}
	d.Exec("ip", "link", "del", "dev", rec.VethLab)
	if p := plan()["bridge/external"]; !strings.HasPrefix(p, "update") || !strings.Contains(p, rec.VethLab) {
		t.Errorf("plan after the veth was removed: %q", p)
	}
	build(false)
	if l := link(rec.VethBr); !strings.Contains(l, "master baremetal ") {
		t.Errorf("after the update %s: %q", rec.VethBr, l)
	}

	rep, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out})
	if err != nil {
		t.Fatalf("destroy: %v", err)
	}
	for _, want := range []string{"bmc/service", "bridge/external"} {
		if !slices.Contains(rep.Destroyed, want) {
			t.Errorf("destroy: %s not in Destroyed %v", want, rep.Destroyed)
		}
	}
	for _, dev := range []string{"baremetal", rec.VethLab, rec.VethBr} {
		if l := link(dev); l != "" {
			t.Errorf("%s after destroy: %s", dev, l)
		}
	}
	rep, err = engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out})
	if err != nil || len(rep.Destroyed)+len(rep.Failed)+len(rep.Absent) != 0 {
		t.Errorf("second destroy: %v %+v", err, rep)
	}
}
