package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// mirrorDestroyNote is the line `labbuild destroy` prints about the mirror's storage when
// mirror/registry is among what it destroys (or would: dryRun): kept unless --mirror
// (deleteStorage). Empty when the lab has no mirror.
func mirrorDestroyNote(c *lab.Config, deleteStorage, dryRun bool) string {
	if c == nil || !c.MirrorOn() {
		return ""
	}
	st := lab.ExpandPath(c.Mirror.Storage, "/")
	switch {
	case deleteStorage && dryRun:
		return "would delete the mirror storage " + st + " (--mirror; shared by every lab of this host)"
	case deleteStorage:
		return "deleted the mirror storage " + st + " (--mirror)"
	case dryRun:
		return "would keep the mirror storage " + st + " (labbuild destroy --mirror deletes it)"
	}
	return "kept the mirror storage " + st + " (labbuild destroy --mirror deletes it)"
}

// runDestroy removes what the records of the selected External targets name, in reverse
// dependency order, and says per target what happened (--json: the same lists).
func runDestroy(ctx context.Context, c *cli, args []string) error {
	o, err := c.options(args)
	if err != nil {
		return err
	}
	rep, err := engine.Destroy(ctx, o)
	if rep == nil {
		return err
	}
	if c.json {
		if jerr := encodeJSON(c.stdout, destroyJSON(rep)); jerr != nil {
			return jerr
		}
		return err
	}
	for _, n := range rep.Planned {
		fmt.Fprintf(c.stdout, "would destroy %s\n", n)
	}
	if len(rep.Planned) > 0 {
		fmt.Fprintln(c.stdout, rep.PlanCount().Terraform()) // the one plan summary
	}
	// In the order handled; "destroyed" only for what existed and was removed.
	for _, n := range rep.Destroyed {
		fmt.Fprintf(c.stdout, "destroyed %s\n", n)
	}
	for _, n := range rep.Absent {
		fmt.Fprintf(c.stdout, "already absent %s (removed outside labbuild); record forgotten\n", n)
	}
	for _, n := range rep.Forgotten {
		fmt.Fprintf(c.stdout, "forgot %s (nothing of its own outside %s)\n", n, o.OutDir)
	}
	for _, n := range rep.Failed {
		fmt.Fprintf(c.stdout, "NOT destroyed %s (still recorded)\n", n)
	}
	for _, n := range rep.Kept {
		fmt.Fprintf(c.stdout, "kept %s (still recorded: %s uses it)\n", n, rep.KeptFor[n])
	}
	if slices.Contains(rep.Planned, "mirror/registry") || slices.Contains(rep.Destroyed, "mirror/registry") || slices.Contains(rep.Absent, "mirror/registry") {
		if note := mirrorDestroyNote(c.cfg, c.mirror, c.dryRun); note != "" {
			fmt.Fprintln(c.stdout, note)
		}
	}
	if len(rep.Planned)+len(rep.Destroyed)+len(rep.Absent)+len(rep.Forgotten)+len(rep.Failed)+len(rep.Kept) == 0 {
		if err == nil {
			fmt.Fprintln(c.stdout, "labbuild: nothing recorded to destroy")
		}
		return err
	}
	if !c.dryRun {
		line := fmt.Sprintf("labbuild: %d destroyed, %d already absent, %d records forgotten", len(rep.Destroyed), len(rep.Absent), len(rep.Forgotten))
		if len(rep.Failed) > 0 {
			line += fmt.Sprintf(", %d NOT destroyed, %d kept (fix the cause on stderr and run labbuild destroy again)", len(rep.Failed), len(rep.Kept))
		}
		fmt.Fprintln(c.stdout, line)
	}
	if err != nil && len(rep.Failed) > 0 {
		// One line per target and its cause, then exit 1 without printing them again.
		for _, l := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(c.stderr, "labbuild: %s\n", l)
		}
		return &engine.BuildError{Failed: rep.Failed}
	}
	return err
}

// destroyJSON is destroy --json: every list present, empty rather than null.
func destroyJSON(r *engine.DestroyReport) engine.DestroyReport {
	return engine.DestroyReport{Destroyed: nonNil(r.Destroyed), Absent: nonNil(r.Absent), Forgotten: nonNil(r.Forgotten),
		Failed: nonNil(r.Failed), Kept: nonNil(r.Kept), KeptFor: r.KeptFor, Planned: r.Planned}
}
