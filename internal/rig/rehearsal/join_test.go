package rehearsal

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/labbuild/labbuild/internal/rig/payload"
	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
)

// The rehearsal lab's machine network: 198.18.0.0/15 is reserved for benchmarking (RFC 2544),
// not a private range, and lives only inside the network namespaces the test creates.
const (
	labDomain   = "rehearsal.labbuild.test"
	master0IP   = "198.18.0.101"
	master1IP   = "198.18.0.102"
	master2IP   = "198.18.0.103"
	worker0IP   = "198.18.0.110"
	bootstrapIP = "198.18.0.100"
	apiVIP      = "198.18.0.10"
)

// labYAML is the rehearsal's lab.yaml: the sample payload (its layout path and refs filled
// in), the lab on 198.18.0.0/24 (testenv.LabNetworkYAML).
func labYAML(p *payload.Payload, layout, uri, poolPath string) string {
	return fmt.Sprintf(`cluster:
  name: rehearsal
  baseDomain: labbuild.test
release:
  image: %s
  version: %s
  mirrors:
    %s: oci:%s
    %s: oci:%s
%snodes:
  - {name: bootstrap, role: bootstrap, ip: 198.18.0.100}
  - {name: master-0, role: master, ip: 198.18.0.101}
libvirt:
  uri: %s
  network: rehearsal
  pool: rehearsal
  poolPath: %s
  domainType: qemu
access:
%s  sshKeyFile: id.pub
pki:
  keyAlgorithm: ECDSA-P256
`, p.ReleaseRef(), p.Version, p.ReleaseRepo, layout, p.ComponentRepo, layout, testenv.LabNetworkYAML, uri, poolPath, pullSecretLine(p))
}

// pullSecretLine is labYAML's access.pullSecretFile line: none for an OKD payload, which pulls
// without a Red Hat pull secret (newLab writes no file then).
func pullSecretLine(p *payload.Payload) string {
	if p.Release.OKD {
		return ""
	}
	return "  pullSecretFile: pull-secret.json\n"
}

// requireHost skips (fails in CI) unless the rehearsal's programs and root are here: etcd and
// the Kubernetes programs of the release's toolchain (testenv.Toolchains), the rest from the
// host.
func requireHost(t *testing.T, tc testenv.Toolchain) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the rehearsal makes network and mount namespaces: it needs root")
	}
	bins := map[string]string{}
	for _, p := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
		"containerd", "containerd-shim-runc-v2", "runc", "ctr", "busybox", "ip", "nsenter", "unshare", "sshd", "sudo"} {
		bins[p] = tc.Require(t, p)
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		testenv.Missing(t, "CNI plugins missing in /usr/lib/cni (bash .ci/install-kubelet-runtime.sh)")
	}
	return bins
}

// buildLabbuild builds the labbuild command into dir (or uses $LABBUILD_BIN).
func buildLabbuild(t *testing.T, dir string) string {
	t.Helper()
	if b := os.Getenv("LABBUILD_BIN"); b != "" {
		return b
	}
	bin := filepath.Join(dir, "labbuild")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/labbuild-full")
	cmd.Dir = repo.Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/labbuild-full: %v\n%s", err, out)
	}
	return bin
}

// newLab writes the sample payload of release (internal/rig/payload Releases; "" is 4.18) and
// the rehearsal lab.yaml into an empty directory; it returns the directory and the payload (its component pull specs name the images the nodes'
// pods run).
func newLab(t *testing.T, release, uri, poolPath string) (string, *payload.Payload) {
	t.Helper()
	dir := t.TempDir()
	bin, err := payload.BuildStandin(context.Background(), repo.Root(), release)
	if err != nil {
		t.Fatal(err)
	}
	p, err := payload.Build(payload.Options{Release: release, Shared: repo.Shared(), MCOBinary: bin})
	if err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(dir, "payload")
	if err := p.WriteLayout(layout); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), mode); err != nil {
			t.Fatal(err)
		}
	}
	if !p.Release.OKD {
		write("pull-secret.json", `{"auths":{"registry.labbuild.invalid":{"auth":"c2FtcGxlOm5vdC1hLXNlY3JldA=="}}}`+"\n", 0o600)
	}
	// The user's key pair: id.pub goes into every node's Ignition (core's authorized keys),
	// id is what labbuild ssh and gather log in with (access.sshKeyFile's private half).
	write("id.pub", testenv.SSHKeyPair(t, filepath.Join(dir, "id"))+" rehearsal\n", 0o644)
	write("lab.yaml", labYAML(p, layout, uri, poolPath), 0o644)
	return dir, p
}

// labNet makes a lab network namespace with a bridge br-lab at the gateway address: the
// first slice's stand-in for libvirt's network (see TestKubeletJoinsBootstrapControlPlane).
func labNet(t *testing.T, name, gateway string) {
	t.Helper()
	t.Cleanup(func() { DeleteLabNet(name) })
	if err := LabNet(name, gateway); err != nil {
		t.Fatal(err)
	}
}

// labbuildIn runs the labbuild binary in dir inside network namespace netns (where the lab's
// bridge is: haproxy/service adds the VIPs there) and returns its combined output.
func labbuildIn(netns, dir, bin string, args ...string) ([]byte, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", netns, bin, "-f", "lab.yaml"}, args...)...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

// rig is one rehearsal: the labbuild binary, the lab directory, the libvirtd whose network
// namespace holds the lab bridge, and the nodes started so far.
type rig struct {
	// labNS and bridge are where nodes join: libvirt's network (the flow) or labNet's.
	labNS, bridge string
	// nodeLabNS places a node on another host's bridge (its network namespace; a lab on
	// several hosts: twohost_flow_test.go), by node name.
	nodeLabNS map[string]string
	// api is the address clients dial: the API VIP (haproxy) or the bootstrap.
	api string
	// hosts, when set, become the nodes' /etc/hosts lines (no lab DNS without libvirt).
	hosts map[string]string
	// release is the sample payload's release ("" is 4.18), tc the Kubernetes and etcd the
	// rehearsal runs for it (bins holds their programs).
	release string
	tc      testenv.Toolchain
	bins    map[string]string
	work    string
	lab     string
	lb      string
	lv      *testenv.Libvirtd
	seq     int
	pause   string
	// payload is the lab's release payload (newLab).
	payload *payload.Payload
	// images are stand-in images every kubelet node's containerd imports under their pull
	// specs before its kubelet starts (in-cluster mode: OnPremImages).
	images []ImageTar
	// clientTar is the in-cluster client's image (ClientImageTarball), imported into node
	// clientNode's containerd (client_test.go); "" without the client.
	clientTar, clientNode string
	// mirrorLog, when set, is the release mirror's log (mirror_flow_test.go): every kubelet
	// node pulls its images through the mirror before its kubelet starts; pulls has each
	// node's pulled images and pullErr its first failure.
	mirrorLog string
	pulls     map[string][]string
	pullErr   map[string]error

	mu    sync.Mutex
	nodes map[string]*Node
	// celDropped are the CRD rules AdaptCRDsFor130 removed from each node's files.
	celDropped map[string][]DroppedRule
}

// newRig is newRigOf the 4.18 sample.
func newRig(t *testing.T, withLibvirt bool) *rig {
	t.Helper()
	return newRigOf(t, "", withLibvirt)
}

// newRigOf prepares a rehearsal of release's sample payload with its toolchain; withLibvirt
// starts a real libvirtd whose network (made by labbuild) the nodes join, else the nodes join
// labNet's bridge.
func newRigOf(t *testing.T, release string, withLibvirt bool) *rig {
	t.Helper()
	tc, err := testenv.ToolchainOf(release)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{release: release, tc: tc, bins: requireHost(t, tc), work: t.TempDir(), seq: os.Getpid() % 10000, nodes: map[string]*Node{}, celDropped: map[string][]DroppedRule{},
		pulls: map[string][]string{}, pullErr: map[string]error{}}
	testenv.RequireShared(t)
	r.lb = buildLabbuild(t, r.work)
	if withLibvirt {
		r.lv = testenv.StartLibvirtd(t)
		r.labNS, r.bridge, r.api = r.lv.NetNS, "virbr-rehearsal", apiVIP
		r.lab, r.payload = newLab(t, release, r.lv.URI("qemu:///system"), filepath.Join(r.lv.Dir, "pool"))
	} else {
		r.labNS, r.bridge, r.api = fmt.Sprintf("lbr%d-lab", r.seq), "br-lab", bootstrapIP
		labNet(t, r.labNS, "198.18.0.1")
		r.hosts = map[string]string{"api-int." + labDomain: bootstrapIP, "api." + labDomain: bootstrapIP}
		r.lab, r.payload = newLab(t, release, "qemu:///system", filepath.Join(r.work, "pool")) // libvirt unused
	}
	r.pause = filepath.Join(r.work, "pause.tar")
	if err := PauseTarball(r.pause, r.bins["busybox"]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, nd := range r.nodes {
			nd.Stop()
		}
	})
	// Registered after the nodes' cleanup, so it runs first (LIFO): the logs are copied while
	// the programs still run, before the temporary directory goes.
	t.Cleanup(func() { r.keepLogs(t) })
	return r
}

// KeepEnv names the directory where a failed rehearsal leaves every node's logs (kubelet,
// containerd, static pods, stand-ins: <dir>/<node>/*.log) and labbuild's own logs
// (<dir>/labbuild/); without it the failure log shows the tail of each node log.
const KeepEnv = "LABBUILD_REHEARSAL_KEEP"

// keepLogs, when t failed, copies the node logs (of running and stopped nodes alike: they
// stay under work/nodes/<node>/logs) to $LABBUILD_REHEARSAL_KEEP, or logs their tails.
func (r *rig) keepLogs(t *testing.T) {
	if !t.Failed() {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(r.work, "nodes", "*", "logs"))
	if d := os.Getenv(KeepEnv); d != "" {
		for _, ld := range dirs {
			node := filepath.Base(filepath.Dir(ld))
			os.MkdirAll(filepath.Join(d, node), 0o755)
			exec.Command("cp", "-r", ld+"/.", filepath.Join(d, node)).Run()
		}
		if lbLogs := filepath.Join(r.lab, "out", ".labbuild", "log"); isDir(lbLogs) {
			os.MkdirAll(filepath.Join(d, "labbuild"), 0o755)
			exec.Command("cp", "-r", lbLogs+"/.", filepath.Join(d, "labbuild")).Run()
		}
		t.Logf("node logs kept in %s", d)
		return
	}
	for _, ld := range dirs {
		ls, _ := filepath.Glob(filepath.Join(ld, "*.log"))
		for _, l := range ls {
			b, _ := os.ReadFile(l)
			if len(b) > 3000 {
				b = b[len(b)-3000:]
			}
			t.Logf("--- %s:\n%s", l, b)
		}
	}
	t.Logf("set %s=<dir> to keep the whole logs", KeepEnv)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// labbuild runs the labbuild binary in the lab directory inside the lab's network namespace.
func (r *rig) labbuild(args ...string) ([]byte, error) {
	return labbuildIn(r.labNS, r.lab, r.lb, args...)
}

// boot places node's Ignition (out/ignition/<node>.ign) under a fresh root, writes the boot
// stand-ins and starts the node on the lab bridge at its keyfile's address.
func (r *rig) boot(node string) (*Node, error) {
	raw, err := os.ReadFile(filepath.Join(r.lab, "out", "ignition", node+".ign"))
	if err != nil {
		return nil, err
	}
	return r.bootIgnition(node, raw)
}

// bootIgnition is boot with the Ignition config raw (a node booted from virtual media: the
// config on the media, not labbuild's file).
func (r *rig) bootIgnition(node string, raw []byte) (*Node, error) {
	return r.bootIgnitionNet(node, raw, nil, "")
}

// bootIgnitionNet is bootIgnition for a node whose config may carry no keyfile: then lease (its
// DHCP lease, DHCPLease) addresses it and hostname, when the config writes no /etc/hostname,
// names it, as NetworkManager does from DHCP.
func (r *rig) bootIgnitionNet(node string, raw []byte, lease *KeyfileNet, hostname string) (*Node, error) {
	root := filepath.Join(r.work, "nodes", node, "root")
	os.RemoveAll(root)
	os.RemoveAll(root + ".work")
	if _, err := Place(raw, root); err != nil {
		return nil, err
	}
	if node != "bootstrap" {
		// The disk the machine-config daemon finds on its first run (firstboot.go): as Ignition
		// left it, before the rehearsal's host overrides.
		if err := SnapshotRoot(root); err != nil {
			return nil, err
		}
	}
	// A kube-apiserver older than 1.31 stands in for OpenShift's: the CRDs' IP/CIDR CEL rules
	// go (cel.go). Every toolchain is 1.31 or newer now; the adaptation stays for a 1.30 one.
	var dropped []DroppedRule
	if r.tc.KubeMinor() < 31 {
		var err error
		if dropped, err = AdaptCRDsFor130(root); err != nil {
			return nil, err
		}
	}
	k, err := ReadKeyfile(root)
	if err != nil && lease != nil {
		k, err = lease, nil
	}
	if err != nil {
		return nil, err
	}
	if err := BootStandins(root, k, r.hosts); err != nil {
		return nil, err
	}
	// core and sshd, as RHCOS and the node's Ignition make them: labbuild ssh and gather.
	if err := CoreUser(raw, root); err != nil {
		return nil, err
	}
	if _, err := SSHD(root); err != nil {
		return nil, err
	}
	if err := ResolveOwnName(root); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.nodes[node]; old != nil {
		old.Stop()
	}
	ns, err := nodeNS(r.seq, node)
	if err != nil {
		return nil, err
	}
	labNS := r.labNS
	if other, ok := r.nodeLabNS[node]; ok {
		labNS = other
	}
	nd, err := StartNode(node, ns, root, filepath.Join(r.work, "nodes", node, "logs"),
		NodeNet{IP: k.IP, Prefix: k.Prefix, Gateway: k.Gateway, LabNS: labNS, Bridge: r.bridge, MTU: k.MTU, Hostname: hostname})
	if err != nil {
		return nil, err
	}
	r.nodes[node] = nd
	r.celDropped[node] = dropped
	// Dialled from the lab network's namespace (the first host's, with an address on the
	// machine network): another host's bridge has none, the tunnel carries the connection.
	if err := StartSSHD(nd, r.bins["sshd"], k.IP, r.labNS); err != nil {
		return nil, err
	}
	return nd, nil
}

// nodeNS names node's network namespace: lbr<seq>-<short node name> (master-1 → m1, worker-0
// → w0, bootstrap → b), within the 15 bytes a veth peer named after it may have. Cutting a
// longer name instead made master-0, master-1 and master-2 one namespace.
func nodeNS(seq int, node string) (string, error) {
	short := node
	switch {
	case node == "bootstrap":
		short = "b"
	case strings.HasPrefix(node, "master-"):
		short = "m" + strings.TrimPrefix(node, "master-")
	case strings.HasPrefix(node, "worker-"):
		short = "w" + strings.TrimPrefix(node, "worker-")
	}
	ns := fmt.Sprintf("lbr%d-%s", seq, short)
	if len(ns) > 14 { // "v"+ns is the veth peer's name (IFNAMSIZ 16 with the NUL)
		return "", fmt.Errorf("rehearsal: node %s: namespace name %s longer than 14 bytes", node, ns)
	}
	return ns, nil
}

// stop ends node's namespaces (its "VM" powered off).
func (r *rig) stop(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if nd := r.nodes[node]; nd != nil {
		nd.Stop()
		delete(r.nodes, node)
	}
}

// staticPods starts every container of the node's static pods whose program is here and
// returns the programs started; the others are stand-ins, not started.
func (r *rig) staticPods(nd *Node) ([]string, []string, error) {
	return r.podsOf(nd, "", nil)
}

// flowBootstrapUp is what a flow does when the bootstrap's domain starts: its static pods,
// then, in the background, the CVO stand-in's CRDs (CVOStandinCRDs) stored in the bootstrap's
// etcd, and with a kube-apiserver older than 1.31 labbuild's release/crds with CEL131 rules
// (SeedCRDs), which it refuses to create. rehearsalFlow and TestRehearsalWithholdFlow share it; a failure goes to fl.
func flowBootstrapUp(ctx context.Context, r *rig, nd *Node, fl *flowLog) {
	if _, _, err := r.staticPods(nd); err != nil {
		fl.fail("bootstrap static pods: %v", err)
		return
	}
	seedFlowCRDs(ctx, r, nd, fl)
}

// seedFlowCRDs stores, in the background, the kube-apiserver 1.31 stand-in's CRDs (labbuild's
// release/crds with CEL131 rules) and the CVO stand-in's in the etcd of node nd, whose
// control plane is the bootstrap's (flowBootstrapUp; a single node's live system, TestSNOFlow).
func seedFlowCRDs(ctx context.Context, r *rig, nd *Node, fl *flowLog) {
	go func() {
		if r.tc.KubeMinor() < 31 {
			files, _ := filepath.Glob(filepath.Join(r.lab, "out", "release", "crds", "crds", "*.yaml"))
			crds := map[string][]byte{}
			for _, f := range files {
				if b, err := os.ReadFile(f); err == nil && CEL131.Match(b) {
					crds[filepath.Base(f)] = b
				}
			}
			names, err := SeedCRDs(ctx, nd, r.bins["etcdctl"], crds)
			if err != nil {
				fl.fail("%v", err)
				return
			}
			fl.logf("kube-apiserver 1.31 stand-in: stored labbuild's %v in the bootstrap's etcd", names)
		}
		if cvo, err := CVOStandinCRDs(repo.Root()); err != nil {
			fl.fail("%v", err)
		} else if names, err := SeedCRDs(ctx, nd, r.bins["etcdctl"], cvo); err != nil {
			fl.fail("%v", err)
		} else {
			fl.logf("CVO stand-in: created %v from the payload's operator manifests", names)
		}
	}()
}

// podsOf is staticPods for the static pod named pod only ("" for all), env added to each
// container's environment.
func (r *rig) podsOf(nd *Node, pod string, env []string) ([]string, []string, error) {
	pods, err := StaticPods(nd.Root)
	if err != nil {
		return nil, nil, err
	}
	var started, standins []string
	for _, c := range pods {
		if pod != "" && c.Pod != pod {
			continue
		}
		k, err := StartContainer(nd, c, r.bins, r.containerShell, env)
		if err != nil {
			return nil, nil, err
		}
		if k == nil {
			standins = append(standins, c.Pod+"/"+c.Name+" ("+c.Program+")")
			continue
		}
		started = append(started, c.Program)
	}
	return started, standins, nil
}

// containerShell runs a container's bash (the in-cluster mode's keepalived container: bash,
// keepalived and socat) as in its image: in a PID namespace of its own, so its `pgrep -o
// keepalived` finds its own keepalived and no other on this host, and with /bin/sh being bash
// as in the RHEL-based images of the MCO's on-prem pods (socat's system: address runs `bash -c
// msg_handler` through /bin/sh with the functions the script exported, which Debian's dash
// would drop).
func (r *rig) containerShell(argv []string) []string {
	return append([]string{r.bins["unshare"], "--pid", "--fork", "--mount-proc", "--kill-child",
		"sh", "-c", `mount --bind "$0" "$(readlink -f /bin/sh)" && exec "$@"`, argv[0]}, argv...)
}

// kubelet runs the node's kubelet-auto-node-size.service, then containerd (on the runtime
// endpoint the kubelet unit names), the unit's ExecStartPre commands and the kubelet from its
// unit.
func (r *rig) kubelet(ctx context.Context, nd *Node, podSubnet string) error {
	if err := RunOneshot(ctx, nd, "kubelet-auto-node-size.service"); err != nil {
		return err
	}
	kl, err := KubeletFromUnit(nd.Root, r.bins["kubelet"])
	if err != nil {
		return err
	}
	known, err := KubeletGates(r.bins["kubelet"])
	if err != nil {
		return err
	}
	if _, err := OverrideKubeletConf(nd.Root, kl.Config, known); err != nil {
		return err
	}
	if err := StartRuntime(ctx, nd, kl.Endpoint, podSubnet, r.pause); err != nil {
		return err
	}
	if r.clientTar != "" && nd.Name == r.clientNode {
		if err := ImportImages(ctx, nd, kl.Endpoint, []ImageTar{{File: r.clientTar, Ref: ClientImage}}); err != nil {
			return err
		}
	}
	if r.mirrorLog != "" {
		var imported []string
		for _, it := range r.images {
			imported = append(imported, it.Specs...)
		}
		images, err := nodeImages(nd, kl, imported)
		if err == nil {
			var k *KeyfileNet
			if k, err = ReadKeyfile(nd.Root); err == nil {
				var lines []string
				lines, err = pullThroughMirror(ctx, nd, kl.Endpoint, k.IP, r.mirrorLog, images)
				r.mu.Lock()
				r.pulls[nd.Name] = lines
				r.mu.Unlock()
			}
		}
		if err != nil {
			r.mu.Lock()
			r.pullErr[nd.Name] = err
			r.mu.Unlock()
		}
	}
	if err := kl.RunPre(ctx, nd); err != nil {
		return err
	}
	if len(r.images) > 0 {
		// The pods' hostPath volumes with mountPropagation HostToContainer need the node's
		// mounts shared, as systemd makes / on RHCOS (containerd refuses a private source).
		if err := nd.Run(ctx, "make-rshared", nil, "mount", "--make-rshared", "/"); err != nil {
			return err
		}
		if err := ImportImages(ctx, nd, kl.Endpoint, r.images); err != nil {
			return err
		}
	}
	return nd.Keep("kubelet", nil, nil, kl.Argv...) // kubelet.service: Restart=always
}

// clients returns clients for labbuild's admin kubeconfig, dialled to the API VIP inside the
// lab's network namespace: through haproxy.
func (r *rig) clients() (*kube.Clients, error) {
	cfg, err := kube.Config(filepath.Join(r.lab, "out", "kubeconfig", "admin", "kubeconfig"), r.api+":6443")
	if err != nil {
		return nil, err
	}
	cfg.Dial = DialIn(r.labNS)
	return kube.NewClients(cfg)
}

func (r *rig) allNodes() []*Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Node
	for _, nd := range r.nodes {
		out = append(out, nd)
	}
	return out
}

// bootstrapUp is the first half of the rehearsal's first slice: labbuild, from an empty
// directory, builds bootstrap.ign and the admin kubeconfig (kubeletJoins builds master-0.ign
// after); the bootstrap node
// joins a bridge in a namespace of the test (stand-in for libvirt's network, which needs
// host/preflight: see TestRehearsalFlow) and its control plane runs from bootstrap.ign's own
// static pods — real etcd, kube-apiserver, kube-controller-manager, kube-scheduler; the CVO
// is a stand-in that is not started — until /readyz answers with labbuild's admin kubeconfig.
func bootstrapUp(ctx context.Context, t *testing.T, release string) (*rig, *kube.Clients) {
	r := newRigOf(t, release, false)
	if out, err := r.labbuild("ignition/bootstrap", "kubeconfig/admin"); err != nil {
		t.Fatalf("labbuild: %v\n%s", err, out)
	}
	r.bootBootstrap(t, "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
	k, err := r.clients()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the bootstrap kube-apiserver /readyz", 5*time.Minute, func() (bool, string) {
		err := kube.Readyz(ctx, k)
		return err == nil, fmt.Sprint(err)
	})

	return r, k
}

// bootBootstrap boots the bootstrap node from bootstrap.ign and starts its static pods' containers
// whose programs are here; the test fails unless the programs want are among them.
func (r *rig) bootBootstrap(t *testing.T, want ...string) *Node {
	t.Helper()
	bNode, err := r.boot("bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	started, standins, err := r.staticPods(bNode)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bootstrap static pods: started %v; stand-ins (not started): %v", started, standins)
	for _, w := range want {
		if !slices.Contains(started, w) {
			t.Fatalf("bootstrap.ign's static pods start %v: no %s", started, w)
		}
	}
	return bNode
}

// TestBootstrapControlPlaneFromIgnition is bootstrapUp alone. `make check` runs
// TestKubeletJoinsBootstrapControlPlane, which begins with it, so this runs with make rehearsal.
func TestBootstrapControlPlaneFromIgnition(t *testing.T) {
	requireRehearsal(t)
	for _, release := range shortRehearsalReleases {
		t.Run(releaseName(release), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			r, k := bootstrapUp(ctx, t, release)
			checkServerVersion(ctx, t, r, k)
		})
	}
}

// shortRehearsalReleases are the releases the short rehearsal (a bootstrap control plane from
// bootstrap.ign, a kubelet joining) runs for, each with its own Kubernetes and etcd
// (testenv.Toolchains): "" is 4.18.
var shortRehearsalReleases = []string{"", "4.20", "4.22"}

// releaseName names a release in test names ("" is 4.18).
func releaseName(release string) string {
	if release == "" {
		return "4.18"
	}
	return release
}

// checkServerVersion requires the bootstrap kube-apiserver to be the toolchain's Kubernetes
// (.ci/build-kube.sh stamps the version into the build).
func checkServerVersion(ctx context.Context, t *testing.T, r *rig, k *kube.Clients) {
	t.Helper()
	v, err := kube.ServerVersion(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if v != r.tc.Kube {
		t.Errorf("bootstrap kube-apiserver reports %s, want the %s toolchain's %s", v, releaseName(r.release), r.tc.Kube)
	}
	t.Logf("bootstrap kube-apiserver %s ready (release %s)", v, releaseName(r.release))
}

// notApplied returns bootkube.sh's "not applied yet" lines (each with oc's reason).
func notApplied(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, " not applied yet") {
			out = append(out, l)
		}
	}
	return out
}

// pinnedTool returns program name of 4.18's toolchain (built by .ci/build-kube.sh at the
// version the rehearsal's kube-apiserver has), else name from PATH.
func pinnedTool(t *testing.T, name string) string {
	t.Helper()
	return pinnedToolOf(t, "", name)
}

// pinnedToolOf is pinnedTool for release's toolchain.
func pinnedToolOf(t *testing.T, release, name string) string {
	t.Helper()
	tc, err := testenv.ToolchainOf(release)
	if err != nil {
		t.Fatal(err)
	}
	return tc.Require(t, name)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// requireRehearsal skips unless LABBUILD_REHEARSAL=1 (`make rehearsal` sets it): the long
// forms are not part of `make check`.
func requireRehearsal(t *testing.T) {
	t.Helper()
	if os.Getenv("LABBUILD_REHEARSAL") != "1" {
		t.Skip("the full rehearsal runs with make rehearsal (LABBUILD_REHEARSAL=1); make check runs TestKubeletJoinsBootstrapControlPlane")
	}
}

// TestKubeletJoinsBootstrapControlPlane is the rehearsal's first slice and `make check`'s
// short form: after bootstrapUp, bootstrap.ign's bootkube.service applies every CRD and
// manifest (the CVO stand-in having applied the payload CRD one of them needs), then
// master-0's real kubelet, started from master-0.ign's kubelet.service with containerd
// standing in for CRI-O, registers through api-int (the bootstrap, in the nodes' /etc/hosts),
// its client and serving CSRs are approved by labbuild's approver (targets/csr) and the Node
// becomes Ready at its lab IP.
//
// It runs for each of shortRehearsalReleases, with that release's sample payload and
// Kubernetes (the bootstrap's kube-apiserver and master-0's kubelet report the toolchain's
// version).
func TestKubeletJoinsBootstrapControlPlane(t *testing.T) {
	for _, release := range shortRehearsalReleases {
		t.Run(releaseName(release), func(t *testing.T) { kubeletJoins(t, release) })
	}
}

func kubeletJoins(t *testing.T, release string) {
	kubectl := pinnedToolOf(t, release, "kubectl")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	r, k := bootstrapUp(ctx, t, release)
	checkServerVersion(ctx, t, r, k)
	// The bootstrap's bootkube.service (from bootstrap.ign) applies the CRDs and cluster
	// manifests, among them the RBAC that lets system:bootstrappers create CSRs. Its `oc` is
	// a stand-in (linkOC).
	bNode := r.allNodes()[0]
	linkOC(ctx, t, bNode, kubectl)
	// Only a kube-apiserver older than 1.31 needs the CRD rules calling 1.31's CEL IP/CIDR
	// functions dropped (exactly those of two CRDs: TestAdaptCRDsFor130); 1.31+ apply them.
	if dropped := len(r.celDropped["bootstrap"]); (r.tc.KubeMinor() < 31) != (dropped > 0) {
		t.Errorf("kube-apiserver %s: %d CEL IP/CIDR rules dropped from bootstrap.ign's CRDs", r.tc.Kube, dropped)
	}
	applyCVOStandinCRDs(ctx, t, k)
	start := time.Now()
	if err := RunOneshot(ctx, bNode, "bootkube.service"); err != nil {
		t.Fatal(err)
	}
	blog, _ := os.ReadFile(filepath.Join(bNode.LogDir, "bootkube.log"))
	t.Logf("bootkube.service done in %s, %d pass(es); files retried: %q", time.Since(start).Round(time.Second),
		strings.Count(string(blog), "bootkube: pass "), notApplied(string(blog)))
	// bootkube.sh marks success as its unit's ConditionPathExists=! names (no rerun at boot).
	if _, err := os.Stat(filepath.Join(bNode.Root, "opt", "openshift", ".bootkube.done")); err != nil {
		t.Errorf("bootkube.service exited 0 but left no /opt/openshift/.bootkube.done: %v", err)
	}
	if out, err := r.labbuild("ignition/master-0"); err != nil {
		t.Fatalf("labbuild: %v\n%s", err, out)
	}
	mNode, err := r.boot("master-0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.kubelet(ctx, mNode, "10.128.0.0/23"); err != nil {
		t.Fatal(err)
	}
	name := "master-0." + labDomain
	expected := map[string]csr.NodeIdentity{name: {Name: name, IPs: []string{master0IP}, DNSNames: []string{"master-0"}}}
	approved := map[string]bool{}
	waitFor(ctx, t, "master-0's CSRs approved and the Node Ready", 4*time.Minute, func() (bool, string) {
		ds, err := csr.Approve(ctx, k.Dynamic, expected)
		if err != nil {
			return false, err.Error()
		}
		for _, d := range ds {
			if d.Approved {
				approved[d.Signer] = true
			}
		}
		// The serving CSR comes once the client certificate is in use, possibly after Ready.
		ready, _, err := kube.NodesReady(ctx, k.Dynamic, []string{name})
		done := err == nil && len(ready) == 1 && approved["kubernetes.io/kubelet-serving"]
		return done, fmt.Sprintf("approved %v, ready %v, err %v", approved, ready, err)
	})

	for _, s := range []string{"kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"} {
		if !approved[s] {
			t.Errorf("no %s CSR approved for %s (approved: %v)", s, name, approved)
		}
	}
	n, err := kube.Get[corev1.Node](ctx, k.Dynamic, kube.Nodes, "", name)
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			ips = append(ips, a.Address)
		}
	}
	if strings.Join(ips, ",") != master0IP {
		t.Errorf("Node %s InternalIP = %v, want [%s]", name, ips, master0IP)
	}
	if n.Status.NodeInfo.KubeletVersion != r.tc.Kube {
		t.Errorf("Node %s kubeletVersion %s, want the toolchain's %s", name, n.Status.NodeInfo.KubeletVersion, r.tc.Kube)
	}
	if _, ok := n.Labels["node.openshift.io/os_id"]; !ok {
		t.Errorf("Node %s labels %v: no node.openshift.io/os_id (from the kubelet unit's --node-labels)", name, n.Labels)
	}
	// A way into the lab (issue 27): labbuild ssh and gather against each node's real sshd.
	checkSSHAndGather(t, r)
}

// applyCVOStandinCRDs is the CVO stand-in's part before bootkube.service: it applies what the
// CVO would from the release payload and a bootstrap manifest needs
// (networks.operator.openshift.io, for 02-operator-network.yaml).
func applyCVOStandinCRDs(ctx context.Context, t *testing.T, k *kube.Clients) {
	t.Helper()
	crds, err := CVOStandinCRDs(repo.Root())
	if err != nil {
		t.Fatal(err)
	}
	ap, err := kube.NewApplier(k.Config, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ap.ApplyFiles(ctx, crds); err != nil {
		t.Fatalf("CVO stand-in: %v", err)
	}
}

// linkOC puts the bootstrap's `oc` in place for bootkube.sh: a stand-in, kubectl (the
// apiserver's version, .ci/build-kube.sh) linked as /usr/local/bin/oc inside the node (oc is
// not packaged).
func linkOC(ctx context.Context, t *testing.T, bNode *Node, kubectl string) {
	t.Helper()
	if err := bNode.Run(ctx, "oc-standin", nil, "ln", "-sf", kubectl, "/usr/local/bin/oc"); err != nil {
		t.Fatal(err)
	}
}

// startBootkube starts the bootstrap's bootkube.service in the background once its `oc` is
// in place (linkOC) and the CVO stand-in's CRDs are applied (applyCVOStandinCRDs), as on a
// bootstrap whose CVO runs. Its progress shows in bNode's bootkube.log and
// /opt/openshift/.bootkube.done.
func startBootkube(ctx context.Context, t *testing.T, bNode *Node, kubectl string, k *kube.Clients) {
	t.Helper()
	linkOC(ctx, t, bNode, kubectl)
	applyCVOStandinCRDs(ctx, t, k)
	go RunOneshot(ctx, bNode, "bootkube.service")
}

// waitFor polls cond every 2 s until it holds, or fails the test after limit with the last
// status (rig.keepLogs then shows or keeps the nodes' logs).
func waitFor(ctx context.Context, t *testing.T, what string, limit time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last string
	for {
		ok, st := cond()
		if ok {
			return
		}
		last = st
		if time.Now().After(deadline) || ctx.Err() != nil {
			// The nodes' logs: rig.keepLogs, when the test ends.
			t.Fatalf("%s: not after %s: %s", what, limit, last)
		}
		time.Sleep(2 * time.Second)
	}
}
