package targets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/hostexec"
)

// vxNet is two hosts as network namespaces joined by a veth underlay (198.19.0.1 and .2, MTU
// 1500), each with the lab bridge virbr-lbt (a stand-in for libvirt's networks, which
// TestLibvirtTwoHosts makes for real) and a node namespace on it at the machine network's MTU,
// and each with a host firewall: nftables input policy drop (replies, loopback and ICMP only).
type vxNet struct{ hosts, nodes [2]string }

// vxHostFW is each host's firewall: nothing new gets in but ICMP (ping across the underlay).
const vxHostFW = "table inet filter {\n\tchain input {\n\t\ttype filter hook input priority filter; policy drop;\n\t\tct state established,related accept\n\t\tiif lo accept\n\t\tip protocol icmp accept\n\t}\n}\n"

func vxSetup(t *testing.T) vxNet {
	t.Helper()
	for _, p := range []string{"ip", "bridge", "nft", "ping"} {
		testenv.Require(t, p)
	}
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root (to create network namespaces)")
	}
	seq := os.Getpid() % 10000
	n := vxNet{hosts: [2]string{fmt.Sprintf("lbvx%d-a", seq), fmt.Sprintf("lbvx%d-b", seq)}, nodes: [2]string{fmt.Sprintf("lbvx%d-na", seq), fmt.Sprintf("lbvx%d-nb", seq)}}
	for _, ns := range append(n.hosts[:], n.nodes[:]...) {
		vxRun0(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	vxRun0(t, "ip", "link", "add", "ul", "netns", n.hosts[0], "type", "veth", "peer", "name", "ul", "netns", n.hosts[1])
	for i, ns := range n.hosts {
		for _, c := range [][]string{
			{"link", "set", "lo", "up"}, {"addr", "add", fmt.Sprintf("198.19.0.%d/24", i+1), "dev", "ul"}, {"link", "set", "ul", "up"},
			{"link", "add", "virbr-lbt", "type", "bridge"}, {"link", "set", "virbr-lbt", "mtu", "1450", "up"},
		} {
			vxRun0(t, "ip", append([]string{"-n", ns}, c...)...)
		}
		cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(vxHostFW)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft in %s: %v: %s", ns, err, out)
		}
		nd := n.nodes[i]
		vxRun0(t, "ip", "link", "add", "p0", "netns", ns, "type", "veth", "peer", "name", "eth0", "netns", nd)
		for _, c := range [][]string{{"-n", ns, "link", "set", "p0", "mtu", "1450", "master", "virbr-lbt", "up"},
			{"-n", nd, "link", "set", "eth0", "mtu", "1450", "up"}, {"-n", nd, "addr", "add", fmt.Sprintf("198.18.0.%d/24", 101+i), "dev", "eth0"}} {
			vxRun0(t, "ip", c...)
		}
	}
	return n
}

// diag is what the hosts and nodes have, for a failure message.
func (n vxNet) diag() string {
	var b strings.Builder
	for _, ns := range append(n.hosts[:], n.nodes[:]...) {
		for _, c := range [][]string{{"ip", "-s", "-d", "link"}, {"ip", "neigh"}, {"bridge", "fdb", "show"}, {"nft", "list", "ruleset"}} {
			out, _ := exec.Command("ip", append([]string{"netns", "exec", ns}, c...)...).CombinedOutput()
			fmt.Fprintf(&b, "--- %s: %s\n%s", ns, strings.Join(c, " "), out)
		}
	}
	return b.String()
}

func vxRun0(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// in runs a command in network namespace ns.
func vxIn(ns string) func(ctx context.Context, name string, args ...string) ([]byte, error) {
	return func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...).CombinedOutput()
	}
}

// vxLab is a lab on host hva (libvirt.uri) and hvb, whose underlays are vxNet's.
func vxLab() *lab.Config {
	c := hostLab()
	c.Hosts = []lab.Host{{Name: "hva", Underlay: "198.19.0.1"}, {Name: "hvb", URI: "qemu+ssh://root@hvb.invalid/system", Underlay: "198.19.0.2"}}
	c.VXLAN = &lab.VXLANConfig{VNI: 4242, Port: lab.DefaultVXLANPort, UnderlayMTU: lab.DefaultUnderlayMTU}
	c.Nodes[len(c.Nodes)-1].Host = "hvb"
	return c
}

// vxBuild builds (or with destroy, destroys) goals of the vxlan family, whose upstreams —
// preflight and the two bridges — are stand-ins (vxSetup made the bridges).
func vxBuild(t *testing.T, c *lab.Config, out string, dry, destroy bool, goals ...string) (*engine.Result, *engine.DestroyReport, error) {
	t.Helper()
	ts := []*engine.Target{clusterStandinFile(hostPreflight, "preflight.json", "{}"),
		clusterStandinFile("libvirt/network", "network.xml", "<network/>"), clusterStandinFile("libvirt/bridge/hvb", "network.xml", "<network/>")}
	ts = append(ts, vxlanTargets(c)...)
	var log strings.Builder
	o := engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: goals, Targets: ts, DryRun: dry, Stdout: &log, Stderr: &log}
	if destroy {
		rep, err := engine.Destroy(context.Background(), o)
		return nil, rep, err
	}
	r, err := engine.Build(context.Background(), o)
	if err != nil {
		err = fmt.Errorf("%w\n%s", err, log.String())
	}
	return r, nil, err
}

// ping sends one DF-set ICMP echo of size bytes of payload from node namespace ns to addr.
func vxPing(ns, addr string, size int) error {
	out, err := exec.Command("ip", "netns", "exec", ns, "ping", "-c", "1", "-W", "2", "-M", "do", "-s", strconv.Itoa(size), addr).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// TestVXLANTwoHosts builds the vxlan family on two hosts (network namespaces, real iproute2
// and nftables): the plan states the MTU arithmetic; each host gets vx-lbt on its lab bridge
// with the other host as its flood peer and UDP 4789 opened from it in its drop-policy
// firewall; a DF-set ping that fills the machine network's MTU (1450: 1422 bytes of payload)
// crosses from a node on one host to a node on the other, one byte more fails — and fails
// in the tunnel too when the sender's interface would allow it; a rerun does nothing; an FDB
// entry removed by hand is planned as an update and restored; another lab's device with the
// same VNI is refused by name; a host that cannot be reached fails destroy naming it and keeps
// the record, and destroy leaves both hosts as they were.
func TestVXLANTwoHosts(t *testing.T) {
	n := vxSetup(t)
	hosts := map[string]hostexec.Host{
		"qemu:///system":                     {Run: vxIn(n.hosts[0])},
		"qemu+ssh://root@hvb.invalid/system": {Run: vxIn(n.hosts[1]), Remote: "hvb.invalid"},
	}
	down := false
	old := vxHostFor
	vxHostFor = func(uri string) (hostexec.Host, error) {
		h, ok := hosts[uri]
		if !ok {
			return h, fmt.Errorf("no test host for %s", uri)
		}
		if down && h.Remote != "" {
			return hostexec.Host{Remote: h.Remote, Run: func(context.Context, string, ...string) ([]byte, error) {
				return []byte("ssh: connect to host hvb.invalid port 22: Connection refused"), errors.New("exit status 255")
			}}, nil
		}
		return h, nil
	}
	t.Cleanup(func() { vxHostFor = old })
	rulesets := func() [2]string {
		var r [2]string
		for i, ns := range n.hosts {
			out, _ := exec.Command("ip", "netns", "exec", ns, "nft", "list", "ruleset").CombinedOutput()
			r[i] = string(out)
		}
		return r
	}
	before := rulesets()
	c, out := vxLab(), t.TempDir()
	goals := []string{"vxlan/hva", "vxlan/hvb"}

	// Before the tunnel: nothing crosses.
	if err := vxPing(n.nodes[0], "198.18.0.102", 56); err == nil {
		t.Fatal("a node on hva reaches one on hvb before any tunnel")
	}
	// The plan probes a target whose upstreams are built: preflight and the bridges first.
	if _, _, err := vxBuild(t, c, out, false, false, hostPreflight, "libvirt/network", "libvirt/bridge/hvb"); err != nil {
		t.Fatal(err)
	}
	plan, _, err := vxBuild(t, c, out, true, false, goals...)
	if err != nil {
		t.Fatal(err)
	}
	var why []string
	for _, p := range plan.Plan {
		if strings.HasPrefix(p.Target, "vxlan/") {
			why = append(why, string(p.Action)+" "+p.Target+": "+p.Why())
		}
	}
	if len(why) != 2 || !strings.Contains(why[1], "create vxlan/hvb") || !strings.Contains(why[1], "machine network MTU 1450 = underlay 1500 − 50 (VXLAN), OVN-Kubernetes MTU 1350 = 1450 − 100 (Geneve)") {
		t.Errorf("plan:\n%s", strings.Join(why, "\n"))
	}
	if _, _, err := vxBuild(t, c, out, false, false, goals...); err != nil {
		t.Fatal(err)
	}
	for i, ns := range n.hosts {
		h := hostexec.Host{Run: vxIn(ns)}
		links, err := h.Links(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		k := slices.IndexFunc(links, func(l hostexec.Link) bool { return l.Name == "vx-lbt" })
		if k < 0 {
			t.Fatalf("%s: no vx-lbt", ns)
		}
		l := links[k]
		if l.Kind != "vxlan" || l.VXLAN.ID != 4242 || l.VXLAN.Port != 4789 || l.MTU != 1450 || l.Master != "virbr-lbt" || !l.Up {
			t.Errorf("%s: vx-lbt %+v", ns, l)
		}
		peers, _ := h.FloodPeers(context.Background(), "vx-lbt")
		if want := fmt.Sprintf("198.19.0.%d", 2-i); !slices.Equal(peers, []string{want}) {
			t.Errorf("%s: flood peers %v", ns, peers)
		}
	}
	if r := rulesets(); !strings.Contains(r[0], `ip saddr 198.19.0.2 udp dport 4789 accept comment "labbuild:lbt:vxlan"`) ||
		!strings.Contains(r[1], `ip saddr 198.19.0.1 udp dport 4789 accept comment "labbuild:lbt:vxlan"`) {
		t.Errorf("firewalls:\n%s\n%s", r[0], r[1])
	}
	// The pre-tunnel ping left a failed neighbour entry; a node would retry, the test forgets it.
	for _, nd := range n.nodes {
		vxRun0(t, "ip", "-n", nd, "neigh", "flush", "all")
	}
	// The machine network's MTU crosses the tunnel exactly: 1450 − 20 (IP) − 8 (ICMP) bytes.
	if err := vxPing(n.nodes[0], "198.18.0.102", 1450-28); err != nil {
		t.Errorf("a DF ping filling MTU 1450 from hva's node to hvb's: %v\n%s", err, n.diag())
	}
	if err := vxPing(n.nodes[0], "198.18.0.102", 1450-27); err == nil {
		t.Errorf("a DF ping one byte over MTU 1450 went through")
	}
	// The tunnel itself carries no more: with the sender's link at 1500, 1451 bytes are lost.
	vxRun0(t, "ip", "-n", n.nodes[0], "link", "set", "eth0", "mtu", "1500")
	vxRun0(t, "ip", "-n", n.hosts[0], "link", "set", "p0", "mtu", "1500")
	if err := vxPing(n.nodes[0], "198.18.0.102", 1450-27); err == nil {
		t.Errorf("1451 bytes crossed the tunnel sized for 1450")
	}
	vxRun0(t, "ip", "-n", n.nodes[0], "link", "set", "eth0", "mtu", "1450")
	vxRun0(t, "ip", "-n", n.hosts[0], "link", "set", "p0", "mtu", "1450")

	if r, _, err := vxBuild(t, c, out, false, false, goals...); err != nil || len(r.Built) != 0 {
		t.Errorf("rerun built %v (%v)", r.Built, err)
	}
	// An FDB entry removed by hand: an update naming it, and back.
	vxRun0(t, "ip", "netns", "exec", n.hosts[1], "bridge", "fdb", "del", "00:00:00:00:00:00", "dev", "vx-lbt", "dst", "198.19.0.1")
	plan, _, err = vxBuild(t, c, out, true, false, goals...)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Plan) != 1 || plan.Plan[0].Action != engine.Update || !strings.Contains(plan.Plan[0].Why(), "no FDB entry to 198.19.0.1") {
		t.Errorf("after an FDB entry's removal, plan %+v", plan.Plan)
	}
	if r, _, err := vxBuild(t, c, out, false, false, goals...); err != nil || !slices.Equal(r.Built, []string{"vxlan/hvb"}) {
		t.Errorf("repair built %v (%v)", r.Built, err)
	}
	if err := vxPing(n.nodes[1], "198.18.0.101", 56); err != nil {
		t.Errorf("after the repair: %v", err)
	}
	// Another lab on these hosts with the same VNI and port: refused, naming its device.
	other := vxLab()
	other.Cluster.Name, other.Libvirt.Network = "lbo", "lbo"
	vxRun0(t, "ip", "-n", n.hosts[0], "link", "add", "virbr-lbo", "type", "bridge")
	if _, _, err := vxBuild(t, other, t.TempDir(), false, false, "vxlan/hva"); err == nil || !strings.Contains(err.Error(), "VXLAN VNI 4242 on UDP 4789 is already device vx-lbt's on host hva") {
		t.Errorf("a second lab with the same VNI: %v", err)
	}
	// hvb unreachable: destroy fails naming it and keeps its record; reachable again, it goes.
	down = true
	if _, _, err := vxBuild(t, c, out, false, true, goals...); err == nil || !strings.Contains(err.Error(), "host hvb is unreachable, vx-lbt stays recorded") {
		t.Errorf("destroy with hvb down: %v", err)
	}
	if _, err := os.Stat(out + "/vxlan/hvb/record.json"); err != nil {
		t.Errorf("hvb's record went with its host down: %v", err)
	}
	down = false
	if _, rep, err := vxBuild(t, c, out, false, true, goals...); err != nil || !slices.Equal(rep.Destroyed, []string{"vxlan/hvb"}) {
		t.Errorf("destroy again: %+v %v", rep, err)
	}
	if _, rep, err := vxBuild(t, c, out, false, true, goals...); err != nil || len(rep.Destroyed) != 0 {
		t.Errorf("second destroy: %+v %v", rep, err)
	}
	for i, ns := range n.hosts {
		if o, _ := exec.Command("ip", "-n", ns, "link", "show", "vx-lbt").CombinedOutput(); !strings.Contains(string(o), "does not exist") {
			t.Errorf("%s: vx-lbt after destroy: %s", ns, o)
		}
		if after := rulesets(); after[i] != before[i] {
			t.Errorf("%s: firewall after destroy:\n%s\nbefore:\n%s", ns, after[i], before[i])
		}
	}
}
