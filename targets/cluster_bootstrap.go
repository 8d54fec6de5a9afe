package targets

// cluster/bootstrap, the joins of masters and workers (cluster/masters, cluster/workers) and
// the manifests applier (cluster.go declares the targets).

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/wait"
)

// clusterBootstrap is cluster/bootstrap's Run.
func clusterBootstrap(ctx context.Context, s *engine.Step, bootstrap string, masters []string) error {
	timeout, err := clusterMinutes(s, lab.WaitBootstrapMinutes)
	if err != nil {
		return err
	}
	k, err := clusterClients(s)
	if err != nil {
		return err
	}
	m, err := clusterMachinesFor(s)
	if err != nil {
		return err
	}
	vip, _ := s.String(lab.NetworkAPIVIP)
	apiReady := func(ctx context.Context) (bool, string, error) {
		if err := kube.Readyz(ctx, k); err != nil {
			return false, "API not ready", err
		}
		return true, "API ready", nil
	}
	// After the pivot the bootstrap is gone for good: starting it again would bring back a
	// second etcd cluster. So when this phase finished before (its record exists) and the API
	// does not answer — a host reboot — the masters come up first, and the bootstrap only if
	// the cluster then says it never got past it.
	done, err := kube.BootstrapComplete(ctx, k.Dynamic)
	if err != nil {
		if _, perr := s.Prev(recordFile); perr == nil {
			s.Logf("the API does not answer (%v) but this phase finished before: starting the masters first", err)
			for _, n := range masters {
				if err := m.Start(ctx, n); err != nil {
					return fmt.Errorf("%s: start VM %s: %w", s.Target().Name, n, err)
				}
			}
			if _, err := clusterWait(ctx, s, wait.Spec{
				What:     "the API to answer through the VIP after the masters started (the cluster was bootstrapped before)",
				Inspect:  fmt.Sprintf("curl -k https://%s:6443/readyz; virsh list --all", vip),
				Timeout:  timeout,
				Interval: clusterPollAPI,
			}, apiReady); err != nil {
				return err
			}
			done, err = kube.BootstrapComplete(ctx, k.Dynamic)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Target().Name, err)
			}
		}
	}
	if done {
		s.Logf("kube-system/bootstrap is complete: the bootstrap phase is over, nothing to do")
		return clusterRecord(s, map[string]any{"bootstrapped": true})
	}
	if err := m.Start(ctx, bootstrap); err != nil {
		return fmt.Errorf("%s: start VM %s: %w", s.Target().Name, bootstrap, err)
	}
	if _, err := clusterWait(ctx, s, wait.Spec{
		What:     "the bootstrap API to answer /readyz through the API VIP",
		Inspect:  fmt.Sprintf("curl -k https://%s:6443/readyz; labbuild ssh bootstrap -- journalctl -u bootkube -u kubelet", vip),
		Timeout:  timeout,
		Interval: clusterPollAPI,
	}, apiReady); err != nil {
		return err
	}

	// CRDs first (release/crds), then the cluster manifests in name order, as bootkube does.
	files := map[string][]byte{}
	for _, src := range []struct{ dep, dir, prefix string }{{clusterCRDs, "crds/", "0-crds/"}, {clusterManifests, "manifests/", "1-manifests/"}} {
		rels, err := s.DepFiles(src.dep)
		if err != nil {
			// Not declared: its family is not registered yet (see clusterRegistered).
			s.Logf("TODO: %s is not in the build graph; its objects are not applied", src.dep)
			continue
		}
		for _, rel := range rels {
			if !strings.HasPrefix(rel, src.dir) || !(strings.HasSuffix(rel, ".yaml") || strings.HasSuffix(rel, ".yml") || strings.HasSuffix(rel, ".json")) {
				continue
			}
			b, err := s.DepFile(src.dep, rel)
			if err != nil {
				return err
			}
			files[src.prefix+strings.TrimPrefix(rel, src.dir)] = b
		}
	}
	a, err := clusterApplier(k.Config, s.Log())
	if err != nil {
		return err
	}
	var applied int
	if _, err := clusterWait(ctx, s, wait.Spec{
		What:     fmt.Sprintf("%d manifest files to apply", len(files)),
		Inspect:  "oc get clusterversion; oc get crd",
		Timeout:  timeout,
		Interval: clusterPollAPI,
	}, func(ctx context.Context) (bool, string, error) {
		// Retried as a whole: server-side apply is idempotent, and an object may need a
		// namespace or CRD a later retry finds.
		n, err := a.ApplyFiles(ctx, files)
		applied = n
		return err == nil, fmt.Sprintf("%d objects applied", n), clusterShortErr(err)
	}); err != nil {
		return err
	}
	r, err := clusterWait(ctx, s, wait.Spec{
		What:     "the cluster-version-operator to report progress",
		Inspect:  "oc get clusterversion version -o yaml",
		Timeout:  timeout,
		Interval: clusterPollAPI,
	}, func(ctx context.Context) (bool, string, error) { return kube.CVOProgress(ctx, k.Dynamic) })
	if err != nil {
		return err
	}
	s.Logf("applied %d objects from %d files; CVO: %s", applied, len(files), r.Status)
	return clusterRecord(s, map[string]any{"bootstrapped": true})
}

// clusterJoin declares a phase that powers nodes on, approves their CSRs and waits until they
// are all Ready: cluster/masters and cluster/workers. later maps the lab's nodes that join in a
// later phase to that phase: their CSRs, when seen early (a rerun, a VM started by hand), are
// left pending for it and logged so, not as a stranger's refused request. start false: the
// phase powers nothing on (platform baremetal's workers, which Metal3 starts through the BMC)
// and only approves and waits. metal3 says which nodes (of nodes and later) a Machine
// provisions: they register under their short name and are approved by their Machine
// (clusterExpected).
func clusterJoin(name, doc string, deps []string, timeoutField string, nodes, nodeReads []string, role string, later map[string]string, start bool, metal3 func(string) bool) *engine.Target {
	return &engine.Target{
		Name:     name,
		Doc:      doc,
		Deps:     deps,
		Reads:    append(append(slices.Clone(clusterReads), timeoutField), nodeReads...),
		Version:  1,
		External: true,
		Run: func(ctx context.Context, s *engine.Step) error {
			timeout, err := clusterMinutes(s, timeoutField)
			if err != nil {
				return err
			}
			if len(nodes) == 0 {
				s.Logf("no %s nodes in the config: nothing to join", role)
				return clusterRecord(s, map[string]any{"nodes": []string{}})
			}
			k, err := clusterClients(s)
			if err != nil {
				return err
			}
			expected, err := clusterExpected(s, nodes, metal3)
			if err != nil {
				return err
			}
			laterFQDN, err := clusterLater(s, later, metal3)
			if err != nil {
				return err
			}
			want := make([]string, 0, len(expected))
			for n := range expected {
				want = append(want, n)
			}
			slices.Sort(want)
			if start {
				m, err := clusterMachinesFor(s)
				if err != nil {
					return err
				}
				for _, n := range nodes {
					if err := m.Start(ctx, n); err != nil {
						return fmt.Errorf("%s: start VM %s: %w", name, n, err)
					}
				}
			}
			inspect := "oc get csr; oc get nodes -l node-role.kubernetes.io/" + role
			what := fmt.Sprintf("%d %s nodes Ready (%s), approving their CSRs", len(want), role, strings.Join(want, ", "))
			if !start {
				what = fmt.Sprintf("Metal3 to provision %d %s nodes through the BMC and each to be Ready (%s), approving their CSRs", len(want), role, strings.Join(want, ", "))
				inspect = "oc get baremetalhosts -n openshift-machine-api; " + inspect
				s.Logf("the %s nodes are BareMetalHosts: the cluster's Metal3 powers them on through the BMC, labbuild starts none", role)
			}
			logged := map[string]bool{} // CSR name → verdict logged (refusals once, not every poll)
			_, err = clusterWait(ctx, s, wait.Spec{
				What:     what,
				Inspect:  inspect,
				Timeout:  timeout,
				Interval: clusterPollNodes,
			}, func(ctx context.Context) (bool, string, error) {
				// Approve every poll: the serving CSR appears only after the client
				// certificate is issued (two waves, spec stage 11).
				ds, err := csr.Approve(ctx, k.Dynamic, expected)
				if err != nil {
					return false, "approving CSRs", err
				}
				for _, d := range ds {
					if d.Approved || !logged[d.CSR] {
						logged[d.CSR] = true
						clusterLogDecisions(s, []csr.Decision{d}, laterFQDN)
					}
				}
				ready, notReady, err := kube.NodesReady(ctx, k.Dynamic, want)
				if err != nil {
					return false, "listing nodes", err
				}
				st := fmt.Sprintf("%d/%d %s nodes Ready", len(ready), len(want), role)
				if len(notReady) > 0 {
					st += " (waiting: " + strings.Join(notReady, ", ") + ")"
				}
				return len(notReady) == 0, st, nil
			})
			if err != nil {
				return err
			}
			return clusterRecord(s, map[string]any{"nodes": want})
		},
		Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
			if len(nodes) == 0 {
				return engine.ProbeResult{Action: engine.Keep}, nil
			}
			k, err := clusterClients(s)
			if err != nil {
				return engine.ProbeResult{}, err
			}
			expected, err := clusterExpected(s, nodes, metal3)
			if err != nil {
				return engine.ProbeResult{}, err
			}
			want := make([]string, 0, len(expected))
			for n := range expected {
				want = append(want, n)
			}
			_, notReady, err := kube.NodesReady(ctx, k.Dynamic, want)
			if err != nil || len(notReady) > 0 {
				return engine.ProbeResult{Action: engine.Update, Reason: "not Ready: " + strings.Join(notReady, ", ") + errText(err)}, nil
			}
			return engine.ProbeResult{Action: engine.Keep}, nil
		},
	}
}

// clusterApplier is cluster/bootstrap's apply step: server-side apply in file-name order,
// CRDs waited for until Established, and the kinds of manifests.StatusKinds (Infrastructure,
// FeatureGate) also through their status subresource, which a plain apply drops.
func clusterApplier(cfg *kube.RESTConfig, log io.Writer) (*kube.Applier, error) {
	a, err := kube.NewApplier(cfg, log)
	if err != nil {
		return nil, err
	}
	a.StatusKinds = manifests.StatusKinds
	return a, nil
}
