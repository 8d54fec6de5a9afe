package rehearsal

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/targets/kube"
)

// PauseImage is the sandbox image the rehearsal's containerd uses: built locally by
// PauseTarball (registry.k8s.io/pause and the release's pod image cannot be pulled here).
const PauseImage = "labbuild.rehearsal/pause:3.9"

// PauseTarball writes a docker-archive tarball of PauseImage to file: one layer holding a
// static busybox whose shell sleeps until SIGTERM, as the real pause does (exit on TERM/INT).
func PauseTarball(file, busybox string) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("rehearsal: pause image: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	tw.Write(bb)
	for _, l := range []string{"sh", "sleep"} {
		tw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return writeImage(file, PauseImage, buf.Bytes(), v1.Config{Entrypoint: []string{"/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"}})
}

// writeImage writes a docker-archive tarball to file of a linux/amd64 image named ref (a tag)
// with one layer (an uncompressed tar) and config cfg.
func writeImage(file, ref string, layerTar []byte, cfg v1.Config) error {
	layer, err := tarball.LayerFromReader(bytes.NewReader(layerTar))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = cfg
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(file, tag, img)
}

// containerdConfig is the rehearsal's containerd configuration (config version 2 of containerd
// 1.6): it stands in for CRI-O, so it listens on the socket the kubelet unit names; the native
// snapshotter because its root is on the node's overlay; the CNI plugins Debian installs.
// restrict_oom_score_adj: the kubelet asks for negative oom_score_adj (-998 for pod sandboxes,
// node-critical pods), which needs CAP_SYS_RESOURCE; where the host withholds it (this
// machine's bounding set does), runc's nsexec fails with "can't get final child's PID from
// pipe: EOF". Restricted, containerd clamps the score to its own (0), as it does rootless.
// registry.config_path: hosts.toml per registry host, which the registries stand-in
// (registries.go) writes from the node's registries.conf; without any, pulls go to the
// registry named, as before.
const containerdConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "` + ContainerdHostsDir + `"
`

// cniConfig is the pod network's stand-in for OVN-Kubernetes (which the network operator
// would deploy): a bridge with host-local addresses from the node's pod subnet.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "rehearsal",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// Kubelet is a node's kubelet as its kubelet.service unit starts it.
type Kubelet struct {
	// Argv is ExecStart with the environment expanded and the kubelet program
	// (/usr/bin/kubelet) replaced by the real binary; a wrapper before it (OpenShift's
	// /usr/local/bin/kubenswrapper, from the node's Ignition) stays and runs.
	Argv []string
	// Pre are the unit's ExecStartPre= commands, run in the node before the kubelet (4.22's
	// worker unit creates /etc/openshift/kubelet.conf.d, its --config-dir, this way).
	Pre []Command
	// Endpoint is the --container-runtime-endpoint the unit names (CRI-O's socket).
	Endpoint string
	// Config is the node path of --config (kubelet.conf).
	Config string
	// DroppedLabels are the --node-labels the upstream kubelet refuses to set on itself
	// (node-role.kubernetes.io/*: OpenShift's kubelet carries a patch allowing them; upstream
	// allows only kubelet.kubernetes.io/, node.kubernetes.io/ and a fixed set). They are
	// removed from the flag; the rest of the flag stays.
	DroppedLabels []string
}

// KubeletFromUnit reads kubelet.service (with drop-ins and environment files) from the node
// root and returns its command line with the program replaced by bin.
func KubeletFromUnit(root, bin string) (*Kubelet, error) {
	s, err := ParseService(root, "kubelet.service")
	if err != nil {
		return nil, err
	}
	k := &Kubelet{Argv: append([]string{}, s.Argv...), Pre: s.Pre}
	found := false
	for i, a := range k.Argv {
		if !strings.HasPrefix(a, "-") && filepath.Base(a) == "kubelet" {
			k.Argv[i], found = bin, true
			break
		}
	}
	if !found {
		return nil, fmt.Errorf("rehearsal: kubelet.service: ExecStart %q names no kubelet program", s.Argv)
	}
	for i, a := range k.Argv {
		v, ok := strings.CutPrefix(a, "--node-labels=")
		if !ok {
			continue
		}
		var keep []string
		for _, l := range strings.Split(v, ",") {
			if key, _, _ := strings.Cut(l, "="); strings.HasPrefix(key, "node-role.kubernetes.io/") {
				k.DroppedLabels = append(k.DroppedLabels, l)
			} else if l != "" {
				keep = append(keep, l)
			}
		}
		k.Argv[i] = "--node-labels=" + strings.Join(keep, ",")
	}
	for _, a := range s.Argv[1:] {
		if v, ok := strings.CutPrefix(a, "--container-runtime-endpoint="); ok {
			k.Endpoint = strings.TrimPrefix(v, "unix://")
		}
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			k.Config = v
		}
	}
	if k.Endpoint == "" || k.Config == "" {
		return nil, fmt.Errorf("rehearsal: kubelet.service: no --container-runtime-endpoint or --config in %q", s.Argv)
	}
	return k, nil
}

// RunPre runs the unit's ExecStartPre= commands in node nd in order, as systemd does before
// ExecStart: a failing one stops the start unless its line has the "-" prefix (RHCOS's
// restorecon, absent here).
func (k *Kubelet) RunPre(ctx context.Context, nd *Node) error {
	for _, c := range k.Pre {
		if err := nd.Run(ctx, "kubelet-pre", nil, c.Argv...); err != nil && !c.IgnoreFailure {
			return fmt.Errorf("rehearsal: kubelet.service ExecStartPre: %w", err)
		}
	}
	return nil
}

// HostOverrides are the kubelet.conf fields the rehearsal changes, each because this host is
// not RHCOS or this kubelet is upstream's:
//   - cgroupDriver: cgroupfs — no systemd runs here;
//   - cgroupsPerQOS: false, enforceNodeAllocatable: [none] — several kubelets share one cgroup
//     hierarchy, so pods get no per-QoS cgroups of their own (node allocatable needs them);
//     "none", not an empty list: with --config-dir (4.22's worker unit) the kubelet merges its
//     drop-ins through v1beta1 JSON, whose omitempty drops an empty list, and defaulting then
//     puts "pods" back (cmd/kubelet/app mergeKubeletConfigurations), which cgroupsPerQOS:
//     false forbids;
//   - systemCgroups: "" — with it the kubelet moves every process of the host's root cgroup
//     into /system.slice: on RHCOS that is the node's own, here it is the whole machine;
//   - protectKernelDefaults: false — it makes the kubelet refuse to start unless kernel
//     sysctls (kernel.panic, vm.overcommit_memory …) have RHCOS's values, which the MCO's
//     sysctl files set; they are not namespaced, so the rehearsal does not set them on the host;
//   - failCgroupV1: false — this host's cgroup hierarchy is v1, which the kubelet shares;
//     from 1.35 the kubelet refuses to start on v1 unless told not to (RHCOS 9.6+ and SCOS 10
//     are v2 only; the field exists from 1.31, older kubelets ignore it);
//   - featureGates.NodeLogQuery: true — kubelet.conf sets enableSystemLogQuery, which the
//     upstream kubelet accepts only with that gate (on by default in OpenShift's); where the
//     gate is GA it is not a known option and goes with the others below.
//
// And OverrideKubeletConf drops every feature gate the kubelet does not offer (KubeletGates):
// the MCO writes all of the FeatureGate's gates into kubelet.conf (85 at 4.18, 118 at 4.22:
// pkg/controller/kubelet-config generateFeatureMap, with openshiftOnlyFeatureGates empty
// because "OpenShift carries a patch that makes kubelet/apiserver ignore feature gates it
// doesn't understand"), and upstream's kubelet refuses to start on an unknown one
// ("unrecognized feature gate", component-base featuregate SetFromMap) or on a GA gate locked
// to the other value.
var HostOverrides = map[string]any{
	"cgroupDriver":           "cgroupfs",
	"cgroupsPerQOS":          false,
	"enforceNodeAllocatable": []string{"none"},
	"systemCgroups":          "",
	"protectKernelDefaults":  false,
	"failCgroupV1":           false,
	"featureGates":           map[string]any{"NodeLogQuery": true},
}

// KubeletGates returns the feature gates the kubelet program bin lets a configuration set, as
// its --help lists them under --feature-gates ("Name=true|false (BETA - default=true)"): the
// alpha and beta gates of its Kubernetes version. GA and deprecated gates are not listed
// (component-base featuregate KnownFeatures); the rehearsal drops those too, which leaves them
// at their defaults. Results are cached by program path.
func KubeletGates(bin string) (map[string]bool, error) {
	kubeletGatesMu.Lock()
	defer kubeletGatesMu.Unlock()
	if g, ok := kubeletGatesCache[bin]; ok {
		return g, nil
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil && len(out) == 0 {
		return nil, fmt.Errorf("rehearsal: %s --help: %w", bin, err)
	}
	g, err := parseKubeletGates(out)
	if err != nil {
		return nil, fmt.Errorf("rehearsal: %s --help: %w", bin, err)
	}
	kubeletGatesCache[bin] = g
	return g, nil
}

var (
	kubeletGatesMu    sync.Mutex
	kubeletGatesCache = map[string]map[string]bool{}
	kubeletGateLine   = regexp.MustCompile(`^\s+([A-Za-z0-9]+)=true\|false \(`)
)

// parseKubeletGates reads the gate names of the --feature-gates section of a kubelet's --help.
func parseKubeletGates(help []byte) (map[string]bool, error) {
	g := map[string]bool{}
	in := false
	for _, l := range strings.Split(string(help), "\n") {
		if strings.Contains(l, "--feature-gates ") {
			in = true
			continue
		}
		if !in {
			continue
		}
		m := kubeletGateLine.FindStringSubmatch(l)
		if m == nil {
			if len(g) > 0 {
				break
			}
			continue
		}
		g[m[1]] = true
	}
	if len(g) == 0 {
		return nil, fmt.Errorf("no --feature-gates options found")
	}
	return g, nil
}

// OverrideKubeletConf applies HostOverrides to the node's kubelet.conf in place (YAML or JSON;
// written back as YAML) and removes the feature gates not in known (KubeletGates of the kubelet
// that will read it). It returns the removed gates, sorted.
func OverrideKubeletConf(root, conf string, known map[string]bool) ([]string, error) {
	p := filepath.Join(root, filepath.FromSlash(conf))
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("rehearsal: kubelet config: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("rehearsal: %s: %w", conf, err)
	}
	for k, v := range HostOverrides {
		if gates, ok := v.(map[string]any); ok {
			cur, _ := m[k].(map[string]any)
			if cur == nil {
				cur = map[string]any{}
			}
			for g, on := range gates {
				cur[g] = on
			}
			v = cur
		}
		m[k] = v
	}
	var dropped []string
	if gates, _ := m["featureGates"].(map[string]any); gates != nil {
		for g := range gates {
			if !known[g] {
				dropped = append(dropped, g)
				delete(gates, g)
			}
		}
		if len(gates) == 0 {
			delete(m, "featureGates")
		}
	}
	sort.Strings(dropped)
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return dropped, os.WriteFile(p, out, 0o644)
}

// StartRuntime writes the containerd configuration and the pod network's CNI config into the
// node root, starts containerd in the node listening on endpoint, and imports the pause image
// tarball into its k8s.io namespace.
func StartRuntime(ctx context.Context, nd *Node, endpoint, podSubnet, pauseTar string) error {
	cfg := filepath.Join(nd.Root, "etc", "containerd", "rehearsal.toml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(containerdConfig, endpoint, PauseImage)), 0o644); err != nil {
		return err
	}
	cni := filepath.Join(nd.Root, "etc", "cni", "net.d", "10-rehearsal.conflist")
	if err := os.MkdirAll(filepath.Dir(cni), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cni, []byte(fmt.Sprintf(cniConfig, podSubnet)), 0o644); err != nil {
		return err
	}
	if _, err := nd.Start("containerd", nil, nil, "sh", "-c", "mkdir -p "+filepath.Dir(endpoint)+" && exec containerd --config /etc/containerd/rehearsal.toml"); err != nil {
		return err
	}
	// The socket is in the node's /run (a tmpfs of its own): wait through the holder's root.
	// /var/run is a symlink to /run, which /proc/<pid>/root would resolve in ours.
	inRun := endpoint
	if rest, ok := strings.CutPrefix(endpoint, "/var/run/"); ok {
		inRun = "/run/" + rest
	}
	sock := fmt.Sprintf("/proc/%d/root%s", nd.holder.Process.Pid, inRun)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rehearsal: node %s: containerd not listening on %s after 60s (see %s/containerd.log)", nd.Name, endpoint, nd.LogDir)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nd.Run(ctx, "ctr", nil, "ctr", "--address", endpoint, "-n", "k8s.io", "images", "import", "--snapshotter", "native", pauseTar)
}

// etcdStandinPod is the stand-in for the etcd static pod the cluster-etcd-operator's installer
// would write on each master: same name, namespace and labels (app=etcd, which
// cluster/etcd's kube.EtcdOn looks for), hostNetwork, but the local pause image, because the
// release's etcd image cannot be pulled here. The kubelet runs it for real and publishes its
// mirror pod etcd-<node>.
const etcdStandinPod = `apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: openshift-etcd
  labels: {app: etcd, k8s-app: etcd, etcd: "true", rehearsal: stand-in}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: etcd
    image: ` + PauseImage + `
    imagePullPolicy: Never
`

// WriteEtcdStandin writes etcdStandinPod to the node's /etc/kubernetes/manifests/etcd-pod.yaml
// (the file name the operator's installer uses).
func WriteEtcdStandin(root string) error {
	dir := filepath.Join(root, PodManifestDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "etcd-pod.yaml"), []byte(etcdStandinPod), 0o644)
}

// NodeRoleLabels sets on Node node the labels its kubelet was started without
// (Kubelet.DroppedLabels, "key=value" each): a stand-in for OpenShift's kubelet patch that lets
// a kubelet register with node-role.kubernetes.io/* from its --node-labels. Without it a
// master Node lacks node-role.kubernetes.io/master, and what selects masters by it (runtimecfg's
// getSortedBackends, the keepalived monitor's unicast peers) finds none.
func NodeRoleLabels(ctx context.Context, k *kube.Clients, node string, labels []string) error {
	if len(labels) == 0 {
		return nil
	}
	patch, err := nodeLabelsPatch(labels)
	if err != nil {
		return err
	}
	if _, err := k.Dynamic.Resource(kube.Nodes).Patch(ctx, node, kube.MergePatchType, patch, kube.PatchOptions{}); err != nil {
		return fmt.Errorf("rehearsal: label node %s %v: %w", node, labels, err)
	}
	return nil
}

// nodeLabelsPatch is the merge patch setting labels ("key=value", or "key" for an empty value).
func nodeLabelsPatch(labels []string) ([]byte, error) {
	m := map[string]string{}
	for _, l := range labels {
		key, val, _ := strings.Cut(l, "=")
		m[key] = val
	}
	return json.Marshal(map[string]any{"metadata": map[string]any{"labels": m}})
}
