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

	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
)

// TestInClusterBootstrapVIP is the in-cluster mode's bootstrap under the rehearsal
// (network.loadBalancer: in-cluster): labbuild builds bootstrap.ign, whose on-prem pods are the
// MCO bootstrap render's; the node runs every static pod whose program is here — the real etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler, the keepalived pod's `keepalived`
// container as its manifest says (bash, Debian keepalived, socat serving
// /var/run/keepalived/keepalived.sock) and its keepalived-monitor by the runtimecfg stand-in
// (internal/rig/standin/runtimecfg, named dynkeepalived as the pod's command); coredns and its runtimecfg
// render are not here (stand-ins, not started). It shows:
//
//   - the bootstrap takes the API VIP through the socket path (the monitor renders, sends
//     reload, the container starts keepalived) and /readyz answers through the VIP with
//     labbuild's admin kubeconfig, from the bootstrap's real kube-apiserver;
//   - when that kube-apiserver dies the monitor sends stop, the container stops keepalived and
//     marks /var/run/keepalived/stopped, and the VIP leaves the bootstrap (no master runs
//     keepalived in this test: TestInClusterVIPMovesToMaster shows the move).
func TestInClusterBootstrapVIP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r := inClusterRig(t, 1, "ignition/bootstrap", "kubeconfig/admin")
	bNode := r.bootBootstrap(t, "etcd", "kube-apiserver", "bash", "dynkeepalived")
	holder := func() bool { return holdsVIP(bNode) }
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

// inClusterRig is the rehearsal for network.loadBalancer: in-cluster without libvirt: the
// keepalived container's programs and the runtimecfg stand-in (inClusterTools), the lab
// switched to in-cluster, and labbuild's build of targets for a lab of masters masters (1 or 3).
func inClusterRig(t *testing.T, masters int, targets ...string) *rig {
	t.Helper()
	requireRehearsal(t)
	r := newRig(t, false)
	r.inClusterTools(t, false)
	labYAMLPath := filepath.Join(r.lab, "lab.yaml")
	b, err := os.ReadFile(labYAMLPath)
	if err != nil {
		t.Fatal(err)
	}
	lab := inClusterLab(t, string(b))
	if masters == 3 {
		m0 := "  - {name: master-0, role: master, ip: " + master0IP + "}\n"
		lab = strings.Replace(lab, m0, m0+"  - {name: master-1, role: master, ip: "+master1IP+"}\n"+
			"  - {name: master-2, role: master, ip: "+master2IP+"}\n", 1)
	}
	os.WriteFile(labYAMLPath, []byte(lab), 0o644)
	if out, err := r.labbuild(targets...); err != nil {
		t.Fatalf("labbuild: %v\n%s", err, out)
	}
	return r
}

// inClusterLab switches the rehearsal's lab.yaml to network.loadBalancer: in-cluster.
func inClusterLab(t *testing.T, lab string) string {
	t.Helper()
	s := strings.Replace(lab, "network:\n", "network:\n  loadBalancer: in-cluster\n", 1)
	if s == lab {
		t.Fatal("lab.yaml has no network: section to extend")
	}
	return s
}

// inClusterTools readies the rig for the in-cluster mode's pods: the keepalived container's
// programs (bash, Debian keepalived, socat, pgrep) and the runtimecfg stand-in under the name
// the pods' commands use (dynkeepalived), for the pods the rehearsal itself runs (the
// bootstrap's); withImages, also the stand-in images (OnPremImages) that every kubelet node's
// containerd imports under the payload's pull specs, so that the masters' kubelets run the
// MCO's keepalived and haproxy pods themselves.
func (r *rig) inClusterTools(t *testing.T, withImages bool) {
	t.Helper()
	testenv.Require(t, "socat")
	testenv.Require(t, "pgrep")
	for _, p := range []string{"/usr/sbin/keepalived", "/usr/sbin/haproxy", "/usr/sbin/iptables", "/usr/bin/curl"} {
		if _, err := os.Stat(p); err != nil {
			testenv.Missing(t, "Debian keepalived, haproxy, iptables and curl (bash .ci/install-keepalived.sh): the on-prem pods run "+p)
		}
	}
	r.bins["bash"] = testenv.Require(t, "bash")
	mon := buildRuntimecfgStandin(t, filepath.Join(r.work, "bin", "dynkeepalived"))
	r.bins["dynkeepalived"] = mon
	if !withImages {
		return
	}
	for _, im := range OnPremImages(mon) {
		it := ImageTar{File: filepath.Join(r.work, im.Tag+".tar"), Ref: OnPremImageRef(im.Tag), Specs: []string{r.payload.Pullspec(im.Tag)}}
		if err := im.Tarball(it.File, it.Ref); err != nil {
			t.Fatal(err)
		}
		r.images = append(r.images, it)
	}
}

// buildRuntimecfgStandin builds internal/rig/standin/runtimecfg to out, static and without symbol tables:
// it also goes into the runtimecfg image, which each kubelet node's containerd unpacks (a copy
// per container with the native snapshotter).
func buildRuntimecfgStandin(t *testing.T, out string) string {
	t.Helper()
	build := exec.Command("go", "build", "-ldflags=-s -w", "-o", out, "./internal/rig/standin/runtimecfg")
	build.Dir = repo.Root()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/rig/standin/runtimecfg: %v\n%s", err, b)
	}
	return out
}

// holdsVIP reports whether node nd has the API VIP on its eth0.
func holdsVIP(nd *Node) bool {
	out, _ := exec.Command("ip", "-n", nd.NetNS, "-o", "-4", "addr", "show", "dev", "eth0").CombinedOutput()
	return strings.Contains(string(out), " "+apiVIP+"/")
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

// TestInClusterVIPMovesToMaster is the in-cluster mode's VIP handover under the rehearsal:
// the bootstrap as in TestInClusterBootstrapVIP, then two masters of the lab's three (the third
// stays off, saving the two cores a kubelet: keepalived needs one peer), master-0 and master-1,
// from their own Ignition — each its real kubelet, joined through api-int and its CSRs approved by labbuild's
// approver, while the bootstrap's bootkube.service applies the manifests — and each master's
// keepalived pod as the MCO rendered it into that Ignition
// (/etc/kubernetes/manifests/keepalived.yaml, MCO templates/common/on-prem/files/keepalived.yaml
// and the master's keepalived.conf.tmpl): its `keepalived` container's bash with Debian
// keepalived and socat, its keepalived-monitor's bash calling the runtimecfg stand-in
// (IS_BOOTSTRAP=no, the kubelet's /var/lib/kubelet/kubeconfig, no --cluster-config). Its
// render-config-keepalived init container (runtimecfg render: the check scripts) is not here;
// the monitor renders keepalived.conf itself. It shows:
//
//   - each master's monitor renders (its peers: the master Nodes) and sends reload through the
//     socket; the masters' keepalived runs, and the VIP stays on the bootstrap (priority 70
//     above any master's 40 + check weights);
//   - the bootstrap's kube-apiserver killed, its monitor sends stop, and the VIP is on a master
//     within 3 × advert_int (read from that master's keepalived.conf) of the stop.
//
// The masters' pods run as the bootstrap's do, by the rehearsal from the manifest, not by their
// kubelet (no stand-in images are imported here), so no mirror pod of theirs is Ready and
// cluster/pivot is not run: TestInClusterFlow has the kubelets run them and reaches cluster/done.
func TestInClusterVIPMovesToMaster(t *testing.T) {
	kubectl := pinnedTool(t, "kubectl")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := inClusterRig(t, 3, "ignition/bootstrap", "ignition/master-0", "ignition/master-1", "kubeconfig/admin")
	bNode := r.bootBootstrap(t, "bash", "dynkeepalived")
	nodeLog := func(nd *Node, name string) string {
		b, _ := os.ReadFile(filepath.Join(nd.LogDir, name+".log"))
		return string(b)
	}
	r.api = apiVIP
	k, err := r.clients()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the bootstrap holds the API VIP", 5*time.Minute, func() (bool, string) {
		return holdsVIP(bNode), lastLine(nodeLog(bNode, "keepalived-keepalived-monitor"))
	})
	waitFor(ctx, t, "/readyz through the API VIP", 2*time.Minute, func() (bool, string) {
		err := kube.Readyz(ctx, k)
		return err == nil, fmt.Sprint(err)
	})

	// bootkube.service applies the CRDs and manifests (the RBAC for the kubelets' CSRs among
	// them); the Provisioning CRD that 99_baremetal-provisioning-config.yaml waits for comes
	// with the CVO stand-in's (startBootkube).
	startBootkube(ctx, t, bNode, kubectl, k)

	masters := map[string]string{"master-0": master0IP, "master-1": master1IP}
	mNodes := map[string]*Node{}
	expected := map[string]csr.NodeIdentity{}
	var names []string
	for m, ip := range masters {
		nd, err := r.boot(m)
		if err != nil {
			t.Fatal(err)
		}
		subnet := map[string]string{"master-0": "10.128.0.0/23", "master-1": "10.128.2.0/23"}[m]
		if err := r.kubelet(ctx, nd, subnet); err != nil {
			t.Fatal(err)
		}
		mNodes[m] = nd
		name := m + "." + labDomain
		expected[name] = csr.NodeIdentity{Name: name, IPs: []string{ip}, DNSNames: []string{m}}
		names = append(names, name)
	}
	waitFor(ctx, t, "the masters' CSRs approved and their Nodes Ready", 6*time.Minute, func() (bool, string) {
		if _, err := csr.Approve(ctx, k.Dynamic, expected); err != nil {
			return false, err.Error()
		}
		ready, _, err := kube.NodesReady(ctx, k.Dynamic, names)
		return err == nil && len(ready) == len(names), fmt.Sprintf("ready %v, err %v", ready, err)
	})
	// The node-role labels the masters' kubelet.service asks for (OpenShift's kubelet sets
	// them; upstream's refuses): the monitors find their peers by node-role.kubernetes.io/master.
	for m, nd := range mNodes {
		kl, err := KubeletFromUnit(nd.Root, r.bins["kubelet"])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(kl.DroppedLabels, "node-role.kubernetes.io/master") {
			t.Errorf("%s's kubelet.service --node-labels lacks node-role.kubernetes.io/master: %v", m, kl.DroppedLabels)
		}
		if err := NodeRoleLabels(ctx, k, m+"."+labDomain, kl.DroppedLabels); err != nil {
			t.Fatal(err)
		}
	}

	// Each master's keepalived pod from its Ignition; the monitor's bash finds dynkeepalived
	// on the image's PATH.
	env := []string{"PATH=" + filepath.Dir(r.bins["dynkeepalived"]) + ":" + os.Getenv("PATH")}
	for m, nd := range mNodes {
		started, standins, err := r.podsOf(nd, "keepalived", env)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s keepalived pod: started %v; stand-ins (not started): %v; its init container (runtimecfg render) is not run", m, started, standins)
		if !slices.Equal(started, []string{"bash", "bash"}) {
			t.Fatalf("%s's keepalived pod starts %v, want its two bash containers (keepalived, keepalived-monitor)", m, started)
		}
	}
	for m, nd := range mNodes {
		waitFor(ctx, t, m+"'s monitor renders keepalived.conf and sends reload", 4*time.Minute, func() (bool, string) {
			return strings.Contains(nodeLog(nd, "keepalived-keepalived"), "The client sent: reload"),
				lastLine(nodeLog(nd, "keepalived-keepalived-monitor"))
		})
		if _, err := os.Stat(filepath.Join(nd.Root, "etc", "keepalived", "keepalived.conf")); err != nil {
			t.Errorf("%s: reload sent but no /etc/keepalived/keepalived.conf: %v", m, err)
		}
	}
	// Both masters' keepalived have run past a master_down_interval (3 × advert_int + skew):
	// the bootstrap's adverts keep them backups.
	time.Sleep(10 * time.Second)
	for m, nd := range mNodes {
		if !strings.Contains(nodeLog(nd, "keepalived-keepalived"), "Entering BACKUP STATE") {
			t.Errorf("%s's keepalived did not enter BACKUP state:\n%s", m, tail(nodeLog(nd, "keepalived-keepalived"), 2000))
		}
		if holdsVIP(nd) {
			t.Errorf("%s holds the API VIP while the bootstrap (priority 70) runs", m)
		}
	}
	if !holdsVIP(bNode) {
		t.Fatalf("the bootstrap lost the API VIP while its API serves")
	}

	// The bootstrap's kube-apiserver dies: its monitor sends stop, a master takes the VIP.
	advert := 0
	for _, nd := range mNodes {
		b, _ := os.ReadFile(filepath.Join(nd.Root, "etc", "keepalived", "keepalived.conf"))
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "advert_int" {
				n, _ := strconv.Atoi(f[1])
				advert = max(advert, n)
			}
		}
	}
	if advert == 0 {
		t.Fatalf("no advert_int in the masters' keepalived.conf")
	}
	syscall.Kill(netnsPID(t, bNode.NetNS, "kube-apiserver"), syscall.SIGKILL)
	var stop time.Time
	for deadline := time.Now().Add(2 * time.Minute); stop.IsZero(); time.Sleep(100 * time.Millisecond) {
		if strings.Contains(nodeLog(bNode, "keepalived-keepalived"), "The client sent: stop") {
			stop = time.Now()
		} else if time.Now().After(deadline) {
			t.Fatalf("the bootstrap's monitor sent no stop: %s", lastLine(nodeLog(bNode, "keepalived-keepalived-monitor")))
		}
	}
	holder := ""
	for deadline := stop.Add(30 * time.Second); holder == ""; time.Sleep(50 * time.Millisecond) {
		for m, nd := range mNodes {
			if holdsVIP(nd) {
				holder = m
			}
		}
		if holder == "" && time.Now().After(deadline) {
			t.Fatalf("no master holds the API VIP 30 s after the bootstrap's stop")
		}
	}
	moved := time.Since(stop)
	t.Logf("bootstrap kube-apiserver killed → stop; the API VIP on %s %v after the stop (advert_int %d s)", holder, moved.Round(10*time.Millisecond), advert)
	if limit := 3 * time.Duration(advert) * time.Second; moved > limit {
		t.Errorf("the VIP reached %s %v after the stop, more than 3 × advert_int = %v", holder, moved, limit)
	}
	if holdsVIP(bNode) {
		t.Errorf("the bootstrap still holds the API VIP after its stop")
	}
	for m, nd := range mNodes {
		var states []string
		for _, l := range strings.Split(nodeLog(nd, "keepalived-keepalived"), "\n") {
			if strings.Contains(l, "_API_") && strings.Contains(l, "STATE") {
				states = append(states, strings.TrimSpace(l))
			}
		}
		t.Logf("%s: monitor %q; keepalived %q", m, lastLine(nodeLog(nd, "keepalived-keepalived-monitor")), states)
	}
}

// TestInClusterFlow is TestRehearsalFlow (3 masters + 1 worker) with network.loadBalancer:
// in-cluster: no host haproxy and no VIP on the lab bridge. The bootstrap's keepalived pod runs
// as in TestInClusterBootstrapVIP and takes the API VIP; each master's real kubelet runs the
// MCO-rendered keepalived and haproxy static pods itself under containerd, from stand-in images
// built of this host's Debian keepalived, haproxy, socat, curl and iptables and the runtimecfg
// stand-in (OnPremImages), named with the payload's pull specs: render-config-keepalived
// (runtimecfg render), keepalived and keepalived-monitor (dynkeepalived), verify-api-int-resolvable,
// haproxy and haproxy-monitor (monitor: haproxy.cfg from the master Nodes, the nat rules to it).
// cluster/pivot waits for those mirror pods Ready, stops the bootstrap, and /readyz answers
// through the VIP from a master; the flow reaches cluster/done. After it a master holds the API
// VIP and its haproxy.cfg balances to the three masters.
func TestInClusterFlow(t *testing.T) {
	rehearsalFlow(t, flowTopology{masters: 3, workers: 1, inCluster: true})
}

// nodeRoleLabels waits for node's Node and sets the labels its kubelet was started without
// (NodeRoleLabels: the stand-in for OpenShift's kubelet patch).
func nodeRoleLabels(ctx context.Context, r *rig, nd *Node, node string, fl *flowLog) {
	kl, err := KubeletFromUnit(nd.Root, r.bins["kubelet"])
	if err != nil {
		fl.fail("%s: %v", node, err)
		return
	}
	for ctx.Err() == nil {
		if k, err := r.clients(); err == nil {
			if err := NodeRoleLabels(ctx, k, node+"."+labDomain, kl.DroppedLabels); err == nil {
				fl.logf("%s: Node labelled %v (OpenShift's kubelet sets them)", node, kl.DroppedLabels)
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(3 * time.Second):
		}
	}
}

// mcoNamespacesFile is the MCO's namespace manifest of the 4.18 payload (the CVO applies it):
// openshift-machine-config-operator and the on-prem platforms' infra namespaces.
const mcoNamespacesFile = "release/machine-config-operator/manifests/0000_80_machine-config_00_namespace.yaml"

// applyMCONamespaces is the CVO stand-in's apply of mcoNamespacesFile
// (../shared/fixtures): the sample payload carries no operator manifests.
func applyMCONamespaces(ctx context.Context, k *kube.Clients) error {
	b, err := os.ReadFile(filepath.Join(repo.Shared(), "fixtures", mcoNamespacesFile))
	if err != nil {
		return err
	}
	return applyFiles(ctx, k, map[string][]byte{filepath.Base(mcoNamespacesFile): b})
}

// inClusterAfterPivot checks the in-cluster mode after cluster/done: the bootstrap is gone, one
// master holds the API VIP, that master's haproxy.cfg (rendered by its haproxy-monitor) balances
// to every master and not the bootstrap, its nat table sends the VIP's port 6443 to haproxy
// (the monitor's rules, word for word as iptables -S prints getHAProxyRuleSpec's), and its
// keepalived pod's run-dir has the iptables-rule-exists marker.
func inClusterAfterPivot(t *testing.T, r *rig, masters []string) {
	t.Helper()
	holder := ""
	for _, m := range masters {
		r.mu.Lock()
		nd := r.nodes[m]
		r.mu.Unlock()
		if nd != nil && holdsVIP(nd) {
			holder = m
			cfg, err := os.ReadFile(filepath.Join(nd.Root, "etc", "haproxy", "haproxy.cfg"))
			if err != nil {
				t.Errorf("%s holds the API VIP but has no /etc/haproxy/haproxy.cfg: %v", m, err)
				continue
			}
			for i := range masters {
				if !strings.Contains(string(cfg), flowMasterIPs[i]+":6443") {
					t.Errorf("%s's haproxy.cfg has no backend %s:6443:\n%s", m, flowMasterIPs[i], cfg)
				}
			}
			if strings.Contains(string(cfg), bootstrapIP+":") {
				t.Errorf("%s's haproxy.cfg still balances to the bootstrap:\n%s", m, cfg)
			}
			// The haproxy monitor's nat rules send the VIP's API port to haproxy, and the
			// keepalived monitor marks them for keepalived's chk_ocp_lb.
			nat, err := exec.Command("nsenter", "--net=/run/netns/"+nd.NetNS, "--", "iptables", "-t", "nat", "-S").CombinedOutput()
			for _, want := range []string{
				"-A PREROUTING -d " + apiVIP + "/32 -p tcp -m tcp --dport 6443 -m comment --comment OCP_API_LB_REDIRECT -j DNAT --to-destination " + apiVIP + ":9445",
				"-A OUTPUT -d " + apiVIP + "/32 -o lo -p tcp -m tcp --dport 6443 -m comment --comment OCP_API_LB_REDIRECT -j REDIRECT --to-ports 9445",
			} {
				if !strings.Contains(string(nat), want) {
					t.Errorf("%s's nat table lacks %q (%v):\n%s", m, want, err, nat)
				}
			}
			if marks, _ := filepath.Glob(filepath.Join(nd.Root, "var/lib/kubelet/pods/*/volumes/kubernetes.io~empty-dir/run-dir/iptables-rule-exists")); len(marks) != 1 {
				t.Errorf("%s: iptables-rule-exists in the keepalived pod's run-dir: %v, want one", m, marks)
			}
			if logs, _ := filepath.Glob(filepath.Join(nd.Root, "var/log/pods/openshift-kni-infra_keepalived-*/keepalived/*.log")); len(logs) > 0 {
				for _, l := range logs {
					b, _ := os.ReadFile(l)
					var prio []string
					for _, line := range strings.Split(string(b), "\n") {
						if strings.Contains(line, "effective priority") || strings.Contains(line, "Entering MASTER STATE") {
							prio = append(prio, line[strings.LastIndex(line, ": ")+2:])
						}
					}
					t.Logf("%s keepalived (%s): %q", m, filepath.Base(l), prio)
				}
			}
		}
	}
	if holder == "" {
		t.Errorf("after cluster/done no master holds the API VIP %s", apiVIP)
	} else {
		t.Logf("after cluster/done %s holds the API VIP", holder)
	}
}
