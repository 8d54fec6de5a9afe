package targets

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// TestBootstrapCompleteGate is the decision table of when cluster/etcd creates
// kube-system/bootstrap: only when openshift-install's bootstrap would (cluster-bootstrap's
// required pods and, with more than one master, its HA pollers and teardown delay; bootkube
// done; then wait_for_ha_api).
func TestBootstrapCompleteGate(t *testing.T) {
	two := []string{"198.18.0.10", "198.18.0.11"}
	ha := func(g bootstrapGate) bootstrapGate { // three masters whose operators run everywhere
		g.masters = 3
		if g.atRevision == nil {
			g.atRevision = []int{3, 3, 3}
		}
		if g.selfHostedFor == 0 {
			g.selfHostedFor = time.Minute
		}
		return g
	}
	sno := func(g bootstrapGate) bootstrapGate { g.masters = 1; return g }
	tests := []struct {
		name   string
		g      bootstrapGate
		want   bool
		status string // a substring of the status line
	}{
		{"etcd on no master", ha(bootstrapGate{etcdOn: 0, topology: "HighlyAvailable", apiAddrs: two}), false, "etcd Ready on 0/3"},
		{"etcd on two of three", ha(bootstrapGate{etcdOn: 2, topology: "HighlyAvailable", apiAddrs: two}), false, "wait-for-ceo"},
		{"HA, only the bootstrap serves", ha(bootstrapGate{etcdOn: 3, topology: "HighlyAvailable", apiAddrs: []string{"198.18.0.10"}}), false, "want at least 2"},
		{"HA, no endpoints object", ha(bootstrapGate{etcdOn: 3, topology: "HighlyAvailable"}), false, "0 address"},
		{"HA, bootstrap and a master", ha(bootstrapGate{etcdOn: 3, topology: "HighlyAvailable", apiAddrs: two}), true, "API endpoints"},
		{"HA, three masters", ha(bootstrapGate{etcdOn: 3, topology: "HighlyAvailable", apiAddrs: []string{"198.18.0.11", "198.18.0.12", "198.18.0.13"}}), true, ""},
		{"topology not reported yet", ha(bootstrapGate{etcdOn: 3, apiAddrs: two}), false, "controlPlaneTopology"},
		{"single master, one address", sno(bootstrapGate{etcdOn: 1, topology: "SingleReplica", apiAddrs: []string{"198.18.0.10"}}), true, "SingleReplica"},
		{"single master, etcd not yet", sno(bootstrapGate{etcdOn: 0, topology: "SingleReplica", apiAddrs: []string{"198.18.0.10"}}), false, "0/1"},
		{"external topology", ha(bootstrapGate{etcdOn: 3, topology: "External"}), true, "External"},
		// cluster-bootstrap's waits (issue 38 #3): everything else done, each holds alone.
		{"no kube-apiserver on a master", ha(bootstrapGate{podsNotReady: []string{"openshift-kube-apiserver/kube-apiserver"}, etcdOn: 3, topology: "HighlyAvailable", apiAddrs: two}),
			false, "no pod Running and Ready on a master for openshift-kube-apiserver/kube-apiserver"},
		{"none of the four", ha(bootstrapGate{podsNotReady: kube.RequiredPods, etcdOn: 3, topology: "HighlyAvailable", apiAddrs: two}),
			false, "openshift-cluster-version/cluster-version-operator"},
		{"single master without its pods", sno(bootstrapGate{podsNotReady: []string{"openshift-kube-scheduler/openshift-kube-scheduler"}, etcdOn: 1, topology: "SingleReplica", apiAddrs: two}),
			false, "openshift-kube-scheduler"},
		{"HA, kube-apiserver at a revision on one node", ha(bootstrapGate{atRevision: []int{1, 3, 3}, revisionStatus: []string{" kubeapiservers/cluster NodeStatuses: [m0 at Current: 1, Target: 1]"},
			etcdOn: 3, topology: "HighlyAvailable", apiAddrs: two}), false, "kubeapiservers/cluster"},
		{"HA, scheduler on no node", ha(bootstrapGate{atRevision: []int{3, 0, 3}, etcdOn: 3, topology: "HighlyAvailable", apiAddrs: two}), false, "self-hosted control plane on at least two masters"},
		{"HA, operators not read", ha(bootstrapGate{atRevision: []int{}, etcdOn: 3, topology: "HighlyAvailable", apiAddrs: two}), false, "at least two masters"},
		{"HA, available for 10 s", ha(bootstrapGate{selfHostedFor: 10 * time.Second, etcdOn: 3, topology: "HighlyAvailable", apiAddrs: two}), false, "waits 30s"},
		{"single master: no HA pollers, no delay", sno(bootstrapGate{etcdOn: 1, topology: "SingleReplica"}), true, "control plane and CVO running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, st := bootstrapCompleteGate(tt.g)
			if got != tt.want || !strings.Contains(st, tt.status) {
				t.Errorf("bootstrapCompleteGate = %v, %q; want %v and a status with %q", got, st, tt.want, tt.status)
			}
		})
	}
}

// TestBootstrapGateReadsTheCluster: what cluster/etcd reads for cluster-bootstrap's waits, from
// a real kube-apiserver with the static-pod operators' CRDs. With nothing running, every
// required pod is missing and each operator resource is absent, and the gate holds. A pod on
// the bootstrap node, a Running pod not Ready and a Pending one do not count; an operator at a
// revision on one node of three holds the gate; once each required pod runs Ready on a master
// and every operator is at a revision on two nodes, cluster-bootstrap's part is done.
func TestBootstrapGateReadsTheCluster(t *testing.T) {
	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{})
	ac, ak := cp.ClientCert(t, "system:admin", "system:masters")
	cfg := cp.RESTConfig(ac, ak)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	k, err := kube.NewClients(kubedyn.Config(cfg))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	files := clusterOperatorCRDs(t)
	nsFiles, err := manifests.NamespaceFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range nsFiles {
		files[f.Name] = f.Data
	}
	var log strings.Builder
	ap, err := clusterApplier(kubedyn.Config(cfg), &log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ap.ApplyFiles(ctx, files); err != nil {
		t.Fatalf("apply: %v\n%s", err, log.String())
	}
	masters := []string{"master-0.ocp4.example.com", "master-1.ocp4.example.com", "master-2.ocp4.example.com"}
	observe := func() bootstrapGate {
		t.Helper()
		g := bootstrapGate{masters: 3, selfHostedFor: time.Minute, etcdOn: 3, topology: "HighlyAvailable", apiAddrs: []string{"198.18.0.11", "198.18.0.12"}}
		if g.podsNotReady, err = kube.PodsNotReady(ctx, k.Dynamic, kube.RequiredPods, masters); err != nil {
			t.Fatal(err)
		}
		for _, gvr := range kube.StaticPodOperators {
			n, st, err := kube.NodesAtRevision(ctx, k.Dynamic, gvr)
			if err != nil {
				t.Fatal(err)
			}
			g.atRevision, g.revisionStatus = append(g.atRevision, n), append(g.revisionStatus, st)
		}
		return g
	}
	step := func(what string, wantMissing []string, wantSelfHosted bool, wantStatus string) {
		t.Helper()
		g := observe()
		if !slices.Equal(g.podsNotReady, wantMissing) {
			t.Errorf("%s: required pods not ready %v, want %v", what, g.podsNotReady, wantMissing)
		}
		ok, st := bootstrapCompleteGate(g)
		if g.selfHosted() != wantSelfHosted || ok != wantSelfHosted || !strings.Contains(st, wantStatus) {
			t.Errorf("%s: self-hosted %v, gate %v %q; want %v with %q", what, g.selfHosted(), ok, st, wantSelfHosted, wantStatus)
		}
	}
	api, sched, kcm, cvo := kube.RequiredPods[0], kube.RequiredPods[1], kube.RequiredPods[2], kube.RequiredPods[3]
	step("nothing runs", kube.RequiredPods, false, "no pod Running and Ready on a master")

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(clusterRequiredPod(ctx, cs, api, masters[0], "", true))
	must(clusterRequiredPod(ctx, cs, sched, masters[0], "", false))                // Running, not Ready
	must(clusterRequiredPod(ctx, cs, kcm, "bootstrap.ocp4.example.com", "", true)) // not a master
	must(clusterRequiredPod(ctx, cs, cvo, masters[1], corev1.PodPending, true))
	step("kube-apiserver only", []string{sched, kcm, cvo}, false, sched)

	must(clusterRequiredPod(ctx, cs, sched, masters[0], "", true))
	must(clusterRequiredPod(ctx, cs, kcm, masters[2], "", true))
	must(clusterRequiredPod(ctx, cs, cvo, masters[1], "", true))
	step("every pod, no operator status", nil, false, "kubeapiservers/cluster does not exist")

	for _, gvr := range kube.StaticPodOperators {
		must(clusterNodeStatuses(ctx, k.Dynamic, gvr, map[string]int64{masters[0]: 1, masters[1]: 0, masters[2]: 0}))
	}
	step("operators at a revision on one node", nil, false, "[master-0.ocp4.example.com at Current: 1, Target: 0]")

	for _, gvr := range kube.StaticPodOperators {
		must(clusterNodeStatuses(ctx, k.Dynamic, gvr, map[string]int64{masters[0]: 1, masters[1]: 2, masters[2]: 0}))
	}
	step("operators at a revision on two nodes", nil, true, "bootstrap complete")
}
