package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/targets"
)

// statusReport is `labbuild status --json`: where every selected target stands, as a dry run
// and the state journal (OUT/.labbuild/state) see it. docs/usage.md documents the schema.
type statusReport struct {
	// Config is the lab file as the user named it (-f), or "default lab.yaml".
	Config string `json:"config"`
	// OutDir is the output directory (-o).
	OutDir  string         `json:"outDir"`
	Targets []targetStatus `json:"targets"`
}

// targetStatus is one target in `status --json`.
type targetStatus struct {
	Name   string `json:"name"`
	Family string `json:"family"`
	// State is "up to date", restorable (the store has its outputs; a build restores them),
	// stale, missing (never built), failed (the last real attempt failed) or blocked (cannot be
	// evaluated now; Error says why): the target's verdict (engine.State).
	State    engine.State `json:"state"`
	External bool         `json:"external"`
	// Key is the first 12 hex digits of the SHA-256 action key of the outputs now in OutDir;
	// empty when none are recorded.
	Key string `json:"key,omitempty"`
	// BuiltAt is when the newest recorded output was written (RFC 3339, UTC).
	BuiltAt string `json:"builtAt,omitempty"`
	// GeneratedAt is the target's epoch when it is not BuiltAt's: the time a certificate was
	// issued or a key made, kept across restores (RFC 3339, UTC).
	GeneratedAt string `json:"generatedAt,omitempty"`
	// Action is what the next build would do: build, restore, or for External targets create,
	// update, replace or build (to be checked again once upstreams are built). Empty: nothing.
	Action  engine.Action        `json:"action,omitempty"`
	Reasons []engine.Reason      `json:"reasons,omitempty"`
	Changes []engine.FieldChange `json:"changes,omitempty"`
	// Exists (External only) says whether the object outside the filesystem exists, as its
	// probe saw it; Drifted whether it differs from what the config declares (Reasons and
	// Changes name how). Drifted is absent when the probe did not run (an upstream changes first).
	Exists  *bool `json:"exists,omitempty"`
	Drifted *bool `json:"drifted,omitempty"`
	// Error is why a blocked target cannot be evaluated.
	Error string `json:"error,omitempty"`
}

// statusJSON computes statusReport for goals (every target when none): a dry run, which
// writes nothing, and a read of the state journal.
func (c *cli) statusJSON(ctx context.Context, goals []string) (*statusReport, error) {
	if len(goals) == 0 {
		var err error
		if goals, err = c.allTargets(); err != nil {
			return nil, err
		}
	}
	p, res, o, err := c.status(ctx, goals, false)
	if err != nil {
		return nil, err
	}
	st, err := cache.LoadState(filepath.Join(o.OutDir, ".labbuild", "state"))
	if err != nil {
		return nil, err
	}
	plan := map[string]engine.PlanItem{}
	for _, pl := range res.Plan {
		plan[pl.Target] = pl
	}
	rep := &statusReport{Config: c.cfgName, OutDir: o.OutDir, Targets: []targetStatus{}}
	ids, err := p.Select(goals)
	if err != nil {
		return nil, err
	}
	for _, i := range ids {
		t := p.Targets[i]
		ts := targetStatus{Name: t.Name, Family: t.Family(), State: res.State(t.Name), External: t.External}
		rec := st.Target(t.Name)
		if rec != nil {
			ts.Key = rec.Key.Short()
			var newest int64
			for _, out := range rec.Outputs {
				newest = max(newest, out.FP.Mtime)
			}
			if newest > 0 {
				ts.BuiltAt = time.Unix(0, newest).UTC().Format(time.RFC3339)
			}
			if rec.Epoch > 0 {
				if g := time.Unix(0, rec.Epoch).UTC().Format(time.RFC3339); g != ts.BuiltAt {
					ts.GeneratedAt = g
				}
			}
		}
		pl, planned := plan[t.Name]
		if planned {
			ts.Action, ts.Reasons, ts.Changes = pl.Action, pl.Reasons, pl.Changes
		}
		if t.External {
			exists, drifted := rec != nil && !rec.Failed, false
			known := ts.State == engine.StateUpToDate || ts.State == engine.StateMissing
			switch pl.Action {
			case engine.Create:
				exists, known = false, true
			case engine.Update, engine.Replace:
				exists, drifted, known = true, true, true
			}
			if !planned || rec == nil {
				known = true
			}
			ts.Exists = &exists
			if known && ts.State != engine.StateBlocked {
				ts.Drifted = &drifted
			}
		}
		if ts.State == engine.StateBlocked {
			ts.Error = blockedBy(c.dryErr.String(), t.Name, res)
		}
		rep.Targets = append(rep.Targets, ts)
	}
	return rep, nil
}

// runStatus reports the running cluster (ObserveCluster, printed by writeClusterStatus) or,
// with --json, each selected target's state.
func runStatus(ctx context.Context, c *cli, args []string) error {
	o, err := c.options(nil)
	if err != nil {
		return err
	}
	cfg := c.cfg // nil with --synthetic
	if cfg == nil {
		return usagef("status: no lab config with --synthetic")
	}
	if !c.json {
		if len(args) > 0 {
			return usagef("status takes no words after it without --json, not %q (fix: labbuild status, or labbuild status --json %s for those targets)", strings.Join(args, " "), strings.Join(args, " "))
		}
		obs, err := targets.ObserveCluster(ctx, cfg, o.OutDir)
		if err != nil {
			return err
		}
		return writeClusterStatus(c.stdout, obs)
	}
	rep, err := c.statusJSON(ctx, args)
	if err != nil {
		return err
	}
	return encodeJSON(c.stdout, rep)
}

// writeClusterStatus prints what `labbuild status` shows of a cluster (targets.ObserveCluster):
// each stage as the API reports it, then one row per node with its role, VM state,
// Kubernetes Ready condition and pending CSRs.
func writeClusterStatus(w io.Writer, obs *targets.ClusterObservation) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if obs.SNOPhase != "" {
		fmt.Fprintf(tw, "single node\t%s (bootstrap in place)\n", obs.SNOPhase)
	}
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
