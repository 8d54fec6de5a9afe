package targets

// The cluster family's shared steps: the admin clients, CSR decisions and the waits with their
// timeouts from the wait.* fields (cluster.go declares the targets).

import (
	"context"
	"fmt"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/csr"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/wait"
)

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

// clusterRecord writes the phase's record, record.json: the state the phase reached, in terms
// that do not change when a finished phase runs again (how it got there — CSR verdicts, apply
// counts — goes to the target's log). A rerun so reproduces the same bytes, and the engine's
// early cutoff keeps the later phases at their Probe instead of running them again.
func clusterRecord(s *engine.Step, v any) error {
	return writeRecord(s, recordFile, v)
}

// clusterMachinesFor returns the VM driver for the lab's libvirt URI and cluster name.
func clusterMachinesFor(s *engine.Step) (ClusterMachines, error) {
	uri, err := s.String(lab.LibvirtURI)
	if err != nil {
		return nil, err
	}
	name, err := s.String(lab.ClusterName)
	if err != nil {
		return nil, err
	}
	return clusterEnv.machines(uri, name), nil
}

// clusterClients returns clients for the admin kubeconfig reached through the API VIP.
func clusterClients(s *engine.Step) (*kube.Clients, error) {
	kc, err := s.DepPath(adminKubeconfig, "kubeconfig")
	if err != nil {
		return nil, err
	}
	vip, err := s.String(lab.NetworkAPIVIP)
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
// alias, the node's IP as the only IP SAN; a node metal3 says a Machine provisions
// (clusterMetal3Node) registers under its short name and is approved by its Machine, as the
// cluster-machine-approver does (csr.NodeIdentity ByMachine).
func clusterExpected(s *engine.Step, nodes []string, metal3 func(string) bool) (map[string]csr.NodeIdentity, error) {
	domain, err := clusterDomain(s)
	if err != nil {
		return nil, err
	}
	out := map[string]csr.NodeIdentity{}
	for _, n := range nodes {
		ip, err := s.String(lab.NodePath(n, lab.NodeIP))
		if err != nil {
			return nil, err
		}
		if metal3(n) {
			out[n] = csr.NodeIdentity{Name: n, IPs: []string{ip}, ByMachine: true}
			continue
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
	m, err := csr.ReadMachines(ctx, k.Dynamic, expected)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list {
		if csr.Pending(&list[i]) {
			if ok, _ := csr.Decide(&list[i], expected, m); ok {
				n++
			}
		}
	}
	return n, nil
}

// clusterLogDecisions logs every CSR verdict once: approvals and refusals with their reason.
// joinsIn maps each of nodes (config names) to phase: clusterJoin's later.
func joinsIn(nodes []string, phase string) map[string]string {
	m := make(map[string]string, len(nodes))
	for _, n := range nodes {
		m[n] = phase
	}
	return m
}

// clusterLater turns later's config names into the node names CSRs carry (clusterNodeName;
// the short name of a node metal3 says a Machine provisions).
func clusterLater(s *engine.Step, later map[string]string, metal3 func(string) bool) (map[string]string, error) {
	if len(later) == 0 {
		return nil, nil
	}
	domain, err := clusterDomain(s)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(later))
	for n, phase := range later {
		if metal3(n) {
			out[n] = phase
			continue
		}
		out[clusterNodeName(n, domain)] = phase
	}
	return out, nil
}

// clusterLogDecisions logs one line per CSR decision (csrVerdict).
func clusterLogDecisions(s *engine.Step, ds []csr.Decision, later map[string]string) {
	for _, d := range ds {
		s.Logf("%s", csrVerdict(d, later))
	}
}

// csrVerdict is a decision's log line: approved, changed meanwhile, left pending for the later
// phase where a lab node joins (later: node name → phase), or refused with the reason.
func csrVerdict(d csr.Decision, later map[string]string) string {
	verdict := "refused (left pending)"
	switch {
	case d.Approved:
		verdict = "approved"
	case d.Approve:
		verdict = "to approve, but it changed meanwhile (next pass)"
	case later[d.Node] != "":
		return fmt.Sprintf("CSR %s (%s, node %q): left pending for %s, where that node joins", d.CSR, d.Signer, d.Node, later[d.Node])
	}
	return fmt.Sprintf("CSR %s (%s, node %q): %s: %s", d.CSR, d.Signer, d.Node, verdict, d.Reason)
}

// clusterMinutes reads a wait.* timeout in minutes; a missing or non-positive value is an
// error naming the field.
func clusterMinutes(s *engine.Step, field string) (time.Duration, error) {
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
func clusterWait(ctx context.Context, s *engine.Step, spec wait.Spec, cond wait.Condition) (wait.Result, error) {
	spec.Clock = clusterEnv.clock
	spec.Interval = clusterEnv.interval(spec.Interval)
	spec.Log = s.Log()
	// openshift-install's failed wait says "openshift-install gather bootstrap"; labbuild's
	// names its own (cmd/labbuild-full gather.go).
	spec.Gather = "labbuild gather"
	name := s.Target().Name
	// The status display shows "waiting for WHAT (status) — 4m10s of 30m", ticking between polls.
	s.Progress(engine.Progress{Phase: "waiting for " + spec.What, Limit: spec.Timeout})
	spec.OnPoll = func(p wait.Poll) {
		phase := "waiting for " + spec.What
		if p.Status != "" {
			phase += " (" + p.Status + ")"
		}
		s.Progress(engine.Progress{Phase: phase, Elapsed: p.Elapsed, Limit: spec.Timeout})
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
