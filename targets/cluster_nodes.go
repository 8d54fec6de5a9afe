package targets

// Live node changes through the Kubernetes API: a node removed from nodes: is drained and its
// Node object deleted before its VM goes (the orphan of cluster/install/<node>), and
// `labbuild --restart` drains a resized, running node before power-cycling it
// (libvirt/vm/<node>). Both say what they could not do: an unreachable API, pods a
// PodDisruptionBudget keeps, DaemonSet and static pods left in place.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/kube"
)

// clusterDrainWait bounds how long a drain waits for evicted pods to be gone, and
// clusterDrainPoll is how often it looks. oc adm drain waits without bound by default; a
// lab's pods stop within their 30 s grace period, so two minutes is ample. Tests shorten both.
var clusterDrainWait, clusterDrainPoll = 2 * time.Minute, 2 * time.Second

// clusterNodeClient returns a dynamic client for the admin kubeconfig (upstream
// kubeconfig/admin) through the API VIP, or nil and why the cluster cannot be asked.
func clusterNodeClient(s *engine.Step) (kube.Interface, string) {
	kc, err := s.DepPath(clusterAdminKC, "kubeconfig")
	if err != nil {
		return nil, "no admin kubeconfig is recorded"
	}
	vip, err := s.String(lab.NetworkAPIVIP)
	if err != nil {
		return nil, err.Error()
	}
	cfg, err := clusterEnv.restConfig(kc, vip)
	if err != nil {
		return nil, err.Error()
	}
	k, err := kube.NewClients(cfg)
	if err != nil {
		return nil, err.Error()
	}
	return k.Dynamic, ""
}

// clusterEvacuate cordons Node fqdn and drains it (kube.Drain), logging what it did and what it
// could not. reachable is false (with the reason logged) when the API does not answer; found
// is false when the cluster has no such Node.
func clusterEvacuate(ctx context.Context, logf func(string, ...any), dyn kube.Interface, fqdn string) (reachable, found bool, err error) {
	found, err = kube.Cordon(ctx, dyn, fqdn)
	if err != nil {
		logf("cannot reach the cluster API to drain %s: %v", fqdn, err)
		return false, false, nil
	}
	if !found {
		logf("the cluster has no Node %s: nothing to drain", fqdn)
		return true, false, nil
	}
	rep, err := kube.Drain(ctx, dyn, fqdn, clusterDrainWait, clusterDrainPoll)
	if err != nil {
		return true, true, fmt.Errorf("drain %s: %w", fqdn, err)
	}
	logf("cordoned and drained %s: %s", fqdn, rep)
	if !rep.Drained() {
		logf("%s is not fully drained (see above); the pods left stop with its VM", fqdn)
	}
	return true, true, nil
}

// clusterNodeOrphan is the orphan of cluster/install/<node> once node is no longer in nodes:
// its Destroy drains the node and deletes its Node object, before the libvirt orphans remove
// its VM and disk (Config.Orphans orders them).
func clusterNodeOrphan(name string) *engine.Target {
	return &engine.Target{Name: name, External: true, Deps: []string{clusterAdminKC}, Reads: clusterReads,
		Run: lvNoRun, Destroy: clusterRemoveNode}
}

// clusterRemoveNode drains and deletes the Node object of a removed node. An API that does not
// answer is said, with the commands to run later, and the record goes: the VM is removed
// anyway. A failing drain or delete on an answering API is an error, so the record stays and
// the next `labbuild cluster` tries again.
func clusterRemoveNode(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
	node := strings.TrimPrefix(s.Target().Name, "cluster/install/")
	domain, err := clusterDomain(s)
	if err != nil {
		return 0, err
	}
	dyn, why := clusterNodeClient(s)
	return clusterRemoveNodeWith(ctx, s.Logf, dyn, why, clusterNodeName(node, domain))
}

// clusterRemoveNodeWith is clusterRemoveNode for Node fqdn through dyn (nil: the cluster
// cannot be asked, for reason why).
func clusterRemoveNodeWith(ctx context.Context, logf func(string, ...any), dyn kube.Interface, why, fqdn string) (engine.DestroyOutcome, error) {
	later := fmt.Sprintf("once the API answers: oc adm drain %s --ignore-daemonsets --delete-emptydir-data; oc delete node %s", fqdn, fqdn)
	if dyn == nil {
		logf("cannot ask the cluster (%s): Node %s not drained and not deleted; %s", why, fqdn, later)
		return engine.RecordOnly, nil
	}
	reachable, found, err := clusterEvacuate(ctx, logf, dyn, fqdn)
	switch {
	case err != nil:
		return 0, err
	case !reachable:
		logf("Node %s not drained and not deleted; %s", fqdn, later)
		return engine.RecordOnly, nil
	case !found:
		return engine.AlreadyAbsent, nil
	}
	existed, err := kube.DeleteNode(ctx, dyn, fqdn)
	if err != nil {
		return 0, err
	}
	if !existed {
		return engine.AlreadyAbsent, nil
	}
	logf("deleted Node %s", fqdn)
	return engine.Destroyed, nil
}
