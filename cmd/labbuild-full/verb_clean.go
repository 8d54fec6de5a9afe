package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/labbuild/labbuild/engine"
)

// runClean removes the selected targets' outputs and state (--cache: the store too, but for
// the sticky secrets unless --regenerate all), or with --trim only trims the store; with -n it
// says what it would remove and removes nothing.
func runClean(ctx context.Context, c *cli, args []string) error {
	sticky := false
	switch {
	case len(c.regenerate) == 0:
	case c.cacheToo && slices.Equal(c.regenerate, []string{engine.RegenerateAll}):
		sticky = true
	default:
		return usagef("clean: --regenerate %s: clean takes only --cache --regenerate all, which removes the sticky secrets from the store too (fix: to make one secret anew, run labbuild --regenerate NAME)", strings.Join(c.regenerate, ","))
	}
	if c.trim && c.cacheToo {
		return usagef("clean: --trim and --cache disagree: --trim keeps what was used in the last 30 days, --cache removes it (fix: choose one)")
	}
	o, err := c.options(args)
	if err != nil {
		return err
	}
	removed := "removed"
	if c.dryRun {
		removed = "would remove"
	}
	if c.trim {
		st, err := engine.TrimCache(ctx, o, engine.TrimAge, engine.TrimBytes)
		if err != nil {
			return err
		}
		verb := "trimmed"
		if c.dryRun {
			verb = "would trim"
		}
		fmt.Fprintf(c.stdout, "labbuild: %s the store: %d entries and %d objects (%d bytes) removed, %d entries (%d bytes) kept\n",
			verb, st.EntriesRemoved, st.ObjectsRemoved, st.BytesRemoved, st.EntriesKept, st.BytesKept)
		return nil
	}
	o.Regenerate = nil // clean's --regenerate all is CleanOptions.Sticky, not a build's
	rep, err := engine.Clean(ctx, o, engine.CleanOptions{Cache: c.cacheToo, Sticky: sticky})
	if err != nil {
		return err
	}
	if c.dryRun {
		for _, n := range rep.Cleaned {
			fmt.Fprintf(c.stdout, "would clean %s\n", n)
		}
		fmt.Fprintf(c.stdout, "labbuild: would clean %d targets (%d files)\n", len(rep.Cleaned), rep.Files)
	} else {
		fmt.Fprintf(c.stdout, "labbuild: cleaned %d targets (%d files)\n", len(rep.Cleaned), rep.Files)
	}
	if !c.cacheToo {
		return nil
	}
	st := rep.Store
	names := strings.Join(rep.Sticky, ", ")
	if sticky {
		fmt.Fprintf(c.stdout, "labbuild: %s the whole content store: %d entries, %d objects (%d bytes), the %d sticky secrets included (%s): "+
			"the next build makes new ones, and so replaces the %d targets made from them (every certificate, kubeconfig and Ignition config)\n",
			removed, st.EntriesRemoved, st.ObjectsRemoved, st.BytesRemoved, len(rep.Sticky), names, rep.StickyUsers)
		return nil
	}
	fmt.Fprintf(c.stdout, "labbuild: %s from the content store %d entries and %d objects (%d bytes); kept: the sticky secrets (%s), so the next build restores them and what is made from them comes out the same "+
		"(labbuild clean --cache --regenerate all removes them too, and so replaces the %d targets made from them)\n",
		removed, st.EntriesRemoved, st.ObjectsRemoved, st.BytesRemoved, names, rep.StickyUsers)
	return nil
}
