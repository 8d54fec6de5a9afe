package rehearsal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/rig/isofs"
	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
)

// snoDiskIgnition is the file in the rehearsal's model of a single node's disk (a directory outside the node
// root) where the coreos-installer stand-in writes the Ignition it installs. The reboot is a
// fresh node root from that file alone: only what the real disk would carry survives.
const snoDiskIgnition = "ignition.json"

// snoStandins are the live system's programs the rig does not have, each following the
// upstream program only as far as install-to-disk.sh and bootstrap-in-place.sh use it:
// crictl (`crictl ps --state running -o json`: CRI's ListContainers as PodRunner writes it to
// CRIStatePath), coreos-installer (`install -n -i IGN DISK`, coreos-installer src/install.rs:
// the image and the Ignition written to DISK — here the Ignition into the disk directory) and
// shutdown (`shutdown -r +1 MSG`: the reboot request, recorded).
func snoStandins(disk string) map[string]string {
	return map[string]string{
		"crictl": `#!/bin/sh
# rehearsal stand-in for crictl: ps --state running -o json only.
[ "$*" = "ps --state running -o json" ] || { echo "crictl stand-in: unsupported: $*" >&2; exit 1; }
exec cat ` + CRIStatePath + "\n",
		"coreos-installer": `#!/bin/sh
# rehearsal stand-in for coreos-installer install -n -i IGN DISK: the disk is a directory.
set -e
[ "$1" = install ] && [ "$2" = -n ] && [ "$3" = -i ] && [ -f "$4" ] && [ -n "$5" ] || { echo "coreos-installer stand-in: unsupported: $*" >&2; exit 1; }
case $5 in /dev/*) ;; *) echo "coreos-installer: $5 is not a block device" >&2; exit 1 ;; esac
mkdir -p ` + disk + `
cp "$4" ` + disk + `/` + snoDiskIgnition + `.tmp
mv ` + disk + `/` + snoDiskIgnition + `.tmp ` + disk + `/` + snoDiskIgnition + `
echo "$5" > ` + disk + `/device
`,
		"shutdown": `#!/bin/sh
# rehearsal stand-in for shutdown -r: the reboot is the test's to do.
echo "$*" > ` + disk + `/reboot-requested
`,
	}
}

// TestSNOInstallToDiskAndReboot is the single node's bootstrap in place on the rig, without
// libvirt: labbuild builds a one-master lab's ignition/bootstrap-in-place; master-0 boots that
// config (the live ISO's) and runs its static pods as the kubelet would (PodRunner) — real
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler at the master's address — and
// its bootkube.service; then install-to-disk.service runs (after labbuild's ConfigMap, which
// cluster/bootkube creates): bootstrap-in-place.sh stops etcd by moving its manifest (the pod
// runner stops it; crictl reports it gone), writes master.ign with the etcd data, and the
// coreos-installer stand-in writes it to the disk directory. The live node goes; the reboot is
// a fresh root from the disk's Ignition alone (Resolve merges the master's original config):
// the carried static pods run again, the API answers with an object created before the
// install (the etcd data carried), and the master's real kubelet joins and is Ready.
func TestSNOInstallToDiskAndReboot(t *testing.T) {
	requireRehearsal(t)
	kubectl := pinnedTool(t, "kubectl")
	r := newRig(t, false)
	for _, p := range []string{"etcdctl"} {
		r.bins[p] = testenv.Require(t, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// One master, no bootstrap, no worker: the lab is a single node; the API is the master.
	labFile := filepath.Join(r.lab, "lab.yaml")
	b, err := os.ReadFile(labFile)
	if err != nil {
		t.Fatal(err)
	}
	sno := strings.Replace(string(b), "  - {name: bootstrap, role: bootstrap, ip: "+bootstrapIP+"}\n", "", 1)
	if sno == string(b) {
		t.Fatal("the rehearsal lab has no bootstrap line to remove")
	}
	if err := os.WriteFile(labFile, []byte(sno), 0o644); err != nil {
		t.Fatal(err)
	}
	r.api = master0IP
	r.hosts = map[string]string{"api-int." + labDomain: master0IP, "api." + labDomain: master0IP}
	if out, err := r.labbuild("ignition/bootstrap-in-place", "kubeconfig/admin"); err != nil {
		t.Fatalf("labbuild: %v\n%s", err, out)
	}
	live, err := os.ReadFile(filepath.Join(r.lab, "out", "ignition", ignition.BootstrapInPlaceFile))
	if err != nil {
		t.Fatal(err)
	}

	// 1. The live system.
	start := time.Now()
	nd, err := r.bootIgnition("master-0", live)
	if err != nil {
		t.Fatal(err)
	}
	liveCtx, liveStop := context.WithCancel(ctx)
	defer liveStop()
	pr := &PodRunner{Node: nd, Bins: r.bins, Shell: r.containerShell, Logf: t.Logf}
	if err := pr.Sync(); err != nil {
		t.Fatal(err)
	}
	go pr.Run(liveCtx)
	k, err := r.clients()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the live system's kube-apiserver /readyz", 5*time.Minute, func() (bool, string) {
		err := kube.Readyz(ctx, k)
		return err == nil, fmt.Sprint(err)
	})
	t.Logf("live system's API ready after %s", time.Since(start).Round(time.Second))
	linkOC(ctx, t, nd, kubectl)
	disk := filepath.Join(r.work, "disks", "master-0")
	sb := filepath.Join(r.work, "standin-bin")
	if err := os.MkdirAll(sb, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range snoStandins(disk) {
		if err := os.WriteFile(filepath.Join(sb, name), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := nd.Run(ctx, "standin-"+name, nil, "ln", "-sf", filepath.Join(sb, name), "/usr/local/bin/"+name); err != nil {
			t.Fatal(err)
		}
	}
	applyCVOStandinCRDs(ctx, t, k)
	if err := RunOneshot(ctx, nd, "bootkube.service"); err != nil {
		t.Fatalf("bootkube.service: %v", err)
	}
	if _, err := os.Stat(filepath.Join(nd.Root, strings.TrimPrefix(ignition.PathBootkubeDone, "/"))); err != nil {
		t.Fatalf("bootkube.service exited 0 but left no %s: %v", ignition.PathBootkubeDone, err)
	}
	t.Logf("bootkube.service done after %s", time.Since(start).Round(time.Second))
	at := time.Now().UTC().Format(time.RFC3339Nano)
	configMap := func(ns, name string, data map[string]any) *kube.Unstructured {
		return &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": ns}, "data": data}}
	}
	if _, err := k.Dynamic.Resource(kube.ConfigMaps).Namespace("default").Create(ctx, configMap("default", "before-install", map[string]any{"at": at}), kube.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// labbuild's cluster/bootkube says the cluster manifests are applied.
	if _, err := k.Dynamic.Resource(kube.ConfigMaps).Namespace("kube-system").Create(ctx, configMap("kube-system", ignition.BootstrapInPlaceConfigMap, nil), kube.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := RunOneshot(ctx, nd, "install-to-disk.service"); err != nil {
		lb, _ := os.ReadFile(filepath.Join(nd.LogDir, "install-to-disk.log"))
		t.Fatalf("install-to-disk.service: %v\n%s", err, lb)
	}
	for _, f := range []string{snoDiskIgnition, "device", "reboot-requested"} {
		if _, err := os.Stat(filepath.Join(disk, f)); err != nil {
			t.Fatalf("after install-to-disk.service: %v", err)
		}
	}
	if dev, _ := os.ReadFile(filepath.Join(disk, "device")); strings.TrimSpace(string(dev)) != "/dev/vda" {
		t.Errorf("coreos-installer wrote %q, want /dev/vda (targets.SNOInstallationDisk)", dev)
	}
	t.Logf("installed to disk after %s", time.Since(start).Round(time.Second))

	// 2. The reboot: the live system's memory is gone; the disk's Ignition is all there is.
	liveStop()
	nd.Stop()
	installed, err := os.ReadFile(filepath.Join(disk, snoDiskIgnition))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ignition.Parse(installed); err != nil {
		t.Fatalf("the installed Ignition is not valid: %v", err)
	}
	nd, err = r.bootIgnition("master-0", installed)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/opt/openshift", "/usr/local/bin/install-to-disk.sh", "/usr/local/bin/bootkube.sh"} {
		if _, err := os.Stat(filepath.Join(nd.Root, p)); err == nil {
			t.Errorf("the installed system has the live system's %s", p)
		}
	}
	for _, p := range []string{ignition.PathPostReboot, "/etc/kubernetes/manifests/etcd-pod.yaml", "/etc/kubernetes/manifests/kube-apiserver-pod.yaml"} {
		if _, err := os.Stat(filepath.Join(nd.Root, p)); err != nil {
			t.Errorf("the installed system lacks %s: %v", p, err)
		}
	}
	pr = &PodRunner{Node: nd, Bins: r.bins, Shell: r.containerShell, Logf: t.Logf}
	if err := pr.Sync(); err != nil {
		t.Fatal(err)
	}
	go pr.Run(ctx)
	waitFor(ctx, t, "the installed master's carried kube-apiserver /readyz", 5*time.Minute, func() (bool, string) {
		err := kube.Readyz(ctx, k)
		return err == nil, fmt.Sprint(err)
	})
	if got, err := k.Dynamic.Resource(kube.ConfigMaps).Namespace("default").Get(ctx, "before-install", kube.GetOptions{}); err != nil {
		t.Errorf("the object made before the install is not there after the reboot (etcd's data not carried): %v", err)
	} else if v, _, _ := kube.NestedString(got.Object, "data", "at"); v != at {
		t.Errorf("before-install's data.at = %q after the reboot, want %q", v, at)
	}
	t.Logf("installed master's API ready after %s", time.Since(start).Round(time.Second))
	if err := r.kubelet(ctx, nd, "10.128.0.0/23"); err != nil {
		t.Fatal(err)
	}
	name := "master-0." + labDomain
	expected := map[string]csr.NodeIdentity{name: {Name: name, IPs: []string{master0IP}, DNSNames: []string{"master-0"}}}
	waitFor(ctx, t, "master-0's CSRs approved and the Node Ready", 5*time.Minute, func() (bool, string) {
		if _, err := csr.Approve(ctx, k.Dynamic, expected); err != nil {
			return false, err.Error()
		}
		ready, _, err := kube.NodesReady(ctx, k.Dynamic, []string{name})
		return err == nil && len(ready) == 1, fmt.Sprintf("ready %v, err %v", ready, err)
	})
	t.Logf("single node Ready after %s", time.Since(start).Round(time.Second))
}

// snoLab turns the flow lab (rehearsalLab, one master and no worker) into a single node's: no
// bootstrap, master-0 at the installer's single-node minimums (lab.SNOMin*: preflight checks
// them), and the live ISO a stand-in laid out as RHCOS's (internal/rig/isofs), by file URL.
func snoLab(t *testing.T, dir string) {
	t.Helper()
	p := filepath.Join(dir, "lab.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, e := range [][2]string{
		{"  - {name: bootstrap, role: bootstrap, ip: " + bootstrapIP + "}\n", ""},
		{"  master: {diskGiB: 20}\n", fmt.Sprintf("  master: {vcpus: %d, memoryMiB: %d, diskGiB: %d}\n", lab.SNOMinVCPUs, lab.SNOMinMemoryMiB, lab.SNOMinDiskGiB)},
	} {
		if !strings.Contains(s, e[0]) {
			t.Fatalf("lab.yaml has no %q to replace", e[0])
		}
		s = strings.Replace(s, e[0], e[1], 1)
	}
	iso, err := isofs.LiveISO("coreos.liveiso=rhcos-418 ignition.firstboot ignition.platform.id=metal", 1139)
	if err != nil {
		t.Fatal(err)
	}
	isoPath := filepath.Join(dir, "rhcos-live.x86_64.iso")
	if err := os.WriteFile(isoPath, iso, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(iso)
	s = strings.Replace(s, "rhcos:\n", fmt.Sprintf("rhcos:\n  liveISOURL: file://%s\n  liveISOSHA256: %s\n", isoPath, hex.EncodeToString(sum[:])), 1)
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snoNode is master-0's life in the flow from its domain's start: the live system from
// ignition/bootstrap-in-place's config (its static pods by PodRunner, the CRDs the 1.30
// kube-apiserver needs seeded, bootkube.service, then install-to-disk.service, which waits for
// labbuild's cluster/bootkube), the reboot as a fresh root from the disk's Ignition, the
// installed master's carried control plane, its kubelet (labbuild's cluster/post-reboot/approve
// approves its CSRs) and its post-reboot bootkube.service, which waits for the operators
// (snoOperatorsStandin) and then cleans up. cleaned is set when that script is done.
func snoNode(ctx context.Context, r *rig, fl *flowLog, disk, kubectl string, cleaned *atomic.Bool) error {
	raw, err := os.ReadFile(filepath.Join(r.lab, "out", "ignition", ignition.BootstrapInPlaceFile))
	if err != nil {
		return err
	}
	nd, err := r.bootIgnition("master-0", raw)
	if err != nil {
		return fmt.Errorf("live system: %w", err)
	}
	liveCtx, liveStop := context.WithCancel(ctx)
	defer liveStop()
	pr := &PodRunner{Node: nd, Bins: r.bins, Shell: r.containerShell, Logf: fl.logf}
	if err := pr.Sync(); err != nil {
		return err
	}
	go pr.Run(liveCtx)
	if err := snoLiveStandins(ctx, r, nd, disk, kubectl); err != nil {
		return err
	}
	applyCVOStandinCRDsFlow(ctx, r, fl)
	if err := RunOneshot(ctx, nd, "bootkube.service"); err != nil {
		return fmt.Errorf("live system: bootkube.service: %w", err)
	}
	fl.logf("master-0 (live): bootkube.service done")
	// The kube-apiserver 1.31 stand-in's CRDs, stored after bootkube.sh applied the node's
	// (whose 1.31 CEL rules boot dropped): labbuild's own apply then finds them as it wrote
	// them. Stored before, bootkube.sh's apply dropped the rules and labbuild's update, adding
	// them back, was refused by the 1.30 kube-apiserver.
	seedFlowCRDs(liveCtx, r, nd, fl)
	if err := RunOneshot(ctx, nd, "install-to-disk.service"); err != nil {
		return fmt.Errorf("live system: install-to-disk.service: %w", err)
	}
	fl.logf("master-0 (live): installed to disk, reboots")
	liveStop()
	r.stop("master-0")
	installed, err := os.ReadFile(filepath.Join(disk, snoDiskIgnition))
	if err != nil {
		return err
	}
	if nd, err = r.bootIgnition("master-0", installed); err != nil {
		return fmt.Errorf("installed system: %w", err)
	}
	pr = &PodRunner{Node: nd, Bins: r.bins, Shell: r.containerShell, Logf: fl.logf}
	if err := pr.Sync(); err != nil {
		return err
	}
	go pr.Run(ctx)
	if err := r.kubelet(ctx, nd, "10.128.0.0/23"); err != nil {
		return fmt.Errorf("installed system: kubelet: %w", err)
	}
	if err := snoInstalledStandins(ctx, r, nd, kubectl); err != nil {
		return err
	}
	go func() {
		if err := snoOperatorsStandin(ctx, r, nd, fl); err != nil && ctx.Err() == nil {
			fl.fail("operators stand-in: %v", err)
		}
	}()
	if err := RunOneshot(ctx, nd, "bootkube.service"); err != nil {
		return fmt.Errorf("installed system: bootkube.service (post reboot): %w", err)
	}
	cleaned.Store(true)
	fl.logf("master-0: post-reboot bootkube.service done")
	return nil
}

// applyCVOStandinCRDsFlow is applyCVOStandinCRDs for a flow: the payload CRD a bootstrap
// manifest needs (networks.operator.openshift.io), applied through the API once it answers, so
// the live system's bootkube.sh can apply 02-operator-network.yaml.
func applyCVOStandinCRDsFlow(ctx context.Context, r *rig, fl *flowLog) {
	go func() {
		for ctx.Err() == nil {
			if k, err := r.clients(); err == nil && kube.Readyz(ctx, k) == nil {
				if err := applyCVOStandinCRDsErr(ctx, k); err == nil {
					fl.logf("CVO stand-in: applied its CRDs through the API")
					return
				}
			}
			time.Sleep(3 * time.Second)
		}
	}()
}

// snoLiveStandins links the live system's stand-ins (snoStandins, and oc: kubectl) into its
// /usr/local/bin.
func snoLiveStandins(ctx context.Context, r *rig, nd *Node, disk, kubectl string) error {
	sb := filepath.Join(r.work, "standin-bin")
	if err := os.MkdirAll(sb, 0o755); err != nil {
		return err
	}
	links := map[string]string{"oc": kubectl}
	for name, s := range snoStandins(disk) {
		if err := os.WriteFile(filepath.Join(sb, name), []byte(s), 0o755); err != nil {
			return err
		}
		links[name] = filepath.Join(sb, name)
	}
	for name, target := range links {
		if err := nd.Run(ctx, "standin-"+name, nil, "ln", "-sf", target, "/usr/local/bin/"+name); err != nil {
			return err
		}
	}
	return nil
}

// snoInstalledStandins links the installed system's: oc (kubectl) and systemctl, whose calls
// (daemon-reload, restart kubelet, disable bootkube.service) the post-reboot script makes are
// recorded in /var/log/rehearsal-systemctl.log and not carried out: the rig's kubelet is not a
// systemd unit, and the unit is not started again in this flow anyway.
func snoInstalledStandins(ctx context.Context, r *rig, nd *Node, kubectl string) error {
	sb := filepath.Join(r.work, "standin-bin")
	sc := filepath.Join(sb, "systemctl")
	if err := os.WriteFile(sc, []byte("#!/bin/sh\n# rehearsal stand-in for systemctl: the call is recorded.\necho \"$*\" >> /var/log/rehearsal-systemctl.log\n"), 0o755); err != nil {
		return err
	}
	for name, target := range map[string]string{"oc": kubectl, "systemctl": sc} {
		if err := nd.Run(ctx, "standin-"+name, nil, "ln", "-sf", target, "/usr/local/bin/"+name); err != nil {
			return err
		}
	}
	return nil
}

// snoCarriedOrder is the order in which the operators' stand-in replaces the carried pods:
// the API's own two first, each waited for, so that the post-reboot script, which goes on
// once the last is replaced, does not meet a restarting API.
var snoCarriedOrder = []string{"etcd-pod.yaml", "kube-apiserver-pod.yaml", "kube-controller-manager-pod.yaml", "kube-scheduler-pod.yaml"}

// snoOperatorsStandin is the static-pod operators' part after a single node's reboot: once the
// master is a Ready Node (their installer pods are scheduled to it), each carried bootstrap pod
// is replaced by one that no longer reads the bootstrap's files — its hostPath volumes under
// /etc/kubernetes/bootstrap-* and /etc/kubernetes/kubeconfigs copied to
// /etc/kubernetes/static-pod-resources, where the operators' revisions keep theirs — so the
// post-reboot script's comparison with /etc/kubernetes/manifests' bootstrap copies goes on and
// its cleanup leaves the control plane running. The operators' own certificates and
// configuration (operators.go, the three-master flow) are not what this flow shows.
func snoOperatorsStandin(ctx context.Context, r *rig, nd *Node, fl *flowLog) error {
	if !masterReady(ctx, r, "master-0."+labDomain) {
		return ctx.Err()
	}
	for _, f := range snoCarriedOrder {
		b, err := os.ReadFile(filepath.Join(nd.Root, PodManifestDir, f))
		if err != nil {
			return err
		}
		var pod corev1.Pod
		if err := yaml.Unmarshal(b, &pod); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		res := "/etc/kubernetes/static-pod-resources/rehearsal-" + strings.TrimSuffix(f, ".yaml")
		for i, v := range pod.Spec.Volumes {
			if v.HostPath == nil {
				continue
			}
			hp := v.HostPath.Path
			if !strings.HasPrefix(hp, "/etc/kubernetes/bootstrap-") && hp != ignition.BootstrapKubeconfigs && !strings.HasPrefix(hp, ignition.BootstrapKubeconfigs+"/") {
				continue
			}
			dst := res + "/" + v.Name
			if err := nd.Run(ctx, "operators-standin", nil, "sh", "-c", `rm -rf "$1" && mkdir -p "$(dirname "$1")" && cp -a "$0" "$1"`, hp, dst); err != nil {
				return fmt.Errorf("%s: copy %s: %w", f, hp, err)
			}
			pod.Spec.Volumes[i].HostPath.Path = dst
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations["rehearsal.labbuild/operator-revision"] = "1"
		out, err := yaml.Marshal(&pod)
		if err != nil {
			return err
		}
		staging := filepath.Join(r.work, "operators-standin-"+f)
		if err := os.WriteFile(staging, out, 0o600); err != nil {
			return err
		}
		if err := nd.Run(ctx, "operators-standin", nil, "sh", "-c", `cp "$0" "$1.tmp" && mv "$1.tmp" "$1"`, staging, PodManifestDir+"/"+f); err != nil {
			return err
		}
		fl.logf("operators stand-in: replaced the carried %s", f)
		if f == "etcd-pod.yaml" || f == "kube-apiserver-pod.yaml" {
			for {
				time.Sleep(3 * time.Second)
				if k, err := r.clients(); err == nil && kube.Readyz(ctx, k) == nil {
					break
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
	}
	return nil
}

// TestSNOFlow runs the real labbuild binary from an empty directory through `labbuild
// cluster` to cluster/done for a single-node lab (one master, no bootstrap, no worker), as
// TestRehearsalFlow does for the other shapes: real libvirtd (the domain with its empty disk and
// the live ISO stand-in behind it, the BiP Ignition through fw_cfg), haproxy/service on the
// VIPs. When the domain starts master-0 lives through snoNode: the live system runs the BiP
// Ignition (real etcd, kube-apiserver, kube-controller-manager, kube-scheduler, its
// bootkube.service), installs to its disk once labbuild's cluster/bootkube says so, "reboots"
// into a fresh root from the disk's Ignition alone, its carried control plane answers, its real
// kubelet joins (labbuild approves the CSRs), and its post-reboot script cleans up once the
// operators' stand-in replaced the carried pods; the CVO stand-in reports ClusterVersion
// Available then. labbuild is killed (SIGKILL) while cluster/reboot waits and rerun: it
// continues there and reaches cluster/done with one Ready node; a third run has nothing to do;
// `labbuild destroy` leaves no domain, volume, pool, network or VIP, and a second destroy does
// nothing. Each run's wall time and peak RSS are logged.
func TestSNOFlow(t *testing.T) {
	requireRehearsal(t)
	start := time.Now()
	kubectl := pinnedTool(t, "kubectl")
	pool, r := flowRig(t, "")
	rehearsalLab(t, r.lab, pool, flowTopology{masters: 1})
	snoLab(t, r.lab)
	h := startFlowHost(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()
	fl := &flowLog{}
	defer func() { t.Logf("stand-ins:\n%s", fl) }()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	disk := filepath.Join(r.work, "disks", "master-0")
	var cleaned, booted atomic.Bool
	w := &Watch{URI: r.lv.URI("qemu:///system"), Cluster: "rehearsal", Nodes: []string{"master-0"},
		Up: func(node string) {
			if booted.Swap(true) {
				fl.fail("domain %s started again: a single node's VM starts once", node)
				return
			}
			fl.logf("domain %s running: the live ISO boots", node)
			go func() {
				if err := snoNode(wctx, r, fl, disk, kubectl, &cleaned); err != nil && wctx.Err() == nil {
					fl.fail("master-0: %v", err)
				}
			}()
		},
		Down: func(node string) {
			fl.logf("domain %s stopped: node stops", node)
			r.stop(node)
		},
	}
	go w.Run(wctx)
	// The CVO stand-in: ClusterVersion status from the start (cluster/bootkube waits for the
	// CVO to report), Available with the two operators once the node's post-reboot is done.
	go func() {
		last := ""
		for wctx.Err() == nil {
			ok := cleaned.Load()
			if k, err := r.clients(); err == nil && fmt.Sprint(ok) != last {
				err := ReportClusterVersion(wctx, k, "4.18.0", ok, fmt.Sprintf("the single node's post-reboot done: %v", ok))
				if err == nil {
					err = ReportOperator(wctx, k, "etcd", "4.18.0", ok, "the installed master's etcd serves")
				}
				if err == nil {
					err = ReportOperator(wctx, k, "kube-apiserver", "4.18.0", ok, "the installed master's kube-apiserver serves")
				}
				if err == nil {
					last = fmt.Sprint(ok)
					fl.logf("CVO stand-in: ClusterVersion Available=%v", ok)
				}
			}
			select {
			case <-wctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	fail := func(what string, run lbRun) {
		t.Helper()
		t.Fatalf("%s (the flow stops at %q): %v\n%s", what, stoppedAt(run.out), run.err, tail(run.out, 4000))
	}

	// Run 1: killed 2 s after cluster/reboot starts waiting for the installed master.
	first := h.labbuildKillAt(regexp.MustCompile(`^\s*cluster/reboot: waiting for`), "cluster")
	t.Logf("run 1 (killed in cluster/reboot): %v after %s, peak RSS %d KiB\n%s", first.err, first.wall, first.maxRSS, tail(first.out, 2500))
	if first.err == nil || !strings.Contains(first.out, "cluster/reboot") || stoppedAt(first.out) != "" {
		fail("run 1 was not killed during cluster/reboot", first)
	}
	// Run 2: continues at cluster/reboot and reaches cluster/done.
	second := h.labbuildKillAt(nil, "cluster")
	t.Logf("run 2: %v after %s, peak RSS %d KiB\n%s", second.err, second.wall, second.maxRSS, tail(second.out, 3000))
	fl.mu.Lock()
	nodeErrs := slices.Clone(fl.errs)
	fl.mu.Unlock()
	if len(nodeErrs) > 0 {
		t.Errorf("the node and stand-ins failed: %v", nodeErrs)
	}
	if second.err != nil {
		fail("the rerun after the kill failed", second)
	}
	for _, done := range []string{"host/preflight", "libvirt/network", "haproxy/service", "cluster/bootkube", "cluster/install-to-disk"} {
		if regexp.MustCompile(`(?m)^\[\d+/\d+\] ` + regexp.QuoteMeta(done) + `$`).MatchString(second.out) {
			t.Errorf("the rerun ran %s again:\n%s", done, second.out)
		}
	}
	for _, p := range []string{"cluster/reboot", "cluster/post-reboot/approve", "cluster/post-reboot/complete", "cluster/post-reboot/cleanup", "cluster/converge", "cluster/done"} {
		if !regexp.MustCompile(`(?m)^\[\d+/\d+\] ` + regexp.QuoteMeta(p) + `$`).MatchString(second.out) {
			t.Errorf("the rerun did not run %s:\n%s", p, tail(second.out, 3000))
		}
	}
	if !cleaned.Load() {
		t.Error("cluster/done before the node's post-reboot script was done")
	}
	if k, err := r.clients(); err != nil {
		t.Errorf("admin client after cluster/done: %v", err)
	} else if nodes, err := kube.List[kube.Node](ctx, k.Dynamic, kube.Nodes, "", ""); err != nil || len(nodes) != 1 || !kube.NodeReady(&nodes[0]) {
		t.Errorf("after cluster/done: nodes %d (%v), want one Ready", len(nodes), err)
	}
	r.mu.Lock()
	nd := r.nodes["master-0"]
	r.mu.Unlock()
	if nd == nil {
		t.Error("after cluster/done master-0 does not run")
	} else {
		// Asked inside the node: what its script removed is an overlay whiteout in the root.
		for _, p := range []string{"/opt/openshift", "/etc/kubernetes/bootstrap-secrets", ignition.PathBootstrapManifests} {
			if err := nd.Run(ctx, "check", nil, "test", "-e", p); err == nil {
				t.Errorf("after cluster/done the node still has the bootstrap's %s", p)
			}
		}
		if err := nd.Run(ctx, "check", nil, "test", "-e", "/var/lib/etcd/member"); err != nil {
			t.Errorf("after cluster/done the node has no etcd data: %v", err)
		}
	}
	third, d1 := h.nullRunThenDestroy(t)
	time.Sleep(time.Second) // the watch sees the domain gone and stops the node
	wcancel()
	uri := r.lv.URI("qemu:///system")
	for _, c := range []struct{ what, cmd string }{
		{"domains", "virsh -c " + uri + " list --all --name"},
		{"networks", "virsh -c " + uri + " net-list --all --name"},
		{"pools", "virsh -c " + uri + " pool-list --all --name"},
		{"volumes", "find " + pool + " -type f 2>/dev/null || true"},
		{"VIPs", "ip -o -4 addr show | grep -F -e " + apiVIP + "/ -e 198.18.0.11/ || true"},
	} {
		out, err := r.lv.Exec("sh", "-c", c.cmd)
		if s := strings.TrimSpace(string(out)); err != nil || s != "" {
			t.Errorf("after destroy, %s left: %q (%v)", c.what, s, err)
		}
	}
	d2 := h.labbuildKillAt(nil, "destroy")
	if d2.err != nil || !strings.Contains(d2.out, "nothing") {
		t.Errorf("second destroy: want nothing to do, got %v:\n%s", d2.err, d2.out)
	}
	fmt.Fprintf(os.Stderr, "rehearsal SNO: test %s; run1 %s (killed), run2 %s, run3 %s, destroy %s; labbuild peak RSS %d/%d/%d/%d KiB\n",
		time.Since(start).Round(time.Second), first.wall.Round(time.Second), second.wall.Round(time.Second), third.wall.Round(time.Second),
		d1.wall.Round(time.Second), first.maxRSS, second.maxRSS, third.maxRSS, d1.maxRSS)
}

// applyCVOStandinCRDsErr is applyCVOStandinCRDs returning its error.
func applyCVOStandinCRDsErr(ctx context.Context, k *kube.Clients) error {
	crds, err := CVOStandinCRDs(repo.Root())
	if err != nil {
		return err
	}
	return applyFiles(ctx, k, crds)
}
