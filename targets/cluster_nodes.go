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

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/targets/kube"
)

// clusterNodeOrphan is the orphan of cluster/install/<node> once node is no longer in nodes:
// its Destroy drains the node and deletes its Node object, before the libvirt orphans remove
// its VM and disk (Config.Orphans orders them).
func clusterNodeOrphan(name string) *engine.Target {
	return &engine.Target{Name: name, External: true, Deps: []string{adminKubeconfig}, Reads: clusterReads,
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
