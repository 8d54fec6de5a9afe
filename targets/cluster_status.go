package targets

// cluster/converge, cluster/done, and what the cluster reports for `labbuild status`
// (ObserveCluster; cmd/labbuild-full prints it). cluster.go declares the targets.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/wait"
)

// clusterConverge is cluster/converge's Run.
func clusterConverge(ctx context.Context, s *engine.Step) error {
	timeout, err := clusterMinutes(s, lab.WaitConvergeMinutes)
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
func clusterDone(ctx context.Context, s *engine.Step) error {
	domain, err := clusterDomain(s)
	if err != nil {
		return err
	}
	kc, err := s.DepPath(adminKubeconfig, "kubeconfig")
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
func ClusterSummary(outDir string, r *engine.Result) []byte {
	if r == nil || !(slices.Contains(r.Built, "cluster/done") || slices.Contains(r.Restored, "cluster/done") || slices.Contains(r.UpToDate, "cluster/done")) {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(outDir, "cluster", "done", "summary.txt"))
	if err != nil {
		return nil
	}
	return b
}

// ClusterObservation is a cluster as its API and the hypervisor report it now
// (ObserveCluster), for `labbuild status`: each stage, and per node its VM, Kubernetes
// condition and pending CSRs. A part the API did not answer is left at its zero value.
type ClusterObservation struct {
	// APIVIP is network.apiVIP: the API was asked through it, on port 6443.
	APIVIP string
	// APIErr says why the API is not ready through the VIP (/readyz); nil when it is. The
	// stages below are asked only of a ready API.
	APIErr error
	// BootstrapComplete: kube-system/bootstrap exists (the bootstrap is done).
	BootstrapComplete bool
	// CVO is the cluster-version-operator's progress (kube.CVOProgress) while the bootstrap
	// is not complete; nil when complete or unknown.
	CVO *ClusterCVO
	// Etcd counts the masters whose etcd member is Ready; nil when unknown.
	Etcd *ClusterEtcd
	// Operators is what the ClusterOperators and ClusterVersion say; nil when unknown.
	Operators *kube.Convergence
	// Nodes are the lab's nodes, in lab.yaml's order.
	Nodes []ClusterNodeObservation
}

// ClusterCVO is the CVO's progress: whether it reports yet, and its one-line status.
type ClusterCVO struct {
	Reporting bool
	Status    string
}

// ClusterEtcd is how many of the masters run a Ready etcd member (kube.EtcdOn).
type ClusterEtcd struct {
	Ready, Masters int
}

// ClusterNodeObservation is one node in a ClusterObservation.
type ClusterNodeObservation struct {
	// Name and Role are the lab node's (lab.yaml nodes[].name, role).
	Name, Role string
	// VM is the domain's state: "running", "off", or "unknown" when the hypervisor did not say.
	VM string
	// Kubernetes is the Node's Ready condition: "Ready", "NotReady or absent", or "" when the
	// API did not answer (and always for the bootstrap, which never joins).
	Kubernetes string
	// PendingCSRs counts the pending CertificateSigningRequests naming the node.
	PendingCSRs int
}

// ObserveCluster asks the cluster (through the admin kubeconfig the build wrote,
// outDir/kubeconfig/admin/kubeconfig, and the API VIP) and the hypervisor what `labbuild status`
// shows. An unreachable API is reported in APIErr, not returned; the error is for a missing
// kubeconfig or unusable client configuration.
func ObserveCluster(ctx context.Context, c *lab.Config, outDir string) (*ClusterObservation, error) {
	kc := filepath.Join(outDir, filepath.FromSlash(adminKubeconfig), "kubeconfig")
	if _, err := os.Stat(kc); err != nil {
		return nil, fmt.Errorf("status: %w (build kubeconfig/admin first: labbuild kubeconfig/admin)", err)
	}
	cfg, err := clusterEnv.restConfig(kc, c.Network.APIVIP)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	k, err := kube.NewClients(cfg)
	if err != nil {
		return nil, err
	}
	m := clusterEnv.machines(c.Libvirt.URI, c.Cluster.Name)
	domain := c.Cluster.Domain()
	obs := &ClusterObservation{APIVIP: c.Network.APIVIP, APIErr: kube.Readyz(ctx, k)}
	pending := map[string]int{}
	ready := map[string]string{}
	if obs.APIErr == nil {
		if done, err := kube.BootstrapComplete(ctx, k.Dynamic); err == nil && done {
			obs.BootstrapComplete = true
		} else if ok, st, err := kube.CVOProgress(ctx, k.Dynamic); err == nil {
			obs.CVO = &ClusterCVO{Reporting: ok, Status: st}
		}
		var masters []string
		for _, n := range c.NodesByRole(lab.RoleMaster) {
			masters = append(masters, clusterNodeName(n.Name, domain))
		}
		if on, err := kube.EtcdOn(ctx, k.Dynamic, masters); err == nil {
			obs.Etcd = &ClusterEtcd{Ready: len(on), Masters: len(masters)}
		}
		if cv, err := kube.Converged(ctx, k.Dynamic); err == nil {
			obs.Operators = &cv
		}
		if list, err := csr.List(ctx, k.Dynamic); err == nil {
			for i := range list {
				if csr.Pending(&list[i]) {
					pending[csr.NodeOf(&list[i])]++
				}
			}
		}
		var names []string
		for _, n := range c.Nodes {
			names = append(names, clusterNodeNameOf(c, n, domain))
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
	for _, n := range c.Nodes {
		vm := "unknown"
		if on, err := m.Running(ctx, n.Name); err == nil {
			vm = map[bool]string{true: "running", false: "off"}[on]
		}
		fq := clusterNodeNameOf(c, n, domain)
		st := ready[fq]
		if n.Role == lab.RoleBootstrap {
			st = ""
		}
		obs.Nodes = append(obs.Nodes, ClusterNodeObservation{Name: n.Name, Role: n.Role, VM: vm, Kubernetes: st, PendingCSRs: pending[fq]})
	}
	return obs, nil
}

// clusterNodeNames maps lab node names to the Node names they register as in the cluster
// (clusterNodeName under the cluster domain), in the order given.
func clusterNodeNames(s *engine.Step, names []string) ([]string, error) {
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
