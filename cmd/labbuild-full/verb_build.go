package main

import (
	"context"
	"fmt"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/targets"
)

// runBuild is the default verb: it builds the goals (the default goal without any), or with -n
// prints the plan (--json: as data), and ends `labbuild cluster` with the cluster's summary.
func runBuild(ctx context.Context, c *cli, args []string) error {
	o, err := c.options(args)
	if err != nil {
		return err
	}
	if err := c.releaseGate(ctx, &o, c.dryRun); err != nil {
		return err
	}
	if err := c.checkFiles(&o); err != nil {
		return err
	}
	o.Stamp = c.stamp.collector()
	pd := newProgress(c)
	if pd != nil && !c.dryRun {
		o.Reporter, o.Stderr = pd, pd.Stderr(o.Stderr)
		if c.verbose {
			ls := &logStream{w: o.Stderr}
			o.LogTee = ls.For
		}
	}
	var endTimes func()
	if !c.dryRun {
		o.Reporter = boundHeapOnWork(o.Reporter)    // the collector on once targets run: memory.go
		o.Reporter, endTimes = profiled(o.Reporter) // LABBUILD_TIMES, labels: see profile.go
	}
	res, err := engine.Build(ctx, o)
	if endTimes != nil {
		endTimes()
	}
	if pd != nil {
		pd.Close() // the summary line below takes the status area's place
	}
	if res == nil {
		return err
	}
	if c.dryRun {
		if c.json {
			if e := printPlanJSON(c, res); e != nil {
				return e
			}
			return err
		}
		printPlan(c, res)
		return err
	}
	if len(res.Built)+len(res.Restored)+len(res.Failed) == 0 && err == nil {
		c.noWork(res) // and the front's stamp: stamp.go
	} else {
		fmt.Fprintf(c.stdout, "labbuild: %s\n", res.Summary())
	}
	if err == nil {
		// The end of `labbuild cluster`, as openshift-install ends: KUBECONFIG, console URL,
		// where the kubeadmin password is.
		c.stdout.Write(targets.ClusterSummary(o.OutDir, res))
	}
	return err
}
