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
			fams[family(b.p.Targets[i].Name)] = true
		}
	}
	var names []string
	for _, n := range b.state.Names() {
		if b.p.Target(n) == nil && fams[family(n)] {
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

func family(name string) string {
	f, _, _ := strings.Cut(name, "/")
	return f
}

// prune plans (dry run) or destroys the orphans of the selected families after a build that
// succeeded, and forgets them: the plan's "destroy" lines.
func (b *builder) prune(ctx context.Context, roots []int, res *Result) error {
	var errs []error
	for _, t := range b.orphans(roots) {
		prev := b.state.Target(t.Name)
		if prev == nil {
			continue
		}
		res.Plan = append(res.Plan, PlanItem{Target: t.Name, Action: "destroy", Reasons: []string{"no longer declared by the config"}, External: true})
		if b.o.DryRun {
			continue
		}
		got := RecordOnly
		if t.Destroy != nil {
			deps := map[string]depOut{}
			for _, d := range t.Deps {
				if dt, ds := b.p.Target(d), b.state.Target(d); dt != nil && ds != nil && !ds.Failed {
					deps[d] = depOut{dir: filepath.Join(b.out, dt.Dir()), files: outputNames(ds.Outputs)}
				}
			}
			s := &Step{ctx: ctx, t: t, values: b.p.values, baseDir: b.baseDir, outRoot: b.out, deps: deps,
				now: b.now, epoch: time.Unix(0, prev.Epoch).UTC(), log: prefixLines{b.stderr, "labbuild: " + t.Name + ": "}, written: map[string]os.FileMode{},
				prevDir: filepath.Join(b.out, t.Dir())}
			var err error
			if got, err = t.Destroy(ctx, s); err != nil {
				errs = append(errs, fmt.Errorf("%s: not destroyed (no longer declared; still recorded): %w", t.Name, err))
				continue
			}
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

// PlanSummary is the plan's last line in Terraform's words, counting the External targets'
// actions: "Plan: 3 to create, 1 to update in place, 0 to replace, 0 to destroy." A second
// sentence counts what a dry run cannot decide yet — External targets that run only if an
// upstream's output really changes ("run"), and file targets to build — when there are any.
// It is empty when the plan touches no External target.
func PlanSummary(plan []PlanItem) string {
	var create, update, replace, destroy, check, files int
	for _, p := range plan {
		switch {
		case p.Action == string(Create):
			create++
		case p.Action == string(Update):
			update++
		case p.Action == string(Replace):
			replace++
		case p.Action == "destroy":
			destroy++
		case p.Action == "restore" || p.Action == string(Keep):
		case p.External:
			check++
		default:
			files++
		}
	}
	if create+update+replace+destroy+check == 0 {
		return ""
	}
	s := fmt.Sprintf("Plan: %d to create, %d to update in place, %d to replace, %d to destroy.", create, update, replace, destroy)
	var more []string
	if check > 0 {
		more = append(more, fmt.Sprintf("%d to check again once their upstreams are built", check))
	}
	if files > 0 {
		more = append(more, fmt.Sprintf("%d file targets to build", files))
	}
	if len(more) > 0 {
		s += " Then " + strings.Join(more, "; ") + "."
	}
	return s
}
