package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/vip"
)

// TestKeepalivedControlSocket runs the bootstrap's keepalived pod as the MCO bootstrap render
// writes it (baremetal/manifests/keepalived.yaml, which labbuild places byte for byte): the
// keepalived container's own command line — bash, Debian's keepalived and socat serving the
// control socket /var/run/keepalived/keepalived.sock — in the bootstrap's network namespace
// with a private mount and PID namespace (the pod's run-dir and conf-dir), and its
// keepalived-monitor container's command line run by the runtimecfg stand-in
// (internal/rig/standin/runtimecfg, KeepalivedWatch). Two masters run keepalived with the config the MCO
// rendered for them, as in TestKeepalivedVIPFailover. It shows:
//
//   - the monitor dials the socket before it renders: started alone it exits with an error and
//     writes no keepalived.conf;
//   - with the container up, the monitor renders keepalived.conf (unicast to the master Nodes it
//     lists through its kubeconfig) and sends "reload", the container starts keepalived, the
//     bootstrap takes the API VIP and https://<VIP>:6443/readyz answers from the bootstrap;
//   - when the bootstrap's API dies, the monitor sends "stop", the container stops keepalived
//     and marks /var/run/keepalived/stopped, and the VIP is on a master within 3 × advert_int
//     (3 s) of the stop, answering /readyz from that master.
func TestKeepalivedControlSocket(t *testing.T) {
	if os.Getuid() != 0 {
		testenv.Missing(t, "network namespaces need root")
	}
	keepalived := testenv.Require(t, "keepalived")
	for _, p := range []string{"socat", "pgrep", "curl", "ip", "unshare", "bash"} {
		testenv.Require(t, p)
	}
	if keepalived != "/usr/sbin/keepalived" {
		// The container's script names /usr/sbin/keepalived.
		testenv.Missing(t, "keepalived is not /usr/sbin/keepalived: "+keepalived)
	}
	for _, d := range []string{"/etc/keepalived", "/run/keepalived"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// The bootstrap pod and template from the MCO bootstrap render; the masters' config.
	boot := bareMetalBootstrap(t)
	var pod corev1.Pod
	if err := yaml.Unmarshal(boot["baremetal/manifests/keepalived.yaml"], &pod); err != nil || len(pod.Spec.Containers) != 2 {
		t.Fatalf("bootstrap keepalived pod: %v\n%s", err, boot["baremetal/manifests/keepalived.yaml"])
	}
	ctr, mon := pod.Spec.Containers[0], pod.Spec.Containers[1]
	if ctr.Name != "keepalived" || mon.Name != "keepalived-monitor" {
		t.Fatalf("containers %s, %s", ctr.Name, mon.Name)
	}
	masterTmpl, scripts := masterKeepalived(t)

	// The runtimecfg stand-in, under the name the pod's command uses.
	bin := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "dynkeepalived"), "github.com/labbuild/labbuild/internal/rig/standin/runtimecfg").CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/rig/standin/runtimecfg: %v\n%s", err, out)
	}

	addNode := kaBridge(t, "lbks")
	bn := addNode("bootstrap", 100)
	m0 := addNode("master-0", 101)
	m1 := addNode("master-1", 102)
	client := addNode("client", 200)
	nodes := []*kaNode{bn, m0, m1}

	// The API's master Nodes (the bootstrap is not a Node).
	var nl corev1.NodeList
	nl.APIVersion, nl.Kind = "v1", "NodeList"
	for _, m := range []*kaNode{m0, m1} {
		nl.Items = append(nl.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.name, Labels: map[string]string{"node-role.kubernetes.io/master": ""}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: m.ip}}}})
	}
	nodesJSON, _ := json.Marshal(nl)
	var logs = map[string]*syncBuf{}
	start := func(name string, cmd *exec.Cmd) *exec.Cmd {
		if logs[name] == nil {
			logs[name] = &syncBuf{}
		}
		cmd.Stdout, cmd.Stderr = logs[name], logs[name]
		cmd.WaitDelay = 2 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	dumpLogs := func() {
		for n, l := range logs {
			t.Logf("--- %s:\n%s", n, l)
		}
	}
	for _, n := range nodes {
		cmd := exec.Command("ip", "netns", "exec", n.ns, os.Args[0], "-test.run=^TestVIPBackendHelper$")
		cmd.Env = append(os.Environ(), "LABBUILD_VIP_BACKEND="+n.name, "LABBUILD_VIP_NODES="+string(nodesJSON))
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		n.backend = cmd
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}

	// The bootstrap's files at the pod's paths: the kubeconfig (the local API), the template,
	// the install-config.
	kubeconfig := filepath.Join(bn.dir, "kubeconfig")
	os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://localhost:6443", insecure-skip-tls-verify: true}}]
users: [{name: admin, user: {token: rehearsal}}]
contexts: [{name: admin, context: {cluster: local, user: admin}}]
current-context: admin
`), 0o600)
	tmplPath := filepath.Join(bn.dir, "keepalived.conf.tmpl")
	os.WriteFile(tmplPath, boot["baremetal/static-pod-resources/keepalived/keepalived.conf.tmpl"], 0o644)
	ccPath := filepath.Join(bn.dir, "cluster-config.yaml")
	os.WriteFile(ccPath, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-config-v1\n  namespace: kube-system\ndata:\n  install-config: |\n    baseDomain: example.com\n    metadata:\n      name: ocp4\n"), 0o644)

	// mountsAnd runs argv in the node's network namespace and a private mount namespace with
	// the pod's conf-dir and run-dir; pid adds a PID namespace (the container's pgrep sees
	// its own keepalived only).
	home := t.TempDir()
	mountsAnd := func(n *kaNode, pid bool, env []string, argv ...string) *exec.Cmd {
		un := []string{"unshare", "--mount", "--propagation", "private"}
		if pid {
			// --kill-child: the namespace's processes die with unshare.
			un = append(un, "--pid", "--fork", "--mount-proc", "--kill-child")
		}
		// The image's /bin/sh is bash (RHEL), through which socat's system: address runs
		// `bash -c msg_handler` with the exported functions; Debian's dash would drop them.
		// A container's /run is its own (keepalived's /run/keepalived.pid of another run
		// would make it exit: "daemon is already running").
		sh := fmt.Sprintf(`mount -t tmpfs tmpfs /run && mkdir /run/keepalived && mount --bind %s /etc/keepalived && mount --bind %s /run/keepalived && mount --bind "$(command -v bash)" "$(readlink -f /bin/sh)" && exec "$@"`,
			filepath.Join(n.dir, "etc-keepalived"), filepath.Join(n.dir, "run-keepalived"))
		args := append(append(append([]string{"netns", "exec", n.ns}, un...), "sh", "-c", sh, "sh"), argv...)
		cmd := exec.Command("ip", args...)
		// A container's environment: the image's PATH and an empty HOME (no host dotfiles).
		cmd.Env = append([]string{"PATH=" + bin + ":/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + home}, env...)
		return cmd
	}
	podEnv := func(c corev1.Container) []string {
		var env []string
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env = append(env, e.Name+"="+e.Value)
			} else if e.Name == "POD_NAMESPACE" {
				env = append(env, e.Name+"="+pod.Namespace)
			}
		}
		return env
	}
	// The monitor's command line, its hostPath files mapped to the test's copies.
	monArgs := []string{}
	for _, a := range mon.Command {
		switch a {
		case "/etc/kubernetes/kubeconfig":
			a = kubeconfig
		case "/config/keepalived.conf.tmpl":
			a = tmplPath
		case "/opt/openshift/manifests/cluster-config.yaml":
			a = ccPath
		}
		monArgs = append(monArgs, a)
	}
	// The lab's VIPs are 192.168.126.10/11; this test's network is 198.18.0.0/24.
	for i, a := range monArgs[:len(monArgs)-1] {
		switch a {
		case "--api-vips":
			monArgs[i+1] = kaVIP
		case "--ingress-vips":
			monArgs[i+1] = kaNet + ".11"
		}
	}
	t.Logf("monitor: %s", strings.Join(monArgs, " "))

	// 1. The monitor alone: nothing listens on the socket, so it exits before rendering.
	var aloneOut bytes.Buffer
	alone := mountsAnd(bn, false, podEnv(mon), monArgs...)
	alone.Stdout, alone.Stderr = &aloneOut, &aloneOut
	if err := alone.Run(); err == nil || !strings.Contains(aloneOut.String(), "keepalived.sock") {
		t.Fatalf("the monitor without the container's socket: %v\n%s", err, aloneOut.String())
	}
	if _, err := os.Stat(filepath.Join(bn.dir, "etc-keepalived", "keepalived.conf")); err == nil {
		t.Fatal("the monitor rendered keepalived.conf without a control socket")
	}
	t.Logf("monitor without the socket exits: %s", strings.TrimSpace(aloneOut.String()))

	// 2. The container, exactly as the pod says, then the monitor.
	start("bootstrap keepalived container", mountsAnd(bn, true, podEnv(ctr), ctr.Command...))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(bn.dir, "run-keepalived", "keepalived.sock")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			dumpLogs()
			t.Fatal("the keepalived container serves no /var/run/keepalived/keepalived.sock")
		}
		time.Sleep(100 * time.Millisecond)
	}
	start("bootstrap keepalived-monitor (runtimecfg stand-in)", mountsAnd(bn, false, podEnv(mon), monArgs...))

	holder := func() string { return kaHolder(nodes) }
	readyz := func() string {
		out, _ := exec.Command("ip", "netns", "exec", client.ns, "curl", "-ksS", "--max-time", "2", "https://"+kaVIP+":6443/readyz").CombinedOutput()
		return string(out)
	}
	waitFor := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !ok() {
			if time.Now().After(deadline) {
				dumpLogs()
				t.Fatalf("%s: not within %v (VIP on %q)", what, d, holder())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitFor("bootstrap takes the VIP through the socket", 60*time.Second, func() bool { return holder() == "bootstrap" })
	waitFor("/readyz through the VIP answers from the bootstrap", 10*time.Second, func() bool { return readyz() == "ok bootstrap" })
	conf, _ := os.ReadFile(filepath.Join(bn.dir, "etc-keepalived", "keepalived.conf"))
	clog := logs["bootstrap keepalived container"].String()
	if !strings.Contains(clog, "The client sent: reload") {
		t.Errorf("the container never got reload:\n%s", clog)
	}
	for _, want := range []string{"priority 70", kaVIP + "/24 label vip", "unicast_src_ip " + bn.ip, "        " + m0.ip + "\n", "        " + m1.ip + "\n"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("keepalived.conf the monitor rendered lacks %q:\n%s", want, conf)
		}
	}
	t.Logf("bootstrap holds %s through the socket path; /readyz → %q", kaVIP, readyz())

	// 3. The masters, with the config the MCO rendered for them (peers: all three).
	for _, n := range []*kaNode{m0, m1} {
		nd, err := vip.NewNode(vip.NodeData{ClusterName: "ocp4", Domain: "ocp4.example.com", APIVIP: kaVIP, IngressVIP: kaNet + ".11",
			MachineNetwork: fmt.Sprintf("%s.0/%d", kaNet, kaPrefix), NodeIP: n.ip, Interface: "eth0", Unicast: true,
			Backends: []string{bn.ip, m0.ip, m1.ip}, DNSUpstreams: []string{"198.18.0.1"}})
		if err != nil {
			t.Fatal(err)
		}
		writeMasterKeepalived(t, n, masterTmpl, scripts, nd)
		start(n.name+" keepalived", mountsAnd(n, true, nil, keepalived, "-f", "/etc/keepalived/keepalived.conf", "--dont-fork", "--vrrp",
			"--log-console", "--log-detail", "-p", "/run/keepalived/keepalived.pid", "-r", "/run/keepalived/vrrp.pid"))
	}
	for _, m := range []*kaNode{m0, m1} {
		waitFor(m.name+" chk_ocp_lb succeeds", 60*time.Second, func() bool {
			return strings.Contains(logs[m.name+" keepalived"].String(), "Script(chk_ocp_lb) succeeded")
		})
	}
	if h := holder(); h != "bootstrap" {
		dumpLogs()
		t.Fatalf("masters up, bootstrap API serving: VIP on %q, want bootstrap", h)
	}

	// 4. The bootstrap's API dies (bootstrap etcd member removed): the monitor stops
	// keepalived through the socket and the VIP moves to a master.
	died := time.Now()
	bn.backend.Process.Signal(syscall.SIGKILL)
	bn.backend.Wait()
	var stopped time.Time
	waitFor("the monitor sends stop", 60*time.Second, func() bool {
		if strings.Contains(logs["bootstrap keepalived container"].String(), "The client sent: stop") {
			stopped = time.Now()
			return true
		}
		return false
	})
	waitFor("the VIP leaves the bootstrap for a master", 20*time.Second, func() bool { h := holder(); return h == "master-0" || h == "master-1" })
	moved := time.Now()
	if b, err := os.ReadFile(filepath.Join(bn.dir, "run-keepalived", "stopped")); err != nil || !strings.Contains(string(b), "Keepalived process stopped") {
		t.Errorf("/var/run/keepalived/stopped: %q %v", b, err)
	}
	h := holder()
	waitFor("/readyz through the VIP answers from "+h, 10*time.Second, func() bool { return readyz() == "ok "+h })
	t.Logf("API died → stop sent after %v (runtimecfg: > %d failed checks 1 s apart); stop → VIP on %s after %v (3 × advert_int = 3s); /readyz → %q",
		stopped.Sub(died).Round(100*time.Millisecond), 4, h, moved.Sub(stopped).Round(100*time.Millisecond), readyz())
	if d := moved.Sub(stopped); d > 3*time.Second {
		dumpLogs()
		t.Errorf("VIP moved %v after the stop, more than keepalived's advert interval × 3 (3 s)", d)
	}
}
