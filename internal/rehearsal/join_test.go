package rehearsal

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/labbuild/labbuild/internal/payload"
	"github.com/labbuild/labbuild/internal/testenv"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
)

// The rehearsal lab's machine network: 198.18.0.0/15 is reserved for benchmarking (RFC 2544),
// not a private range, and lives only inside the network namespaces the test creates.
const (
	labCIDRPrefix = 24
	labGateway    = "198.18.0.1"
	labDomain     = "rehearsal.labbuild.test"
	bootstrapIP   = "198.18.0.100"
	master0IP     = "198.18.0.101"
)

// labYAML is the rehearsal's lab.yaml: the sample payload (its layout path and refs filled
// in), the lab on 198.18.0.0/24.
func labYAML(p *payload.Payload, layout string) string {
	return fmt.Sprintf(`cluster:
  name: rehearsal
  baseDomain: labbuild.test
release:
  image: %s
  version: %s
  mirrors:
    %s: oci:%s
    %s: oci:%s
network:
  machineNetwork: 198.18.0.0/24
  gateway: 198.18.0.1
  dns: 198.18.0.1
  apiVIP: 198.18.0.10
  ingressVIP: 198.18.0.11
  dhcpStart: 198.18.0.200
  dhcpEnd: 198.18.0.254
nodes:
  - {name: bootstrap, role: bootstrap, ip: 198.18.0.100}
  - {name: master-0, role: master, ip: 198.18.0.101}
access:
  pullSecretFile: pull-secret.json
  sshKeyFile: id.pub
pki:
  keyAlgorithm: ECDSA-P256
`, p.ReleaseRef(), p.Version, p.ReleaseRepo, layout, p.ComponentRepo, layout)
}

// requireHost skips (fails in CI) unless the rehearsal's programs and root are here.
func requireHost(t *testing.T) map[string]string {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "the rehearsal makes network and mount namespaces: it needs root")
	}
	bins := map[string]string{}
	for _, p := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
		"containerd", "containerd-shim-runc-v2", "runc", "ctr", "busybox", "ip", "nsenter", "unshare"} {
		bins[p] = testenv.Require(t, p)
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
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/labbuild")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/labbuild: %v\n%s", err, out)
	}
	return bin
}

// newLab writes the sample payload and the rehearsal lab.yaml into an empty directory.
func newLab(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin, err := payload.BuildStandin(context.Background(), testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	p, err := payload.Build(payload.Options{Shared: testenv.Shared(), MCOBinary: bin})
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
	write("pull-secret.json", `{"auths":{"registry.labbuild.invalid":{"auth":"c2FtcGxlOm5vdC1hLXNlY3JldA=="}}}`+"\n", 0o600)
	write("id.pub", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOaBFaMdLlvY8tD1Y5fM6a0m5kpB7JYIt3JfPpY3JrF4 rehearsal\n", 0o644)
	write("lab.yaml", labYAML(p, layout), 0o644)
	return dir
}

// labNet makes the lab network namespace with its bridge at the gateway address.
func labNet(t *testing.T, name string) {
	t.Helper()
	steps := [][]string{
		{"ip", "netns", "add", name},
		{"ip", "-n", name, "link", "set", "lo", "up"},
		{"ip", "-n", name, "link", "add", "br-lab", "type", "bridge"},
		{"ip", "-n", name, "addr", "add", labGateway + "/24", "dev", "br-lab"},
		{"ip", "-n", name, "link", "set", "br-lab", "up"},
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestKubeletJoinsBootstrapControlPlane is the rehearsal's first slice: labbuild builds
// bootstrap.ign and master-0.ign from an empty directory; the bootstrap's control plane runs
// from bootstrap.ign's own static pods (real etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler; the CVO is a stand-in that is not started); master-0's real kubelet, started
// from master-0.ign's kubelet.service with containerd standing in for CRI-O, registers through
// api-int, its client and serving CSRs are approved by labbuild's approver (targets/csr) and
// the Node becomes Ready at its lab IP.
func TestKubeletJoinsBootstrapControlPlane(t *testing.T) {
	bins := requireHost(t)
	testenv.RequireShared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	work := t.TempDir()
	lb := buildLabbuild(t, work)
	lab := newLab(t)
	cmd := exec.Command(lb, "-f", "lab.yaml", "ignition/bootstrap", "ignition/master-0", "kubeconfig/admin")
	cmd.Dir = lab
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("labbuild ignition: %v\n%s", err, out)
	}
	ign := func(node string) []byte {
		b, err := os.ReadFile(filepath.Join(lab, "out", "ignition", node+".ign"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	seq := os.Getpid() % 10000
	labNS := fmt.Sprintf("lbr%d-lab", seq)
	labNet(t, labNS)
	logs := filepath.Join(work, "logs")

	// The bootstrap node: bootstrap.ign's files under its root; every static pod whose
	// program is here runs; the rest are stand-ins (none started).
	bRoot := filepath.Join(work, "bootstrap", "root")
	if _, err := Place(ign("bootstrap"), bRoot); err != nil {
		t.Fatal(err)
	}
	bNode, err := StartNode("bootstrap", fmt.Sprintf("lbr%d-b", seq), bRoot, filepath.Join(logs, "bootstrap"),
		NodeNet{IP: bootstrapIP, Prefix: labCIDRPrefix, Gateway: labGateway, LabNS: labNS, Bridge: "br-lab"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bNode.Stop)
	pods, err := StaticPods(bRoot)
	if err != nil {
		t.Fatal(err)
	}
	var started []string
	for _, c := range pods {
		bin, ok := bins[c.Program]
		if !ok {
			t.Logf("static pod %s/%s: %s has no real program here: stand-in (not started)", c.Pod, c.Name, c.Program)
			continue
		}
		if _, err := bNode.Start(c.Pod+"-"+c.Name, c.Env, c.Binds, append([]string{bin}, c.Args...)...); err != nil {
			t.Fatal(err)
		}
		started = append(started, c.Program)
	}
	for _, want := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if !strings.Contains(strings.Join(started, " "), want) {
			t.Fatalf("bootstrap.ign's static pods start %v: no %s", started, want)
		}
	}

	// The admin kubeconfig labbuild wrote, dialled inside the bootstrap's namespace.
	kc, _ := filepath.Glob(filepath.Join(lab, "out", "kubeconfig", "admin", "kubeconfig"))
	if len(kc) == 0 {
		t.Fatal("no out/kubeconfig/admin/kubeconfig")
	}
	cfg, err := kube.Config(kc[0], bootstrapIP+":6443")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dial = DialIn(bNode.NetNS)
	k, err := kube.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the bootstrap kube-apiserver /readyz", 5*time.Minute, func() (bool, string) {
		err := kube.Readyz(ctx, k.Typed)
		return err == nil, fmt.Sprint(err)
	}, bNode)

	// master-0: its Ignition under its root; what RHCOS services would write at boot is
	// written by stand-ins (named below); then containerd and the kubelet from its unit.
	mRoot := filepath.Join(work, "master-0", "root")
	if _, err := Place(ign("master-0"), mRoot); err != nil {
		t.Fatal(err)
	}
	mNet, err := ReadKeyfile(mRoot)
	if err != nil {
		t.Fatal(err)
	}
	if mNet.IP != master0IP {
		t.Fatalf("master-0's keyfile address %s, want %s", mNet.IP, master0IP)
	}
	// api-int resolves to the bootstrap here (no haproxy, no lab DNS in this slice).
	if err := BootStandins(mRoot, mNet, map[string]string{"api-int." + labDomain: bootstrapIP, "api." + labDomain: bootstrapIP}); err != nil {
		t.Fatal(err)
	}
	mNode, err := StartNode("master-0", fmt.Sprintf("lbr%d-m0", seq), mRoot, filepath.Join(logs, "master-0"),
		NodeNet{IP: mNet.IP, Prefix: mNet.Prefix, Gateway: mNet.Gateway, LabNS: labNS, Bridge: "br-lab"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mNode.Stop)
	if err := RunOneshot(ctx, mNode, "kubelet-auto-node-size.service"); err != nil {
		t.Fatal(err)
	}
	kl, err := KubeletFromUnit(mRoot, bins["kubelet"])
	if err != nil {
		t.Fatal(err)
	}
	if err := OverrideKubeletConf(mRoot, kl.Config); err != nil {
		t.Fatal(err)
	}
	pause := filepath.Join(work, "pause.tar")
	if err := PauseTarball(pause, bins["busybox"]); err != nil {
		t.Fatal(err)
	}
	if err := StartRuntime(ctx, mNode, kl.Endpoint, "10.128.0.0/23", pause); err != nil {
		t.Fatal(err)
	}
	if _, err := mNode.Start("kubelet", nil, nil, kl.Argv...); err != nil {
		t.Fatal(err)
	}

	name := "master-0." + labDomain
	expected := map[string]csr.NodeIdentity{name: {Name: name, IPs: []string{master0IP}, DNSNames: []string{"master-0"}}}
	approved := map[string]bool{}
	waitFor(ctx, t, "master-0's CSRs approved and the Node Ready", 8*time.Minute, func() (bool, string) {
		ds, err := csr.Approve(ctx, k.Typed, expected)
		if err != nil {
			return false, err.Error()
		}
		for _, d := range ds {
			if d.Approved {
				approved[d.Signer] = true
			}
		}
		ready, _, err := kube.NodesReady(ctx, k.Typed, []string{name})
		return err == nil && len(ready) == 1, fmt.Sprintf("approved %v, ready %v, err %v", approved, ready, err)
	}, mNode, bNode)

	for _, s := range []string{"kubernetes.io/kube-apiserver-client-kubelet", "kubernetes.io/kubelet-serving"} {
		if !approved[s] {
			t.Errorf("no %s CSR approved for %s (approved: %v)", s, name, approved)
		}
	}
	n, err := k.Typed.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
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
	if _, ok := n.Labels["node-role.kubernetes.io/master"]; !ok {
		t.Errorf("Node %s labels %v: no node-role.kubernetes.io/master (from the kubelet unit's --node-labels)", name, n.Labels)
	}
}

// waitFor polls cond every 2 s until it holds, or fails the test after limit with the last
// status and the tails of the nodes' logs.
func waitFor(ctx context.Context, t *testing.T, what string, limit time.Duration, cond func() (bool, string), nodes ...*Node) {
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
			for _, nd := range nodes {
				ls, _ := filepath.Glob(filepath.Join(nd.LogDir, "*.log"))
				for _, l := range ls {
					b, _ := os.ReadFile(l)
					if len(b) > 3000 {
						b = b[len(b)-3000:]
					}
					t.Logf("--- %s:\n%s", l, b)
				}
			}
			t.Fatalf("%s: not after %s: %s", what, limit, last)
		}
		time.Sleep(2 * time.Second)
	}
}
