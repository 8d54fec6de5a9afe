package ignition

import (
	"fmt"
	"path"
	"strings"
)

// Bootstrap node paths (openshift-the-hard-way stage 08 §8.2; the installer uses /opt/openshift
// for the same purpose, installer-reference/ignition.md §3.1).
const (
	BootstrapDir         = "/opt/openshift"
	BootstrapCRDDir      = "/opt/openshift/crds"
	BootstrapManifestDir = "/opt/openshift/manifests"
	BootstrapSecretDir   = "/etc/kubernetes/bootstrap-secrets"
	BootstrapKubeconfigs = "/etc/kubernetes/kubeconfigs"
	// BootstrapConfigs holds the control plane's config files (the kube-apiserver's
	// --openshift-config; render/manifests BootstrapConfigsDir).
	BootstrapConfigs      = "/etc/kubernetes/bootstrap-configs"
	PathCRIOPause         = "/etc/crio/crio.conf.d/00-pause.conf"
	PathBootkube          = "/usr/local/bin/bootkube.sh"
	PathBootkubeDone      = "/opt/openshift/.bootkube.done"
	PathBootstrapManifest = "/etc/kubernetes/manifests/.keep"
	// BootstrapStaticPodResources holds the static pods' resources (in-cluster VIPs: the
	// keepalived and coredns templates of the MCO bootstrap render, placed as bootkube.sh's
	// copy_static_resources_for places them).
	BootstrapStaticPodResources = "/etc/kubernetes/static-pod-resources"
)

// BootstrapInput is everything the bootstrap node's config is made of. Files are placed where
// their Path says; the caller (targets/ignition.go) maps upstream outputs to the paths the
// static pods reference.
type BootstrapInput struct {
	Hostname string
	Network  StaticNetwork
	SSHKey   string
	// PullSecret goes to /var/lib/kubelet/config.json (0600): the kubelet's default credential
	// file, which the CRI-O pause drop-in also names.
	PullSecret []byte
	// CRIOPause is /etc/crio/crio.conf.d/00-pause.conf (manifests/crio-pause): without it
	// CRI-O pulls registry.k8s.io/pause.
	CRIOPause []byte
	// StaticPods go to /etc/kubernetes/manifests/<name> (Path must be there).
	StaticPods []File
	// Files are the TLS files, kubeconfigs, CRDs (under BootstrapCRDDir) and cluster manifests
	// (under BootstrapManifestDir), each at its node path.
	Files []File
	// ApplyKubeconfig is the node path of the kubeconfig the apply step (bootkube.sh) uses:
	// a localhost kubeconfig with cluster-admin rights.
	ApplyKubeconfig string
}

// BootstrapResult is a built bootstrap config.
type BootstrapResult struct {
	JSON         []byte
	Files, Units int
}

// kubeletStandalone is the bootstrap kubelet: static pods only. No --kubeconfig and no
// --bootstrap-kubeconfig, so it never registers a Node and nothing but the static pods runs
// there (OTHW stage 08 §8.2, the installer's kubelet.sh.template flags).
const kubeletStandalone = `[Unit]
Description=Kubernetes Kubelet (bootstrap, static pods only)
Wants=rpc-statd.service network-online.target crio.service
After=network-online.target crio.service

[Service]
Type=notify
ExecStartPre=/bin/mkdir --parents /etc/kubernetes/manifests
ExecStart=/usr/bin/kubelet \
  --anonymous-auth=false \
  --container-runtime-endpoint=/var/run/crio/crio.sock \
  --pod-manifest-path=/etc/kubernetes/manifests \
  --cluster-domain=cluster.local \
  --cgroup-driver=systemd \
  --v=2
Restart=always
RestartSec=10

[Install]
WantedBy=multi-user.target
`

const bootkubeUnit = `[Unit]
Description=Apply the bootstrap CRDs and cluster manifests (labbuild)
Wants=kubelet.service
After=kubelet.service crio.service
ConditionPathExists=/usr/local/bin/bootkube.sh
ConditionPathExists=!/opt/openshift/.bootkube.done

[Service]
Type=oneshot
WorkingDirectory=/opt/openshift
ExecStart=/usr/local/bin/bootkube.sh
Restart=on-failure
RestartSec=5
RemainAfterExit=true
StandardOutput=journal+console
StandardError=journal+console

[Install]
WantedBy=multi-user.target
`

// bootkubeScript is the apply step: wait for the bootstrap API, then apply every CRD and then
// every manifest, repeating passes until all succeed (a manifest whose CRD is not yet
// established fails once and succeeds on the next pass). Server-side apply, because CRDs
// exceed the 256 KiB last-applied annotation of client-side apply. `oc` ships in RHCOS.
// A file not applied is logged with the first line of oc's error (at most 300 bytes): the
// journal then says why ("no matches for kind", a CRD the apiserver refuses) instead of only
// which file; oc's output is never printed whole (the API server redacts Secret values in its
// errors, and only one line of it is shown).
const bootkubeScript = `#!/usr/bin/env bash
# labbuild bootkube.sh: the bootstrap node's apply step.
set -uo pipefail
export KUBECONFIG=%s
echo "bootkube: waiting for the API"
until oc get --raw=/readyz >/dev/null 2>&1; do sleep 5; done
apply_all() {
  local dir=$1 failed=0 f err
  for f in "$dir"/*.yaml "$dir"/*.yml "$dir"/*.json; do
    [ -e "$f" ] || continue
    if ! err=$(oc apply --server-side --force-conflicts -f "$f" 2>&1 >/dev/null); then
      err=$(printf '%%s\n' "$err" | grep -m1 -v '^[[:space:]]*$' | cut -c1-300)
      echo "bootkube: $f not applied yet: ${err:-oc failed}"; failed=1
    fi
  done
  return $failed
}
for pass in $(seq 1 60); do
  echo "bootkube: pass $pass"
  apply_all %s && apply_all %s && break
  if [ "$pass" = 60 ]; then echo "bootkube: giving up; systemd restarts me"; exit 1; fi
  sleep 10
done
touch %s
echo "bootkube: done"
`

// Bootstrap builds the bootstrap node's config: standalone kubelet and the apply unit, the
// CRI-O pause drop-in, static pods, TLS files, kubeconfigs, CRDs, cluster manifests, pull
// secret, SSH key, hostname and static network — every path once (a path given twice is a
// *DuplicateError). The result is validated.
func Bootstrap(in BootstrapInput) (*BootstrapResult, error) {
	add, err := bootstrapAdditions(in)
	if err != nil {
		return nil, err
	}
	return encodeAdditions("bootstrap", add)
}

// encodeAdditions applies add to an empty config and encodes it (validated).
func encodeAdditions(what string, add Additions) (*BootstrapResult, error) {
	cfg, err := Apply(New(), add)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	raw, err := Encode(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return &BootstrapResult{JSON: raw, Files: len(cfg.Storage.Files), Units: len(cfg.Systemd.Units)}, nil
}

// bootstrapAdditions is everything of the bootstrap config (Bootstrap's checks included).
func bootstrapAdditions(in BootstrapInput) (Additions, error) {
	var none Additions
	if len(in.PullSecret) == 0 {
		return none, fmt.Errorf("ignition: bootstrap: pull secret is empty")
	}
	if len(in.CRIOPause) == 0 {
		return none, fmt.Errorf("ignition: bootstrap: CRI-O pause drop-in is empty (manifests/crio-pause)")
	}
	if !strings.HasPrefix(in.ApplyKubeconfig, "/") {
		return none, fmt.Errorf("ignition: bootstrap: apply kubeconfig path %q must be absolute", in.ApplyKubeconfig)
	}
	base, err := NodeBase(in.Hostname, in.Network)
	if err != nil {
		return none, err
	}
	files := append(base,
		File{Path: PathCRIOPause, Mode: ModeFile, Contents: in.CRIOPause},
		File{Path: PathPullSecret, Mode: ModeSecret, Contents: in.PullSecret},
		File{Path: PathBootkube, Mode: ModeExec, Contents: []byte(fmt.Sprintf(bootkubeScript,
			in.ApplyKubeconfig, BootstrapCRDDir, BootstrapManifestDir, PathBootkubeDone))},
		File{Path: PathBootstrapManifest, Mode: ModeFile},
	)
	for _, p := range in.StaticPods {
		if path.Dir(p.Path) != PathStaticPodManifests {
			return none, fmt.Errorf("ignition: bootstrap: static pod %s must be in %s", p.Path, PathStaticPodManifests)
		}
	}
	files = append(files, in.StaticPods...)
	files = append(files, in.Files...)
	seenKubeconfig := false
	for _, f := range files {
		if f.Path == in.ApplyKubeconfig {
			seenKubeconfig = true
		}
	}
	if !seenKubeconfig {
		return none, fmt.Errorf("ignition: bootstrap: apply kubeconfig %s is not among the files", in.ApplyKubeconfig)
	}
	enabled := true
	add := Additions{
		Files: files,
		Dirs: []Dir{
			{Path: BootstrapDir, Mode: ModeDir},
			{Path: BootstrapManifestDir, Mode: ModeDir},
			{Path: BootstrapCRDDir, Mode: ModeDir},
			{Path: PathStaticPodManifests, Mode: ModeDir},
			{Path: BootstrapSecretDir, Mode: ModePrivDir},
			{Path: BootstrapKubeconfigs, Mode: ModePrivDir},
		},
		Units: []Unit{
			{Name: "kubelet.service", Enabled: &enabled, Contents: kubeletStandalone},
			{Name: "bootkube.service", Enabled: &enabled, Contents: bootkubeUnit},
		},
	}
	if in.SSHKey != "" {
		add.SSHKeys = []string{in.SSHKey}
	}
	return add, nil
}
