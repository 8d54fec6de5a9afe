package rehearsal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/rig/testenv"
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
