package targets

// The cluster family drives the lab from installed VMs to a converged cluster (spec stages
// 10-16): each phase is an External target that a user can run alone
// (`labbuild cluster/masters`), whose Run makes the phase happen and waits for its
// done-condition, and whose Probe observes the cluster and says Keep when that condition
// already holds. A rerun after a failure, a kill or a reboot so skips every finished phase
// and continues with the first unfinished one; a wait's timeout fails only its phase.
//
// Phases, in the order that works:
//
//	cluster/install/<node>  first boot of every VM with its Ignition (libvirt family's VM)
//	cluster/bootstrap       bootstrap VM on; /readyz through the API VIP; CRDs + manifests applied
//	                        with server-side apply; the CVO reports progress
//	cluster/csr-approver    one approval pass over pending CSRs: lab nodes only (targets/csr)
//	cluster/masters         masters on; their CSRs approved (client, then serving); all Ready
//	cluster/etcd            etcd on every master; then kube-system/bootstrap status=complete
//	cluster/pivot           HAProxy without the bootstrap; API through the VIP; bootstrap VM off
//	cluster/workers         workers on; their CSRs approved; all Ready (none: compact cluster)
//	cluster/converge        every ClusterOperator Available, none Degraded; ClusterVersion Available
//	cluster/done            summary: console URL, kubeadmin password and admin kubeconfig paths

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/virt"
	"github.com/labbuild/labbuild/targets/wait"
)

// ClusterMachines powers the lab's VMs for the cluster family. The libvirt family defines
// them (libvirt/vm/<node>); this interface is the little the phases need, so they are testable
// without VMs. node is the config's node name ("master-0"). Every method must be idempotent.
type ClusterMachines interface {
	// Install boots node for the first time so it installs RHCOS from its Ignition.
	Install(ctx context.Context, node string) error
	// Installed reports whether Install has happened (the VM exists and was started once).
	Installed(ctx context.Context, node string) (bool, error)
	// Start powers node on; a running VM is left alone.
	Start(ctx context.Context, node string) error
	// Stop powers node off (virsh destroy: the bootstrap's disk is thrown away anyway).
	Stop(ctx context.Context, node string) error
	// Running reports whether node's VM is running.
	Running(ctx context.Context, node string) (bool, error)
}

// ClusterBalancer switches the host's HAProxy to a new configuration file (the post-pivot one,
// without the bootstrap backends) and reloads it, as OTHW's stage 12 does by hand.
type ClusterBalancer interface {
	Switch(ctx context.Context, cfgFile string) error
}

// clusterWorld is everything outside the build the cluster family touches. Tests replace
// clusterEnv (and restore it); production uses defaultClusterWorld.
type clusterWorld struct {
	// clock drives every wait (wait.RealClock in production).
	clock wait.Clock
	// interval maps a phase's production poll interval to the one used (identity in
	// production; tests shorten it).
	interval func(time.Duration) time.Duration
	// restConfig makes the client config from the admin kubeconfig file and the API VIP.
	restConfig func(kubeconfig, apiVIP string) (*kube.RESTConfig, error)
	// machines returns the VM driver for the libvirt URI and cluster name.
	machines func(uri, cluster string) ClusterMachines
	// balancer returns the HAProxy switcher.
	balancer func() ClusterBalancer
	// onPoll, when set, sees every poll of every wait (tests: kill a build mid-wait).
	onPoll func(target string, p wait.Poll)
	// etcdMembers lists etcd's members through one of endpoints (https://<master ip>:2379)
	// with the etcd client certificate (etcdMemberList in production). Nil: cluster/etcd cannot
	// look at etcd and says so in its log.
	etcdMembers func(ctx context.Context, endpoints []string, tls EtcdTLSFiles) ([]EtcdMember, error)
}

var clusterEnv = defaultClusterWorld()

func defaultClusterWorld() clusterWorld {
	return clusterWorld{
		clock:    wait.RealClock{},
		interval: func(d time.Duration) time.Duration { return d },
		restConfig: func(kubeconfig, apiVIP string) (*kube.RESTConfig, error) {
			// The admin kubeconfig names https://api.<domain>:6443; the host reaches it
			// through the API VIP, which haproxy holds (spec stage 02).
			return kube.Config(kubeconfig, apiVIP+":6443")
		},
		machines:    func(uri, cluster string) ClusterMachines { return virtMachines{uri: uri, cluster: cluster} },
		balancer:    func() ClusterBalancer { return hpReloadBalancer{} },
		etcdMembers: etcdMemberList,
	}
}

// Poll intervals, as OTHW's wait scripts use them (spec stages 10, 11 and 13).
const (
	clusterPollAPI   = 5 * time.Second  // wait-bootstrap.sh retry helper
	clusterPollNodes = 15 * time.Second // wait-masters.sh
	clusterPollCO    = 15 * time.Second // wait-convergence.sh
)

// Names of the upstream targets the family reads, owned by other families.
const (
	clusterAdminKC   = "kubeconfig/admin"
	clusterManifests = "manifests/bootstrap"
	clusterCRDs      = "release/crds"
	clusterKubeadmin = "manifests/kubeadmin"
	clusterPostPivot = "haproxy/config-post-pivot"
	// clusterLB is the host load balancer holding the API and ingress VIPs: cluster/bootstrap
	// waits for the API through it and cluster/pivot reloads it. Absent when the cluster holds
	// its own VIPs (network.loadBalancer: in-cluster), which opt() follows.
	clusterLB = "haproxy/service"
)

// clusterHostDeps are the host integration targets the bring-up needs before the first
// wait: the host's firewall open for the VIP ports from the lab bridge, and the cluster
// domain resolvable on the host (host_integration.go).
var clusterHostDeps = []string{"host/firewall", "host/dns"}

func init() {
	Register(Family{Name: "cluster", Doc: "drive the lab from VMs to a converged cluster (stages 10-16; External, resumable)",
		Targets: func(c *Config) []*Target { return clusterTargets(c, clusterRegistered(c)) }})
}

// clusterRegistered returns a test of whether a target of another family is in the registered
// graph for c. Dependencies on families still being written (libvirt, haproxy, release) are
// declared only when their target exists, so the registered graph always builds.
func clusterRegistered(c *Config) func(string) bool {
	cache := map[string]map[string]bool{}
	return func(name string) bool {
		fam, _, _ := strings.Cut(name, "/")
		if fam == "cluster" {
			return false
		}
		set, ok := cache[fam]
		if !ok {
			set = map[string]bool{}
			for _, f := range families {
				if f.Name == fam {
					for _, t := range f.Targets(c) {
						set[t.Name] = true
					}
				}
			}
			cache[fam] = set
		}
		return set[name]
	}
}

// clusterNodeName is the Kubernetes node name of a lab node: the FQDN its Ignition writes to
// /etc/hostname (render/ignition NodeBase), which the kubelet registers as.
func clusterNodeName(node, domain string) string { return node + "." + domain }

// clusterReads are the config paths every phase that talks to the cluster reads.
var clusterReads = []string{"cluster.name", "cluster.baseDomain", "network.apiVIP", "libvirt.uri"}

// clusterTargets declares the family for c; have says which upstream targets of other
// families exist (tests pass their stand-ins).
func clusterTargets(c *Config, have func(string) bool) []*Target {
	opt := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, "cluster/") || have(n) { // the family's own targets always exist
				out = append(out, n)
			}
		}
		return out
	}
	var ts []*Target
	install := func(role string) []string {
		var out []string
		for _, n := range c.NodesByRole(role) {
			out = append(out, "cluster/install/"+n.Name)
		}
		return out
	}
	for _, n := range c.Nodes {
		node := n.Name // identity only; values come through the Step
		ts = append(ts, &Target{
			Name:     "cluster/install/" + node,
			Doc:      "first boot of " + node + " with its Ignition (RHCOS install)",
			Deps:     opt("libvirt/vm/"+node, "ignition/"+node, "libvirt/dns"),
			Reads:    []string{"cluster.name", "libvirt.uri"},
			Version:  1,
			External: true,
			Run: func(ctx context.Context, s *Step) error {
				m, err := clusterMachinesFor(s)
				if err != nil {
					return err
				}
				if err := m.Install(ctx, node); err != nil {
					return fmt.Errorf("%s: install %s: %w (check: virsh -c <libvirt.uri> console <cluster>-%s)", s.Target().Name, node, err, node)
				}
				return clusterRecord(s, map[string]any{"node": node, "installed": true})
			},
			Probe: func(ctx context.Context, s *Step) (ProbeResult, error) {
				m, err := clusterMachinesFor(s)
				if err != nil {
					return ProbeResult{}, err
				}
				ok, err := m.Installed(ctx, node)
				if err != nil {
					return ProbeResult{Action: Create, Reason: "cannot see VM " + node + ": " + err.Error()}, nil
				}
				if !ok {
					return ProbeResult{Action: Create, Reason: "VM " + node + " not installed"}, nil
				}
				return ProbeResult{Action: Keep}, nil
			},
		})
	}

	masters, workers := c.NodesByRole(RoleMaster), c.NodesByRole(RoleWorker)
	nodeReads := func(ns []Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, "nodes."+n.Name+".ip")
		}
		return out
	}
	names := func(ns []Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	masterNames, workerNames := names(masters), names(workers)
	allJoining := append(slices.Clone(masters), workers...)
	bootstrap := c.Bootstrap().Name

	ts = append(ts,
		&Target{
			Name:     "cluster/bootstrap",
			Doc:      "bootstrap VM on; API ready through the VIP; CRDs and manifests applied; CVO reporting",
			Deps:     append([]string{clusterAdminKC}, opt(append([]string{"cluster/install/" + bootstrap, clusterCRDs, clusterManifests, clusterLB}, clusterHostDeps...)...)...),
			Reads:    append(slices.Clone(clusterReads), "wait.bootstrapMinutes"),
			Version:  1,
			External: true,
			Run: func(ctx context.Context, s *Step) error {
				return clusterBootstrap(ctx, s, bootstrap, masterNames)
			},
			Probe: func(ctx context.Context, s *Step) (ProbeResult, error) {
				k, err := clusterClients(s)
				if err != nil {
					return ProbeResult{}, err
				}
				if done, _ := kube.BootstrapComplete(ctx, k.Dynamic); done {
					return ProbeResult{Action: Keep}, nil // past the pivot: the bootstrap is gone for good
				}
				if err := kube.Readyz(ctx, k); err != nil {
					return ProbeResult{Action: Update, Reason: "API not ready through the VIP: " + err.Error()}, nil
				}
				done, status, err := kube.CVOProgress(ctx, k.Dynamic)
				if err != nil || !done {
					return ProbeResult{Action: Update, Reason: "CVO not reporting: " + status + errText(err)}, nil
				}
				return ProbeResult{Action: Keep}, nil
			},
		},
		&Target{
			Name:     "cluster/csr-approver",
			Doc:      "approve pending CSRs of the lab's nodes only (client, then serving); refuse the rest",
			Deps:     []string{clusterAdminKC, "cluster/bootstrap"},
			Reads:    append(slices.Clone(clusterReads), nodeReads(allJoining)...),
			Version:  1,
			External: true,
			Run: func(ctx context.Context, s *Step) error {
				k, err := clusterClients(s)
				if err != nil {
					return err
				}
				expected, err := clusterExpected(s, names(allJoining))
				if err != nil {
					return err
				}
				ds, err := csr.Approve(ctx, k.Dynamic, expected)
				if err != nil {
					return fmt.Errorf("%s: %w (check: oc get csr)", s.Target().Name, err)
				}
				clusterLogDecisions(s, ds)
				return clusterRecord(s, map[string]any{"decisions": ds})
			},
			Probe: func(ctx context.Context, s *Step) (ProbeResult, error) {
				k, err := clusterClients(s)
				if err != nil {
					return ProbeResult{}, err
				}
				expected, err := clusterExpected(s, names(allJoining))
				if err != nil {
					return ProbeResult{}, err
				}
				n, err := clusterApprovable(ctx, k, expected)
				if err != nil {
					return ProbeResult{Action: Update, Reason: err.Error()}, nil
				}
				if n > 0 {
					return ProbeResult{Action: Update, Reason: fmt.Sprintf("%d lab node CSRs pending", n)}, nil
				}
				return ProbeResult{Action: Keep}, nil
			},
		},
		clusterJoin("cluster/masters", "masters on; their CSRs approved; every master Ready",
			append([]string{clusterAdminKC, "cluster/bootstrap"}, opt(install(RoleMaster)...)...),
			"wait.mastersMinutes", masterNames, nodeReads(masters), "master"),
		&Target{
			Name:     "cluster/etcd",
			Doc:      "etcd running on every master; then kube-system/bootstrap status=complete (bootstrap member removed)",
			Deps:     append([]string{clusterAdminKC, "cluster/masters"}, opt(etcdClientDeps...)...),
			Reads:    append(append(slices.Clone(clusterReads), "wait.etcdMinutes", "nodes."+bootstrap+".ip"), nodeReads(masters)...),
			Version:  2,
			External: true,
			Run: func(ctx context.Context, s *Step) error {
				return clusterEtcd(ctx, s, masterNames, bootstrap)
			},
			Probe: func(ctx context.Context, s *Step) (ProbeResult, error) {
				k, err := clusterClients(s)
				if err != nil {
					return ProbeResult{}, err
				}
				done, err := kube.BootstrapComplete(ctx, k.Dynamic)
				if err != nil || !done {
					return ProbeResult{Action: Create, Reason: "ConfigMap kube-system/bootstrap not complete" + errText(err)}, nil
				}
				if in, _, err := etcdBootstrapMember(ctx, s, masterNames, bootstrap); err == nil && in {
					return ProbeResult{Action: Update, Reason: "the bootstrap is still an etcd member"}, nil
				}
				return ProbeResult{Action: Keep}, nil
			},
		},
		&Target{
			Name:     "cluster/pivot",
			Doc:      pivotDoc(c),
			Deps:     append([]string{clusterAdminKC, "cluster/etcd"}, opt(clusterPostPivot, clusterLB)...),
			Reads:    append(append(slices.Clone(clusterReads), "wait.pivotMinutes"), vipPivotReads(c)...),
			Version:  1,
			External: true,
			Run: func(ctx context.Context, s *Step) error {
				return clusterPivot(ctx, s, bootstrap, masterNames)
			},
			Probe: func(ctx context.Context, s *Step) (ProbeResult, error) {
				m, err := clusterMachinesFor(s)
				if err != nil {
					return ProbeResult{}, err
				}
				if on, err := m.Running(ctx, bootstrap); err != nil || on {
					return ProbeResult{Action: Update, Reason: "bootstrap VM still running" + errText(err)}, nil
				}
				k, err := clusterClients(s)
				if err != nil {
					return ProbeResult{}, err
				}
				if err := kube.Readyz(ctx, k); err != nil {
					return ProbeResult{Action: Update, Reason: "API not ready through the VIP: " + err.Error()}, nil
				}
				return ProbeResult{Action: Keep}, nil
			},
		},
		clusterJoin("cluster/workers", "workers on; their CSRs approved; every worker Ready (none in a compact cluster)",
			append([]string{clusterAdminKC, "cluster/pivot"}, opt(install(RoleWorker)...)...),
			"wait.workersMinutes", workerNames, nodeReads(workers), "worker"),
		&Target{
			Name:     "cluster/converge",
			Doc:      "every ClusterOperator Available and not Degraded; ClusterVersion Available",
			Deps:     []string{clusterAdminKC, "cluster/pivot", "cluster/workers"},
			Reads:    append(slices.Clone(clusterReads), "wait.convergeMinutes"),
			Version:  1,
			External: true,
			Run:      clusterConverge,
			Probe: func(ctx context.Context, s *Step) (ProbeResult, error) {
				k, err := clusterClients(s)
				if err != nil {
					return ProbeResult{}, err
				}
				cv, err := kube.Converged(ctx, k.Dynamic)
				if err != nil || !cv.Done() {
					return ProbeResult{Action: Update, Reason: cv.String() + errText(err)}, nil
				}
				return ProbeResult{Action: Keep}, nil
			},
		},
		&Target{
			Name:     "cluster/done",
			Doc:      "prints the console URL and where the kubeadmin password and admin kubeconfig are",
			Deps:     append([]string{clusterAdminKC, "cluster/converge"}, opt(clusterKubeadmin, "host/dns")...),
			Reads:    []string{"cluster.name", "cluster.baseDomain"},
			Version:  1,
			External: true,
			Run:      clusterDone,
		},
	)
	return ts
}

// clusterShortErr keeps a wait's remembered error to a few lines: a server's validation error
// on a large CRD runs to kilobytes and would drown the one line a timeout prints. The full
// text is in the target's log (the applier logs each object).
func clusterShortErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if len(msg) <= 600 {
		return err
	}
	return fmt.Errorf("%s… (%d more bytes; see the target's log)", msg[:600], len(msg)-600)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

// clusterRecord writes the phase's record, record.json: the state the phase reached, in terms
// that do not change when a finished phase runs again (how it got there — CSR verdicts, apply
// counts — goes to the target's log). A rerun so reproduces the same bytes, and the engine's
// early cutoff keeps the later phases at their Probe instead of running them again.
func clusterRecord(s *Step, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return s.WriteFile("record.json", append(b, '\n'), 0o644)
}

// clusterMachinesFor returns the VM driver for the lab's libvirt URI and cluster name.
func clusterMachinesFor(s *Step) (ClusterMachines, error) {
	uri, err := s.String("libvirt.uri")
	if err != nil {
		return nil, err
	}
	name, err := s.String("cluster.name")
	if err != nil {
		return nil, err
	}
	return clusterEnv.machines(uri, name), nil
}

// clusterClients returns clients for the admin kubeconfig reached through the API VIP.
func clusterClients(s *Step) (*kube.Clients, error) {
	kc, err := s.DepPath(clusterAdminKC, "kubeconfig")
	if err != nil {
		return nil, err
	}
	vip, err := s.String("network.apiVIP")
	if err != nil {
		return nil, err
	}
	cfg, err := clusterEnv.restConfig(kc, vip)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	return kube.NewClients(cfg)
}

// clusterExpected returns the CSR identities of nodes: FQDN node name, short name as DNS
// alias, the node's IP as the only IP SAN.
func clusterExpected(s *Step, nodes []string) (map[string]csr.NodeIdentity, error) {
	domain, err := clusterDomain(s)
	if err != nil {
		return nil, err
	}
	out := map[string]csr.NodeIdentity{}
	for _, n := range nodes {
		ip, err := s.String("nodes." + n + ".ip")
		if err != nil {
			return nil, err
		}
		name := clusterNodeName(n, domain)
		out[name] = csr.NodeIdentity{Name: name, IPs: []string{ip}, DNSNames: []string{n}}
	}
	return out, nil
}

// clusterApprovable counts the pending CSRs csr.Decide would approve.
func clusterApprovable(ctx context.Context, k *kube.Clients, expected map[string]csr.NodeIdentity) (int, error) {
	list, err := csr.List(ctx, k.Dynamic)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list {
		if csr.Pending(&list[i]) {
			if ok, _ := csr.Decide(&list[i], expected); ok {
				n++
			}
		}
	}
	return n, nil
}

// clusterLogDecisions logs every CSR verdict once: approvals and refusals with their reason.
func clusterLogDecisions(s *Step, ds []csr.Decision) {
	for _, d := range ds {
		verdict := "refused (left pending)"
		switch {
		case d.Approved:
			verdict = "approved"
		case d.Approve:
			verdict = "to approve, but it changed meanwhile (next pass)"
		}
		s.Logf("CSR %s (%s, node %q): %s: %s", d.CSR, d.Signer, d.Node, verdict, d.Reason)
	}
}

// clusterMinutes reads a wait.* timeout in minutes; a missing or non-positive value is an
// error naming the field.
func clusterMinutes(s *Step, field string) (time.Duration, error) {
	var m int
	if err := s.Value(field, &m); err != nil {
		return 0, err
	}
	if m <= 0 {
		return 0, fmt.Errorf("%s: %s (%s) is %d: want a positive number of minutes", s.Target().Name, field, s.Where(field), m)
	}
	return time.Duration(m) * time.Minute, nil
}

// clusterWait runs one wait of target s with the world's clock, logging to the target's log.
func clusterWait(ctx context.Context, s *Step, spec wait.Spec, cond wait.Condition) (wait.Result, error) {
	spec.Clock = clusterEnv.clock
	spec.Interval = clusterEnv.interval(spec.Interval)
	spec.Log = s.Log()
	name := s.Target().Name
	// The status display shows "waiting for WHAT (status) — 4m10s of 30m", ticking between polls.
	s.Progress(Progress{Phase: "waiting for " + spec.What, Limit: spec.Timeout})
	spec.OnPoll = func(p wait.Poll) {
		phase := "waiting for " + spec.What
		if p.Status != "" {
			phase += " (" + p.Status + ")"
		}
		s.Progress(Progress{Phase: phase, Elapsed: p.Elapsed, Limit: spec.Timeout})
		if clusterEnv.onPoll != nil {
			clusterEnv.onPoll(name, p)
		}
	}
	r, err := wait.Until(ctx, spec, cond)
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// clusterBootstrap is cluster/bootstrap's Run.
func clusterBootstrap(ctx context.Context, s *Step, bootstrap string, masters []string) error {
	timeout, err := clusterMinutes(s, "wait.bootstrapMinutes")
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
	vip, _ := s.String("network.apiVIP")
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
		if _, perr := s.Prev("record.json"); perr == nil {
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
		Inspect:  fmt.Sprintf("curl -k https://%s:6443/readyz; ssh core@<bootstrap ip> journalctl -u bootkube -u kubelet", vip),
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
// are all Ready: cluster/masters and cluster/workers.
func clusterJoin(name, doc string, deps []string, timeoutField string, nodes, nodeReads []string, role string) *Target {
	return &Target{
		Name:     name,
		Doc:      doc,
		Deps:     deps,
		Reads:    append(append(slices.Clone(clusterReads), timeoutField), nodeReads...),
		Version:  1,
		External: true,
		Run: func(ctx context.Context, s *Step) error {
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
			expected, err := clusterExpected(s, nodes)
			if err != nil {
				return err
			}
			want := make([]string, 0, len(expected))
			for n := range expected {
				want = append(want, n)
			}
			slices.Sort(want)
			m, err := clusterMachinesFor(s)
			if err != nil {
				return err
			}
			for _, n := range nodes {
				if err := m.Start(ctx, n); err != nil {
					return fmt.Errorf("%s: start VM %s: %w", name, n, err)
				}
			}
			logged := map[string]bool{} // CSR name → verdict logged (refusals once, not every poll)
			_, err = clusterWait(ctx, s, wait.Spec{
				What:     fmt.Sprintf("%d %s nodes Ready (%s), approving their CSRs", len(want), role, strings.Join(want, ", ")),
				Inspect:  "oc get csr; oc get nodes -l node-role.kubernetes.io/" + role,
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
						clusterLogDecisions(s, []csr.Decision{d})
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
		Probe: func(ctx context.Context, s *Step) (ProbeResult, error) {
			if len(nodes) == 0 {
				return ProbeResult{Action: Keep}, nil
			}
			k, err := clusterClients(s)
			if err != nil {
				return ProbeResult{}, err
			}
			expected, err := clusterExpected(s, nodes)
			if err != nil {
				return ProbeResult{}, err
			}
			want := make([]string, 0, len(expected))
			for n := range expected {
				want = append(want, n)
			}
			_, notReady, err := kube.NodesReady(ctx, k.Dynamic, want)
			if err != nil || len(notReady) > 0 {
				return ProbeResult{Action: Update, Reason: "not Ready: " + strings.Join(notReady, ", ") + errText(err)}, nil
			}
			return ProbeResult{Action: Keep}, nil
		},
	}
}

// clusterEtcd is cluster/etcd's Run: wait for the cluster-etcd-operator's etcd on every master,
// then mark the bootstrap complete so the operator removes the etcd-bootstrap member.
func clusterEtcd(ctx context.Context, s *Step, masters []string, bootstrap string) error {
	timeout, err := clusterMinutes(s, "wait.etcdMinutes")
	if err != nil {
		return err
	}
	k, err := clusterClients(s)
	if err != nil {
		return err
	}
	want, err := clusterNodeNames(s, masters)
	if err != nil {
		return err
	}
	slices.Sort(want)
	if _, err := clusterWait(ctx, s, wait.Spec{
		What:     fmt.Sprintf("etcd running on %d masters", len(want)),
		Inspect:  "oc get pods -n openshift-etcd -l app=etcd -o wide; oc get co etcd",
		Timeout:  timeout,
		Interval: clusterPollNodes,
	}, func(ctx context.Context) (bool, string, error) {
		on, err := kube.EtcdOn(ctx, k.Dynamic, want)
		if err != nil {
			return false, "listing etcd pods", err
		}
		return len(on) == len(want), fmt.Sprintf("etcd Ready on %d/%d masters", len(on), len(want)), nil
	}); err != nil {
		return err
	}
	if err := kube.MarkBootstrapComplete(ctx, k.Dynamic); err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	s.Logf("created ConfigMap kube-system/bootstrap status=complete: the cluster-etcd-operator now removes the etcd-bootstrap member")
	// The pivot stops the bootstrap VM: while it is still an etcd member, that would take a
	// voting member away from a 2- or 4-member cluster (quorum lost with one more failure),
	// so wait for the operator's bootstrap teardown to remove it first.
	if clusterEnv.etcdMembers == nil {
		s.Logf("no etcd client in this build: not waiting for the etcd-bootstrap member to leave")
		return clusterRecord(s, map[string]any{"etcdOn": want, "bootstrapComplete": true})
	}
	if _, err := clusterWait(ctx, s, wait.Spec{
		What:     "the bootstrap to leave etcd's member list",
		Inspect:  "oc rsh -n openshift-etcd <etcd pod> etcdctl member list -w table; oc get etcd cluster -o yaml",
		Timeout:  timeout,
		Interval: clusterPollAPI,
	}, func(ctx context.Context) (bool, string, error) {
		in, members, err := etcdBootstrapMember(ctx, s, masters, bootstrap)
		if err != nil {
			return false, "listing etcd members", err
		}
		st := fmt.Sprintf("etcd members: %s", strings.Join(members, ", "))
		return !in, st, nil
	}); err != nil {
		return err
	}
	s.Logf("the bootstrap is no longer an etcd member")
	return clusterRecord(s, map[string]any{"etcdOn": want, "bootstrapComplete": true, "bootstrapMemberRemoved": true})
}

// etcdClientDeps are the PKI targets cluster/etcd reads to talk to etcd as its operator does
// (openshift-config/etcd-client, trusted through etcd-signer).
var etcdClientDeps = []string{"pki/ca/etcd-signer", "pki/cert/etcd-client", "pki/key/etcd-client"}

// EtcdTLSFiles are the PEM files of an etcd client: CA bundle, certificate and key.
type EtcdTLSFiles struct{ CA, Cert, Key string }

// EtcdMember is one entry of etcd's member list (etcdserverpb.Member, as the v3 JSON gateway
// returns it).
type EtcdMember struct {
	ID         string   `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
}

// etcdBootstrapMember lists etcd's members through the masters and reports whether one of them
// is the bootstrap: named etcd-bootstrap (as the installer's bootstrap etcd calls itself) or
// with a peer URL on the bootstrap's IP. members are the names, for the wait's status.
func etcdBootstrapMember(ctx context.Context, s *Step, masters []string, bootstrap string) (in bool, members []string, err error) {
	if clusterEnv.etcdMembers == nil {
		return false, nil, errors.New("no etcd client")
	}
	var tf EtcdTLSFiles
	for i, p := range []*string{&tf.CA, &tf.Cert, &tf.Key} {
		dep, rel := etcdClientDeps[i], "tls.crt"
		if i == 2 {
			rel = "tls.key"
		}
		if *p, err = s.DepPath(dep, rel); err != nil {
			return false, nil, err
		}
	}
	var endpoints []string
	for _, m := range masters {
		ip, err := s.String("nodes." + m + ".ip")
		if err != nil {
			return false, nil, err
		}
		endpoints = append(endpoints, "https://"+net.JoinHostPort(ip, "2379"))
	}
	bip, err := s.String("nodes." + bootstrap + ".ip")
	if err != nil {
		return false, nil, err
	}
	ms, err := clusterEnv.etcdMembers(ctx, endpoints, tf)
	if err != nil {
		return false, nil, err
	}
	for _, m := range ms {
		members = append(members, m.Name)
		if m.Name == "etcd-bootstrap" {
			in = true
		}
		for _, u := range m.PeerURLs {
			if pu, err := url.Parse(u); err == nil && pu.Hostname() == bip {
				in = true
			}
		}
	}
	return in, members, nil
}

// etcdMemberList is the production etcdMembers: POST /v3/cluster/member/list on etcd's gRPC
// JSON gateway (on by default on the client port), over mutual TLS, trying each endpoint in
// turn until one answers.
func etcdMemberList(ctx context.Context, endpoints []string, tf EtcdTLSFiles) ([]EtcdMember, error) {
	cert, err := tls.LoadX509KeyPair(tf.Cert, tf.Key)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	ca, err := os.ReadFile(tf.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	var errs []error
	for _, ep := range endpoints {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(ep, "/")+"/v3/cluster/member/list", strings.NewReader("{}"))
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			errs = append(errs, fmt.Errorf("%s: %s %s%s", ep, resp.Status, bytes.TrimSpace(body[:min(len(body), 200)]), errText(err)))
			continue
		}
		var out struct {
			Members []EtcdMember `json:"members"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			errs = append(errs, fmt.Errorf("%s: member list: %w", ep, err))
			continue
		}
		return out.Members, nil
	}
	return nil, fmt.Errorf("no etcd endpoint answered: %w", errors.Join(errs...))
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

// pivotDoc is cluster/pivot's one-line description in c's load-balancer mode.
func pivotDoc(c *Config) string {
	if c.InCluster() {
		return "masters' keepalived and haproxy Ready; bootstrap VM off (keepalived moves the VIP); API ready through the VIP"
	}
	return "HAProxy without the bootstrap; API ready through the VIP; bootstrap VM off"
}

// vipPivotReads: in the in-cluster mode the pivot reads the mode (no host haproxy to switch).
func vipPivotReads(c *Config) []string {
	if c.InCluster() {
		return []string{"network.loadBalancer"}
	}
	return nil
}

// clusterPivot is cluster/pivot's Run. In the host mode it switches labbuild's haproxy to the
// post-pivot config, powers the bootstrap off and waits for /readyz through the VIP. In the
// in-cluster mode no host haproxy exists: it first waits until every master's keepalived and
// haproxy static pods are Ready (vipMastersReady: their VRRP priority then wins once the
// bootstrap's stops), then powers the bootstrap off and waits for /readyz through the VIP,
// which keepalived moves to a master.
func clusterPivot(ctx context.Context, s *Step, bootstrap string, masters []string) error {
	timeout, err := clusterMinutes(s, "wait.pivotMinutes")
	if err != nil {
		return err
	}
	rec := map[string]any{}
	inCluster := false
	if slices.Contains(s.Target().Reads, "network.loadBalancer") {
		lb, err := s.String("network.loadBalancer")
		if err != nil {
			return err
		}
		inCluster = lb == LoadBalancerInCluster
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
	vip, _ := s.String("network.apiVIP")
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
	return clusterRecord(s, rec)
}

// clusterConverge is cluster/converge's Run.
func clusterConverge(ctx context.Context, s *Step) error {
	timeout, err := clusterMinutes(s, "wait.convergeMinutes")
	if err != nil {
		return err
	}
	k, err := clusterClients(s)
	if err != nil {
		return err
	}
	var last kube.Convergence
	if _, err := clusterWait(ctx, s, wait.Spec{
		What:     "every ClusterOperator Available and not Degraded, and ClusterVersion Available",
		Inspect:  "oc get co; oc get clusterversion",
		Timeout:  timeout,
		Interval: clusterPollCO,
	}, func(ctx context.Context) (bool, string, error) {
		c, err := kube.Converged(ctx, k.Dynamic)
		if err != nil {
			return false, "reading ClusterOperators", err
		}
		last = c
		return c.Done(), c.String(), nil
	}); err != nil {
		return err
	}
	s.Logf("converged: %s", last)
	return clusterRecord(s, map[string]any{"converged": true})
}

// clusterDone writes summary.txt: where the user goes next, in openshift-install's words
// (pkg/cmd/openshift-install create.go logComplete): the KUBECONFIG export, the console URL,
// and where the kubeadmin password is; never the password itself, which stays in its 0600 file.
func clusterDone(ctx context.Context, s *Step) error {
	domain, err := clusterDomain(s)
	if err != nil {
		return err
	}
	kc, err := s.DepPath(clusterAdminKC, "kubeconfig")
	if err != nil {
		return err
	}
	pw := "(manifests/kubeadmin is not in the build graph)"
	if p, err := s.DepPath(clusterKubeadmin, "kubeadmin-password"); err == nil {
		pw = p
	}
	text := fmt.Sprintf(`Install complete!
To access the cluster as the system:admin user when using 'oc', run
    export KUBECONFIG=%s
Access the OpenShift web-console here: https://console-openshift-console.apps.%s
Login to the console with user: "kubeadmin", and the password in %s
`, kc, domain, pw)
	if note, err := s.DepFile("host/dns", "note.txt"); err == nil {
		text += string(note) // the host's resolver needs a hand: say what to add
	}
	s.Logf("%s", text)
	return s.WriteFile("summary.txt", []byte(text), 0o644)
}

// ClusterSummary returns what `labbuild cluster` prints when it ends: cluster/done's
// summary.txt under outDir, when r built cluster/done or found it up to date; nil otherwise.
func ClusterSummary(outDir string, r *Result) []byte {
	if r == nil || !(slices.Contains(r.Executed, "cluster/done") || slices.Contains(r.Reused, "cluster/done") || slices.Contains(r.UpToDate, "cluster/done")) {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(outDir, "cluster", "done", "summary.txt"))
	if err != nil {
		return nil
	}
	return b
}

// virtMachines is the production ClusterMachines: it powers the domains libvirt/vm/<node>
// defined (named <cluster>-<node>) through go-libvirt (targets/virt), on the lab's
// libvirt.uri. First boot installs from the VM's own media (the domain carries its Ignition
// through fw_cfg), so Install is a start.
// TODO(libvirt family): run coreos-installer with the node's Ignition on a live-ISO boot
// (spec target-graph 3.10) once RHCOS media is fetched.
type virtMachines struct{ uri, cluster string }

func (v virtMachines) domain(node string) string { return v.cluster + "-" + node }

// with runs fn on a fresh connection: phases poll for minutes and a libvirtd restart must not
// leave them holding a dead connection.
func (v virtMachines) with(fn func(c *virt.Conn) error) error {
	c, err := virt.Connect(v.uri)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

func (v virtMachines) state(node string) (st virt.DomainState, found bool, err error) {
	err = v.with(func(c *virt.Conn) error {
		_, st, found, err = c.Domain(v.domain(node))
		return err
	})
	return st, found, err
}

func (v virtMachines) Install(ctx context.Context, node string) error { return v.Start(ctx, node) }

func (v virtMachines) Installed(ctx context.Context, node string) (bool, error) {
	_, found, err := v.state(node)
	return found, err
}

func (v virtMachines) Running(ctx context.Context, node string) (bool, error) {
	st, found, err := v.state(node)
	if err != nil {
		return false, err
	}
	if !found {
		return false, fmt.Errorf("domain %s is not defined on %s (run labbuild libvirt/vm/%s)", v.domain(node), v.uri, node)
	}
	return st == virt.DomainRunning, nil
}

func (v virtMachines) Start(ctx context.Context, node string) error {
	if on, err := v.Running(ctx, node); err != nil || on {
		return err
	}
	return v.with(func(c *virt.Conn) error { return c.StartDomain(v.domain(node), false) })
}

func (v virtMachines) Stop(ctx context.Context, node string) error {
	return v.with(func(c *virt.Conn) error { return c.StopDomain(v.domain(node)) }) // a missing or stopped domain is fine
}

// haproxyFileBalancer installs a configuration file at path and reloads haproxy, the manual
// step of OTHW's execute-pivot.sh (edit /etc/haproxy/haproxy.cfg; systemctl reload haproxy).
// It checks the file with `haproxy -c` first, so a bad config never replaces a good one.
// hpReloadBalancer uses it when no labbuild haproxy runs.
type haproxyFileBalancer struct{ path string }

func (h haproxyFileBalancer) Switch(ctx context.Context, cfgFile string) error {
	if out, err := exec.CommandContext(ctx, "haproxy", "-c", "-f", cfgFile).CombinedOutput(); err != nil {
		return fmt.Errorf("haproxy -c -f %s: %w: %.300s", cfgFile, err, out)
	}
	b, err := os.ReadFile(cfgFile)
	if err != nil {
		return err
	}
	tmp := h.path + ".labbuild-tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, h.path); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "systemctl", "reload", "haproxy").CombinedOutput(); err != nil {
		return fmt.Errorf("systemctl reload haproxy: %w: %.300s (reload it by hand: %s is in place)", err, out, filepath.Clean(h.path))
	}
	return nil
}

// ClusterStatus writes, for `labbuild status`, each cluster stage and node as the cluster and
// the hypervisor report them: the API through the VIP, the bootstrap, etcd, operators, and per
// node its role, VM state, Kubernetes Ready condition and pending CSRs. It reads the admin
// kubeconfig the build wrote (outDir/kubeconfig/admin/kubeconfig). An unreachable API is
// reported, not returned as an error; errors are for a missing kubeconfig or a failed write.
func ClusterStatus(ctx context.Context, c *Config, outDir string, w io.Writer) error {
	kc := filepath.Join(outDir, filepath.FromSlash(clusterAdminKC), "kubeconfig")
	if _, err := os.Stat(kc); err != nil {
		return fmt.Errorf("status: %w (build kubeconfig/admin first: labbuild kubeconfig/admin)", err)
	}
	cfg, err := clusterEnv.restConfig(kc, c.Network.APIVIP)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	k, err := kube.NewClients(cfg)
	if err != nil {
		return err
	}
	m := clusterEnv.machines(c.Libvirt.URI, c.Cluster.Name)
	domain := c.Cluster.Domain()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	apiErr := kube.Readyz(ctx, k)
	if apiErr != nil {
		fmt.Fprintf(tw, "api\tnot ready through %s:6443: %v\n", c.Network.APIVIP, apiErr)
	} else {
		fmt.Fprintf(tw, "api\tready through %s:6443\n", c.Network.APIVIP)
		if done, err := kube.BootstrapComplete(ctx, k.Dynamic); err == nil && done {
			fmt.Fprintf(tw, "bootstrap\tcomplete (kube-system/bootstrap)\n")
		} else if ok, st, err := kube.CVOProgress(ctx, k.Dynamic); err == nil {
			fmt.Fprintf(tw, "bootstrap\tin progress; CVO reporting: %v (%s)\n", ok, st)
		}
		var masters []string
		for _, n := range c.NodesByRole(RoleMaster) {
			masters = append(masters, clusterNodeName(n.Name, domain))
		}
		if on, err := kube.EtcdOn(ctx, k.Dynamic, masters); err == nil {
			fmt.Fprintf(tw, "etcd\tReady on %d/%d masters\n", len(on), len(masters))
		}
		if cv, err := kube.Converged(ctx, k.Dynamic); err == nil {
			fmt.Fprintf(tw, "operators\t%s\n", cv)
		}
	}
	pending := map[string]int{}
	ready := map[string]string{}
	if apiErr == nil {
		if list, err := csr.List(ctx, k.Dynamic); err == nil {
			for i := range list {
				if csr.Pending(&list[i]) {
					pending[csr.NodeOf(&list[i])]++
				}
			}
		}
		var names []string
		for _, n := range c.Nodes {
			names = append(names, clusterNodeName(n.Name, domain))
		}
		if r, nr, err := kube.NodesReady(ctx, k.Dynamic, names); err == nil {
			for _, n := range r {
				ready[n] = "Ready"
			}
			for _, n := range nr {
				ready[n] = "NotReady or absent"
			}
		}
	}
	fmt.Fprintf(tw, "\nNODE\tROLE\tVM\tKUBERNETES\tPENDING CSRS\n")
	for _, n := range c.Nodes {
		vm := "unknown"
		if on, err := m.Running(ctx, n.Name); err == nil {
			vm = map[bool]string{true: "running", false: "off"}[on]
		}
		fq := clusterNodeName(n.Name, domain)
		st := ready[fq]
		if n.Role == RoleBootstrap || st == "" {
			st = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", n.Name, n.Role, vm, st, pending[fq])
	}
	return tw.Flush()
}

// clusterNodeNames maps lab node names to the Node names they register as in the cluster
// (clusterNodeName under the cluster domain), in the order given.
func clusterNodeNames(s *Step, names []string) ([]string, error) {
	domain, err := clusterDomain(s)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, clusterNodeName(n, domain))
	}
	return out, nil
}
