package rehearsal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/testenv"
	"github.com/labbuild/labbuild/targets/kube"
)

// TestInClusterBootstrapVIP is the in-cluster mode's bootstrap under the rehearsal
// (network.loadBalancer: in-cluster): labbuild builds bootstrap.ign, whose on-prem pods are the
// MCO bootstrap render's; the node runs every static pod whose program is here — the real etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, the keepalived pod's `keepalived`
// container as its manifest says (bash, Debian keepalived, socat serving
// /var/run/keepalived/keepalived.sock) and its keepalived-monitor by the runtimecfg stand-in
// (cmd/runtimecfg-standin, named dynkeepalived as the pod's command); coredns and its runtimecfg
// render are not here (stand-ins, not started). It shows:
//
//   - the bootstrap takes the API VIP through the socket path (the monitor renders, sends
//     reload, the container starts keepalived) and /readyz answers through the VIP with
//     labbuild's admin kubeconfig, from the bootstrap's real kube-apiserver;
//   - when that kube-apiserver dies the monitor sends stop, the container stops keepalived and
//     marks /var/run/keepalived/stopped, and the VIP leaves the bootstrap (no master runs
//     keepalived in this slice: cmd/mco-standin TestKeepalivedControlSocket shows the move).
func TestInClusterBootstrapVIP(t *testing.T) {
	requireRehearsal(t)
	testenv.Require(t, "socat")
	testenv.Require(t, "pgrep")
	if _, err := os.Stat("/usr/sbin/keepalived"); err != nil {
		testenv.Missing(t, "Debian keepalived (bash .ci/install-keepalived.sh): the container's script runs /usr/sbin/keepalived")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := newRig(t, false)
	r.bins["bash"] = testenv.Require(t, "bash")
	mon := filepath.Join(r.work, "bin", "dynkeepalived")
	build := exec.Command("go", "build", "-o", mon, "./cmd/runtimecfg-standin")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/runtimecfg-standin: %v\n%s", err, out)
	}
	r.bins["dynkeepalived"] = mon
	labYAMLPath := filepath.Join(r.lab, "lab.yaml")
	b, err := os.ReadFile(labYAMLPath)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(labYAMLPath, []byte(strings.Replace(string(b), "network:\n", "network:\n  loadBalancer: in-cluster\n", 1)), 0o644)
	if out, err := r.labbuild("ignition/bootstrap", "kubeconfig/admin"); err != nil {
		t.Fatalf("labbuild: %v\n%s", err, out)
	}
	bNode, err := r.boot("bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	started, standins, err := r.staticPods(bNode)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bootstrap static pods: started %v; stand-ins (not started): %v", started, standins)
	for _, want := range []string{"etcd", "kube-apiserver", "bash", "dynkeepalived"} {
		if !slices.Contains(started, want) {
			t.Fatalf("bootstrap.ign's static pods start %v: no %s", started, want)
		}
	}
	holder := func() bool {
		out, _ := exec.Command("ip", "-n", bNode.NetNS, "-o", "-4", "addr", "show", "dev", "eth0").CombinedOutput()
		return strings.Contains(string(out), " "+apiVIP+"/")
	}
	nodeLog := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(bNode.LogDir, name+".log"))
		return string(b)
	}
	// The VIP is the only way in: no host haproxy, no VIP on the bridge.
	r.api = apiVIP
	k, err := r.clients()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	waitFor(ctx, t, "the bootstrap holds the API VIP", 5*time.Minute, func() (bool, string) {
		return holder(), "container: " + lastLine(nodeLog("keepalived-keepalived")) + "; monitor: " + lastLine(nodeLog("keepalived-keepalived-monitor"))
	})
	if l := nodeLog("keepalived-keepalived"); !strings.Contains(l, "The client sent: reload") {
		t.Errorf("the keepalived container got no reload through its socket:\n%s", l)
	}
	waitFor(ctx, t, "/readyz through the API VIP", 2*time.Minute, func() (bool, string) {
		err := kube.Readyz(ctx, k)
		return err == nil, fmt.Sprint(err)
	})
	v, err := kube.ServerVersion(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("VIP %s on the bootstrap through the socket path %v after its static pods started; /readyz through it: ok (kube-apiserver %s)", apiVIP, time.Since(t0).Round(time.Second), v)

	// The bootstrap kube-apiserver dies: the monitor stops keepalived through the socket.
	pid := netnsPID(t, bNode.NetNS, "kube-apiserver")
	died := time.Now()
	syscall.Kill(pid, syscall.SIGKILL)
	waitFor(ctx, t, "the monitor sends stop", 2*time.Minute, func() (bool, string) {
		return strings.Contains(nodeLog("keepalived-keepalived"), "The client sent: stop"), lastLine(nodeLog("keepalived-keepalived-monitor"))
	})
	stop := time.Now()
	waitFor(ctx, t, "the VIP leaves the bootstrap", 30*time.Second, func() (bool, string) { return !holder(), "" })
	t.Logf("kube-apiserver killed → stop sent after %v; VIP released %v after the stop",
		stop.Sub(died).Round(100*time.Millisecond), time.Since(stop).Round(100*time.Millisecond))
	var stopped []byte
	if err := bNode.Run(ctx, "cat-stopped", nil, "cat", EmptyDirPath("keepalived", "run-dir")+"/stopped"); err == nil {
		stopped, _ = os.ReadFile(filepath.Join(bNode.LogDir, "cat-stopped.log"))
	}
	if !strings.Contains(string(stopped), "Keepalived process stopped") {
		t.Errorf("/var/run/keepalived/stopped: %q", stopped)
	}
}

// netnsPID returns the pid of the process named comm in network namespace ns (one this test
// started: the node's namespace holds nothing else).
func netnsPID(t *testing.T, ns, comm string) int {
	t.Helper()
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		b, _ := os.ReadFile("/proc/" + f + "/comm")
		if strings.TrimSpace(string(b)) == comm {
			pid, _ := strconv.Atoi(f)
			return pid
		}
	}
	t.Fatalf("no %s in network namespace %s", comm, ns)
	return 0
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
