package targets

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// TestEarlyBootstrapSignalLosesAPI shows, on real programs, why cluster/etcd must not write
// kube-system/bootstrap early (issue 24). Real etcd runs the bootstrap's member and a master's
// member joined to it; the real kube-apiserver runs with the bootstrap static pod's flags, whose
// --etcd-servers names only the bootstrap's member. The early signal is written and the
// bootstrap member removed, as the cluster-etcd-operator's BootstrapTeardownController does on
// seeing it: the bootstrap's API then loses its storage (/readyz fails on etcd, writes fail)
// while the cluster's data lives on in the master's member. At that moment the gate
// (bootstrapCompleteGate) fed with the same cluster's real default/kubernetes Endpoints (at most
// the bootstrap's own address: no second kube-apiserver serves) says to wait, so the fixed
// cluster/etcd would not have written it.
func TestEarlyBootstrapSignalLosesAPI(t *testing.T) {
	testenv.Require(t, "kube-apiserver")
	etcdBin := testenv.Require(t, "etcd")
	etcdctl := testenv.Require(t, "etcdctl")
	l := newMFLab(t)
	l.now = time.Now()
	l.build("manifests", "pki", "kubeconfig")
	ca := l.path("pki/ca/etcd-signer", "tls.crt")
	srvCrt, srvKey := l.path("pki/cert/etcd-server", "tls.crt"), l.path("pki/key/etcd-server", "tls.key")
	peerCrt, peerKey := l.path("pki/cert/etcd-peer", "tls.crt"), l.path("pki/key/etcd-peer", "tls.key")
	cliCrt, cliKey := l.path("pki/cert/etcd-client", "tls.crt"), l.path("pki/key/etcd-client", "tls.key")
	tlsArgs := []string{"--cert-file", srvCrt, "--key-file", srvKey, "--trusted-ca-file", ca, "--client-cert-auth",
		"--peer-cert-file", peerCrt, "--peer-key-file", peerKey, "--peer-trusted-ca-file", ca, "--peer-client-cert-auth"}
	ctl := func(endpoint string, args ...string) (string, error) {
		cmd := exec.Command(etcdctl, append([]string{"--endpoints=" + endpoint, "--cacert=" + ca, "--cert=" + cliCrt, "--key=" + cliKey,
			"--command-timeout=10s"}, args...)...)
		cmd.Env = []string{"ETCDCTL_API=3"}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	// The bootstrap's member, then a master's member joined to it (as the operator scales etcd).
	bc, bp := "https://127.0.0.1:"+testenv.FreePort(t), "https://127.0.0.1:"+testenv.FreePort(t)
	testenv.StartProcess(t, "etcd-bootstrap", etcdBin, append([]string{"--name", "etcd-bootstrap", "--data-dir", t.TempDir(),
		"--listen-client-urls", bc, "--advertise-client-urls", bc, "--listen-peer-urls", bp, "--initial-advertise-peer-urls", bp,
		"--initial-cluster", "etcd-bootstrap=" + bp, "--initial-cluster-state", "new"}, tlsArgs...)...)
	testenv.WaitFor(t, "bootstrap etcd", 30*time.Second, func() error { _, err := ctl(bc, "endpoint", "health"); return err })
	mc, mp := "https://127.0.0.1:"+testenv.FreePort(t), "https://127.0.0.1:"+testenv.FreePort(t)
	if out, err := ctl(bc, "member", "add", "master-0", "--peer-urls="+mp); err != nil {
		t.Fatalf("member add: %v: %s", err, out)
	}
	testenv.StartProcess(t, "etcd-master-0", etcdBin, append([]string{"--name", "master-0", "--data-dir", t.TempDir(),
		"--listen-client-urls", mc, "--advertise-client-urls", mc, "--listen-peer-urls", mp, "--initial-advertise-peer-urls", mp,
		"--initial-cluster", "etcd-bootstrap=" + bp + ",master-0=" + mp, "--initial-cluster-state", "existing"}, tlsArgs...)...)
	testenv.WaitFor(t, "master-0's etcd member", 60*time.Second, func() error { _, err := ctl(mc, "endpoint", "health"); return err })

	// The bootstrap kube-apiserver, on the bootstrap's member only.
	args := mfPodArgs(t, l, "manifests/bootstrap", "static-pods/"+manifests.KubeAPIServerPodFile, "kube-apiserver")
	for i, a := range args {
		if strings.HasPrefix(a, "--etcd-servers=") {
			args[i] = "--etcd-servers=" + bc
		}
	}
	adminCfg := mfRestConfig(t, l.path("kubeconfig/admin", "kubeconfig"))
	testenv.StartKubeAPIServer(t, args, adminCfg)
	cs, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// What the fixed cluster/etcd reads now: no API address besides the bootstrap's. Even with
	// etcd on every master, a HighlyAvailable control plane waits.
	kc, err := kube.NewClients(kubedyn.Config(adminCfg))
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := kube.APIAddresses(ctx, kc.Dynamic)
	if err != nil {
		t.Fatal(err)
	}
	// The masters' control plane runs nowhere in this cluster: the required pods alone hold
	// the gate (issue 38 #3); with them taken as Running and Ready on every master and the
	// operators at a revision everywhere, the API addresses still do.
	notReady, err := kube.PodsNotReady(ctx, kc.Dynamic, kube.RequiredPods, []string{"master-0", "master-1", "master-2"})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []bootstrapGate{
		{masters: 3, podsNotReady: notReady, atRevision: []int{3, 3, 3}, selfHostedFor: time.Minute, etcdOn: 3, topology: "HighlyAvailable", apiAddrs: addrs},
		{masters: 3, atRevision: []int{3, 3, 3}, selfHostedFor: time.Minute, etcdOn: 3, topology: "HighlyAvailable", apiAddrs: addrs},
	} {
		if ok, st := bootstrapCompleteGate(g); ok {
			t.Fatalf("the gate would mark bootstrap complete with required pods not ready %v, API addresses %v: %s", g.podsNotReady, addrs, st)
		} else {
			t.Logf("the fixed cluster/etcd waits: %s", st)
		}
	}

	// The early signal, and the operator's answer to it: the bootstrap member goes.
	if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap"},
		Data: map[string]string{"status": "complete"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := ctl(mc, "member", "list")
	if err != nil {
		t.Fatalf("member list: %v: %s", err, out)
	}
	var id string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Split(line, ", "); len(f) > 2 && f[2] == "etcd-bootstrap" {
			id = f[0]
		}
	}
	if id == "" {
		t.Fatalf("no etcd-bootstrap in %s", out)
	}
	// etcd refuses a removal until the remaining members have been connected to a quorum for
	// its health interval (etcdserver mayRemoveMember: "unhealthy cluster", 5 s after the
	// master member joined); the operator's BootstrapTeardownController retries, and so does this.
	testenv.WaitFor(t, "etcd to accept removing etcd-bootstrap", 30*time.Second, func() error {
		if out, err := ctl(mc, "member", "remove", id); err != nil {
			return fmt.Errorf("member remove etcd-bootstrap: %v: %s", err, out)
		}
		return nil
	})

	// The bootstrap API has lost its storage.
	testenv.WaitFor(t, "the bootstrap kube-apiserver to lose etcd", 60*time.Second, func() error {
		body, err := cs.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil {
			return fmt.Errorf("/readyz still ok: %s", body)
		}
		return nil
	})
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().ConfigMaps("default").Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-teardown"}}, metav1.CreateOptions{}); err == nil {
		t.Error("the bootstrap kube-apiserver still writes after its etcd member was removed")
	}
	// The cluster's data lives on in the master's member, out of the bootstrap API's reach.
	if out, err := ctl(mc, "get", "/registry/configmaps/kube-system/bootstrap", "--keys-only"); err != nil || !strings.Contains(out, "bootstrap") {
		t.Errorf("master-0's member lacks the cluster's data: %v %s", err, out)
	}
}
