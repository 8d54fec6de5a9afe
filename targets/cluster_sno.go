package targets

// A single-node lab's bring-up: bootstrap in place (docs/sno.md). The master boots the live
// ISO with the bootstrap-in-place Ignition (ignition/bootstrap-in-place), runs the bootstrap
// control plane, writes its master Ignition with that control plane and its etcd data to its
// disk and reboots into it (the installer's bootstrap-in-place.sh and install-to-disk.sh, as
// labbuild renders them); the installed master then finishes as the only node. labbuild drives
// and follows each phase as an External target, resumable like every phase of `cluster`:
//
//	cluster/bootkube               VM on (the live ISO); /readyz through the API VIP; CRDs and
//	                               manifests applied; the CVO reports; the node told to go on
//	cluster/install-to-disk        the live control plane stops (etcd's data copied) and the
//	                               node writes the master Ignition to its disk
//	cluster/reboot                 the installed master's kubelet asks to join its own API
//	cluster/post-reboot/approve    its CSRs approved; the Node Ready
//	cluster/post-reboot/complete   kube-system/bootstrap complete; the bootstrap's leases released
//	cluster/post-reboot/cleanup    the operators replaced the carried bootstrap pods and the
//	                               node removed the bootstrap's leftovers
//	cluster/converge, cluster/done as for every lab
//
// The phases read the cluster only: a rerun after a kill asks the API where the node is, and a
// phase whose record exists is kept while the API is down (the node is between two phases).

import (
	"context"
	"fmt"
	"slices"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/wait"
)

// The leases the installer's bootstrap-in-place-post-reboot.sh releases after the reboot
// (release_cvo_lease, release_cpc_lease): the bootstrap CVO's and cluster-policy-controller's,
// held by processes that no longer run, which the new ones would otherwise wait out. Each is a
// Lease and a ConfigMap of the same name.
var snoBootstrapLeases = []struct{ ns, name string }{
	{"openshift-cluster-version", "version"},
	{"kube-system", "cluster-policy-controller-lock"},
}

// snoLeases is the coordination.k8s.io Lease resource.
var snoLeases = kube.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}

// snoState is where the cluster says a single node is.
type snoState struct {
	apiUp     bool   // /readyz answers through the API VIP
	handshake bool   // ConfigMap kube-system/<ignition.BootstrapInPlaceConfigMap> exists
	complete  bool   // ConfigMap kube-system/bootstrap says complete
	installed bool   // the installed master's kubelet has talked to the API: its Node, or a CSR for it
	ready     bool   // its Node is Ready
	why       string // what the observation saw, for the status line
}

// snoObserve reads the cluster through k; a down API is a state (apiUp false), not an error.
func snoObserve(ctx context.Context, k *kube.Clients, node string) snoState {
	var st snoState
	if err := kube.Readyz(ctx, k); err != nil {
		st.why = "the API does not answer through the VIP (" + shortErr(err) + ")"
		return st
	}
	st.apiUp = true
	_, err := kube.Get[kube.ConfigMap](ctx, k.Dynamic, kube.ConfigMaps, kube.BootstrapNamespace, ignition.BootstrapInPlaceConfigMap)
	st.handshake = err == nil
	st.complete, _ = kube.BootstrapComplete(ctx, k.Dynamic)
	ready, notReady, err := kube.NodesReady(ctx, k.Dynamic, []string{node})
	switch {
	case err == nil && len(ready) == 1:
		st.installed, st.ready = true, true
	case err == nil && len(notReady) == 1:
		if _, gerr := kube.Get[kube.Node](ctx, k.Dynamic, kube.Nodes, "", node); gerr == nil {
			st.installed = true
		}
	}
	if !st.installed {
		if list, err := csr.List(ctx, k.Dynamic); err == nil {
			for i := range list {
				st.installed = st.installed || csr.NodeOf(&list[i]) == node
			}
		}
	}
	switch {
	case st.ready:
		st.why = "Node " + node + " is Ready"
	case st.installed:
		st.why = "the installed master's kubelet has joined the API (Node or CSR " + node + ")"
	case st.handshake:
		st.why = "the live control plane serves and labbuild's apply is done"
	default:
		st.why = "the live control plane serves"
	}
	return st
}

// snoPhaseName names the phase a single node is in (docs/sno.md), from the cluster's state
// and whether cluster/bootkube and cluster/install-to-disk have finished (their records): with
// the API down or back before the installed master joined, only the records tell the install
// from the reboot.
func snoPhaseName(st snoState, bootkubeDone, installDone bool) string {
	switch {
	case st.apiUp && st.complete && !st.handshake:
		return "converge"
	case st.apiUp && (st.installed || st.complete):
		return "post-reboot"
	case installDone:
		return "reboot"
	case bootkubeDone || (st.apiUp && st.handshake):
		return "install to disk"
	}
	return "bootkube"
}

// shortErr is err's first line, at most 120 bytes.
func shortErr(err error) string {
	s := err.Error()
	for i, c := range s {
		if c == '\n' {
			s = s[:i]
			break
		}
	}
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// clusterSNOTargets declares the cluster family for a single-node lab; opt filters the
// upstreams of other families to those declared.
func clusterSNOTargets(c *lab.Config, opt func(...string) []string) []*engine.Target {
	master := c.NodesByRole(lab.RoleMaster)[0].Name
	masterReads := []string{lab.NodePath(master, lab.NodeIP)}
	// snoTarget declares one phase: observe decides Keep, run does the phase.
	phase := func(name, doc string, deps []string, timeout string, done func(st snoState, hadRecord bool) bool,
		run func(ctx context.Context, s *engine.Step, k *kube.Clients, node string) error) *engine.Target {
		return &engine.Target{
			Name: name, Doc: doc, Deps: deps,
			Reads:   append(append(slices.Clone(clusterReads), timeout), masterReads...),
			Version: 1, External: true,
			Run: func(ctx context.Context, s *engine.Step) error {
				k, node, err := snoClients(s, master)
				if err != nil {
					return err
				}
				return run(ctx, s, k, node)
			},
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				k, node, err := snoClients(s, master)
				if err != nil {
					return engine.ProbeResult{}, err
				}
				_, perr := s.Prev(recordFile)
				st := snoObserve(ctx, k, node)
				if done(st, perr == nil) {
					return engine.ProbeResult{Action: engine.Keep}, nil
				}
				return engine.ProbeResult{Action: engine.Update, Reason: st.why}, nil
			},
		}
	}
	bootkubeDone := func(st snoState, hadRecord bool) bool {
		return st.installed || st.complete || (st.apiUp && st.handshake) || (!st.apiUp && hadRecord)
	}
	installDone := func(st snoState, hadRecord bool) bool { return st.installed || st.complete || hadRecord }
	rebootDone := func(st snoState, _ bool) bool { return st.apiUp && (st.installed || st.complete) }
	completeDone := func(st snoState, _ bool) bool { return st.apiUp && st.complete }
	cleanupDone := func(st snoState, _ bool) bool { return st.apiUp && st.complete && !st.handshake }

	vm := "libvirt/vm/" + master
	return []*engine.Target{
		phase("cluster/bootkube", "the single node on from its live ISO; API ready through the VIP; CRDs and manifests applied; CVO reporting; the node told to install",
			append([]string{adminKubeconfig}, opt(append([]string{vm, "libvirt/dns", clusterCRDs, clusterManifests, clusterLB}, clusterHostDeps...)...)...),
			lab.WaitBootstrapMinutes, bootkubeDone,
			func(ctx context.Context, s *engine.Step, k *kube.Clients, node string) error {
				return snoBootkube(ctx, s, k, master, node, bootkubeDone)
			}),
		phase("cluster/install-to-disk", "the live control plane stops (etcd's data copied into the master Ignition) and the node installs RHCOS with it to its disk",
			[]string{adminKubeconfig, "cluster/bootkube"}, lab.WaitBootstrapMinutes, installDone,
			func(ctx context.Context, s *engine.Step, k *kube.Clients, node string) error {
				return snoWait(ctx, s, k, node, lab.WaitBootstrapMinutes,
					"the live system to stop its control plane and install itself to its disk",
					"virsh console <cluster>-"+master+"; labbuild ssh "+master+" -- journalctl -u install-to-disk",
					func(st snoState) bool { return st.installed || st.complete || !st.apiUp }, map[string]any{"installedToDisk": true})
			}),
		phase("cluster/reboot", "the node reboots from its disk; the installed master's kubelet joins its own API",
			[]string{adminKubeconfig, "cluster/install-to-disk"}, lab.WaitBootstrapMinutes, rebootDone,
			func(ctx context.Context, s *engine.Step, k *kube.Clients, node string) error {
				return snoWait(ctx, s, k, node, lab.WaitBootstrapMinutes,
					"the installed master to boot from its disk and its kubelet to join the API",
					"virsh console <cluster>-"+master+"; oc get csr; oc get nodes",
					func(st snoState) bool { return rebootDone(st, false) }, map[string]any{"rebooted": true})
			}),
		clusterJoin("cluster/post-reboot/approve", "the installed master's CSRs approved (as bootstrap-in-place-post-reboot.sh's approve_csr); its Node Ready",
			[]string{adminKubeconfig, "cluster/reboot"}, lab.WaitMastersMinutes, []string{master}, masterReads, "master", nil, joinRunning, func(string) bool { return false }),
		phase("cluster/post-reboot/complete", "kube-system/bootstrap complete; the bootstrap CVO's and cluster-policy-controller's leases released (bootstrap-in-place-post-reboot.sh)",
			[]string{adminKubeconfig, "cluster/post-reboot/approve"}, lab.WaitEtcdMinutes, completeDone, snoComplete),
		phase("cluster/post-reboot/cleanup", "the operators replaced the carried bootstrap pods and the node removed the bootstrap's leftovers (its post-reboot unit)",
			[]string{adminKubeconfig, "cluster/post-reboot/complete"}, lab.WaitConvergeMinutes, cleanupDone,
			func(ctx context.Context, s *engine.Step, k *kube.Clients, node string) error {
				return snoWait(ctx, s, k, node, lab.WaitConvergeMinutes,
					"the operators to replace the bootstrap's static pods and the node to remove the bootstrap's leftovers",
					"oc get pods -A -o wide | grep "+master+"; labbuild ssh "+master+" -- journalctl -u bootkube",
					func(st snoState) bool { return cleanupDone(st, false) }, map[string]any{"cleaned": true})
			}),
		clusterConvergeTarget([]string{adminKubeconfig, "cluster/post-reboot/cleanup"}),
		clusterDoneTarget(opt),
	}
}

// snoClients returns the admin clients and the master's Kubernetes node name.
func snoClients(s *engine.Step, master string) (*kube.Clients, string, error) {
	k, err := clusterClients(s)
	if err != nil {
		return nil, "", err
	}
	domain, err := clusterDomain(s)
	if err != nil {
		return nil, "", err
	}
	return k, clusterNodeName(master, domain), nil
}

// snoBootkube is cluster/bootkube's Run: start the VM (its empty disk falls through to the live
// ISO), wait for the live control plane, apply the CRDs and manifests as cluster/bootstrap
// does, wait for the CVO, then create ignition.BootstrapInPlaceConfigMap: the live node's
// install-to-disk.sh waits for it before it stops etcd.
func snoBootkube(ctx context.Context, s *engine.Step, k *kube.Clients, master, node string, done func(snoState, bool) bool) error {
	timeout, err := clusterMinutes(s, lab.WaitBootstrapMinutes)
	if err != nil {
		return err
	}
	_, perr := s.Prev(recordFile)
	if st := snoObserve(ctx, k, node); done(st, perr == nil) {
		s.Logf("nothing to do: %s", st.why)
		return clusterRecord(s, map[string]any{"bootkube": true})
	}
	m, err := clusterMachinesFor(s)
	if err != nil {
		return err
	}
	if err := m.Start(ctx, master); err != nil {
		return fmt.Errorf("%s: start VM %s: %w", s.Target().Name, master, err)
	}
	vip, _ := s.String(lab.NetworkAPIVIP)
	if _, err := clusterWait(ctx, s, wait.Spec{
		What:     "the live system's bootstrap API to answer /readyz through the API VIP",
		Inspect:  fmt.Sprintf("curl -k https://%s:6443/readyz; virsh console <cluster>-%s; labbuild ssh %s -- journalctl -u bootkube -u kubelet", vip, master, master),
		Timeout:  timeout,
		Interval: clusterPollAPI,
	}, func(ctx context.Context) (bool, string, error) {
		if err := kube.Readyz(ctx, k); err != nil {
			return false, "API not ready", err
		}
		return true, "API ready", nil
	}); err != nil {
		return err
	}
	if err := clusterApplyBootstrap(ctx, s, k, timeout); err != nil {
		return err
	}
	cm := &kube.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": ignition.BootstrapInPlaceConfigMap, "namespace": kube.BootstrapNamespace},
		"data":     map[string]any{"status": "applied"}}}
	if _, err := k.Dynamic.Resource(kube.ConfigMaps).Namespace(kube.BootstrapNamespace).Apply(ctx, ignition.BootstrapInPlaceConfigMap, cm,
		kube.ApplyOptions{FieldManager: kube.FieldManager, Force: true}); err != nil {
		return fmt.Errorf("%s: apply configmap %s/%s: %w", s.Target().Name, kube.BootstrapNamespace, ignition.BootstrapInPlaceConfigMap, err)
	}
	s.Logf("created ConfigMap %s/%s: the live node goes on to stop etcd and install itself to its disk", kube.BootstrapNamespace, ignition.BootstrapInPlaceConfigMap)
	return clusterRecord(s, map[string]any{"bootkube": true})
}

// snoWait waits (timeout field timeoutField) until ok holds for the cluster's state and
// records rec.
func snoWait(ctx context.Context, s *engine.Step, k *kube.Clients, node, timeoutField, what, inspect string, ok func(snoState) bool, rec map[string]any) error {
	timeout, err := clusterMinutes(s, timeoutField)
	if err != nil {
		return err
	}
	r, err := clusterWait(ctx, s, wait.Spec{What: what, Inspect: inspect, Timeout: timeout, Interval: clusterPollAPI},
		func(ctx context.Context) (bool, string, error) {
			st := snoObserve(ctx, k, node)
			return ok(st), st.why, nil
		})
	if err != nil {
		return err
	}
	s.Logf("%s", r.Status)
	return clusterRecord(s, rec)
}

// snoComplete is cluster/post-reboot/complete's Run: what bootstrap-in-place-post-reboot.sh
// does through the API once the installed master answers. signal_bootstrap_complete: the
// installer's report-progress.sh cannot write kube-system/bootstrap on a single node, whose
// control plane stops when bootkube is done. release_cvo_lease and release_cpc_lease: the
// bootstrap's CVO and cluster-policy-controller held their leases on the live system; deleted
// (Lease and ConfigMap of each), the payload's CVO and the operators' cluster-policy-controller
// take them at once instead of waiting them out. restore_cvo_overrides has nothing to restore:
// labbuild's ClusterVersion carries no overrides.
func snoComplete(ctx context.Context, s *engine.Step, k *kube.Clients, node string) error {
	timeout, err := clusterMinutes(s, lab.WaitEtcdMinutes)
	if err != nil {
		return err
	}
	if _, err := clusterWait(ctx, s, wait.Spec{
		What:     "kube-system/bootstrap complete and the bootstrap's leases released",
		Inspect:  "oc get configmap -n kube-system bootstrap; oc get lease -n openshift-cluster-version version",
		Timeout:  timeout,
		Interval: clusterPollAPI,
	}, func(ctx context.Context) (bool, string, error) {
		if done, err := kube.BootstrapComplete(ctx, k.Dynamic); err != nil {
			return false, "reading kube-system/bootstrap", err
		} else if !done {
			// The leases first: once kube-system/bootstrap says complete this step is not
			// taken again.
			for _, l := range snoBootstrapLeases {
				for _, r := range []kube.GroupVersionResource{snoLeases, kube.ConfigMaps} {
					err := k.Dynamic.Resource(r).Namespace(l.ns).Delete(ctx, l.name, kube.DeleteOptions{})
					switch {
					case err == nil:
						s.Logf("released the bootstrap's %s %s/%s", r.Resource, l.ns, l.name)
					case !kube.IsNotFound(err):
						return false, "releasing " + l.ns + "/" + l.name, err
					}
				}
			}
			if err := kube.MarkBootstrapComplete(ctx, k.Dynamic); err != nil {
				return false, "creating kube-system/bootstrap", err
			}
			s.Logf("created ConfigMap kube-system/bootstrap status=complete")
		}
		return true, "bootstrap complete", nil
	}); err != nil {
		return err
	}
	return clusterRecord(s, map[string]any{"bootstrapComplete": true})
}
