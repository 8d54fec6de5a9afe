package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Orphaner is implemented by a Source whose families can undo what External targets made
// after the config stopped declaring them: a node removed from nodes: leaves its VM, its disk
// and its recorded state behind, and no declared target would ever destroy them.
type Orphaner interface {
	// Orphans returns, in the order to destroy them (VMs before their disks), a target for
	// each of names (recorded in the state, no longer declared) that it can undo: Name as
	// recorded, External, and a Destroy that works from the recorded outputs (Step.Prev)
	// alone. Names it does not know are left out and stay recorded. An orphan's Deps name
	// declared targets whose recorded outputs its Destroy reads (the admin kubeconfig, to
	// delete a removed node's Node object): those recorded are handed to it as upstreams. What
	// its Destroy logs is printed on stderr, prefixed with its name.

	Orphans(names []string) []*Target
}

// orphans returns the undoable orphans of the families the build selected: `labbuild libvirt`
// or `labbuild cluster` removes a deleted node's VM; `labbuild ignition/master-0` leaves it.
func (b *builder) orphans(roots []int) []*Target {
	or, ok := b.o.Config.(Orphaner)
	if !ok || b.o.Targets != nil {
		return nil
	}
	fams := map[string]bool{}
	for i, in := range b.p.Graph.Closure(roots) {
		if in && b.p.Targets[i].External {
			fams[b.p.Targets[i].Family()] = true
		}
	}
	var names []string
	for _, n := range b.state.Names() {
		if b.p.Target(n) == nil && fams[Family(n)] {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	return or.Orphans(names)
}

// prefixLines writes each line written to it to w, prefixed with p.
type prefixLines struct {
	w io.Writer
	p string
}

func (l prefixLines) Write(b []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			if _, err := io.WriteString(l.w, l.p+line); err != nil {
				return 0, err
			}
		}
	}
	return len(b), nil
}

// prune destroys the orphans of the selected families after a build that succeeded, and
// forgets them (a dry run only plans them): the plan's "destroy" lines.
func (b *builder) prune(ctx context.Context, roots []int, res *Result) error {
	var errs []error
	for _, t := range b.orphans(roots) {
		prev := b.state.Target(t.Name)
		if prev == nil {
			continue
		}
		res.Plan = append(res.Plan, PlanItem{Target: t.Name, Action: ActionDestroy, State: StateStale, Reasons: []Reason{{Kind: Undeclared}}, External: true})
		deps := map[string]depOut{}
		for _, d := range t.Deps {
			if dt, ds := b.p.Target(d), b.state.Target(d); dt != nil && ds != nil && !ds.Failed {
				deps[d] = depOut{dir: filepath.Join(b.out, dt.Dir()), files: outputNames(ds.Outputs)}
			}
		}
		s := &Step{ctx: ctx, t: t, values: b.p.values, baseDir: b.baseDir, outRoot: b.out, deps: deps,
			now: b.now, epoch: time.Unix(0, prev.Epoch).UTC(), log: prefixLines{b.stderr, "labbuild: " + t.Name + ": "}, written: map[string]os.FileMode{},
			prevDir: filepath.Join(b.out, t.Dir())}
		got, planned, err := b.runner.undo(ctx, t, s)
		switch {
		case planned:
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: not destroyed (no longer declared; still recorded): %w", t.Name, err))
			continue
		}
		b.forget(t, prev)
		if got != Destroyed {
			why := "already absent"
			if got == RecordOnly {
				why = "nothing of its own to remove"
			}
			fmt.Fprintf(b.stderr, "labbuild: forgot %s (no longer declared by the config; %s)\n", t.Name, why)
			continue
		}
		res.Destroyed = append(res.Destroyed, t.Name)
		fmt.Fprintf(b.stderr, "labbuild: destroyed %s (no longer declared by the config)\n", t.Name)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%v", errs)
	}
	return nil
}
