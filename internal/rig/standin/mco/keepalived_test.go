package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/vip"
)

// The VIP failover test runs Debian's keepalived (.ci/install-keepalived.sh) on three "nodes" —
// the bootstrap and two masters — each a network namespace on one bridge (198.18.0.0/24, in
// namespaces this test creates), with the keepalived.conf the lab's assets produce, rendered
// as runtimecfg renders it on the node at boot (render/vip.Render: baremetal-runtimecfg is not
// served by the module proxy here, so its template step runs over the same data):
//
//   - the bootstrap: the keepalived.conf.tmpl of the stand-in MCO's bootstrap render
//     (baremetal/static-pod-resources, MCO manifests/on-prem: priority 70, unicast);
//   - the masters: the keepalived.conf.tmpl and check scripts the stand-in MCO rendered from the
//     real 4.18 on-prem templates into rendered-master (priority 40 plus check weights).
//
// Every node runs a backend (this test binary, re-executed inside the namespace): haproxy's
// health port 9444 (/haproxy_ready, which the masters' chk_ocp_lb polls) and an HTTPS
// "kube-apiserver" on 6443 answering /readyz with the node's name. The VIP must sit on the
// bootstrap first, move to a master when the bootstrap's keepalived stops, and move again
// when that master stops; a curl through the VIP from a client namespace reaches a live
// backend each time.

const (
	kaNet    = "198.18.0"
	kaVIP    = kaNet + ".10"
	kaPrefix = 24
)

type kaNode struct {
	name, ns, ip string
	dir          string // etc-keepalived, run-keepalived
	ka           *exec.Cmd
	backend      *exec.Cmd
}

// TestVIPBackendHelper is the backend each node namespace runs (not a test on its own).
func TestVIPBackendHelper(t *testing.T) {
	name := os.Getenv("LABBUILD_VIP_BACKEND")
	if name == "" {
		t.Skip("helper process of TestKeepalivedVIPFailover")
	}
	go http.ListenAndServe(":9444", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ready "+name) }))
	// The API also answers a Node list (LABBUILD_VIP_NODES, a core/v1 NodeList): what the
	// runtimecfg stand-in reads through its kubeconfig.
	nodes := os.Getenv("LABBUILD_VIP_NODES")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/nodes" && nodes != "" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, nodes)
			return
		}
		io.WriteString(w, "ok "+name)
	}))
	ln, err := net.Listen("tcp", ":6443")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv.Listener = ln
	srv.StartTLS()
	select {}
}

func TestKeepalivedVIPFailover(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Missing(t, "network namespaces need root")
	}
	keepalived := testenv.Require(t, "keepalived")
	testenv.Require(t, "curl")
	testenv.Require(t, "ip")
	testenv.Require(t, "unshare")
	for _, d := range []string{"/etc/keepalived", "/run/keepalived"} {
		if err := os.MkdirAll(d, 0o755); err != nil { // bind-mount targets (keepalived's own dirs)
			t.Fatal(err)
		}
	}

	tmpl, scripts := masterKeepalived(t)
	// The bootstrap's template, from the stand-in operator's bootstrap render (the MCO's
	// manifests/on-prem/keepalived.conf.tmpl, as bootkube.sh places it).
	bootTmpl := bareMetalBootstrap(t)["baremetal/static-pod-resources/keepalived/keepalived.conf.tmpl"]
	if len(bootTmpl) == 0 {
		t.Fatal("the operator bootstrap wrote no baremetal keepalived.conf.tmpl")
	}
	addNode := kaBridge(t, "lbka")
	boot := addNode("bootstrap", 100)
	m0 := addNode("master-0", 101)
	m1 := addNode("master-1", 102)
	client := addNode("client", 200)
	nodes := []*kaNode{boot, m0, m1}

	// What runtimecfg sees at boot on each node: the API's backends (the bootstrap and the
	// masters while the bootstrap serves), no ingress peers (no router runs in this test).
	data := func(n *kaNode) vip.Node {
		nd, err := vip.NewNode(vip.NodeData{ClusterName: "ocp4", Domain: "ocp4.example.com", APIVIP: kaVIP, IngressVIP: kaNet + ".11",
			MachineNetwork: fmt.Sprintf("%s.0/%d", kaNet, kaPrefix), NodeIP: n.ip, Interface: "eth0", Unicast: true,
			Backends: []string{boot.ip, m0.ip, m1.ip}, DNSUpstreams: []string{"198.18.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		return nd
	}
	for _, n := range nodes {
		if n != boot {
			writeMasterKeepalived(t, n, tmpl, scripts, data(n))
			continue
		}
		conf, err := vip.Render(bootTmpl, data(n))
		if err != nil {
			t.Fatalf("%s: render keepalived.conf: %v", n.name, err)
		}
		os.WriteFile(filepath.Join(n.dir, "etc-keepalived", "keepalived.conf"), conf, 0o644)
		t.Logf("%s keepalived.conf:\n%s", n.name, conf)
	}

	startBackend := func(n *kaNode) {
		cmd := exec.Command("ip", "netns", "exec", n.ns, os.Args[0], "-test.run=^TestVIPBackendHelper$")
		cmd.Env = append(os.Environ(), "LABBUILD_VIP_BACKEND="+n.name)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n.backend = cmd
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	var logs = map[string]*syncBuf{}
	startKeepalived := func(n *kaNode) {
		// keepalived in the node's namespace, with /etc/keepalived and /var/run/keepalived
		// bind-mounted from the node's dirs in a private mount namespace: the paths the
		// rendered configuration and scripts name.
		sh := fmt.Sprintf("mount --bind %s /etc/keepalived && mount --bind %s /run/keepalived && exec %s -f /etc/keepalived/keepalived.conf --dont-fork --vrrp --log-console --log-detail -p /run/keepalived/keepalived.pid -r /run/keepalived/vrrp.pid",
			filepath.Join(n.dir, "etc-keepalived"), filepath.Join(n.dir, "run-keepalived"), keepalived)
		cmd := exec.Command("ip", "netns", "exec", n.ns, "unshare", "--mount", "--propagation", "private", "sh", "-c", sh)
		logs[n.name] = &syncBuf{}
		cmd.Stdout, cmd.Stderr = logs[n.name], logs[n.name]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n.ka = cmd
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	stop := func(n *kaNode) {
		// SIGTERM: keepalived sends a priority-0 advertisement and removes the VIP, as when
		// the bootstrap's static pod stops with the VM.
		n.ka.Process.Signal(syscall.SIGTERM)
		n.ka.Wait()
		n.backend.Process.Kill()
		n.backend.Wait()
	}
	holder := func() string { return kaHolder(nodes) }
	curl := func() (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "ip", "netns", "exec", client.ns, "curl", "-ksS", "--max-time", "2", "https://"+kaVIP+":6443/readyz").CombinedOutput()
		return string(out), err
	}
	expect := func(want []string, what string) string {
		t.Helper()
		deadline := time.Now().Add(40 * time.Second)
		var h string
		for time.Now().Before(deadline) {
			h = holder()
			for _, w := range want {
				if h == w {
					// A curl through the VIP reaches that node's live backend.
					var body string
					var err error
					for i := 0; i < 10; i++ {
						if body, err = curl(); err == nil && body == "ok "+w {
							t.Logf("%s: VIP on %s; curl https://%s:6443/readyz → %q", what, w, kaVIP, body)
							return w
						}
						time.Sleep(300 * time.Millisecond)
					}
					t.Fatalf("%s: VIP on %s but curl through it: %q, %v", what, w, body, err)
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		for n, l := range logs {
			t.Logf("--- %s keepalived log:\n%s", n, l)
		}
		t.Fatalf("%s: VIP on %q, want one of %v", what, h, want)
		return ""
	}

	for _, n := range nodes {
		startBackend(n)
	}
	// The bootstrap boots first and takes the VIP; the masters join later, as in the lab.
	startKeepalived(boot)
	expect([]string{"bootstrap"}, "bootstrap alone")
	startKeepalived(m0)
	startKeepalived(m1)
	// The masters' checks pass (rise 3 × 2 s): their priority climbs to 40+20+5 = 65 (chk_mcs
	// cannot see a machine-config-server here), still below the bootstrap's 70.
	time.Sleep(10 * time.Second)
	expect([]string{"bootstrap"}, "masters up, bootstrap running")

	// The masters' chk_ocp_lb (haproxy's /haproxy_ready on 9444 and the iptables marker)
	// passes: their priority carries its weight, the only way a master outbids another.
	// On a loaded machine the script's 1.9 s timeout can expire a few times first: wait for it.
	for _, m := range []*kaNode{m0, m1} {
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(logs[m.name].String(), "Script(chk_ocp_lb) succeeded") && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
		}
		if l := logs[m.name].String(); !strings.Contains(l, "Script(chk_ocp_lb) succeeded") {
			t.Errorf("%s: chk_ocp_lb never succeeded:\n%s", m.name, l)
		}
	}

	stop(boot)
	first := expect([]string{"master-0", "master-1"}, "bootstrap stopped")
	next := map[string]*kaNode{"master-0": m0, "master-1": m1}
	stop(next[first])
	other := map[string]string{"master-0": "master-1", "master-1": "master-0"}[first]
	expect([]string{other}, first+" stopped")
}

// syncBuf is a bytes.Buffer safe for the process's writer and the test's reads.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// kaRun runs a command and fails the test with its output.
func kaRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// kaBridge creates a bridge in a namespace of its own (removed at cleanup) and returns a
// function adding a node: a network namespace with eth0 on the bridge at 198.18.0.<host>/24 and
// the node's etc-keepalived and run-keepalived directories.
func kaBridge(t *testing.T, prefix string) func(name string, host int) *kaNode {
	tag := fmt.Sprintf("%s%d", prefix, os.Getpid()%100000)
	brNS := tag + "-br"
	kaRun(t, "ip", "netns", "add", brNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", brNS).Run() })
	kaRun(t, "ip", "-n", brNS, "link", "add", "br0", "type", "bridge")
	kaRun(t, "ip", "-n", brNS, "link", "set", "br0", "up")
	base := t.TempDir()
	return func(name string, host int) *kaNode {
		n := &kaNode{name: name, ns: fmt.Sprintf("%s-%d", tag, host), ip: fmt.Sprintf("%s.%d", kaNet, host), dir: filepath.Join(base, name)}
		kaRun(t, "ip", "netns", "add", n.ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", n.ns).Run() })
		peer := fmt.Sprintf("v%d", host)
		kaRun(t, "ip", "-n", n.ns, "link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", brNS)
		kaRun(t, "ip", "-n", brNS, "link", "set", peer, "master", "br0", "up")
		kaRun(t, "ip", "-n", n.ns, "addr", "add", fmt.Sprintf("%s/%d", n.ip, kaPrefix), "dev", "eth0")
		kaRun(t, "ip", "-n", n.ns, "link", "set", "eth0", "up")
		kaRun(t, "ip", "-n", n.ns, "link", "set", "lo", "up")
		for _, d := range []string{"etc-keepalived", "run-keepalived"} {
			os.MkdirAll(filepath.Join(n.dir, d), 0o755)
		}
		return n
	}
}

// masterKeepalived returns the masters' keepalived.conf.tmpl and check script templates, from
// the stand-in's render of the real on-prem templates into rendered-master.
func masterKeepalived(t *testing.T) ([]byte, map[string][]byte) {
	t.Helper()
	cfgs, _ := renderBareMetal(t)
	const dir = "/etc/kubernetes/static-pod-resources/keepalived/"
	tmpl, err := ignition.FileContents(cfgs["master"], dir+"keepalived.conf.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	scripts := map[string][]byte{}
	for _, s := range []string{"chk_ocp_script.sh", "chk_ocp_script_both.sh", "chk_mcs_script.sh", "chk_default_ingress.sh"} {
		if scripts[s], err = ignition.FileContents(cfgs["master"], dir+"scripts/"+s+".tmpl"); err != nil {
			t.Fatal(err)
		}
	}
	return tmpl, scripts
}

// writeMasterKeepalived renders a master's keepalived.conf and check scripts as runtimecfg
// would at boot into its etc-keepalived, and the iptables marker the keepalived pod's monitor
// creates once haproxy's redirect is in place (chk_ocp_script.sh requires it).
func writeMasterKeepalived(t *testing.T, n *kaNode, tmpl []byte, scripts map[string][]byte, data vip.Node) {
	t.Helper()
	conf, err := vip.Render(tmpl, data)
	if err != nil {
		t.Fatalf("%s: render keepalived.conf: %v", n.name, err)
	}
	for s, b := range scripts {
		out, err := vip.Render(b, data)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		os.WriteFile(filepath.Join(n.dir, "etc-keepalived", s), out, 0o755)
	}
	os.WriteFile(filepath.Join(n.dir, "run-keepalived", "iptables-rule-exists"), nil, 0o644)
	os.WriteFile(filepath.Join(n.dir, "etc-keepalived", "keepalived.conf"), conf, 0o644)
}

// kaHolder names the nodes whose eth0 holds the API VIP, comma-separated.
func kaHolder(nodes []*kaNode) string {
	var on []string
	for _, n := range nodes {
		out, _ := exec.Command("ip", "-n", n.ns, "-o", "-4", "addr", "show", "dev", "eth0").CombinedOutput()
		if bytes.Contains(out, []byte(" "+kaVIP+"/")) {
			on = append(on, n.name)
		}
	}
	return strings.Join(on, ",")
}
