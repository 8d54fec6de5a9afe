package kube

// Node lifecycle calls for live lab edits: cordon, drain (the Eviction API, as `oc adm drain`
// does), uncordon and delete. Only kube.Interface (client.go): no typed clientset and no
// client-go dynamic package (issue 18 keeps them out of the binary's start-up).

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

var (
	nodesGVR = GroupVersionResource{Version: "v1", Resource: "nodes"}
	podsGVR  = GroupVersionResource{Version: "v1", Resource: "pods"}
)

// mirrorAnnotation marks the API mirror of a static pod (kubelet's
// kubeConfigMirrorAnnotationKey): the kubelet runs it from a file, an eviction would
// only delete the mirror.
const mirrorAnnotation = "kubernetes.io/config.mirror"

// Cordon marks node unschedulable (spec.unschedulable=true, what `oc adm cordon` patches).
// A node that does not exist is not an error: found is false.
func Cordon(ctx context.Context, dyn Interface, node string) (found bool, err error) {
	return setUnschedulable(ctx, dyn, node, true)
}

// Uncordon marks node schedulable again (`oc adm uncordon`).
func Uncordon(ctx context.Context, dyn Interface, node string) (found bool, err error) {
	return setUnschedulable(ctx, dyn, node, false)
}

func setUnschedulable(ctx context.Context, dyn Interface, node string, on bool) (bool, error) {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	_, err := dyn.Resource(nodesGVR).Patch(ctx, node, MergePatchType, []byte(patch), PatchOptions{FieldManager: FieldManager})
	if IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("set node %s unschedulable=%t: %w", node, on, err)
	}
	return true, nil
}

// DeleteNode deletes the Node object (`oc delete node`); existed is false when there was none.
func DeleteNode(ctx context.Context, dyn Interface, node string) (existed bool, err error) {
	err = dyn.Resource(nodesGVR).Delete(ctx, node, DeleteOptions{})
	if IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("delete node %s: %w", node, err)
	}
	return true, nil
}

// DrainReport is what Drain did with the pods on a node, each as "namespace/name".
type DrainReport struct {
	// Evicted pods were accepted by the Eviction API and are gone.
	Evicted []string
	// Skipped pods are not drained, as `oc adm drain --ignore-daemonsets` leaves them: a
	// DaemonSet's (its controller would put it back at once) and static pods' mirrors (the
	// kubelet runs them from files), with the reason after the name.
	Skipped []string
	// Refused pods could not be evicted: a PodDisruptionBudget forbids it now (HTTP 429), or
	// the API refused otherwise; the reason follows the name.
	Refused []string
	// Terminating pods were evicted but still existed when the wait ended.
	Terminating []string
}

// Drained reports whether nothing that should leave the node is left on it.
func (r DrainReport) Drained() bool { return len(r.Refused) == 0 && len(r.Terminating) == 0 }

// String is one line for a log or a message: "evicted 3 pods; not drained: a/b (PodDisruptionBudget …)".
func (r DrainReport) String() string {
	parts := []string{fmt.Sprintf("evicted %d pods", len(r.Evicted))}
	if len(r.Skipped) > 0 {
		parts = append(parts, "left in place: "+strings.Join(r.Skipped, ", "))
	}
	if len(r.Refused) > 0 {
		parts = append(parts, "could not drain: "+strings.Join(r.Refused, ", "))
	}
	if len(r.Terminating) > 0 {
		parts = append(parts, "still terminating: "+strings.Join(r.Terminating, ", "))
	}
	return strings.Join(parts, "; ")
}

// Drain evicts every pod on node through the Eviction API (policy/v1, which honours
// PodDisruptionBudgets, as `oc adm drain` does), skipping DaemonSet pods and static pods'
// mirrors, then waits up to wait for the evicted pods to be gone, polling every poll. Pods
// already finished (Succeeded, Failed) are deleted without eviction as drain does. It does not
// cordon: call Cordon first so nothing is scheduled back. An error is returned only when the
// API cannot be asked at all; what could not be drained is in the report.
func Drain(ctx context.Context, dyn Interface, node string, wait, poll time.Duration) (DrainReport, error) {
	var r DrainReport
	pods, err := podsOn(ctx, dyn, node)
	if err != nil {
		return r, err
	}
	evicted := map[string]string{}
	for _, p := range pods {
		id := p.GetNamespace() + "/" + p.GetName()
		if why := skipReason(p); why != "" {
			r.Skipped = append(r.Skipped, id+" ("+why+")")
			continue
		}
		phase, _, _ := NestedString(p.Object, "status", "phase")
		if phase == "Succeeded" || phase == "Failed" {
			if err := dyn.Resource(podsGVR).Namespace(p.GetNamespace()).Delete(ctx, p.GetName(), DeleteOptions{}); err != nil && !IsNotFound(err) {
				r.Refused = append(r.Refused, id+" (delete: "+err.Error()+")")
				continue
			}
			evicted[id] = p.GetUID()
			continue
		}
		ev := &Unstructured{Object: map[string]any{
			"apiVersion": "policy/v1", "kind": "Eviction",
			"metadata": map[string]any{"name": p.GetName(), "namespace": p.GetNamespace()},
		}}
		_, err := dyn.Resource(podsGVR).Namespace(p.GetNamespace()).Create(ctx, ev, CreateOptions{}, "eviction")
		switch {
		case err == nil || IsNotFound(err):
			evicted[id] = p.GetUID()
		case IsTooManyRequests(err):
			r.Refused = append(r.Refused, id+" (PodDisruptionBudget: "+apiMessage(err)+")")
		default:
			r.Refused = append(r.Refused, id+" ("+apiMessage(err)+")")
		}
	}
	// Wait for the evicted pods to be gone (a pod recreated under the same name has another UID).
	deadline := time.Now().Add(wait)
	for len(evicted) > 0 {
		left, err := podsOn(ctx, dyn, node)
		if err != nil {
			return r, err
		}
		still := map[string]bool{}
		for _, p := range left {
			id := p.GetNamespace() + "/" + p.GetName()
			if uid, ok := evicted[id]; ok && uid == p.GetUID() {
				still[id] = true
			}
		}
		for id := range evicted {
			if !still[id] {
				r.Evicted = append(r.Evicted, id)
				delete(evicted, id)
			}
		}
		if len(evicted) == 0 || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return r, ctx.Err()
		case <-time.After(poll):
		}
	}
	for id := range evicted {
		r.Terminating = append(r.Terminating, id)
	}
	for _, l := range [][]string{r.Evicted, r.Skipped, r.Refused, r.Terminating} {
		sort.Strings(l)
	}
	return r, nil
}

// podsOn lists the pods bound to node (field selector spec.nodeName, as drain lists them).
func podsOn(ctx context.Context, dyn Interface, node string) ([]Unstructured, error) {
	l, err := dyn.Resource(podsGVR).List(ctx, ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, fmt.Errorf("list pods on node %s: %w", node, err)
	}
	return l.Items, nil
}

// skipReason says why drain leaves p alone, or "".
func skipReason(p Unstructured) string {
	if _, ok := p.GetAnnotations()[mirrorAnnotation]; ok {
		return "static pod"
	}
	for _, o := range p.GetOwnerReferences() {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return "DaemonSet " + o.Name
		}
	}
	return ""
}

// apiMessage is an API error's message without the client's prefixes.
func apiMessage(err error) string { return Message(err) }
