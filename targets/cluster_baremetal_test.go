package targets

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
	"github.com/labbuild/labbuild/targets/wait"
)

// TestClusterBaremetalWorkers: on platform baremetal the workers are Metal3's. labbuild
// declares no cluster/install/<worker> (nothing of labbuild starts them); cluster/workers needs
// bmc/service, the workers' (empty) domains and their Ignition instead and reads the platform; the masters and the bootstrap are installed as on
// the other platforms. Platform none keeps a cluster/install per node.
func TestClusterBaremetalWorkers(t *testing.T) {
	for _, tc := range []struct {
		platform    string
		wantWorkers []string
		wantInstall []string
	}{
		{lab.PlatformBaremetal, []string{"bmc/service", "cluster/pivot", "ignition/worker-0", "ignition/worker-1", "kubeconfig/admin", "libvirt/vm/worker-0", "libvirt/vm/worker-1"},
			[]string{"cluster/install/bootstrap", "cluster/install/master-0", "cluster/install/master-1", "cluster/install/master-2"}},
		{"", []string{"cluster/install/worker-0", "cluster/install/worker-1", "cluster/pivot", "kubeconfig/admin"},
			[]string{"cluster/install/bootstrap", "cluster/install/master-0", "cluster/install/master-1", "cluster/install/master-2", "cluster/install/worker-0", "cluster/install/worker-1"}},
	} {
		c := clusterConfig(3, 2)
		c.Platform = tc.platform
		ts := clusterTargets(c, func(n string) bool {
			return n == "bmc/service" || n == adminKubeconfig || strings.HasPrefix(n, "libvirt/vm/worker-") || strings.HasPrefix(n, "ignition/worker-")
		})
		var install []string
		for _, x := range ts {
			if strings.HasPrefix(x.Name, "cluster/install/") {
				install = append(install, x.Name)
			}
			if x.Name != "cluster/workers" {
				continue
			}
			deps := slices.Clone(x.Deps)
			slices.Sort(deps)
			if !slices.Equal(deps, tc.wantWorkers) {
				t.Errorf("platform %q: cluster/workers deps %v, want %v", tc.platform, deps, tc.wantWorkers)
			}
			if got := slices.Contains(x.Reads, "platform"); got != (tc.platform == lab.PlatformBaremetal) {
				t.Errorf("platform %q: cluster/workers reads platform: %v", tc.platform, got)
			}
			if tc.platform == lab.PlatformBaremetal && !strings.Contains(x.Doc, "Metal3") {
				t.Errorf("platform %q: cluster/workers doc %q does not say Metal3 provisions the workers", tc.platform, x.Doc)
			}
		}
		slices.Sort(install)
		if !slices.Equal(install, tc.wantInstall) {
			t.Errorf("platform %q: install targets %v, want %v", tc.platform, install, tc.wantInstall)
		}
	}
}

// TestLvNotBMCOwned: on platform baremetal the BMC's CD-ROM and boot order are not drift of
// libvirt/vm/<node> (a rerun must not replace a host Metal3 is provisioning); a changed NIC or
// RHCOS disk still is, and off that platform everything counts.
func TestLvNotBMCOwned(t *testing.T) {
	diff := []string{
		`boot: want "hd", got "cdrom,hd"`,
		"disk: unexpected cdrom sda/sata /pool/rehearsal-bmc/boot-worker-0.iso",
		"disk: unexpected cdrom sda/sata ",
		"nic: missing 52:54:00:aa:bb:cc network lab virtio",
		"disk: unexpected disk vdb/virtio /pool/extra.qcow2",
	}
	if got, want := lvNotBMCOwned(diff, true), diff[3:]; !slices.Equal(got, want) {
		t.Errorf("baremetal: %q, want %q", got, want)
	}
	if got := lvNotBMCOwned(diff, false); !slices.Equal(got, diff) {
		t.Errorf("other platforms: %q, want all of it", got)
	}
	if lvNotBMCOwned(diff[:3], true) != nil {
		t.Errorf("the BMC's changes alone are still a diff")
	}
}

// TestClusterMetal3WorkerJoins: on platform baremetal cluster/workers against a real
// kube-apiserver and kube-controller-manager (the CSR signer) with the Machine CRD, a worker
// booted as Metal3 boots it: from the MCO's pointer config, so its kubelet registers under the
// DHCP short name worker-0 and bootstraps as the node-bootstrapper service account (the
// installer's kubelet client certificate identity, as the in-cluster machine-config-server's
// token is). While its Machine carries no inspected addresses the wait times out with the
// client CSR left pending, as the cluster-machine-approver leaves it; once the Machine has
// worker-0 as InternalDNS (the baremetal actuator's copy of the inspected host name),
// cluster/workers approves the client CSR, the node link sets the Machine's nodeRef, the
// serving CSR is approved within the Machine's addresses, and worker-0 is Ready.
func TestClusterMetal3WorkerJoins(t *testing.T) {
	const domain = "ocp4.example.com"
	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{ControllerManager: true, ServerNames: []string{"api." + domain}})
	ac, ak := cp.ClientCert(t, "system:admin", "system:masters")
	adminCfg := cp.RESTConfig(ac, ak)
	adminKC, err := os.ReadFile(cp.Kubeconfig(t, "admin", "https://api."+domain+":6443", ac, ak))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := kube.NewClients(kubedyn.Config(adminCfg))
	if err != nil {
		t.Fatal(err)
	}
	adminCS, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		t.Fatal(err)
	}
	crd, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_machines-Default.crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var alog strings.Builder
	ap, err := clusterApplier(kubedyn.Config(adminCfg), &alog)
	if err != nil {
		t.Fatal(err)
	}
	// The Machine CRD, its namespace, and the MCO's csr-bootstrap-role-binding.yaml
	// (ClusterRoleBinding system-bootstrap-node-bootstrapper: the node-bootstrapper service
	// account may create CSRs).
	if _, err := ap.ApplyFiles(ctx, map[string][]byte{
		"0-crd.yaml": mfFor130(t, crd),
		"1-ns.yaml":  []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: openshift-machine-api\n"),
		"2-crb.yaml": []byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: system-bootstrap-node-bootstrapper\n" +
			"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: system:node-bootstrapper\n" +
			"subjects:\n- kind: ServiceAccount\n  name: node-bootstrapper\n  namespace: openshift-machine-config-operator\n"),
	}); err != nil {
		t.Fatalf("apply: %v\n%s", err, alog.String())
	}
	machines := admin.Dynamic.Resource(kube.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machines"}).Namespace("openshift-machine-api")
	m := &kube.Unstructured{Object: map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
		"metadata": map[string]any{"name": "ocp4-worker-0-x7k2p", "namespace": "openshift-machine-api"}, "spec": map[string]any{}}}
	if _, err := machines.Create(ctx, m, kube.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setStatus := func(status map[string]any) {
		t.Helper()
		if _, err := kube.PatchStatus(ctx, machines, "machine.openshift.io/v1beta1", "Machine", "ocp4-worker-0-x7k2p", status); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(map[string]any{"phase": "Provisioning"}) // not inspected yet: no addresses

	c := clusterConfig(1, 1)
	c.Platform, c.Network.LoadBalancer = lab.PlatformBaremetal, lab.LoadBalancerInCluster
	c.Wait.WorkersMinutes = 1
	old := clusterEnv
	t.Cleanup(func() { clusterEnv = old })
	clusterEnv = clusterWorld{
		clock:    wait.NewFakeClock(time.Unix(1e9, 0)),
		interval: func(d time.Duration) time.Duration { return d },
		restConfig: func(kc, vip string) (*kube.RESTConfig, error) {
			return kube.Config(kc, cp.Addr)
		},
		machines: func(uri, cluster string) ClusterMachines { return newFakeMachines(c) },
	}
	var ts []*engine.Target
	for _, x := range clusterTargets(c, func(n string) bool { return n == adminKubeconfig }) {
		if x.Name == "cluster/workers" {
			ts = append(ts, x)
		}
	}
	ts = append(ts, clusterStandinFile(adminKubeconfig, "kubeconfig", string(adminKC)), clusterStandinFile("cluster/pivot", "record.json", "{}"))
	out := t.TempDir()
	var stderr strings.Builder
	build := func() error {
		stderr.Reset()
		_, err := engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"cluster/workers"}, Targets: ts, Jobs: 1, Now: time.Now, Stderr: &stderr})
		return err
	}

	// worker-0 boots from the pointer config: DHCP name, node-bootstrapper identity.
	sa := "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper"
	bc, bk := cp.ClientCert(t, sa, "system:serviceaccounts:openshift-machine-config-operator", "system:serviceaccounts")
	on := make(chan struct{})
	close(on)
	joined := make(chan error, 1)
	go func() {
		joined <- clusterKubelet(ctx, cp, cp.RESTConfig(bc, bk), on, on, "worker-0", "worker-0", "192.168.126.110")
	}()
	// The node link (machine-api nodelink controller): the Node becomes the Machine's nodeRef.
	go func() {
		clusterWaitReal(ctx, func() (bool, error) {
			n, err := adminCS.CoreV1().Nodes().Get(ctx, "worker-0", metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			// A merge patch, as the nodelink controller's own update keeps the addresses.
			patch := `{"status":{"nodeRef":{"kind":"Node","name":"` + n.Name + `","uid":"` + string(n.UID) + `"}}}`
			_, err = machines.Patch(ctx, "ocp4-worker-0-x7k2p", kube.MergePatchType, []byte(patch), kube.PatchOptions{FieldManager: "nodelink-controller"}, "status")
			return err == nil, err
		})
	}()

	// 1. The Machine not inspected: the approver has nothing to match the name with.
	if err := clusterWaitReal(ctx, func() (bool, error) {
		list, err := adminCS.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) > 0, err
	}); err != nil {
		t.Fatal(err)
	}
	if err := build(); err == nil {
		t.Fatal("cluster/workers succeeded with a Machine that has no InternalDNS")
	}
	log := clusterLog(t, out, "cluster/workers")
	for _, want := range []string{"0/1 worker nodes Ready (waiting: worker-0)", "no Machine in openshift-machine-api has InternalDNS worker-0"} {
		if !strings.Contains(log, want) {
			t.Errorf("timed-out cluster/workers' log lacks %q:\n%s", want, log)
		}
	}

	// 2. Inspected: the actuator copies the host's NIC address and host name.
	setStatus(map[string]any{"phase": "Provisioned", "addresses": []any{
		map[string]any{"type": "InternalIP", "address": "192.168.126.110"},
		map[string]any{"type": "Hostname", "address": "worker-0"},
		map[string]any{"type": "InternalDNS", "address": "worker-0"},
	}})
	clusterEnv.clock = wait.RealClock{}
	clusterEnv.interval = func(d time.Duration) time.Duration { return d / 50 }
	if err := build(); err != nil {
		t.Fatalf("cluster/workers: %v\n%s\n%s", err, stderr.String(), clusterLog(t, out, "cluster/workers"))
	}
	if err := <-joined; err != nil {
		t.Fatal(err)
	}
	log = clusterLog(t, out, "cluster/workers")
	for _, want := range []string{"authorizeNodeClientCSR", "authorizeServingCertWithMachine"} {
		if !strings.Contains(log, want) {
			t.Errorf("cluster/workers' log lacks an approval by %s:\n%s", want, log)
		}
	}
	if ready, _, err := kube.NodesReady(ctx, admin.Dynamic, []string{"worker-0"}); err != nil || len(ready) != 1 {
		t.Errorf("worker-0 Ready: %v %v", ready, err)
	}
}
