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
//	cluster/etcd            the masters' control plane and the CVO running, etcd on every master;
//	                        then kube-system/bootstrap status=complete
//	cluster/pivot           HAProxy without the bootstrap; API through the VIP; bootstrap VM off
//	cluster/workers         workers on; their CSRs approved; all Ready (none: compact cluster)
//	cluster/converge        every ClusterOperator Available, none Degraded; ClusterVersion Available
//	cluster/done            summary: console URL, kubeadmin password and admin kubeconfig paths

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
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

// clusterEnv is the cluster family's world: defaultClusterWorld in production, a test seam
// that tests replace and restore.
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

// Names of the upstream targets the family reads, owned by other families (and
// adminKubeconfig, shared_nodes.go).
const (
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
		Targets: func(l Lab) []*engine.Target { return clusterTargets(l.Config, clusterRegistered(l.Config)) }})
}

// clusterRegistered returns a test of whether a target of another family is in the registered
// graph for c. Dependencies on families still being written (libvirt, haproxy, release) are
// declared only when their target exists, so the registered graph always builds.
func clusterRegistered(c *lab.Config) func(string) bool {
	cache := map[string]map[string]bool{}
	return func(name string) bool {
		fam := engine.Family(name)
		if fam == "cluster" {
			return false
		}
		set, ok := cache[fam]
		if !ok {
			set = map[string]bool{}
			for _, f := range families {
				if f.Name == fam {
					for _, t := range f.Targets(Lab{Config: c}) {
						set[t.Name] = true
					}
				}
			}
			cache[fam] = set
		}
		return set[name]
	}
}

// clusterReads are the config paths every phase that talks to the cluster reads.
var clusterReads = []string{lab.ClusterName, lab.ClusterBaseDomain, lab.NetworkAPIVIP, lab.LibvirtURI}

// clusterTargets declares the family for c; have says which upstream targets of other
// families exist (tests pass their stand-ins).
func clusterTargets(c *lab.Config, have func(string) bool) []*engine.Target {
	opt := func(names ...string) []string {
		var out []string
		for _, n := range names {
			if strings.HasPrefix(n, "cluster/") || have(n) { // the family's own targets always exist
				out = append(out, n)
			}
		}
		return out
	}
	var ts []*engine.Target
	install := func(role string) []string {
		var out []string
		for _, n := range c.NodesByRole(role) {
			if !clusterMetal3Node(c, n) {
				out = append(out, "cluster/install/"+n.Name)
			}
		}
		return out
	}
	for _, n := range c.Nodes {
		if clusterMetal3Node(c, n) {
			continue // Metal3 powers it on through the BMC (cluster/workers waits for it)
		}
		node := n.Name // identity only; values come through the Step
		ts = append(ts, &engine.Target{
			Name:     "cluster/install/" + node,
			Doc:      "first boot of " + node + " with its Ignition (RHCOS install)",
			Deps:     opt("libvirt/vm/"+node, "ignition/"+node, "libvirt/dns"),
			Reads:    []string{lab.ClusterName, lab.LibvirtURI},
			Version:  1,
			External: true,
			Run: func(ctx context.Context, s *engine.Step) error {
				m, err := clusterMachinesFor(s)
				if err != nil {
					return err
				}
				if err := m.Install(ctx, node); err != nil {
					return fmt.Errorf("%s: install %s: %w (check: virsh -c <libvirt.uri> console <cluster>-%s)", s.Target().Name, node, err, node)
				}
				return clusterRecord(s, map[string]any{"node": node, "installed": true})
			},
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				m, err := clusterMachinesFor(s)
				if err != nil {
					return engine.ProbeResult{}, err
				}
				ok, err := m.Installed(ctx, node)
				if err != nil {
					return engine.ProbeResult{Action: engine.Create, Reason: "cannot see VM " + node + ": " + err.Error()}, nil
				}
				if !ok {
					return engine.ProbeResult{Action: engine.Create, Reason: "VM " + node + " not installed"}, nil
				}
				return engine.ProbeResult{Action: engine.Keep}, nil
			},
		})
	}

	masters, workers := c.NodesByRole(lab.RoleMaster), c.NodesByRole(lab.RoleWorker)
	nodeReads := func(ns []lab.Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, lab.NodePath(n.Name, lab.NodeIP))
		}
		return out
	}
	names := func(ns []lab.Node) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.Name)
		}
		return out
	}
	masterNames, workerNames := names(masters), names(workers)
	// Platform baremetal: Metal3 needs the BMC and the (empty) worker domains behind it (the
	// BMC answers 404 for a System whose domain is not defined), and the workers' Ignition is
	// built as on the other platforms: it is what the user data Metal3 writes resolves to (the
	// MCO's pointer config, answered by the machine-config-server).
	var metal3Deps []string
	if c.Baremetal() {
		metal3Deps = append(metal3Deps, "bmc/service")
		for _, n := range workerNames {
			metal3Deps = append(metal3Deps, "libvirt/vm/"+n, "ignition/"+n)
		}
	}
	allJoining := append(slices.Clone(masters), workers...)
	metal3 := func(node string) bool { return clusterMetal3Node(c, c.Node(node)) }
	bootstrap := c.Bootstrap().Name

	ts = append(ts,
		&engine.Target{
			Name:     "cluster/bootstrap",
			Doc:      "bootstrap VM on; API ready through the VIP; CRDs and manifests applied; CVO reporting",
			Deps:     append([]string{adminKubeconfig}, opt(append([]string{"cluster/install/" + bootstrap, clusterCRDs, clusterManifests, clusterLB}, clusterHostDeps...)...)...),
			Reads:    append(slices.Clone(clusterReads), lab.WaitBootstrapMinutes),
			Version:  1,
			External: true,
			Run: func(ctx context.Context, s *engine.Step) error {
				return clusterBootstrap(ctx, s, bootstrap, masterNames)
			},
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				k, err := clusterClients(s)
				if err != nil {
					return engine.ProbeResult{}, err
				}
				if done, _ := kube.BootstrapComplete(ctx, k.Dynamic); done {
					return engine.ProbeResult{Action: engine.Keep}, nil // past the pivot: the bootstrap is gone for good
				}
				if err := kube.Readyz(ctx, k); err != nil {
					return engine.ProbeResult{Action: engine.Update, Reason: "API not ready through the VIP: " + err.Error()}, nil
				}
				done, status, err := kube.CVOProgress(ctx, k.Dynamic)
				if err != nil || !done {
					return engine.ProbeResult{Action: engine.Update, Reason: "CVO not reporting: " + status + errText(err)}, nil
				}
				return engine.ProbeResult{Action: engine.Keep}, nil
			},
		},
		&engine.Target{
			Name:     "cluster/csr-approver",
			Doc:      "approve pending CSRs of the lab's nodes only (client, then serving); refuse the rest",
			Deps:     []string{adminKubeconfig, "cluster/bootstrap"},
			Reads:    append(append(slices.Clone(clusterReads), nodeReads(allJoining)...), platformReads(c)...),
			Version:  1,
			External: true,
			Run: func(ctx context.Context, s *engine.Step) error {
				k, err := clusterClients(s)
				if err != nil {
					return err
				}
				expected, err := clusterExpected(s, names(allJoining), metal3)
				if err != nil {
					return err
				}
				ds, err := csr.Approve(ctx, k.Dynamic, expected)
				if err != nil {
					return fmt.Errorf("%s: %w (check: oc get csr)", s.Target().Name, err)
				}
				clusterLogDecisions(s, ds, nil)
				return clusterRecord(s, map[string]any{"decisions": ds})
			},
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				k, err := clusterClients(s)
				if err != nil {
					return engine.ProbeResult{}, err
				}
				expected, err := clusterExpected(s, names(allJoining), metal3)
				if err != nil {
					return engine.ProbeResult{}, err
				}
				n, err := clusterApprovable(ctx, k, expected)
				if err != nil {
					return engine.ProbeResult{Action: engine.Update, Reason: err.Error()}, nil
				}
				if n > 0 {
					return engine.ProbeResult{Action: engine.Update, Reason: fmt.Sprintf("%d lab node CSRs pending", n)}, nil
				}
				return engine.ProbeResult{Action: engine.Keep}, nil
			},
		},
		clusterJoin("cluster/masters", "masters on; their CSRs approved; every master Ready",
			append([]string{adminKubeconfig, "cluster/bootstrap"}, opt(install(lab.RoleMaster)...)...),
			lab.WaitMastersMinutes, masterNames, nodeReads(masters), "master", joinsIn(workerNames, "cluster/workers"), true, metal3),
		&engine.Target{
			Name:     "cluster/etcd",
			Doc:      "the masters' control plane and CVO running, etcd on every master; then kube-system/bootstrap status=complete (bootstrap member removed)",
			Deps:     append([]string{adminKubeconfig, "cluster/masters"}, opt(etcdClientDeps...)...),
			Reads:    append(append(append(slices.Clone(clusterReads), lab.WaitEtcdMinutes, lab.NodePath(bootstrap, lab.NodeIP)), nodeReads(masters)...), vipModeReads(c)...),
			Version:  3, // 3: cluster-bootstrap's required pods and HA pollers (issue 38 #3)
			External: true,
			Run: func(ctx context.Context, s *engine.Step) error {
				return clusterEtcd(ctx, s, masterNames, bootstrap)
			},
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				k, err := clusterClients(s)
				if err != nil {
					return engine.ProbeResult{}, err
				}
				done, err := kube.BootstrapComplete(ctx, k.Dynamic)
				if err != nil || !done {
					return engine.ProbeResult{Action: engine.Create, Reason: "ConfigMap kube-system/bootstrap not complete" + errText(err)}, nil
				}
				if in, _, err := etcdBootstrapMember(ctx, s, masterNames, bootstrap); err == nil && in {
					return engine.ProbeResult{Action: engine.Update, Reason: "the bootstrap is still an etcd member"}, nil
				}
				return engine.ProbeResult{Action: engine.Keep}, nil
			},
		},
		&engine.Target{
			Name:     "cluster/pivot",
			Doc:      pivotDoc(c),
			Deps:     append([]string{adminKubeconfig, "cluster/etcd"}, opt(clusterPostPivot, clusterLB)...),
			Reads:    append(append(slices.Clone(clusterReads), lab.WaitPivotMinutes), vipPivotReads(c)...),
			Version:  1,
			External: true,
			Run: func(ctx context.Context, s *engine.Step) error {
				return clusterPivot(ctx, s, bootstrap, masterNames)
			},
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				m, err := clusterMachinesFor(s)
				if err != nil {
					return engine.ProbeResult{}, err
				}
				if on, err := m.Running(ctx, bootstrap); err != nil || on {
					return engine.ProbeResult{Action: engine.Update, Reason: "bootstrap VM still running" + errText(err)}, nil
				}
				k, err := clusterClients(s)
				if err != nil {
					return engine.ProbeResult{}, err
				}
				if err := kube.Readyz(ctx, k); err != nil {
					return engine.ProbeResult{Action: engine.Update, Reason: "API not ready through the VIP: " + err.Error()}, nil
				}
				return engine.ProbeResult{Action: engine.Keep}, nil
			},
		},
		clusterWorkers(c, append([]string{adminKubeconfig, "cluster/pivot"}, opt(append(install(lab.RoleWorker), metal3Deps...)...)...), workerNames, nodeReads(workers)),
		&engine.Target{
			Name:     "cluster/converge",
			Doc:      "every ClusterOperator Available and not Degraded; ClusterVersion Available",
			Deps:     []string{adminKubeconfig, "cluster/pivot", "cluster/workers"},
			Reads:    append(slices.Clone(clusterReads), lab.WaitConvergeMinutes),
			Version:  1,
			External: true,
			Run:      clusterConverge,
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				k, err := clusterClients(s)
				if err != nil {
					return engine.ProbeResult{}, err
				}
				cv, err := kube.Converged(ctx, k.Dynamic)
				if err != nil || !cv.Done() {
					return engine.ProbeResult{Action: engine.Update, Reason: cv.String() + errText(err)}, nil
				}
				return engine.ProbeResult{Action: engine.Keep}, nil
			},
		},
		&engine.Target{
			Name:     "cluster/done",
			Doc:      "prints the console URL and where the kubeadmin password and admin kubeconfig are",
			Deps:     append([]string{adminKubeconfig, "cluster/converge"}, opt(clusterKubeadmin, "host/dns")...),
			Reads:    []string{lab.ClusterName, lab.ClusterBaseDomain},
			Version:  1,
			External: true,
			Run:      clusterDone,
		},
	)
	return ts
}

// platformReads is lab.Platform on platform baremetal, where it decides how the workers' CSRs
// are approved (clusterExpected), and nothing elsewhere (a lab without it keeps its keys).
func platformReads(c *lab.Config) []string {
	if c.Baremetal() {
		return []string{lab.Platform}
	}
	return nil
}

// clusterMetal3Node reports whether n is a host the cluster's Metal3 provisions: a worker on
// platform baremetal (docs/baremetal.md: the workers are handed over empty as BareMetalHosts).
// labbuild neither installs nor starts it; cluster/workers waits for its Node.
func clusterMetal3Node(c *lab.Config, n lab.Node) bool {
	return c.Baremetal() && n.Role == lab.RoleWorker
}

// clusterWorkers is cluster/workers. On platform baremetal the workers are Metal3's: the
// phase needs bmc/service and the workers' empty domains (Metal3 drives them through it once
// cluster/pivot unpaused their BareMetalHosts, as the installer's master-bmh-update.sh lets
// it; the caller passes them in deps), starts no VM, and waits for the workers' Nodes under
// the short names DHCP gives them (clusterNodeNameOf: Metal3 boots them from the MCO's pointer
// config, which writes no /etc/hostname), approving their CSRs as OpenShift's
// cluster-machine-approver does: a client CSR from the node-bootstrapper service account for
// a Machine whose InternalDNS is the node's name, a serving CSR within the addresses of the
// Machine whose nodeRef is the node (targets/csr machine.go; issue 38 #5), narrowed to the
// lab's workers.
func clusterWorkers(c *lab.Config, deps []string, workers, reads []string) *engine.Target {
	if !c.Baremetal() {
		return clusterJoin("cluster/workers", "workers on; their CSRs approved; every worker Ready (none in a compact cluster)",
			deps, lab.WaitWorkersMinutes, workers, reads, "worker", nil, true, func(string) bool { return false })
	}
	t := clusterJoin("cluster/workers", "workers provisioned by Metal3 through the BMC (platform baremetal), registered under their DHCP short names; their CSRs approved by their Machines; every worker Ready",
		deps, lab.WaitWorkersMinutes, workers, append(reads, lab.Platform), "worker", nil, false, func(string) bool { return true })
	t.Version = 2 // 2: short names, approved by the Machine (issue 38 #5)
	return t
}
