package targets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/hostexec"
)

// setHostEnv replaces hostEnv for the test.
func setHostEnv(t *testing.T, h hostexec.Host) {
	old := hostEnv
	hostEnv = h
	t.Cleanup(func() { hostEnv = old })
}

// hostLab is a lab whose host targets the tests build alone (their upstream preflight is
// replaced by a stand-in).
func hostLab() *lab.Config {
	c := testLabConfig()
	c.Cluster.Name, c.Cluster.BaseDomain = "lbt", "example.test"
	c.Network.DNS = "198.18.0.1"
	c.Libvirt.Network = "lbt"
	return c
}

func hostBuild(t *testing.T, c *lab.Config, out, goal string, destroy bool) (*engine.Result, error) {
	t.Helper()
	ts := append([]*engine.Target{clusterStandinFile(hostPreflight, "preflight.json", "{}")}, hostIntegrationTargets(c)...)
	var log strings.Builder
	o := engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{goal}, Targets: ts, Stdout: &log, Stderr: &log}
	if destroy {
		_, err := engine.Destroy(context.Background(), o)
		return nil, err
	}
	r, err := engine.Build(context.Background(), o)
	if err != nil {
		err = fmt.Errorf("%w\n%s", err, log.String())
	}
	return r, err
}

// hostDestroy destroys goal (its preflight stand-in is only forgotten) and checks what the
// report calls it: "destroyed", "absent" or "forgotten".
func hostDestroy(t *testing.T, c *lab.Config, out, goal, want string) {
	t.Helper()
	ts := append([]*engine.Target{clusterStandinFile(hostPreflight, "preflight.json", "{}")}, hostIntegrationTargets(c)...)
	rep, err := engine.Destroy(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{goal}, Targets: ts})
	if err != nil {
		t.Fatalf("destroy %s: %v", goal, err)
	}
	got := map[string][]string{"destroyed": rep.Destroyed, "absent": rep.Absent, "forgotten": rep.Forgotten}
	for k, v := range got {
		if w := []string{goal}; k == want && !slices.Equal(v, w) || k != want && len(v) != 0 {
			t.Errorf("destroy %s: %s %v; want it %s", goal, k, v, want)
		}
	}
}

// TestHostDNS: where NetworkManager runs, host/dns writes the split-DNS drop-in (and selects
// NetworkManager's dnsmasq when nothing did) under the host root and reloads NetworkManager; a
// rerun keeps it; a drop-in removed by hand is planned and restored; destroy removes exactly
// its files, and again does nothing. Without NetworkManager nothing is written and the note
// says what to add. NetworkManager itself cannot run here: nmcli is a stand-in runner.
func TestHostDNS(t *testing.T) {
	for _, nm := range []bool{true, false} {
		t.Run(fmt.Sprintf("networkmanager=%v", nm), func(t *testing.T) {
			root := t.TempDir()
			var mu sync.Mutex
			var calls []string
			setHostEnv(t, hostexec.Host{Root: root, Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, name+" "+strings.Join(args, " "))
				if name == "nmcli" && nm {
					if slices.Contains(args, "RUNNING") {
						return []byte("running\n"), nil
					}
					return nil, nil
				}
				return nil, errors.New("exec: not found")
			}})
			// An unrelated NetworkManager file stays untouched.
			os.MkdirAll(filepath.Join(root, "etc/NetworkManager/conf.d"), 0o755)
			os.WriteFile(filepath.Join(root, "etc/NetworkManager/conf.d/00-other.conf"), []byte("[main]\nplugins=keyfile\n"), 0o644)
			c, out := hostLab(), t.TempDir()
			if _, err := hostBuild(t, c, out, "host/dns", false); err != nil {
				t.Fatal(err)
			}
			dropIn := filepath.Join(root, "etc/NetworkManager/dnsmasq.d/labbuild-lbt.conf")
			sel := filepath.Join(root, "etc/NetworkManager/conf.d/labbuild-dnsmasq.conf")
			b, err := os.ReadFile(dropIn)
			if !nm {
				if err == nil {
					t.Errorf("wrote %s without NetworkManager", dropIn)
				}
				note, _ := os.ReadFile(filepath.Join(out, "host/dns/note.txt"))
				if !strings.Contains(string(note), "server=/lbt.example.test/198.18.0.1") {
					t.Errorf("note does not say what to add:\n%s", note)
				}
				hostDestroy(t, c, out, "host/dns", "forgotten") // it wrote nothing on the host
				return
			}
			if err != nil || !strings.Contains(string(b), "\nserver=/lbt.example.test/198.18.0.1\n") {
				t.Fatalf("drop-in %s: %v\n%s", dropIn, err, b)
			}
			if s, _ := os.ReadFile(sel); hostexec.DNSMode(s) != "dnsmasq" {
				t.Errorf("NetworkManager not switched to dnsmasq: %q", s)
			}
			if !slices.Contains(calls, "nmcli general reload conf dns-full") {
				t.Errorf("NetworkManager not reloaded: %v", calls)
			}
			if r, err := hostBuild(t, c, out, "host/dns", false); err != nil || len(r.Built) != 0 {
				t.Errorf("rerun executed %v (%v)", r.Built, err)
			}
			os.Remove(dropIn)
			if r, err := hostBuild(t, c, out, "host/dns", false); err != nil || !slices.Equal(r.Built, []string{"host/dns"}) {
				t.Errorf("after removing the drop-in by hand executed %v (%v)", r.Built, err)
			}
			if _, err := os.Stat(dropIn); err != nil {
				t.Errorf("drop-in not restored: %v", err)
			}
			hostDestroy(t, c, out, "host/dns", "destroyed")
			if _, err := hostBuild(t, c, out, "host/dns", true); err != nil {
				t.Fatalf("second destroy: %v", err)
			}
			for _, f := range []string{dropIn, sel} {
				if _, err := os.Stat(f); !os.IsNotExist(err) {
					t.Errorf("destroy left %s", f)
				}
			}
			if _, err := os.Stat(filepath.Join(root, "etc/NetworkManager/conf.d/00-other.conf")); err != nil {
				t.Errorf("destroy removed a file it did not write: %v", err)
			}
			// Removed by hand before destroy: already absent, not "destroyed".
			if _, err := hostBuild(t, c, out, "host/dns", false); err != nil {
				t.Fatal(err)
			}
			os.Remove(dropIn)
			os.Remove(sel)
			hostDestroy(t, c, out, "host/dns", "absent")
		})
	}
}

// TestHostFirewallNftables runs host/firewall against the real nft in a network namespace the
// test creates, whose input chain drops by default: the lab's rule goes first into it, a
// rerun keeps it, a rule deleted by hand is restored, destroy leaves the ruleset as it was and
// a second destroy does nothing. With neither firewalld nor nftables nothing is done.
func TestHostFirewallNftables(t *testing.T) {
	nft := testenv.Require(t, "nft")
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to create a network namespace)")
	}
	ns := fmt.Sprintf("lbfw-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	inNS := func(name string, args ...string) ([]byte, error) {
		return exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...).CombinedOutput()
	}
	base := "table inet filter {\n\tchain input {\n\t\ttype filter hook input priority filter; policy drop;\n\t\tct state established,related accept\n\t}\n}\n"
	cmd := exec.Command("ip", "netns", "exec", ns, nft, "-f", "-")
	cmd.Stdin = strings.NewReader(base)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("load the host's ruleset: %v: %s", err, out)
	}
	ruleset := func() string {
		o, err := inNS(nft, "list", "ruleset")
		if err != nil {
			t.Fatalf("nft list ruleset: %v: %s", err, o)
		}
		return string(o)
	}
	before := ruleset()
	setHostEnv(t, hostexec.Host{Root: t.TempDir(), Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return inNS(name, args...)
	}})
	c, out := hostLab(), t.TempDir()
	if _, err := hostBuild(t, c, out, "host/firewall", false); err != nil {
		t.Fatal(err)
	}
	rule := fmt.Sprintf(`iifname "%s" tcp dport { 80, 443, 6443, 22623 } accept comment "labbuild:lbt"`, rl.Bridge("lbt"))
	got := ruleset()
	if !strings.Contains(got, rule) {
		t.Fatalf("ruleset lacks %s:\n%s", rule, got)
	}
	if strings.Index(got, rule) > strings.Index(got, "ct state established") {
		t.Errorf("the lab's rule is not first in the chain:\n%s", got)
	}
	if r, err := hostBuild(t, c, out, "host/firewall", false); err != nil || len(r.Built) != 0 {
		t.Errorf("rerun executed %v (%v)", r.Built, err)
	}
	// Flushed by hand (a firewall reload): planned and restored.
	cmd = exec.Command("ip", "netns", "exec", ns, nft, "-f", "-")
	cmd.Stdin = strings.NewReader("flush ruleset\n" + base)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, o)
	}
	if r, err := hostBuild(t, c, out, "host/firewall", false); err != nil || !slices.Equal(r.Built, []string{"host/firewall"}) {
		t.Errorf("after a flush executed %v (%v)", r.Built, err)
	}
	if !strings.Contains(ruleset(), rule) {
		t.Error("rule not restored after a flush")
	}
	hostDestroy(t, c, out, "host/firewall", "destroyed")
	if _, err := hostBuild(t, c, out, "host/firewall", true); err != nil {
		t.Fatalf("second destroy: %v", err)
	}
	if after := ruleset(); after != before {
		t.Errorf("destroy left the ruleset changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// A firewall reload dropped the rule before destroy: already absent.
	if _, err := hostBuild(t, c, out, "host/firewall", false); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("ip", "netns", "exec", ns, nft, "-f", "-")
	cmd.Stdin = strings.NewReader("flush ruleset\n" + base)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, o)
	}
	hostDestroy(t, c, out, "host/firewall", "absent")

	// Platform baremetal: the BMC's port too (Metal3 reaches it from the masters).
	bm := hostLab()
	bm.Platform, bm.Network.LoadBalancer = lab.PlatformBaremetal, "in-cluster"
	outBM := t.TempDir()
	if _, err := hostBuild(t, bm, outBM, "host/firewall", false); err != nil {
		t.Fatal(err)
	}
	if bmRule := strings.Replace(rule, "6443, 22623 }", "6443, 8000, 22623 }", 1); !strings.Contains(ruleset(), bmRule) {
		t.Errorf("platform baremetal: ruleset lacks %s:\n%s", bmRule, ruleset())
	}
	hostDestroy(t, bm, outBM, "host/firewall", "destroyed")
	if after := ruleset(); after != before {
		t.Errorf("platform baremetal: destroy left the ruleset changed:\n%s", after)
	}

	// Neither firewalld nor nftables: nothing.
	var calls []string
	setHostEnv(t, hostexec.Host{Root: t.TempDir(), Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
		calls = append(calls, name+" "+strings.Join(args, " "))
		return nil, errors.New("exec: not found")
	}})
	out2 := t.TempDir()
	if _, err := hostBuild(t, c, out2, "host/firewall", false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(out2, "host/firewall/record.json")); !strings.Contains(string(b), `"mode": "none"`) || len(calls) != 2 {
		t.Errorf("without a firewall: record %s, commands %v (want only the two detections)", b, calls)
	}
	hostDestroy(t, c, out2, "host/firewall", "forgotten")
}
