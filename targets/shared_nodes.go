package targets

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/kube"
)

// Shared by the cluster family and the libvirt family: a node as the cluster and the lab
// network know it (its Node name, its MAC), and the drain through the Kubernetes API that
// both a removed node (cluster/install's orphan) and a --restart of a resized VM
// (libvirt/vm) go through.

// adminKubeconfig is the admin kubeconfig's target (the kubeconfig family's), through which
// the cluster family's phases and the node drains reach the API.
const adminKubeconfig = "kubeconfig/admin"

// clusterDrainWait bounds how long a drain waits for evicted pods to be gone, and
// clusterDrainPoll is how often it looks. oc adm drain waits without bound by default; a
// lab's pods stop within their 30 s grace period, so two minutes is ample. Tests shorten both.
var clusterDrainWait, clusterDrainPoll = 2 * time.Minute, 2 * time.Second

// clusterNodeClient returns a dynamic client for the admin kubeconfig (upstream
// kubeconfig/admin) through the API VIP, or nil and why the cluster cannot be asked.
func clusterNodeClient(s *engine.Step) (kube.Interface, string) {
	kc, err := s.DepPath(adminKubeconfig, "kubeconfig")
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

// clusterNodeName is the Kubernetes node name of a lab node: the FQDN its Ignition writes to
// /etc/hostname (render/ignition NodeBase), which the kubelet registers as.
func clusterNodeName(node, domain string) string { return node + "." + domain }

// clusterNodeNameOf is the Node name n of c registers as: clusterNodeName, but for a host
// Metal3 provisions (clusterMetal3Node) the short name. Such a host boots the MCO's pointer
// config (MCO release-4.18 pkg/controller/common/helpers.go PointerConfig: only the merge
// source and its CA), which writes no /etc/hostname, so its kernel host name is what DHCP
// gives it: the lab network's host entry, the node's short name (render/libvirt Network,
// NetworkDHCPHost Name). Issue 38 #5.
func clusterNodeNameOf(c *lab.Config, n lab.Node, domain string) string {
	if clusterMetal3Node(c, n) {
		return n.Name
	}
	return clusterNodeName(n.Name, domain)
}

// nodeMAC returns the node's configured MAC, or the one derived from cluster and node names.
func nodeMAC(s *engine.Step, cluster, node string) (string, error) {
	if p := lab.NodePath(node, lab.NodeMAC); slices.Contains(s.Target().Reads, p) {
		return s.String(p)
	}
	return rl.MAC(cluster, node), nil
}
