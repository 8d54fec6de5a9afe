package rehearsal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/labbuild/labbuild/targets/kube"
)

var machineGVR = kube.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machines"}

// Machine API names (openshift/api machine/v1beta1 and machine-api-operator release-4.18).
const (
	// MachineFinalizer is the machine controller's finalizer on every Machine it reconciles
	// (openshift/api machine/v1beta1 MachineFinalizer): a deleted Machine stays, with a
	// deletionTimestamp, until the actuator's Delete has released its instance.
	MachineFinalizer = "machine.machine.openshift.io"
	// DeleteMachineAnnotation marks a Machine to go first when its MachineSet scales down
	// (pkg/controller/machineset/delete_policy.go DeleteNodeAnnotation; oc annotate machine
	// NAME machine.openshift.io/delete-machine=true). oldDeleteMachineAnnotation is its
	// previous spelling, still honoured.
	DeleteMachineAnnotation    = "machine.openshift.io/delete-machine"
	oldDeleteMachineAnnotation = "machine.openshift.io/cluster-api-delete-machine"
)

// MachineSetStandin is a stand-in for the machine-api-operator's MachineSet controller
// (machine-api-controllers' machineset-controller; its image is not pullable here). It reads
// only what that controller reads — the MachineSet and the Machines in its namespace — and
// writes Machines as it does. Its Log receives one line per Machine created or deleted.
type MachineSetStandin struct {
	Kube *kube.Clients
	Log  io.Writer
}

func (s *MachineSetStandin) logf(format string, args ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, "machineset stand-in: "+format+"\n", args...)
	}
}

// Sync is one reconcile of MachineSet set in openshift-machine-api (machine-api-operator
// release-4.18 pkg/controller/machineset/controller.go reconcile, syncReplicas):
//
//   - spec.replicas must be set ("the Replicas field in Spec for machineset ... is nil"), the
//     selector non-empty and matching spec.template.metadata.labels (validateMachineset); only
//     selector.matchLabels is read here, matchExpressions is refused;
//   - the Machines it counts are those in the namespace not controlled by another owner, not
//     being deleted and matching the selector (shouldExcludeMachine); a matching Machine
//     without a controller is adopted (adoptOrphan: the MachineSet's controller reference
//     appended);
//   - with fewer than spec.replicas it creates the difference from spec.template (createMachine:
//     generateName "<set>-", the template's labels and annotations, its spec with the
//     providerSpec, the MachineSet as controller owner);
//   - with more it deletes the surplus chosen by spec.deletePolicy (MachinesToDelete);
//   - status.replicas and observedGeneration are written, the count before this sync as
//     calculateStatus does (the ready/available counts, which read the Machines' Nodes, are not
//     written).
//
// It returns the names of the Machines created and deleted (deletion requested: a Machine with
// MachineFinalizer stays until the machine controller's Delete, Metal3Standin.DeleteMachine).
func (s *MachineSetStandin) Sync(ctx context.Context, set string) (created, deleted []string, err error) {
	sets := s.Kube.Dynamic.Resource(machineSet).Namespace(MachineAPINamespace)
	ms, err := sets.Get(ctx, set, kube.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("machineset %s: %w", set, err)
	}
	replicas, ok := dig(ms.Object, "spec", "replicas").(int64)
	if !ok {
		return nil, nil, fmt.Errorf("machineset %s: the Replicas field in Spec is nil, this should not be allowed", set)
	}
	if dig(ms.Object, "spec", "selector", "matchExpressions") != nil {
		return nil, nil, fmt.Errorf("machineset %s: spec.selector.matchExpressions: the stand-in reads matchLabels only", set)
	}
	selector, _ := dig(ms.Object, "spec", "selector", "matchLabels").(map[string]any)
	if len(selector) == 0 {
		return nil, nil, fmt.Errorf("machineset %s: spec.selector: empty selector is not allowed for MachineSet", set)
	}
	tmplLabels, _ := dig(ms.Object, "spec", "template", "metadata", "labels").(map[string]any)
	if !labelsMatch(stringMap(tmplLabels), selector) {
		return nil, nil, fmt.Errorf("machineset %s: spec.template.metadata.labels: `selector` does not match template `labels`", set)
	}
	machines := s.Kube.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace)
	all, err := machines.List(ctx, kube.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("machineset %s: failed to list machines: %w", set, err)
	}
	var owned []kube.Unstructured
	for _, m := range all.Items {
		ctrl := controllerOf(&m)
		if ctrl != nil && ctrl.UID != ms.GetUID() || dig(m.Object, "metadata", "deletionTimestamp") != nil || !labelsMatch(m.GetLabels(), selector) {
			continue
		}
		if ctrl == nil {
			meta := m.Object["metadata"].(map[string]any)
			refs, _ := meta["ownerReferences"].([]any)
			meta["ownerReferences"] = append(refs, controllerRef(ms))
			if _, err := machines.Update(ctx, &m, kube.UpdateOptions{}); err != nil {
				s.logf("failed to adopt Machine %s into MachineSet %s: %v", m.GetName(), set, err)
				continue
			}
		}
		owned = append(owned, m)
	}
	slices.SortFunc(owned, func(a, b kube.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })

	diff := len(owned) - int(replicas)
	switch {
	case diff < 0:
		tmpl, _ := dig(ms.Object, "spec", "template").(map[string]any)
		tmeta, _ := tmpl["metadata"].(map[string]any)
		for range -diff {
			meta := map[string]any{"generateName": set + "-", "namespace": MachineAPINamespace,
				"ownerReferences": []any{controllerRef(ms)}}
			for _, k := range []string{"labels", "annotations"} {
				if v, ok := tmeta[k]; ok {
					meta[k] = v
				}
			}
			o := &kube.Unstructured{Object: map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
				"metadata": meta, "spec": tmpl["spec"]}}
			got, err := machines.Create(ctx, o, kube.CreateOptions{})
			if err != nil {
				return created, nil, fmt.Errorf("machineset %s: unable to create Machine: %w", set, err)
			}
			created = append(created, got.GetName())
			s.logf("machineset %s: created Machine %s (%d of %d replicas)", set, got.GetName(), len(owned)+len(created), replicas)
		}
	case diff > 0:
		policy, _ := dig(ms.Object, "spec", "deletePolicy").(string)
		doomed, err := MachinesToDelete(owned, diff, policy, time.Now())
		if err != nil {
			return nil, nil, fmt.Errorf("machineset %s: spec.deletePolicy: %w", set, err)
		}
		for _, m := range doomed {
			if err := machines.Delete(ctx, m.GetName(), kube.DeleteOptions{}); err != nil && !kube.IsNotFound(err) {
				return nil, deleted, fmt.Errorf("machineset %s: unable to delete Machine %s: %w", set, m.GetName(), err)
			}
			deleted = append(deleted, m.GetName())
			s.logf("machineset %s: deleted Machine %s (%s delete policy, %d replicas)", set, m.GetName(), policyName(policy), replicas)
		}
	}
	st := map[string]any{"replicas": int64(len(owned))}
	if g, ok := dig(ms.Object, "metadata", "generation").(int64); ok {
		st["observedGeneration"] = g
	}
	if _, err := kube.PatchStatus(ctx, sets, "machine.openshift.io/v1beta1", "MachineSet", set, st); err != nil {
		return created, deleted, fmt.Errorf("machineset %s: failed to update machine set status: %w", set, err)
	}
	return created, deleted, nil
}

func policyName(p string) string {
	if p == "" {
		return "Random"
	}
	return p
}

// controllerOf is metav1.GetControllerOf: the owner reference with controller true, or nil.
func controllerOf(m *kube.Unstructured) *kube.OwnerReference {
	for _, r := range m.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return &r
		}
	}
	return nil
}

// controllerRef is metav1.NewControllerRef(ms, MachineSet kind).
func controllerRef(ms *kube.Unstructured) map[string]any {
	return map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
		"name": ms.GetName(), "uid": ms.GetUID(), "controller": true, "blockOwnerDeletion": true}
}

func stringMap(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// Delete priorities of machine-api-operator release-4.18
// pkg/controller/machineset/delete_policy.go.
const (
	mustDelete    = 100.0
	betterDelete  = 50.0
	preferDelete  = 40.0
	couldDelete   = 20.0
	mustNotDelete = 0.0

	secondsPerHundredDays = 8640000.0
)

// MachinesToDelete picks diff of machines to delete under a MachineSet's spec.deletePolicy
// ("" is Random), as of now: getMachinesToDeletePrioritized with getDeletePriorityFunc's
// priority (delete_policy.go), highest first:
//
//   - Random (randomDeletePolicy): being deleted 100; the delete-machine annotation (or its old
//     spelling) or a status.errorReason/errorMessage 50; no status.nodeRef yet 40; else 20;
//   - Oldest (oldestDeletePriority): being deleted, annotated or failed 100; else rising with
//     age towards 50 (50·(1−e^(−age/100 days))), a Machine without or with a future
//     creationTimestamp 0;
//   - Newest (newestDeletePriority): being deleted, annotated or failed 100; else 100 minus
//     the Oldest priority.
//
// Machines of equal priority keep the order given (upstream sorts with sort.Sort, whose order
// among equals is unspecified: "Random"); the controller passes them sorted by name. Another
// policy is an error naming the three.
func MachinesToDelete(machines []kube.Unstructured, diff int, policy string, now time.Time) ([]kube.Unstructured, error) {
	var prio func(m *kube.Unstructured) float64
	switch policy {
	case "", "Random":
		prio = func(m *kube.Unstructured) float64 {
			switch {
			case dig(m.Object, "metadata", "deletionTimestamp") != nil:
				return mustDelete
			case deleteAnnotated(m) || machineFailed(m):
				return betterDelete
			case dig(m.Object, "status", "nodeRef") == nil:
				return preferDelete
			}
			return couldDelete
		}
	case "Oldest":
		prio = func(m *kube.Unstructured) float64 { return oldestPriority(m, now) }
	case "Newest":
		prio = func(m *kube.Unstructured) float64 {
			if dig(m.Object, "metadata", "deletionTimestamp") != nil || deleteAnnotated(m) || machineFailed(m) {
				return mustDelete
			}
			return mustDelete - oldestPriority(m, now)
		}
	default:
		return nil, fmt.Errorf("unsupported delete policy %s, must be one of 'Random', 'Newest', or 'Oldest'", policy)
	}
	if diff >= len(machines) {
		return machines, nil
	}
	if diff <= 0 {
		return nil, nil
	}
	sorted := slices.Clone(machines)
	slices.SortStableFunc(sorted, func(a, b kube.Unstructured) int {
		pa, pb := prio(&a), prio(&b)
		switch {
		case pa > pb:
			return -1
		case pa < pb:
			return 1
		}
		return 0
	})
	return sorted[:diff], nil
}

func oldestPriority(m *kube.Unstructured, now time.Time) float64 {
	if dig(m.Object, "metadata", "deletionTimestamp") != nil || deleteAnnotated(m) || machineFailed(m) {
		return mustDelete
	}
	ts, _ := dig(m.Object, "metadata", "creationTimestamp").(string)
	created, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return mustNotDelete
	}
	d := now.Sub(created)
	if d < 0 {
		return mustNotDelete
	}
	return betterDelete * (1 - math.Exp(-d.Seconds()/secondsPerHundredDays))
}

func deleteAnnotated(m *kube.Unstructured) bool {
	a := m.GetAnnotations()
	return a[DeleteMachineAnnotation] != "" || a[oldDeleteMachineAnnotation] != ""
}

func machineFailed(m *kube.Unstructured) bool {
	return dig(m.Object, "status", "errorReason") != nil || dig(m.Object, "status", "errorMessage") != nil
}

// MachineAnnotation is the node link's annotation on a Node naming its Machine,
// "<namespace>/<name>" (machine-api-operator release-4.18
// pkg/controller/nodelink/nodelink_controller.go machineAnnotationKey).
const MachineAnnotation = "machine.openshift.io/machine"

// NodeLinkStandin is a stand-in for the machine-api-operator's node link controller
// (machine-api-controllers' nodelink-controller, pkg/controller/nodelink/nodelink_controller.go;
// its image is not pullable here). It reads only what that controller reads, the Nodes and the
// Machines in openshift-machine-api, and writes what it writes: the Machine's status.nodeRef
// and the Node's MachineAnnotation, labels, annotations and taints. Log receives one line per
// link made.
type NodeLinkStandin struct {
	Kube *kube.Clients
	Log  io.Writer
}

// Sync is one Reconcile of every Node (nodelink_controller.go Reconcile), in name order:
//
//   - findMachineFromNode: the Machine whose spec.providerID equals the Node's spec.providerID,
//     else the one whose first InternalIP in status.addresses equals the Node's first InternalIP
//     (findMachineFromNodeByProviderID, findMachineFromNodeByIP); more than one is an error
//     ("expected 1 machine"); none: the Node is skipped;
//   - updateNodeRef: a Node not being deleted becomes the Machine's status.nodeRef (kind Node,
//     name, uid) — upstream writes it when the Node's readiness changes (nodeReadinessCache),
//     here when the reference differs;
//   - the Node gets MachineAnnotation, the Machine's spec.metadata annotations and labels, and
//     its spec.taints not already there by key and effect (addTaintsToNode).
//
// It returns Node name → Machine name for the Nodes linked.
func (s *NodeLinkStandin) Sync(ctx context.Context) (map[string]string, error) {
	nodesAPI := s.Kube.Dynamic.Resource(kube.Nodes)
	machines := s.Kube.Dynamic.Resource(machineGVR).Namespace(MachineAPINamespace)
	nodes, err := nodesAPI.List(ctx, kube.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("node link: list nodes: %w", err)
	}
	ms, err := machines.List(ctx, kube.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("node link: list machines: %w", err)
	}
	slices.SortFunc(nodes.Items, func(a, b kube.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	linked := map[string]string{}
	for _, n := range nodes.Items {
		var found []kube.Unstructured
		if pid, _ := dig(n.Object, "spec", "providerID").(string); pid != "" {
			for _, m := range ms.Items {
				if p, _ := dig(m.Object, "spec", "providerID").(string); p == pid {
					found = append(found, m)
				}
			}
		}
		if ip := internalIP(n.Object); len(found) == 0 && ip != "" {
			for _, m := range ms.Items {
				if internalIP(m.Object) == ip {
					found = append(found, m)
				}
			}
		}
		switch {
		case len(found) == 0:
			continue
		case len(found) > 1:
			return linked, fmt.Errorf("failed to find machine from node %q: expected 1 machine, got %d", n.GetName(), len(found))
		}
		m := found[0]
		if dig(n.Object, "metadata", "deletionTimestamp") != nil {
			continue
		}
		ref := map[string]any{"kind": "Node", "name": n.GetName(), "uid": string(n.GetUID())}
		if have, _ := dig(m.Object, "status", "nodeRef").(map[string]any); have["name"] != ref["name"] || have["uid"] != ref["uid"] {
			body, _ := json.Marshal(map[string]any{"status": map[string]any{"nodeRef": ref}})
			if _, err := machines.Patch(ctx, m.GetName(), kube.MergePatchType, body, kube.PatchOptions{}, "status"); err != nil {
				return linked, fmt.Errorf("error updating nodeRef for machine %q and node %q: %w", m.GetName(), n.GetName(), err)
			}
			if s.Log != nil {
				fmt.Fprintf(s.Log, "node link stand-in: Machine %s → Node %s\n", m.GetName(), n.GetName())
			}
		}
		linked[n.GetName()] = m.GetName()
		ann := map[string]any{MachineAnnotation: MachineAPINamespace + "/" + m.GetName()}
		if a, _ := dig(m.Object, "spec", "metadata", "annotations").(map[string]any); a != nil {
			maps.Copy(ann, a)
		}
		meta := map[string]any{"annotations": ann}
		if l, _ := dig(m.Object, "spec", "metadata", "labels").(map[string]any); len(l) > 0 {
			meta["labels"] = l
		}
		patch := map[string]any{"metadata": meta}
		taints, _ := dig(n.Object, "spec", "taints").([]any)
		added := false
		mtaints, _ := dig(m.Object, "spec", "taints").([]any)
		for _, mt := range mtaints {
			mtm, _ := mt.(map[string]any)
			if !slices.ContainsFunc(taints, func(nt any) bool {
				ntm, _ := nt.(map[string]any)
				return ntm["key"] == mtm["key"] && ntm["effect"] == mtm["effect"]
			}) {
				taints, added = append(taints, mt), true
			}
		}
		if added {
			patch["spec"] = map[string]any{"taints": taints}
		}
		body, _ := json.Marshal(patch)
		if _, err := nodesAPI.Patch(ctx, n.GetName(), kube.MergePatchType, body, kube.PatchOptions{}); err != nil {
			return linked, fmt.Errorf("node link: error updating node %s: %w", n.GetName(), err)
		}
	}
	return linked, nil
}

// internalIP is the first InternalIP of an object's status.addresses (a Node's or a Machine's).
func internalIP(o map[string]any) string {
	addrs, _ := dig(o, "status", "addresses").([]any)
	for _, a := range addrs {
		if am, _ := a.(map[string]any); am["type"] == "InternalIP" {
			s, _ := am["address"].(string)
			return s
		}
	}
	return ""
}
