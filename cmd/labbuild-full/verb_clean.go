package main

import (
	"context"
	"fmt"

	"github.com/labbuild/labbuild/engine"
)

// runClean removes the selected targets' outputs and state (--cache: the store too), or with
// --trim only trims the store.
func runClean(ctx context.Context, c *cli, args []string) error {
	o, err := c.options(args)
	if err != nil {
		return err
	}
	if c.trim {
		st, err := engine.TrimCache(o, engine.TrimAge, engine.TrimBytes)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "labbuild: trimmed the store: %d entries and %d objects (%d bytes) removed, %d entries (%d bytes) kept\n",
			st.EntriesRemoved, st.ObjectsRemoved, st.BytesRemoved, st.EntriesKept, st.BytesKept)
		return nil
	}
	names, err := engine.Clean(ctx, o, engine.CleanOptions{Cache: c.cacheToo})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "labbuild: cleaned %d targets\n", len(names))
	if c.cacheToo {
		fmt.Fprintf(c.stdout, "labbuild: removed the content store: the next build generates new keys\n")
	}
	return nil
}
