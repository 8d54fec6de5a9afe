package rehearsal

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/labbuild/labbuild/targets/kube"
)

// cvoStandin reports progress on the ClusterVersion once cluster/bootstrap applied it, as the
// CVO's first sync does (stand-in: the CVO's image cannot run here). It polls until ctx ends.
func cvoStandin(ctx context.Context, r *rig) {
	status := map[string]any{
		"desired":            map[string]any{"version": "4.18.0", "image": "quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("0", 64)},
		"observedGeneration": int64(1), "versionHash": "rehearsal-standin", "availableUpdates": nil,
		"conditions": []any{
			map[string]any{"type": "Progressing", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": "Working towards 4.18.0 (rehearsal CVO stand-in)"},
			map[string]any{"type": "Available", "status": "False", "lastTransitionTime": "2026-01-01T00:00:00Z"},
		},
	}
	for ctx.Err() == nil {
		if k, err := r.clients(); err == nil {
			if _, err := kube.PatchStatus(ctx, k.Dynamic.Resource(kube.ClusterVersions), "config.openshift.io/v1", "ClusterVersion", "version", status); err == nil {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// lbRun is one labbuild run: its output, exit status, wall time and peak RSS.
type lbRun struct {
	out    string
	err    error
	wall   time.Duration
	maxRSS int64 // KiB
}

// killDelay is how long after the phase's first line labbuildKillAt kills labbuild.
const killDelay = 10 * time.Second

// labbuildKillAt runs labbuild args in the lab and, killDelay after kill matches a line of
// its output, kills it with SIGKILL (as an OOM kill would: no cleanup runs).
func (r *rig) labbuildKillAt(kill *regexp.Regexp, args ...string) lbRun {
	cmd := exec.Command("ip", append([]string{"netns", "exec", r.lv.NetNS, r.lb, "-f", "lab.yaml"}, args...)...)
	cmd.Dir = r.lab
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var buf bytes.Buffer
	var mu sync.Mutex
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return lbRun{err: err}
	}
	done := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			mu.Lock()
			buf.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if kill != nil && kill.MatchString(sc.Text()) {
				// Mid-phase: the phase has started its VMs and waits for its nodes.
				kill = nil
				time.AfterFunc(killDelay, func() { cmd.Process.Signal(syscall.SIGKILL) })
			}
		}
		close(done)
	}()
	err := cmd.Wait()
	pw.Close()
	<-done
	run := lbRun{out: buf.String(), err: err, wall: time.Since(start)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		run.maxRSS = ru.Maxrss
	}
	return run
}

// TestRehearsalFlow runs the real labbuild binary from an empty directory through
// `labbuild cluster/etcd` with every VM start turned into its node starting (Watch): the
// bootstrap's control plane from bootstrap.ign's static pods, master-0's real kubelet, CSRs
// approved by labbuild itself, the etcd static pod on master-0 (a stand-in for the
// cluster-etcd-operator's, run by the real kubelet). labbuild is killed (SIGKILL) while cluster/masters waits and
// rerun: it continues there and finishes; a third run runs nothing. `labbuild destroy` then
// leaves no domain, volume, pool, network, bridge, haproxy or VIP in the lab's namespace, and
// a second destroy does nothing. Wall time and peak memory of each run are logged.
//
// Not yet: cluster/pivot and later phases (see docs/rehearsal.md): they need the
// masters' etcd and kube-apiserver, which the operators would start.
func TestRehearsalFlow(t *testing.T) {
	requireRehearsal(t)
	// host/preflight (upstream of every libvirt target) wants memory for every VM still to
	// define; the lab's sizes may not go below OpenShift's minimum (16 GiB for the bootstrap
	// and a master), so the rehearsal needs 32 GiB available even though its VMs boot nothing.
	if avail := memAvailableMiB(); avail < 2*16384 {
		t.Skipf("host/preflight would refuse this lab: bootstrap + master-0 need 32768 MiB, MemAvailable is %d MiB", avail)
	}
	r := newRig(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	var errMu sync.Mutex
	var nodeErrs []string
	w := &Watch{URI: r.lv.URI("qemu:///system"), Cluster: "rehearsal", Nodes: []string{"bootstrap", "master-0"},
		Up: func(node string) {
			nd, err := r.boot(node)
			if err == nil {
				if node == "bootstrap" {
					_, _, err = r.staticPods(nd)
				} else if err = WriteEtcdStandin(nd.Root); err == nil {
					err = r.kubelet(ctx, nd, "10.128.0.0/23")
				}
			}
			if err != nil {
				errMu.Lock()
				nodeErrs = append(nodeErrs, node+": "+err.Error())
				errMu.Unlock()
			}
		},
		Down: r.stop,
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	go w.Run(wctx)
	go cvoStandin(wctx, r)

	// First run: killed once cluster/masters is waiting for the masters.
	first := r.labbuildKillAt(regexp.MustCompile(`\] cluster/masters\b`), "cluster/etcd")
	t.Logf("run 1 (killed in cluster/masters): %v after %s, peak RSS %d KiB\n%s", first.err, first.wall, first.maxRSS, tail(first.out, 2500))
	if first.err == nil || !strings.Contains(first.out, "cluster/masters") {
		t.Fatalf("run 1 was not killed during cluster/masters (err %v)", first.err)
	}
	second := r.labbuildKillAt(nil, "cluster/etcd")
	t.Logf("run 2: %v after %s, peak RSS %d KiB\n%s", second.err, second.wall, second.maxRSS, tail(second.out, 2500))
	errMu.Lock()
	if len(nodeErrs) > 0 {
		t.Errorf("nodes failed to start: %v", nodeErrs)
	}
	errMu.Unlock()
	if second.err != nil {
		for _, nd := range r.allNodes() {
			t.Logf("node %s logs in %s", nd.Name, nd.LogDir)
		}
		t.Fatalf("rerun after the kill failed: %v", second.err)
	}
	if strings.Contains(second.out, "libvirt/network\n") || strings.Contains(second.out, "] cluster/bootstrap\n") {
		t.Errorf("rerun ran finished targets again:\n%s", second.out)
	}
	third := r.labbuildKillAt(nil, "cluster/etcd")
	t.Logf("run 3: %v after %s, peak RSS %d KiB\n%s", third.err, third.wall, third.maxRSS, tail(third.out, 800))
	if third.err != nil || !regexp.MustCompile(`\b0 built\b`).MatchString(third.out) {
		t.Errorf("third run: want nothing built, got %v:\n%s", third.err, third.out)
	}

	d1 := r.labbuildKillAt(nil, "destroy")
	t.Logf("destroy: %v after %s\n%s", d1.err, d1.wall, tail(d1.out, 1500))
	if d1.err != nil {
		t.Fatalf("destroy: %v", d1.err)
	}
	time.Sleep(time.Second) // the watch sees the domains gone and stops the nodes
	wcancel()
	for _, c := range []struct{ what, cmd string }{
		{"domains", "virsh -c " + r.lv.URI("qemu:///system") + " list --all --name"},
		{"networks", "virsh -c " + r.lv.URI("qemu:///system") + " net-list --all --name"},
		{"pools", "virsh -c " + r.lv.URI("qemu:///system") + " pool-list --all --name"},
		{"bridges", "ip -o link show type bridge"},
		{"VIPs", "ip -o -4 addr show | grep -F 198.18.0. || true"},
	} {
		out, err := r.lv.Exec("sh", "-c", c.cmd)
		if s := strings.TrimSpace(string(out)); err != nil || s != "" {
			t.Errorf("after destroy, %s left: %q (%v)", c.what, s, err)
		}
	}
	pids, _ := exec.Command("ip", "netns", "pids", r.lv.NetNS).Output()
	for _, p := range strings.Fields(string(pids)) {
		if b, _ := os.ReadFile("/proc/" + p + "/cmdline"); bytes.Contains(b, []byte("haproxy")) {
			t.Errorf("after destroy, haproxy pid %s still runs: %q", p, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	d2 := r.labbuildKillAt(nil, "destroy")
	if d2.err != nil || !strings.Contains(d2.out, "nothing") {
		t.Errorf("second destroy: want nothing to do, got %v:\n%s", d2.err, d2.out)
	}
	fmt.Fprintf(os.Stderr, "rehearsal: run1 %s (killed), run2 %s, run3 %s, destroy %s; peak RSS %d/%d/%d KiB\n",
		first.wall.Round(time.Second), second.wall.Round(time.Second), third.wall.Round(time.Second), d1.wall.Round(time.Second), first.maxRSS, second.maxRSS, third.maxRSS)
}

// memAvailableMiB is /proc/meminfo's MemAvailable in MiB (0 when unreadable).
func memAvailableMiB() int64 {
	b, _ := os.ReadFile("/proc/meminfo")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			var kb int64
			fmt.Sscan(f[1], &kb)
			return kb / 1024
		}
	}
	return 0
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
