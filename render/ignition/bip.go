package ignition

// Bootstrap in place: the Ignition a single-node lab's master boots first, from the live ISO
// (openshift/installer release-4.18 pkg/asset/ignition/bootstrap/bootstrap_in_place.go
// SingleNodeBootstrapInPlace, which writes bootstrap-in-place-for-live-iso.ign). It is the
// bootstrap config of the node, plus what data/data/bootstrap/bootstrap-in-place/ adds:
// install-to-disk.service and its script, the script that writes the master Ignition with the
// bootstrap control plane and its etcd data in it (bootstrap-in-place.sh with master-update.fcc),
// and the post-reboot unit that master Ignition carries (bootstrap-in-place-post-reboot.sh).
// docs/sno.md has the table of what the installer's holds and where each part is here.

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Node paths of the bootstrap-in-place config (the installer's where it has one).
const (
	// BootstrapInPlaceFile is the config's file name (installer bootstrap_in_place.go
	// singleNodeBootstrapInPlaceIgnFilename).
	BootstrapInPlaceFile = "bootstrap-in-place-for-live-iso.ign"
	// PathOriginalMaster is the master Ignition the install writes to disk, before the
	// bootstrap's control plane is added (bootstrap-in-place.sh fetches it from the local
	// machine-config-server into this file; labbuild renders it, ignition/<master>).
	PathOriginalMaster = "/opt/openshift/original-master.ign"
	// PathMasterIgnition is the master Ignition coreos-installer writes to the disk.
	PathMasterIgnition = "/opt/openshift/master.ign"
	// PathInstallToDisk and PathBootstrapInPlace are the live system's scripts
	// (data/data/bootstrap/bootstrap-in-place/files/usr/local/bin/).
	PathInstallToDisk    = "/usr/local/bin/install-to-disk.sh"
	PathBootstrapInPlace = "/usr/local/bin/bootstrap-in-place.sh"
	// PathPostRebootSource is the post-reboot script on the live system
	// (files/opt/openshift/bootstrap-in-place/bootstrap-in-place-post-reboot.sh) and
	// PathPostReboot where master-update.fcc puts it on the installed master.
	PathPostRebootSource = "/opt/openshift/bootstrap-in-place/bootstrap-in-place-post-reboot.sh"
	PathPostReboot       = "/usr/local/bin/bootstrap-in-place-post-reboot.sh"
	// PathPostRebootKubeconfig is the loopback admin kubeconfig the post-reboot unit uses and
	// whose presence starts it (master-update.fcc: auth/kubeconfig-loopback).
	PathPostRebootKubeconfig = "/etc/kubernetes/bootstrap-secrets/kubeconfig"
	// PathBootstrapManifests keeps a copy of each carried bootstrap static pod on the installed
	// master: the post-reboot unit compares the live pods with it to see that the operators
	// replaced them (the installer greps for bootstrap-kube-apiserver instead).
	PathBootstrapManifests = "/etc/kubernetes/bootstrap-manifests"
	// PathEtcdData is the bootstrap etcd's data directory, carried to the disk.
	PathEtcdData = "/var/lib/etcd"
)

// BootstrapInPlaceConfigMap is the ConfigMap in kube-system that labbuild's cluster/bootkube
// creates once its own apply is done (the Infrastructure and FeatureGate status the node's
// bootkube.sh cannot write among it): the live node waits for it before it stops etcd, and
// the installed node deletes it when it has removed the bootstrap's leftovers, which is how
// labbuild's cluster/post-reboot/cleanup sees that. The installer needs no such object: its
// bootkube.sh's cluster-bootstrap applies everything, status included, before
// bootstrap-in-place.sh runs.
const BootstrapInPlaceConfigMap = "labbuild-bootstrap-in-place"

// CarriedPod is one bootstrap static pod the master keeps running after the reboot: File is
// its name in /etc/kubernetes/manifests on the live system, As its name on the installed
// master, the operator's own (master-update.fcc: etcd-pod.yaml, kube-apiserver-pod.yaml,
// kube-controller-manager-pod.yaml, kube-scheduler-pod.yaml), which the operators' installers
// overwrite when they roll out their revision.
type CarriedPod struct{ File, As string }

// BootstrapInPlaceInput is the single node's bootstrap-in-place config.
type BootstrapInPlaceInput struct {
	// Bootstrap is the bootstrap config of the node (its name and address: the master's).
	Bootstrap BootstrapInput
	// MasterIgnition is the master's own Ignition (ignition/<master>): PathOriginalMaster.
	MasterIgnition []byte
	// InstallationDisk is the disk coreos-installer writes (install-config
	// bootstrapInPlace.installationDisk; /dev/vda, labbuild's virtio disk).
	InstallationDisk string
	// EtcdPod is the bootstrap etcd's static pod file, which bootstrap-in-place.sh moves out of
	// the manifests directory to stop etcd before its data is copied.
	EtcdPod string
	// Carried are the static pods the installed master runs until the operators replace them;
	// the etcd pod must be among them.
	Carried []CarriedPod
}

// Carried trees and files of the master update, as master-update.fcc lists its own: the
// bootstrap's secrets, kubeconfigs and configs (the carried pods mount them) and the etcd data.
var bipTrees = []string{BootstrapSecretDir, BootstrapKubeconfigs, BootstrapConfigs, PathEtcdData}

// bipPathRE is what the generated script writes into JSON without escaping.
var bipPathRE = regexp.MustCompile(`^/[A-Za-z0-9._/@+=:-]+$`)

// BootstrapInPlace builds the single node's live-ISO config: Bootstrap's, plus the master
// Ignition, install-to-disk.service (enabled, as the installer enables it), its script, the
// script writing the master Ignition, and the post-reboot script. The result is validated.
func BootstrapInPlace(in BootstrapInPlaceInput) (*BootstrapResult, error) {
	if _, err := Parse(in.MasterIgnition); err != nil {
		return nil, fmt.Errorf("ignition: bootstrap in place: master Ignition: %w", err)
	}
	if !strings.HasPrefix(in.InstallationDisk, "/dev/") {
		return nil, fmt.Errorf("ignition: bootstrap in place: installation disk %q is not a /dev path", in.InstallationDisk)
	}
	etcdCarried := false
	for _, p := range in.Carried {
		if p.File == "" || p.As == "" || strings.Contains(p.File+p.As, "/") {
			return nil, fmt.Errorf("ignition: bootstrap in place: carried pod %+v: want two file names", p)
		}
		etcdCarried = etcdCarried || p.File == in.EtcdPod
	}
	if !etcdCarried {
		return nil, fmt.Errorf("ignition: bootstrap in place: the etcd pod %q is not among the carried pods", in.EtcdPod)
	}
	add, err := bootstrapAdditions(in.Bootstrap)
	if err != nil {
		return nil, err
	}
	for _, p := range in.Carried {
		found := false
		for _, f := range in.Bootstrap.StaticPods {
			found = found || f.Path == PathStaticPodManifests+"/"+p.File
		}
		if !found {
			return nil, fmt.Errorf("ignition: bootstrap in place: carried pod %s is not a static pod of the bootstrap", p.File)
		}
	}
	script, err := bootstrapInPlaceScript(in)
	if err != nil {
		return nil, err
	}
	enabled := true
	add.Files = append(add.Files,
		File{Path: PathOriginalMaster, Mode: ModeSecret, Contents: in.MasterIgnition},
		File{Path: PathInstallToDisk, Mode: modeBin, Contents: []byte(installToDiskScript(in))},
		File{Path: PathBootstrapInPlace, Mode: modeBin, Contents: []byte(script)},
		File{Path: PathPostRebootSource, Mode: modeBin, Contents: []byte(postRebootScript(in))},
	)
	add.Units = append(add.Units, Unit{Name: "install-to-disk.service", Enabled: &enabled, Contents: installToDiskUnit})
	return encodeAdditions("bootstrap in place", add)
}

// modeBin is the installer's mode for its scripts (common.go AddStorageFiles: 0555 in bin).
const modeBin = 0o555

// installToDiskUnit is the installer's install-to-disk.service
// (data/data/bootstrap/bootstrap-in-place/systemd/units/install-to-disk.service), unchanged.
const installToDiskUnit = `[Unit]
Description=Install to disk
Requires=bootkube.service
Wants=bootkube.service
After=bootkube.service
ConditionPathExists=!/opt/openshift/.install-to-disk.done

[Service]
WorkingDirectory=/opt/openshift
ExecStart=/usr/local/bin/install-to-disk.sh

Restart=on-failure
RestartSec=5s

[Install]
WantedBy=multi-user.target
`

// installToDiskScript is install-to-disk.sh.template for labbuild: wait for bootkube.sh, then
// for labbuild's own apply (BootstrapInPlaceConfigMap), write the master Ignition
// (bootstrap-in-place.sh, which the installer's bootkube.sh runs at its end), install it to
// the disk with coreos-installer and reboot. Each step leaves a .done file, so a restart of
// the unit continues where it stopped.
func installToDiskScript(in BootstrapInPlaceInput) string {
	return strings.NewReplacer("@KUBECONFIG@", in.Bootstrap.ApplyKubeconfig, "@CM@", BootstrapInPlaceConfigMap,
		"@DISK@", in.InstallationDisk, "@DONE@", PathBootkubeDone, "@BIP@", PathBootstrapInPlace, "@MASTER@", PathMasterIgnition).Replace(`#!/usr/bin/env bash
# labbuild: the single node's install to disk (openshift/installer release-4.18
# data/data/bootstrap/bootstrap-in-place/files/usr/local/bin/install-to-disk.sh.template), run by
# install-to-disk.service in /opt/openshift.
set -euoE pipefail
export KUBECONFIG=@KUBECONFIG@

echo "Waiting for @DONE@"
until [ -f @DONE@ ]; do
  sleep 5
done

if [ ! -f master-ignition.done ]; then
  # labbuild's cluster/bootkube applies the cluster manifests from the host too (their status
  # among them) and says when it is done: etcd must not stop before.
  echo "Waiting for labbuild (ConfigMap kube-system/@CM@)"
  until oc get configmap -n kube-system @CM@ >/dev/null 2>&1; do
    sleep 5
  done
  @BIP@
  touch master-ignition.done
fi

if [ ! -f coreos-installer.done ]; then
  # Write image + ignition to disk
  echo "Executing coreos-installer with the following options: install -n -i @MASTER@ @DISK@"
  coreos-installer install -n -i @MASTER@ @DISK@
  touch coreos-installer.done
fi

echo "Going to reboot"
shutdown -r +1 "Bootstrap completed, server is going to reboot."
touch /opt/openshift/.install-to-disk.done
echo "Done"
`)
}

// bootstrapInPlaceScript is bootstrap-in-place.sh for labbuild: stop etcd as the installer's
// does (its manifest moved out, then crictl until no etcd container runs), then write
// PathMasterIgnition as cluster-bootstrap's bootstrap-in-place renders master-update.fcc: a
// config that merges PathOriginalMaster and adds the bootstrap's secrets, kubeconfigs and etcd
// data, the carried static pods under their operator names (and a copy of each in
// PathBootstrapManifests), the loopback kubeconfig and the post-reboot unit. The JSON is
// streamed by the shell (gzip and base64 of each file: the etcd database may be large), so the
// live system needs nothing but bash, coreutils, findutils, gzip and jq (for crictl's output).
func bootstrapInPlaceScript(in BootstrapInPlaceInput) (string, error) {
	enabled := true
	unit, err := json.Marshal(IgnUnit(Unit{Name: "bootkube.service", Enabled: &enabled, Contents: postRebootUnit}))
	if err != nil {
		return "", err
	}
	dirs, err := json.Marshal([]map[string]any{
		{"path": PathEtcdData + "/member", "mode": ModePrivDir},
		{"path": BootstrapSecretDir, "mode": ModePrivDir},
		{"path": BootstrapKubeconfigs, "mode": ModePrivDir},
		{"path": BootstrapConfigs, "mode": ModeDir},
		{"path": PathBootstrapManifests, "mode": ModeDir},
	})
	if err != nil {
		return "", err
	}
	var files strings.Builder
	for _, t := range bipTrees {
		fmt.Fprintf(&files, "tree %s %s\n", t, t)
	}
	carried := append([]CarriedPod(nil), in.Carried...)
	sort.Slice(carried, func(i, j int) bool { return carried[i].As < carried[j].As })
	for _, p := range carried {
		src := PathStaticPodManifests + "/" + p.File
		if p.File == in.EtcdPod {
			src = path.Dir(PathStaticPodManifests) + "/" + p.File // moved out to stop etcd
		}
		fmt.Fprintf(&files, "entry %s/%s %d %s\n", PathStaticPodManifests, p.As, ModeFile, src)
		fmt.Fprintf(&files, "entry %s/%s %d %s\n", PathBootstrapManifests, p.As, ModeFile, src)
	}
	fmt.Fprintf(&files, "entry %s %d %s\n", PathPostRebootKubeconfig, ModeSecret, in.Bootstrap.ApplyKubeconfig)
	fmt.Fprintf(&files, "entry %s %d %s\n", PathPostReboot, modeBin, PathPostRebootSource)
	for _, l := range strings.Split(strings.TrimSpace(files.String()), "\n") {
		for _, f := range strings.Fields(l)[1:] {
			if strings.HasPrefix(f, "/") && !bipPathRE.MatchString(f) {
				return "", fmt.Errorf("ignition: bootstrap in place: path %q has characters the script does not write into JSON", f)
			}
		}
	}
	return strings.NewReplacer("@ETCDPOD@", in.EtcdPod, "@MANIFESTS@", PathStaticPodManifests, "@OUT@", PathMasterIgnition,
		"@ORIGINAL@", PathOriginalMaster, "@VERSION@", Version, "@DIRS@", string(dirs), "@UNITS@", string(unit),
		"@FILES@", files.String()).Replace(`#!/usr/bin/env bash
# labbuild: writes the master Ignition a single node installs to its disk (openshift/installer
# release-4.18 data/data/bootstrap/bootstrap-in-place/files/usr/local/bin/bootstrap-in-place.sh
# and files/opt/openshift/bootstrap-in-place/master-update.fcc, which cluster-bootstrap's
# bootstrap-in-place turns into Ignition with butane). Run by install-to-disk.sh.
set -euoE pipefail
cd /opt/openshift

if [ ! -f stop-etcd.done ]; then
  echo "Stop etcd static pod by moving the manifest"
  mv @MANIFESTS@/@ETCDPOD@ /etc/kubernetes || echo "already moved @ETCDPOD@"

  until crictl ps --state running -o json | jq -e '[.containers[] | select(.metadata.name == "etcd")] | length == 0' > /dev/null; do
    echo "Waiting for etcd to go down"
    sleep 10
  done

  touch stop-etcd.done
fi

echo "Creating master ignition and writing it to disk"
sep=
# entry PATH MODE SOURCE: one storage file of the master Ignition, gzip-compressed.
entry() {
  printf '%s{"path":"%s","mode":%d,"overwrite":true,"contents":{"compression":"gzip","source":"data:;base64,' "$sep" "$1" "$2"
  gzip -9cn "$3" | base64 -w0
  printf '"}}'
  sep=,
}
# tree DIR SOURCE: every regular file under SOURCE at the same place under DIR, its mode kept.
tree() {
  local f rel
  while IFS= read -r -d '' f; do
    rel=${f#"$2"/}
    case $rel in
    *[!A-Za-z0-9._/@+=:-]*) echo "bootstrap-in-place: $f: a name this script does not write into JSON" >&2; exit 1 ;;
    esac
    entry "$1/$rel" "$((8#$(stat -c %a "$f")))" "$f"
  done < <(find "$2" -type f -print0 | sort -z)
}
# The fixed parts, as JSON (a heredoc: printf would read their backslashes as escapes).
dirs=$(cat <<'JSON'
@DIRS@
JSON
)
units=$(cat <<'JSON'
@UNITS@
JSON
)
{
  printf '{"ignition":{"version":"@VERSION@","config":{"merge":[{"compression":"gzip","source":"data:;base64,'
  gzip -9cn @ORIGINAL@ | base64 -w0
  printf '"}]}},"storage":{"directories":%s,"files":[' "$dirs"
@FILES@  printf ']},"systemd":{"units":[%s]}}\n' "$units"
} > @OUT@.tmp
mv @OUT@.tmp @OUT@
echo "Wrote @OUT@"
`), nil
}

// postRebootUnit starts the post-reboot script on the installed master (master-update.fcc's
// bootkube.service, "Bootkube - bootstrap in place post reboot", unchanged).
const postRebootUnit = `[Unit]
Description=Bootkube - bootstrap in place post reboot
Wants=kubelet.service
After=kubelet.service
ConditionPathExists=/etc/kubernetes/bootstrap-secrets/kubeconfig
[Service]
Type=oneshot
ExecStart=/usr/local/bin/bootstrap-in-place-post-reboot.sh
RestartSec=5s
[Install]
WantedBy=multi-user.target
`

// postRebootScript is the node's part of bootstrap-in-place-post-reboot.sh: what only the
// node can do. labbuild's cluster/post-reboot targets do the rest from the host (approve_csr,
// signal_bootstrap_complete, release_cvo_lease, release_cpc_lease; docs/sno.md). Once the
// operators have replaced every carried bootstrap pod (the installer waits for the
// kube-apiserver's only, and for the CVO: labbuild's cluster/converge waits for that), it
// restarts the kubelet (restart_kubelet), removes the bootstrap's files (clean) and then
// BootstrapInPlaceConfigMap, with the bootstrap's own kubeconfig, last: labbuild's
// cluster/post-reboot/cleanup waits for that.
func postRebootScript(in BootstrapInPlaceInput) string {
	var pods []string
	for _, p := range in.Carried {
		pods = append(pods, p.As)
	}
	sort.Strings(pods)
	return strings.NewReplacer("@KUBECONFIG@", PathPostRebootKubeconfig, "@PODS@", strings.Join(pods, " "),
		"@MANIFESTS@", PathStaticPodManifests, "@COPIES@", PathBootstrapManifests, "@CM@", BootstrapInPlaceConfigMap,
		"@KUBECONFIGS@", BootstrapKubeconfigs).Replace(`#!/usr/bin/env bash
# labbuild: the installed single node's post-reboot step (openshift/installer release-4.18
# data/data/bootstrap/bootstrap-in-place/files/opt/openshift/bootstrap-in-place/
# bootstrap-in-place-post-reboot.sh: wait_for_api, restart_kubelet, clean). labbuild's
# cluster/post-reboot targets approve the CSRs, signal bootstrap complete and release the
# leases from the host.
set -euoE pipefail

echo "Running bootkube bootstrap-in-place post reboot"
export KUBECONFIG=@KUBECONFIG@

until oc get --raw=/readyz &> /dev/null; do
  echo "Waiting for api ..."
  sleep 5
done

for pod in @PODS@; do
  while cmp -s @MANIFESTS@/$pod @COPIES@/$pod; do
    echo "Waiting for the operators to replace the bootstrap's $pod"
    sleep 10
  done
done

echo "Restarting kubelet"
systemctl daemon-reload
systemctl restart kubelet

echo "Removing the bootstrap's leftovers"
rm -rf /usr/local/bin/installer-gather.sh /usr/local/bin/installer-masters-gather.sh /var/log/log-bundle-bootstrap.tar.gz
rm -rf /opt/openshift
systemctl disable bootkube.service
oc delete configmap -n kube-system @CM@ --ignore-not-found
rm -rf /etc/kubernetes/bootstrap-* @KUBECONFIGS@
echo "Done"
`)
}
