package targets

// cluster/bootstrap, the joins of masters and workers (cluster/masters, cluster/workers) and
// the manifests applier (cluster.go declares the targets).

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

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

	if err := clusterApplyBootstrap(ctx, s, k, timeout); err != nil {
		return err
	}
	return clusterRecord(s, map[string]any{"bootstrapped": true})
}

// clusterApplyBootstrap applies the payload CRDs (release/crds) and then the cluster manifests
// (manifests/bootstrap) in name order, as bootkube does, retrying the whole set until it goes
// through, and waits for the cluster-version-operator to report: cluster/bootstrap's work once
// the API answers, and a single node's cluster/bootkube's.
func clusterApplyBootstrap(ctx context.Context, s *engine.Step, k *kube.Clients, timeout time.Duration) error {
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
	return nil
}

// joinMode is how a join phase gets its nodes running.
type joinMode int

const (
	// joinStart powers the nodes' VMs on (cluster/masters, cluster/workers).
	joinStart joinMode = iota
	// joinMetal3 starts nothing: Metal3 powers the nodes on through the BMC (platform
	// baremetal's workers).
	joinMetal3
	// joinRunning starts nothing: the node runs already (a single node after its reboot,
	// cluster/post-reboot/approve).
	joinRunning
)

// clusterJoin declares a phase that powers nodes on, approves their CSRs and waits until they
// are all Ready: cluster/masters and cluster/workers. later maps the lab's nodes that join in a
// later phase to that phase: their CSRs, when seen early (a rerun, a VM started by hand), are
// left pending for it and logged so, not as a stranger's refused request. mode says whether
// the phase powers the nodes on or only approves and waits. metal3 says which nodes (of nodes
// and later) a Machine provisions: they register under their short name and are approved by
// their Machine (clusterExpected).
func clusterJoin(name, doc string, deps []string, timeoutField string, nodes, nodeReads []string, role string, later map[string]string, mode joinMode, metal3 func(string) bool) *engine.Target {
	start := mode == joinStart
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
			if mode == joinMetal3 {
				what = fmt.Sprintf("Metal3 to provision %d %s nodes through the BMC and each to be Ready (%s), approving their CSRs", len(want), role, strings.Join(want, ", "))
				inspect = "oc get baremetalhosts -n openshift-machine-api; " + inspect
				s.Logf("the %s nodes are BareMetalHosts: the cluster's Metal3 powers them on through the BMC, labbuild starts none", role)
			}
			logged := map[string]bool{} // CSR name → verdict logged (refusals once, not every poll)
			served := &joinServing{}
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
					return false, st, nil
				}
				// Listed again after the Ready check: a CSR made since Approve listed counts.
				list, err := csr.List(ctx, k.Dynamic)
				if err != nil {
					return false, st + "; listing CSRs", err
				}
				m, err := csr.ReadMachines(ctx, k.Dynamic, expected)
				if err != nil {
					return false, st + "; reading Machines", err
				}
				done, more := served.look(want, list, expected, m)
				if !done {
					st += "; " + more
				}
				return done, st, nil
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

// joinServingPolls is how many polls clusterJoin waits for the serving CSR of a Ready node
// that has none (joinServing): at 15 s a poll, a minute, where a kubelet asks within a few
// seconds of its Node status.
const joinServingPolls = 4

// joinServing is clusterJoin's last condition, kept across its polls: once every node is
// Ready, no CSR may be pending that labbuild would approve (csr.Decide, the machine
// approver's rules), and each node must have asked for its kubelet serving certificate. A
// kubelet with serverTLSBootstrap (the MCO's templates/*/01-*-kubelet/_base/files/kubelet.yaml)
// asks for that certificate only once its Node status carries addresses (kubelet
// NewKubeletServerCertificateManager: no template without them; client-go's certificate
// manager looks at the template again every second), so its CSR can arrive after the Node
// is Ready. Stopping at Ready left that CSR pending: `oc logs` and `oc exec` through the
// kubelet's :10250 failed ("tls: internal error") and the next labbuild run rebuilt
// cluster/csr-approver. A Ready node with no serving CSR at all is waited on for
// joinServingPolls polls, then taken as served: its kubelet was given its certificate
// before, and kube-controller-manager's csrcleaner deletes an issued CSR an hour after.
type joinServing struct {
	unseen map[string]int // node name → polls it was Ready with no serving CSR
}

// look is one poll's verdict once every node of want (node names, sorted) is Ready: list is
// every CSR, listed after the Ready check; expected and m are what csr.Decide reads. It
// returns done, or what the join still waits for.
func (j *joinServing) look(want []string, list []csr.CertificateSigningRequest, expected map[string]csr.NodeIdentity, m *csr.MachineView) (bool, string) {
	pending := 0
	asked := map[string]bool{} // node name → has a serving CSR, in any state
	for i := range list {
		c := &list[i]
		if c.Spec.SignerName == csr.SignerServing {
			if n := csr.NodeOf(c); n != "" {
				asked[n] = true
			}
		}
		if csr.Pending(c) {
			if ok, _ := csr.Decide(c, expected, m); ok {
				pending++
			}
		}
	}
	if pending > 0 {
		return false, fmt.Sprintf("%d lab node CSRs pending (approved on the next poll)", pending)
	}
	if j.unseen == nil {
		j.unseen = map[string]int{}
	}
	var waiting []string
	for _, n := range want {
		if asked[n] {
			continue
		}
		if j.unseen[n]++; j.unseen[n] <= joinServingPolls {
			waiting = append(waiting, n)
		}
	}
	if len(waiting) > 0 {
		return false, "waiting for the kubelet serving CSR of " + strings.Join(waiting, ", ")
	}
	return true, ""
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
