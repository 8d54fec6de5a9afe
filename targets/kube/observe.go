package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The OpenShift config API resources the waits read (openshift/api config/v1, CRDs
// 0000_00_cluster-version-operator_01_clusteroperators.crd.yaml and ..._clusterversions...).
var (
	ClusterOperators = GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusteroperators"}
	ClusterVersions  = GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}
)

// The kube-system/bootstrap ConfigMap: openshift-install's report-progress.sh creates it with
// data.status "complete" once bootkube is done, and the cluster-etcd-operator removes the
// etcd-bootstrap member only after it sees it (library-go pkg/operator/bootstrap
// IsBootstrapComplete).
const (
	BootstrapNamespace = "kube-system"
	BootstrapConfigMap = "bootstrap"
)

// EtcdNamespace and EtcdPodLabel select the etcd static pods the cluster-etcd-operator runs on
// the masters (`oc get pods -n openshift-etcd -l app=etcd`).
const (
	EtcdNamespace = "openshift-etcd"
	EtcdPodLabel  = "app=etcd"
)

// NodeReady reports whether n has condition Ready=True (what `oc get nodes` prints as Ready).
func NodeReady(n *Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// NodesReady lists the nodes and splits names into those Ready and those not (absent or not
// Ready), both sorted.
func NodesReady(ctx context.Context, dyn Interface, names []string) (ready, notReady []string, err error) {
	list, err := List[Node](ctx, dyn, Nodes, "", "")
	if err != nil {
		return nil, nil, err
	}
	ok := map[string]bool{}
	for i := range list {
		ok[list[i].Name] = NodeReady(&list[i])
	}
	for _, n := range names {
		if ok[n] {
			ready = append(ready, n)
		} else {
			notReady = append(notReady, n)
		}
	}
	sort.Strings(ready)
	sort.Strings(notReady)
	return ready, notReady, nil
}

// EtcdOn returns the nodes among names on which an etcd pod (namespace EtcdNamespace, label
// EtcdPodLabel) is Running with condition Ready=True, sorted.
func EtcdOn(ctx context.Context, dyn Interface, names []string) ([]string, error) {
	pods, err := List[Pod](ctx, dyn, Pods, EtcdNamespace, EtcdPodLabel)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods {
		if p.Status.Phase != "Running" || !slices.Contains(names, p.Spec.NodeName) || slices.Contains(out, p.Spec.NodeName) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				out = append(out, p.Spec.NodeName)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// BootstrapComplete reports whether ConfigMap kube-system/bootstrap has data.status
// "complete".
func BootstrapComplete(ctx context.Context, dyn Interface) (bool, error) {
	cm, err := Get[ConfigMap](ctx, dyn, ConfigMaps, BootstrapNamespace, BootstrapConfigMap)
	if IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get configmap %s/%s: %w", BootstrapNamespace, BootstrapConfigMap, err)
	}
	return cm.Data["status"] == "complete", nil
}

// MarkBootstrapComplete server-side-applies ConfigMap kube-system/bootstrap with data.status
// "complete" (idempotent), as openshift-install's report-progress.sh does at the end of
// bootkube.
func MarkBootstrapComplete(ctx context.Context, dyn Interface) error {
	cm := &Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": BootstrapConfigMap, "namespace": BootstrapNamespace},
		"data":     map[string]any{"status": "complete"}}}
	_, err := dyn.Resource(ConfigMaps).Namespace(BootstrapNamespace).Apply(ctx, BootstrapConfigMap, cm, ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("apply configmap %s/%s: %w", BootstrapNamespace, BootstrapConfigMap, err)
	}
	return nil
}

// Infrastructures and Endpoints are the resources the installer's wait-for-ha-api.sh reads
// before it reports bootstrap complete.
var (
	Infrastructures = GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "infrastructures"}
	Endpoints       = GroupVersionResource{Version: "v1", Resource: "endpoints"}
)

// ControlPlaneTopology returns Infrastructure cluster's status.controlPlaneTopology
// (HighlyAvailable, SingleReplica, ...; "" when unset), as is_topology_ha in the installer's
// data/data/bootstrap/files/usr/local/bin/wait-for-ha-api.sh reads it.
func ControlPlaneTopology(ctx context.Context, dyn Interface) (string, error) {
	o, err := dyn.Resource(Infrastructures).Get(ctx, "cluster", GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get infrastructure cluster: %w", err)
	}
	t, _, _ := NestedString(o.Object, "status", "controlPlaneTopology")
	return t, nil
}

// APIAddresses returns the addresses of the default/kubernetes Endpoints (every subset's
// addresses: each kube-apiserver that serves registers its own), as is_api_available in
// wait-for-ha-api.sh counts them. A missing Endpoints object is no addresses.
func APIAddresses(ctx context.Context, dyn Interface) ([]string, error) {
	o, err := dyn.Resource(Endpoints).Namespace("default").Get(ctx, "kubernetes", GetOptions{})
	if IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get endpoints default/kubernetes: %w", err)
	}
	var out []string
	subsets, _, _ := NestedSlice(o.Object, "subsets")
	for _, ss := range subsets {
		m, _ := ss.(map[string]any)
		addrs, _, _ := NestedSlice(m, "addresses")
		for _, a := range addrs {
			am, _ := a.(map[string]any)
			if ip, _, _ := NestedString(am, "ip"); ip != "" && !slices.Contains(out, ip) {
				out = append(out, ip)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// CVOProgress reports whether the cluster-version-operator has started reporting: the
// ClusterVersion "version" exists and has a Progressing, Available or Failing condition
// (the CVO writes them on its first sync; the installer's ClusterVersion has no status).
// status is a one-line summary, such as `Progressing=True: Working towards 4.18.0`.
func CVOProgress(ctx context.Context, dyn Interface) (done bool, status string, err error) {
	cv, err := dyn.Resource(ClusterVersions).Get(ctx, "version", GetOptions{})
	if IsNotFound(err) {
		return false, "no ClusterVersion version yet", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("get clusterversion version: %w", err)
	}
	for _, typ := range []string{"Progressing", "Available", "Failing"} {
		if s := Condition(cv, typ); s != "" {
			return true, typ + "=" + s + conditionMessage(cv.Object, typ), nil
		}
	}
	return false, "ClusterVersion version has no conditions yet (the CVO has not synced)", nil
}

func conditionMessage(o map[string]any, typ string) string {
	st, _ := o["status"].(map[string]any)
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			if msg, _ := m["message"].(string); msg != "" {
				if len(msg) > 120 {
					msg = msg[:120] + "…"
				}
				return ": " + msg
			}
		}
	}
	return ""
}

// Convergence is what the ClusterOperators and the ClusterVersion say, counted the way
// OTHW's wait-convergence.sh counts (spec stage 13), with its defect fixed: zero operators is
// not convergence.
type Convergence struct {
	Total       int
	Available   int      // operators with Available=True
	Degraded    []string // operators with Degraded=True, sorted
	Progressing []string // operators with Progressing=True, sorted
	Unavailable []string // operators without Available=True, sorted
	// Version is the ClusterVersion's Available condition status ("" when absent).
	Version string
}

// Done reports convergence: at least one ClusterOperator, every one Available and none
// Degraded, and ClusterVersion Available=True. Progressing operators are reported but do not
// hold it up (openshift-install's wait-for install-complete waits on ClusterVersion
// Available, which the CVO sets once every operator reached its level).
func (c Convergence) Done() bool {
	return c.Total > 0 && c.Available == c.Total && len(c.Degraded) == 0 && c.Version == "True"
}

// String is the one-line status a wait shows.
func (c Convergence) String() string {
	s := fmt.Sprintf("%d/%d ClusterOperators Available", c.Available, c.Total)
	if len(c.Unavailable) > 0 {
		s += " (waiting: " + short(c.Unavailable) + ")"
	}
	if len(c.Degraded) > 0 {
		s += "; Degraded: " + short(c.Degraded)
	}
	if len(c.Progressing) > 0 {
		s += fmt.Sprintf("; %d Progressing", len(c.Progressing))
	}
	v := c.Version
	if v == "" {
		v = "unknown"
	}
	return s + "; ClusterVersion Available=" + v
}

func short(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// Converged reads every ClusterOperator and the ClusterVersion "version".
func Converged(ctx context.Context, dyn Interface) (Convergence, error) {
	var c Convergence
	list, err := dyn.Resource(ClusterOperators).List(ctx, ListOptions{})
	if err != nil {
		return c, fmt.Errorf("list clusteroperators: %w", err)
	}
	for i := range list.Items {
		o := &list.Items[i]
		c.Total++
		if Condition(o, "Available") == "True" {
			c.Available++
		} else {
			c.Unavailable = append(c.Unavailable, o.GetName())
		}
		if Condition(o, "Degraded") == "True" {
			c.Degraded = append(c.Degraded, o.GetName())
		}
		if Condition(o, "Progressing") == "True" {
			c.Progressing = append(c.Progressing, o.GetName())
		}
	}
	sort.Strings(c.Unavailable)
	sort.Strings(c.Degraded)
	sort.Strings(c.Progressing)
	cv, err := dyn.Resource(ClusterVersions).Get(ctx, "version", GetOptions{})
	switch {
	case err == nil:
		c.Version = Condition(cv, "Available")
	case !IsNotFound(err):
		return c, fmt.Errorf("get clusterversion version: %w", err)
	}
	return c, nil
}

// RequiredPods are the pods the installer's bootkube.sh passes to `cluster-bootstrap start
// --required-pods` (data/data/bootstrap/files/usr/local/bin/bootkube.sh.template
// REQUIRED_PODS), each "<namespace>/<pod name prefix>": the masters' kube-apiserver,
// kube-scheduler and kube-controller-manager static pods (the operators' revision pods,
// kube-apiserver-<node> …) and the cluster-version-operator's Deployment pod.
var RequiredPods = []string{
	"openshift-kube-apiserver/kube-apiserver",
	"openshift-kube-scheduler/openshift-kube-scheduler",
	"openshift-kube-controller-manager/kube-controller-manager",
	"openshift-cluster-version/cluster-version-operator",
}

// PodsNotReady returns the clauses of required ("<namespace>/<prefix>") that no pod satisfies:
// a pod of that namespace whose name has the prefix, on one of nodes (spec.nodeName), in phase
// Running with condition Ready=True, as cluster-bootstrap release-4.18 pkg/start/status.go
// statusController.AllRunningAndReady decides (it matches a pod key by prefix, and polls until
// the matched pods are all Running and Ready; labbuild takes any matching pod, which is what
// cluster-bootstrap's unordered match settles on). Pods elsewhere, the bootstrap's own above
// all, do not count. A clause without a slash is an error.
func PodsNotReady(ctx context.Context, dyn Interface, required, nodes []string) ([]string, error) {
	var missing []string
	byNS := map[string][]Pod{}
	for _, clause := range required {
		ns, prefix, ok := strings.Cut(clause, "/")
		if !ok || ns == "" || prefix == "" {
			return nil, fmt.Errorf("required pod %q: want <namespace>/<name prefix>", clause)
		}
		pods, seen := byNS[ns]
		if !seen {
			var err error
			if pods, err = List[Pod](ctx, dyn, Pods, ns, ""); err != nil {
				return nil, err
			}
			byNS[ns] = pods
		}
		ready := false
		for _, p := range pods {
			if strings.HasPrefix(p.Name, prefix) && slices.Contains(nodes, p.Spec.NodeName) && PodReady(&p) {
				ready = true
				break
			}
		}
		if !ready {
			missing = append(missing, clause)
		}
	}
	return missing, nil
}

// PodReady reports whether p is in phase Running with condition Ready=True (cluster-bootstrap's
// "Ready" pod status).
func PodReady(p *Pod) bool {
	if p.Status.Phase != "Running" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// The static-pod operators' resources whose status.nodeStatuses cluster-bootstrap reads before
// it lets the bootstrap go (release-4.18 pkg/start/ha_checker.go: kubeapiservers,
// kubeschedulers, kubecontrollermanagers, each named "cluster", operator.openshift.io/v1).
var (
	KubeAPIServers         = GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "kubeapiservers"}
	KubeSchedulers         = GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "kubeschedulers"}
	KubeControllerManagers = GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "kubecontrollermanagers"}
)

// StaticPodOperators are the three resources of cluster-bootstrap's HA pollers, in its order.
var StaticPodOperators = []GroupVersionResource{KubeAPIServers, KubeSchedulers, KubeControllerManagers}

// NodesAtRevision returns how many entries of the operator resource gvr "cluster"'s
// status.nodeStatuses have currentRevision >= 1 (a node where the operator installed a
// revision of its static pod), and a status line naming each node's current and target
// revision, as cluster-bootstrap's newAPIAvailabilityPoller (and the scheduler's and kcm's)
// count them. A missing resource or an empty list is 0 with a status saying so (the poller
// retries); other errors are returned.
func NodesAtRevision(ctx context.Context, dyn Interface, gvr GroupVersionResource) (int, string, error) {
	o, err := dyn.Resource(gvr).Get(ctx, "cluster", GetOptions{})
	if IsNotFound(err) {
		return 0, gvr.Resource + "/cluster does not exist", nil
	}
	if err != nil {
		return 0, "", fmt.Errorf("get %s/cluster: %w", gvr.Resource, err)
	}
	statuses, _, _ := NestedSlice(o.Object, "status", "nodeStatuses")
	if len(statuses) == 0 {
		return 0, "NodeStatuses for " + gvr.Resource + "/cluster is empty", nil
	}
	n := 0
	var b strings.Builder
	for _, s := range statuses {
		m, _ := s.(map[string]any)
		node, _, _ := NestedString(m, "nodeName")
		cur, _ := m["currentRevision"].(int64) // integers decode as int64 (decodeObject)
		tgt, _ := m["targetRevision"].(int64)
		fmt.Fprintf(&b, " [%s at Current: %d, Target: %d]", node, cur, tgt)
		if cur >= 1 {
			n++
		}
	}
	return n, gvr.Resource + "/cluster NodeStatuses:" + b.String(), nil
}
