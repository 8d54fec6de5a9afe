package rehearsal

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// The two-host flow's underlay (198.18.0.0/15, outside the machine network 198.18.0.0/24):
// hv1 is the flow host's namespace (libvirtd, the lab network, haproxy), hv2 a second
// libvirtd's, joined by a veth pair as two hosts by a switch.
const (
	underlay1 = "198.19.0.1"
	underlay2 = "198.19.0.2"
	flowVNI   = 4242
	// flowMTU is the machine network's MTU the lab computes: a 1500-byte underlay − 50 (VXLAN).
	flowMTU = 1450
)

// secondHost is hv2: a real libvirtd in a network namespace of its own whose pool directory is a
// disk of its own (a private tmpfs at libvirt.poolPath's parent), reached by labbuild the way
// it reaches any other host: qemu+libssh2 over a real sshd (Debian's) on hv2's underlay
// address, whose root also runs ip, bridge and nft for labbuild over ssh(1). Its firewall drops
// what it does not know (ssh and ICMP get in), so the VXLAN port must be opened by labbuild.
type secondHost struct {
	lv                *testenv.Libvirtd
	dir, uri, badURI  string
	key, knownHosts   string
	sshd              *exec.Cmd
	pool              string
	killedAt          []string // what hv2 had when labbuild was killed placing it
	killedRecords     []string // the records labbuild had written by then
	hostDown, planMTU lbRun
}

// hv2FW is hv2's firewall.
const hv2FW = `table inet filter {
	chain input {
		type filter hook input priority 0; policy drop;
		ct state established,related accept
		iif lo accept
		ip protocol icmp accept
		tcp dport 22 accept
	}
}
`

// startSecondHost starts hv2 and its underlay to hv1 (the flow host's namespace, whose
// firewall gets ICMP accepted, as a host's usually does), and rewrites the lab: hosts hv1
// (libvirt.uri) and hv2, vxlan VNI flowVNI, worker-0 on hv2.
func startSecondHost(t *testing.T, r *rig, pool string) *secondHost {
	t.Helper()
	s := &secondHost{dir: filepath.Join(r.work, "hv2"), pool: pool}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	r.bins["sshd"] = testenv.Require(t, "sshd")
	s.lv = testenv.StartLibvirtdWith(t, testenv.LibvirtdOptions{Private: []string{filepath.Dir(pool)}})
	if err := run("ip", "link", "add", "ul", "netns", r.lv.NetNS, "type", "veth", "peer", "name", "ul", "netns", s.lv.NetNS); err != nil {
		t.Fatal(err)
	}
	for ns, a := range map[string]string{r.lv.NetNS: underlay1, s.lv.NetNS: underlay2} {
		for _, c := range [][]string{{"-n", ns, "addr", "add", a + "/24", "dev", "ul"}, {"-n", ns, "link", "set", "ul", "up"}} {
			if err := run("ip", c...); err != nil {
				t.Fatal(err)
			}
		}
	}
	if out, err := r.lv.Exec("nft", "add", "rule", "inet", "filter", "input", "ip", "protocol", "icmp", "accept"); err != nil {
		t.Fatalf("hv1's firewall: %v: %s", err, out)
	}
	fw := filepath.Join(s.dir, "firewall.nft")
	os.WriteFile(fw, []byte(hv2FW), 0o644)
	if out, err := s.lv.Exec("nft", "-f", fw); err != nil {
		t.Fatalf("hv2's firewall: %v: %s", err, out)
	}
	s.startSSHD(t, r.bins["sshd"])
	q := "?socket=" + s.lv.Socket + "&keyfile=" + s.key + "&known_hosts=" + s.knownHosts
	s.uri = "qemu+libssh2://root@" + underlay2 + "/system" + q
	s.badURI = "qemu+libssh2://root@" + underlay2 + "/system?socket=" + filepath.Join(s.dir, "no-libvirtd-sock") + "&keyfile=" + s.key + "&known_hosts=" + s.knownHosts
	s.writeLab(t, r.lab, s.uri)
	if r.nodeLabNS == nil {
		r.nodeLabNS = map[string]string{}
	}
	r.nodeLabNS["worker-0"] = s.lv.NetNS
	return s
}

// writeLab puts hosts: (hv2 at uri), vxlan: and worker-0's host: into dir/lab.yaml.
func (s *secondHost) writeLab(t *testing.T, dir, uri string) {
	t.Helper()
	p := filepath.Join(dir, "lab.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	y := regexp.MustCompile(`(?s)\nhosts:\n.*?\nvxlan: [^\n]*\n`).ReplaceAllString(string(b), "\n")
	w0 := "  - {name: worker-0, role: worker, ip: " + worker0IP + "}\n"
	y = strings.Replace(y, w0, strings.TrimSuffix(w0, "}\n")+", host: hv2}\n", 1)
	if !strings.Contains(y, "host: hv2}") {
		t.Fatal("lab.yaml has no worker-0 line to place on hv2")
	}
	y += fmt.Sprintf("hosts:\n  - {name: hv1, underlay: %s}\n  - {name: hv2, uri: %q, underlay: %s}\nvxlan: {vni: %d}\n", underlay1, uri, underlay2, flowVNI)
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startSSHD starts Debian's sshd on hv2's underlay address, in hv2's namespaces (the daemon's
// mount namespace: its pool disk), root logging in with a key of the test's, and writes that
// key and hv2's host key for labbuild (keyfile=, known_hosts=).
func (s *secondHost) startSSHD(t *testing.T, sshd string) {
	t.Helper()
	hostPub, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	userPub, userPriv, _ := ed25519.GenerateKey(rand.Reader)
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(s.dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pemOf := func(k ed25519.PrivateKey) []byte {
		blk, err := ssh.MarshalPrivateKey(k, "")
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(blk)
	}
	hp, _ := ssh.NewPublicKey(hostPub)
	up, _ := ssh.NewPublicKey(userPub)
	hostKey := write("ssh_host_ed25519_key", pemOf(hostPriv), 0o600)
	s.key = write("id_hv2", pemOf(userPriv), 0o600)
	auth := write("authorized_keys", ssh.MarshalAuthorizedKey(up), 0o600)
	s.knownHosts = write("known_hosts", []byte(underlay2+" "+string(ssh.MarshalAuthorizedKey(hp))), 0o600)
	cfg := write("sshd_config", []byte(fmt.Sprintf("ListenAddress %s\nPort 22\nHostKey %s\nAuthorizedKeysFile %s\nPubkeyAuthentication yes\nPasswordAuthentication no\n"+
		"KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\nStrictModes no\nAllowStreamLocalForwarding yes\nPidFile none\n",
		underlay2, hostKey, auth)), 0o644)
	logf, err := os.Create(filepath.Join(s.dir, "sshd.log"))
	if err != nil {
		t.Fatal(err)
	}
	// A /run of its own (sshd's privilege separation directory), in a copy of the daemon's
	// mount namespace: the host's /run is left alone.
	s.sshd = exec.Command("nsenter", "-t", strconv.Itoa(s.lv.Pid), "-m", "-n", "--", "unshare", "-m", "--propagation", "private",
		"sh", "-c", "mount -t tmpfs tmpfs /run && mkdir -p /run/sshd && exec "+sshd+" -D -e -f "+cfg)
	s.sshd.Stdout, s.sshd.Stderr = logf, logf
	s.sshd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.sshd.Start(); err != nil {
		t.Fatal(err)
	}
	go s.sshd.Wait()
	t.Cleanup(func() { syscall.Kill(-s.sshd.Process.Pid, syscall.SIGKILL); logf.Close() })
	dial := DialIn(s.lv.NetNS)
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := dial(ctx, "tcp", net.JoinHostPort(underlay2, "22"))
		cancel()
		if err == nil {
			c.Close()
			return
		}
		if i == 100 {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("hv2's sshd does not listen: %v: %s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// virsh runs virsh against hv2's daemon (its socket, from outside).
func (s *secondHost) virsh(args ...string) string {
	out, _ := exec.Command("virsh", append([]string{"-c", s.lv.URI("qemu:///system")}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out))
}

// objects lists what hv2 has of a lab: domains, networks, pools, the pool's files, bridges,
// VXLAN devices and labbuild's firewall rules, one "kind: names" line each.
func (s *secondHost) objects() []string {
	inMount := func(script string) string {
		out, _ := exec.Command("nsenter", "-t", strconv.Itoa(s.lv.Pid), "-m", "--", "sh", "-c", script).CombinedOutput()
		return strings.Join(strings.Fields(string(out)), " ")
	}
	links := func(kind string) string {
		out, _ := s.lv.Exec("ip", "-o", "link", "show", "type", kind)
		var names []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(l); len(f) > 1 {
				names = append(names, strings.TrimSuffix(f[1], ":"))
			}
		}
		return strings.Join(names, " ")
	}
	rules, _ := s.lv.Exec("nft", "list", "ruleset")
	var tagged []string
	for _, l := range strings.Split(string(rules), "\n") {
		if strings.Contains(l, `"labbuild:`) {
			tagged = append(tagged, strings.TrimSpace(l))
		}
	}
	return []string{
		"domains: " + strings.Join(strings.Fields(s.virsh("list", "--all", "--name")), " "),
		"networks: " + strings.Join(strings.Fields(s.virsh("net-list", "--all", "--name")), " "),
		"pools: " + strings.Join(strings.Fields(s.virsh("pool-list", "--all", "--name")), " "),
		"files: " + inMount("find "+s.pool+" -type f -printf '%f\\n' 2>/dev/null || true"),
		"bridges: " + links("bridge"),
		"vxlan: " + links("vxlan"),
		"firewall: " + strings.Join(tagged, "; "),
	}
}

// beforeRun1 is the two-host flow's start:
//
//   - with hv2's URI naming a socket no libvirtd listens on, `labbuild cluster` fails in
//     host/preflight naming hv2 and the URI, and neither host has anything of the lab;
//   - `labbuild host/preflight`, then the plan `labbuild -n cluster` states the MTU;
//   - `labbuild cluster` is killed half a second after it starts placing hv2's objects (its
//     isolated bridge, pool or tunnel): what hv2 and the records had then is kept for the
//     report, and the flow's runs go on from there.
func (s *secondHost) beforeRun1(t *testing.T, h *flowHost) {
	t.Helper()
	s.writeLab(t, h.r.lab, s.badURI)
	s.hostDown = h.labbuildKillAt(nil, "cluster")
	t.Logf("hv2 down: %v after %s\n%s", s.hostDown.err, s.hostDown.wall, tail(s.hostDown.out, 1500))
	if want := "host hv2: libvirtd at libvirt.uri " + s.badURI; s.hostDown.err == nil || stoppedAt(s.hostDown.out) != "host/preflight" || !strings.Contains(s.hostDown.out, want) {
		t.Errorf("with hv2's libvirtd down: stopped at %q, want host/preflight naming %q", stoppedAt(s.hostDown.out), want)
	}
	for _, o := range s.objects() {
		if _, v, _ := strings.Cut(o, ": "); v != "" {
			t.Errorf("hv2 has %s after the failed preflight", o)
		}
	}
	for _, c := range []string{"list --all --name", "net-list --all --name", "pool-list --all --name"} {
		if out, _ := h.r.lv.Exec("virsh", append([]string{"-c", h.r.lv.URI("qemu:///system")}, strings.Fields(c)...)...); strings.TrimSpace(string(out)) != "" {
			t.Errorf("hv1 has %q (%s) after the failed preflight", strings.TrimSpace(string(out)), c)
		}
	}
	s.writeLab(t, h.r.lab, s.uri)

	if pre := h.labbuildKillAt(nil, "host/preflight"); pre.err != nil {
		t.Fatalf("host/preflight with both hosts up: %v\n%s", pre.err, tail(pre.out, 3000))
	}
	s.planMTU = h.labbuildKillAt(nil, "-n", "cluster")
	t.Logf("plan: %v\n%s", s.planMTU.err, tail(s.planMTU.out, 2500))
	for _, want := range []string{fmt.Sprintf("machine network MTU %d = underlay 1500 − 50 (VXLAN), OVN-Kubernetes MTU %d = %d − 100 (Geneve)", flowMTU, flowMTU-100, flowMTU),
		fmt.Sprintf("isolated network rehearsal (bridge virbr-rehearsal, MTU %d) does not exist (on host hv2)", flowMTU)} {
		if !strings.Contains(s.planMTU.out, want) {
			t.Errorf("the plan does not say %q", want)
		}
	}

	killed := h.labbuildKillAfter(context.Background(), regexp.MustCompile(`^\[\d+/\d+\] (libvirt/(pool|bridge)/hv2|vxlan/hv2|libvirt/(volume|vm)/worker-0)$`), 500*time.Millisecond, "cluster")
	s.killedAt = s.objects()
	recs, _ := filepath.Glob(filepath.Join(h.r.lab, "out", "*", "*", "record.json"))
	more, _ := filepath.Glob(filepath.Join(h.r.lab, "out", "*", "*", "*", "record.json"))
	for _, p := range append(recs, more...) {
		if rel, _ := filepath.Rel(filepath.Join(h.r.lab, "out"), filepath.Dir(p)); strings.Contains(rel, "hv2") || strings.HasSuffix(rel, "worker-0") {
			s.killedRecords = append(s.killedRecords, rel)
		}
	}
	t.Logf("killed placing hv2's objects (%v after %s); hv2 had %q; records %v\n%s", killed.err, killed.wall, s.killedAt, s.killedRecords, tail(killed.out, 1500))
	if killed.err == nil || stoppedAt(killed.out) != "" {
		t.Errorf("the run was not killed placing hv2's objects: %v\n%s", killed.err, tail(killed.out, 2000))
	}
}

// afterDone checks, after cluster/done: hv2 holds exactly what an uninterrupted run leaves
// there, whatever the kill left; a ping with DF set that fills the machine network's MTU goes
// from worker-0 (hv2) to master-0 and the bootstrap's address... (hv1) and one byte more does
// not — not even when worker-0's own link would let it out: the tunnel carries no more.
func (s *secondHost) afterDone(t *testing.T, r *rig) {
	t.Helper()
	got := s.objects()
	want := []string{
		"domains: rehearsal-worker-0",
		"networks: rehearsal",
		"pools: rehearsal",
		"", // files: the image, worker-0's disk and Ignition (checked below)
		"bridges: virbr-rehearsal",
		"vxlan: vx-rehearsal",
		"", // firewall: one rule per input hook chain (checked below)
	}
	// libvirt's iptables (nft backend) adds an ip filter INPUT chain beside the host's own
	// (and an ip6 one, which IPv4 tunnel traffic never meets): vxlan/hv2's rule goes first
	// into each input hook chain of the ip and inet families.
	rules, _ := s.lv.Exec("nft", "list", "ruleset")
	chains := ipv4InputChains(string(rules))
	rule := fmt.Sprintf(`ip saddr %s udp dport %d accept comment "labbuild:rehearsal:vxlan"`, underlay1, 4789)
	if got[6] != "firewall: "+strings.Repeat(rule+"; ", chains-1)+rule {
		t.Errorf("hv2's firewall after the rerun: %q; want %d× %q (one per input hook chain)", got[6], chains, rule)
	}
	for i := range want {
		if i == 6 {
			continue
		}
		if i == 3 {
			f := strings.Fields(strings.TrimPrefix(got[3], "files: "))
			slices.Sort(f)
			if len(f) != 3 || f[0] != "rehearsal-worker-0.ign" || f[1] != "rehearsal-worker-0.qcow2" || !strings.HasPrefix(f[2], "rhcos-") {
				t.Errorf("hv2's pool after the rerun: %v; want the image once, worker-0's disk and Ignition", f)
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("hv2 after the rerun: %q, want %q (an uninterrupted run's)", got[i], want[i])
		}
	}
	peers, _ := s.lv.Exec("bridge", "fdb", "show", "dev", "vx-rehearsal")
	if !strings.Contains(string(peers), "00:00:00:00:00:00 dst "+underlay1+" self permanent") {
		t.Errorf("hv2's vx-rehearsal has no flood entry to hv1:\n%s", peers)
	}
	r.mu.Lock()
	w := r.nodes["worker-0"]
	r.mu.Unlock()
	if w == nil {
		t.Error("worker-0 does not run")
		return
	}
	ping := func(addr string, size int) error {
		out, err := exec.Command("ip", "netns", "exec", w.NetNS, "ping", "-c", "1", "-W", "3", "-M", "do", "-s", strconv.Itoa(size), addr).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, lastLines(string(out), 2))
		}
		return nil
	}
	for _, addr := range []string{master0IP, "198.18.0.1"} {
		if err := ping(addr, flowMTU-28); err != nil {
			t.Errorf("worker-0 (hv2) → %s (hv1), DF, %d bytes (the MTU): %v", addr, flowMTU, err)
		}
		if err := ping(addr, flowMTU-27); err == nil {
			t.Errorf("worker-0 (hv2) → %s (hv1), DF, %d bytes (one over the MTU) went through", addr, flowMTU+1)
		}
	}
	peer := "v" + w.NetNS
	if len(peer) > 15 {
		peer = peer[:15]
	}
	for _, c := range [][]string{{"-n", w.NetNS, "link", "set", "eth0", "mtu", "1500"}, {"-n", s.lv.NetNS, "link", "set", peer, "mtu", "1500"}} {
		if err := run("ip", c...); err != nil {
			t.Fatal(err)
		}
	}
	if err := ping(master0IP, flowMTU-27); err == nil {
		t.Errorf("%d bytes crossed the tunnel sized for %d (worker-0's link at 1500)", flowMTU+1, flowMTU)
	}
	for _, c := range [][]string{{"-n", w.NetNS, "link", "set", "eth0", "mtu", strconv.Itoa(flowMTU)}, {"-n", s.lv.NetNS, "link", "set", peer, "mtu", strconv.Itoa(flowMTU)}} {
		run("ip", c...)
	}
	t.Logf("worker-0 (hv2) → master-0 (hv1): DF %d bytes pass, %d do not (also with its link at 1500)", flowMTU, flowMTU+1)

	// labbuild status reaches worker-0's objects on hv2: each probe looks at hv2's libvirtd
	// (or, for vxlan/hv2, its links over ssh) and finds them there, as built.
	goals := []string{"libvirt/pool/hv2", "libvirt/volume/worker-0", "libvirt/vm/worker-0", "vxlan/hv2"}
	cmd := exec.Command("ip", append([]string{"netns", "exec", r.labNS, r.lb, "-f", "lab.yaml", "status", "--json"}, goals...)...)
	cmd.Dir = r.lab
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("labbuild status --json %v: %v\n%s", goals, err, tail(stderr.String(), 2000))
	}
	var rep struct {
		Targets []struct {
			Name   string `json:"name"`
			State  string `json:"state"`
			Exists *bool  `json:"exists"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("labbuild status --json: %v\n%s", err, tail(string(out), 2000))
	}
	seen := 0
	for _, ts := range rep.Targets {
		if !slices.Contains(goals, ts.Name) {
			continue
		}
		seen++
		if ts.State != "up to date" || ts.Exists == nil || !*ts.Exists {
			t.Errorf("labbuild status: %s is %q (exists %v), want up to date and existing on hv2", ts.Name, ts.State, ts.Exists)
		}
	}
	if seen != len(goals) {
		t.Errorf("labbuild status --json lists %d of %v:\n%s", seen, goals, tail(string(out), 2000))
	}
	t.Logf("labbuild status: %v up to date on hv2", goals)
}

// afterDestroy checks that destroy left nothing of the lab on hv2 (no domain, volume, pool,
// network, bridge, VXLAN device or firewall rule) and no VXLAN device or tunnel rule on hv1.
func (s *secondHost) afterDestroy(t *testing.T, r *rig) {
	t.Helper()
	for _, o := range s.objects() {
		if k, v, _ := strings.Cut(o, ": "); v != "" {
			t.Errorf("after destroy, hv2 has %s: %s", k, v)
		}
	}
	if out, _ := r.lv.Exec("ip", "-o", "link", "show", "type", "vxlan"); strings.TrimSpace(string(out)) != "" {
		t.Errorf("after destroy, hv1 has a VXLAN device: %s", out)
	}
	if out, _ := r.lv.Exec("nft", "list", "ruleset"); strings.Contains(string(out), "labbuild:rehearsal:vxlan") {
		t.Errorf("after destroy, hv1's firewall still opens the tunnel:\n%s", out)
	}
}

// ipv4InputChains counts the input hook chains of the tables of families ip and inet in the
// text of `nft list ruleset`: the chains an IPv4 packet to the host passes.
func ipv4InputChains(ruleset string) int {
	n, family := 0, ""
	for _, l := range strings.Split(ruleset, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "table" {
			family = f[1]
		}
		if (family == "ip" || family == "inet") && strings.Contains(l, "hook input") {
			n++
		}
	}
	return n
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, " | ")
}

// TestRehearsalTwoHostFlow is TestRehearsalFlow (3 masters + 1 worker) on two hosts: two real
// libvirtds, each in its own network namespace, joined by a veth underlay (198.19.0.0/24);
// the bootstrap and the masters on hv1, worker-0 on hv2 (secondHost). labbuild reaches hv2
// over qemu+libssh2 and runs ip, bridge and nft there over ssh; the machine network is one L2
// through VXLAN devices on both lab bridges (vxlan/hv1, vxlan/hv2), at MTU 1450. Before the
// flow's runs: a host-down preflight, the plan with the MTU, a kill while placing hv2's
// objects (beforeRun1). worker-0's real kubelet joins through the tunnel (DNS from hv1's
// dnsmasq, the API VIP on hv1's bridge) and cluster/done is reached; then hv2's state is an
// uninterrupted run's and the DF pings fill the MTU exactly (afterDone); destroy leaves
// nothing on either host (afterDestroy).
func TestRehearsalTwoHostFlow(t *testing.T) {
	rehearsalFlow(t, flowTopology{masters: 3, workers: 1, twoHosts: true})
}
