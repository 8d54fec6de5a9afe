package targets

// cluster/pivot: the load balancer without the bootstrap, in both load-balancer modes
// (cluster.go declares the targets).

import (
	"context"
	"fmt"
	"slices"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/wait"
)

// pivotDoc is cluster/pivot's one-line description in c's load-balancer mode.
func pivotDoc(c *lab.Config) string {
	if c.InCluster() {
		return "masters' keepalived and haproxy Ready; bootstrap VM off (keepalived moves the VIP); API ready through the VIP"
	}
	return "HAProxy without the bootstrap; API ready through the VIP; bootstrap VM off"
}

// vipPivotReads: in the in-cluster mode the pivot reads the mode (no host haproxy to switch).
func vipPivotReads(c *lab.Config) []string {
	if c.Baremetal() { // and the worker hosts are unpaused after the pivot
		return []string{lab.NetworkLoadBalancer, lab.Platform}
	}
	return vipModeReads(c)
}

// clusterPivot is cluster/pivot's Run. In the host mode it switches labbuild's haproxy to the
// post-pivot config, powers the bootstrap off and waits for /readyz through the VIP. In the
// in-cluster mode no host haproxy exists: it first waits until every master's keepalived and
// haproxy static pods are Ready (vipMastersReady: their VRRP priority then wins once the
// bootstrap's stops), then powers the bootstrap off and waits for /readyz through the VIP,
// which keepalived moves to a master. With platform baremetal it then unpauses the
// BareMetalHosts (UnpauseBareMetalHosts), as the installer's bootstrap does at that point.
func clusterPivot(ctx context.Context, s *engine.Step, bootstrap string, masters []string) error {
	timeout, err := clusterMinutes(s, lab.WaitPivotMinutes)
	if err != nil {
		return err
	}
	rec := map[string]any{}
	inCluster, err := vipInCluster(s)
	if err != nil {
		return err
	}
	if inCluster {
		k, err := clusterClients(s)
		if err != nil {
			return err
		}
		nodes, err := clusterNodeNames(s, masters)
		if err != nil {
			return err
		}
		if _, err := clusterWait(ctx, s, wait.Spec{
			What:     "every master's keepalived and haproxy static pods Ready (the masters can take the API VIP)",
			Inspect:  "oc get pods -n " + vipInfraNamespace + " -o wide",
			Timeout:  timeout,
			Interval: clusterPollNodes,
		}, func(ctx context.Context) (bool, string, error) {
			pods, err := vipListInfraPods(ctx, k.Dynamic)
			if err != nil {
				return false, "listing " + vipInfraNamespace + " pods", err
			}
			ok, status := vipMastersReady(pods, nodes)
			return ok, status, nil
		}); err != nil {
			return err
		}
		rec["vip"] = "keepalived"
	} else if cfg, err := s.DepPath(clusterPostPivot, "haproxy.cfg"); err == nil {
		if err := clusterEnv.balancer().Switch(ctx, cfg); err != nil {
			return fmt.Errorf("%s: switch HAProxy to the post-pivot config: %w", s.Target().Name, err)
		}
		rec["haproxy"] = "post-pivot"
	} else {
		// TODO(haproxy family): declare haproxy/config-post-pivot (haproxy.cfg without the
		// bootstrap backends); until it exists the bootstrap stays in the backends, which
		// haproxy's health checks mark DOWN once the VM is off.
		s.Logf("TODO: %s is not in the build graph; HAProxy keeps the bootstrap backends (health checks mark them DOWN)", clusterPostPivot)
		rec["haproxy"] = "unchanged"
	}
	m, err := clusterMachinesFor(s)
	if err != nil {
		return err
	}
	if err := m.Stop(ctx, bootstrap); err != nil {
		return fmt.Errorf("%s: stop VM %s: %w", s.Target().Name, bootstrap, err)
	}
	k, err := clusterClients(s)
	if err != nil {
		return err
	}
	vip, _ := s.String(lab.NetworkAPIVIP)
	if _, err := clusterWait(ctx, s, wait.Spec{
		What:     "the API to answer /readyz through the VIP without the bootstrap",
		Inspect:  fmt.Sprintf("curl -k https://%s:6443/readyz; oc get pods -n openshift-kube-apiserver", vip),
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
	rec["bootstrapStopped"] = true
	if slices.Contains(s.Target().Reads, lab.Platform) {
		if p, err := s.String(lab.Platform); err != nil {
			return err
		} else if p == lab.PlatformBaremetal {
			// Right after the bootstrap leaves, the masters' kube-apiserver that now answers
			// may still be setting up a CRD's storage ("storage is (re)initializing", 503):
			// retried as any API wait is, not fatal.
			var hosts []string
			if _, err := clusterWait(ctx, s, wait.Spec{
				What:     "every BareMetalHost unpaused for Metal3 (openshift-install's master-bmh-update.sh)",
				Inspect:  "oc get baremetalhosts -n " + manifests.MachineAPINamespace + " -o custom-columns=NAME:.metadata.name,PAUSED:.metadata.annotations",
				Timeout:  timeout,
				Interval: clusterPollAPI,
			}, func(ctx context.Context) (bool, string, error) {
				done, err := UnpauseBareMetalHosts(ctx, k.Dynamic)
				hosts = append(hosts, done...)
				if err != nil {
					return false, fmt.Sprintf("%d unpaused so far", len(hosts)), err
				}
				return true, fmt.Sprintf("%d unpaused", len(hosts)), nil
			}); err != nil {
				return err
			}
			s.Logf("BareMetalHosts unpaused for Metal3: %v", hosts)
			rec["unpausedHosts"] = hosts
		}
	}
	return clusterRecord(s, rec)
}

var bmhResource = kube.GroupVersionResource{Group: "metal3.io", Version: "v1alpha1", Resource: "baremetalhosts"}

// UnpauseBareMetalHosts (cluster/pivot, platform baremetal) removes manifests.BMHPausedAnnotation from every BareMetalHost in
// openshift-machine-api, as openshift-install's bootstrap does once the control plane is up
// (data/data/bootstrap/baremetal/files/usr/local/bin/master-bmh-update.sh: it waits for the
// masters' hosts, stops the bootstrap's Ironic, then `oc annotate baremetalhosts --all
// baremetalhost.metal3.io/paused-`): from then on Metal3 registers and provisions the
// workers. It returns the hosts it unpaused (none on a second call). Without the BareMetalHost
// CRD (no cluster-baremetal-operator yet, or bmc/manifests not applied) there is nothing to
// unpause and no error.
func UnpauseBareMetalHosts(ctx context.Context, dyn kube.Interface) ([]string, error) {
	hosts := dyn.Resource(bmhResource).Namespace(manifests.MachineAPINamespace)
	list, err := hosts.List(ctx, kube.ListOptions{})
	if kube.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list BareMetalHosts: %w", err)
	}
	var done []string
	for _, h := range list.Items {
		if _, ok := h.GetAnnotations()[manifests.BMHPausedAnnotation]; !ok {
			continue
		}
		patch := `{"metadata":{"annotations":{"` + manifests.BMHPausedAnnotation + `":null}}}`
		if _, err := hosts.Patch(ctx, h.GetName(), kube.MergePatchType, []byte(patch), kube.PatchOptions{FieldManager: kube.FieldManager}); err != nil {
			return done, fmt.Errorf("unpause BareMetalHost %s: %w", h.GetName(), err)
		}
		done = append(done, h.GetName())
	}
	return done, nil
}
