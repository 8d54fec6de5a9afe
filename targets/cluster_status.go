package targets

// cluster/converge, cluster/done and `labbuild status`: what the cluster reports at the end
// (cluster.go declares the targets).

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/wait"
)

// clusterConverge is cluster/converge's Run.
func clusterConverge(ctx context.Context, s *engine.Step) error {
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
func clusterDone(ctx context.Context, s *engine.Step) error {
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
