package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/labbuild/labbuild/targets"
)

// writeClusterStatus prints what `labbuild status` shows of a cluster (targets.ObserveCluster):
// each stage as the API reports it, then one row per node with its role, VM state,
// Kubernetes Ready condition and pending CSRs.
func writeClusterStatus(w io.Writer, obs *targets.ClusterObservation) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if obs.APIErr != nil {
		fmt.Fprintf(tw, "api\tnot ready through %s:6443: %v\n", obs.APIVIP, obs.APIErr)
	} else {
		fmt.Fprintf(tw, "api\tready through %s:6443\n", obs.APIVIP)
		if obs.BootstrapComplete {
			fmt.Fprintf(tw, "bootstrap\tcomplete (kube-system/bootstrap)\n")
		} else if obs.CVO != nil {
			fmt.Fprintf(tw, "bootstrap\tin progress; CVO reporting: %v (%s)\n", obs.CVO.Reporting, obs.CVO.Status)
		}
		if obs.Etcd != nil {
			fmt.Fprintf(tw, "etcd\tReady on %d/%d masters\n", obs.Etcd.Ready, obs.Etcd.Masters)
		}
		if obs.Operators != nil {
			fmt.Fprintf(tw, "operators\t%s\n", obs.Operators)
		}
	}
	fmt.Fprintf(tw, "\nNODE\tROLE\tVM\tKUBERNETES\tPENDING CSRS\n")
	for _, n := range obs.Nodes {
		st := n.Kubernetes
		if st == "" {
			st = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", n.Name, n.Role, n.VM, st, n.PendingCSRs)
	}
	return tw.Flush()
}
