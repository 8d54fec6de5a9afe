package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/labbuild/labbuild/cache"
)

// runner does what the verdicts ask and owns the build's writes: the build's (buildRunner)
// restores and runs targets, records them in the state and writes their logs; the dry run's
// (planRunner, Options.DryRun) plans them and writes nothing. It is chosen once per build,
// as ninja swaps in a dry-run command runner and terraform's plan is a walk of its own: no
// other code asks whether this is a dry run.
type runner interface {
	// open locks the output directory (waiting until ctx is done) and loads its state into b.
	open(ctx context.Context, b *builder) error
	// act does what verdict v says for target n, which is not up to date (its deps are done).
	act(ctx context.Context, b *builder, n *node, v *verdict, nodes []*node, runSem chan struct{})
	// failed notes that n failed with msg: its state (failed; blocked in a plan, which could
	// not evaluate it) and, in the output directory, its record and its log.
	failed(b *builder, n *node, msg string)
	// undo destroys External target t through s (Target.Destroy; nil: RecordOnly), or, in a
	// plan, only says it would (planned).
	undo(ctx context.Context, t *Target, s *Step) (got DestroyOutcome, planned bool, err error)
	// close folds the state journal and trims the store when due, before the state closes.
	close(b *builder)
}

func newRunner(o Options) runner {
	if o.DryRun {
		return planRunner{}
	}
	return buildRunner{}
}

// buildRunner is a build's runner.
type buildRunner struct{}

func (buildRunner) open(ctx context.Context, b *builder) error {
	if err := os.MkdirAll(b.meta, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	var err error
	b.lock, err = cache.Acquire(ctx, filepath.Join(b.meta, lockFile), b.waiting)
	if err != nil {
		return err
	}
	if err := b.loadState(); err != nil {
		return err
	}
	os.RemoveAll(filepath.Join(b.meta, tmpDir)) // leftovers of an interrupted build
	if err := os.MkdirAll(filepath.Join(b.meta, tmpDir), 0o700); err != nil {
		return err
	}
	b.cache.CleanTmp()
	return nil
}

// act restores n when the store holds its key (and its Probe, if any, then sees the object
// as recorded), else runs it.
func (buildRunner) act(ctx context.Context, b *builder, n *node, v *verdict, nodes []*node, runSem chan struct{}) {
	t := n.t
	if v.entry != nil {
		b.started(n, true)
		if err := b.restore(n, v.entry, v.prev); err != nil {
			if t.Sticky && !b.regen[t.Name] {
				// Damaged since its verdict hashed it: still never made anew unasked.
				if serr := b.checkSticky(n, v, err); serr != nil {
					b.fail(n, serr)
					return
				}
			}
			v.reasons = append(v.reasons, Reason{Kind: StoreUnusable, Detail: err.Error()})
		} else {
			// External targets: the record is back; the real object may still differ.
			if t.Probe != nil {
				pr, err := b.probe(ctx, n, v.epoch, nodes)
				if err != nil {
					b.fail(n, err)
					return
				}
				v.drift(pr)
			}
			if v.probe.Action == "" || v.probe.Action == Keep {
				n.outcome = Restored
				n.plan = newPlanItem(t, v.state, ActionRestore, v.reasons)
				b.explain(n)
				return
			}
		}
		v.entry = nil
		v.decideAction()
	}
	runSem <- struct{}{}
	defer func() { <-runSem }()
	if ctx.Err() != nil {
		n.outcome = Skipped
		return
	}
	b.started(n, false)
	n.plan = newPlanItem(t, v.state, v.action, v.reasons)
	b.explain(n)
	if err := b.execute(ctx, n, v, nodes); err != nil {
		b.fail(n, err)
		return
	}
	n.outcome = Built
}

func (buildRunner) failed(b *builder, n *node, msg string) {
	n.state = StateFailed
	if prev := b.state.Target(n.t.Name); prev != nil {
		cp := *prev
		cp.Failed = true
		b.state.SetTarget(n.t.Name, &cp)
	} else {
		b.state.SetTarget(n.t.Name, &cache.TargetState{Failed: true})
	}
	// The log ends with the error, so labbuild log and explain can show it later (also when
	// the target failed before it ran: an input file that cannot be read).
	logPath := logPathIn(b.meta, n.t.Name)
	os.MkdirAll(filepath.Dir(logPath), 0o755)
	if f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644); err == nil {
		fmt.Fprintf(f, "FAILED: %s\n", msg)
		f.Close()
	}
}

func (buildRunner) undo(ctx context.Context, t *Target, s *Step) (DestroyOutcome, bool, error) {
	if t.Destroy == nil {
		return RecordOnly, false, nil
	}
	got, err := t.Destroy(ctx, s)
	return got, false, err
}

func (buildRunner) close(b *builder) {
	b.state.Compact(false)
	b.maybeTrim()
}

// planRunner is a dry run's runner: it plans each target and writes nothing — no directory,
// no lock file, no state, no log, no store entry.
type planRunner struct{}

func (planRunner) open(ctx context.Context, b *builder) error {
	// A dry run reads: a shared lock where a build left a lock file, and no pid written.
	if _, err := os.Stat(filepath.Join(b.meta, lockFile)); err == nil {
		if b.lock, err = cache.AcquireShared(ctx, filepath.Join(b.meta, lockFile), b.waiting); err != nil {
			return err
		}
	}
	if err := b.loadState(); err != nil {
		return err
	}
	b.state.SetReadOnly() // what the plan learns (input digests) stays in memory
	return nil
}

// act plans n: its plan item, and what its dependents will see of it — the store's outputs
// when it would be restored, else an output not known until it is built (pending).
func (planRunner) act(ctx context.Context, b *builder, n *node, v *verdict, nodes []*node, _ chan struct{}) {
	t := n.t
	n.outcome = Planned
	switch {
	case v.pending:
		n.pending = true
		if pr, ok := b.probeStale(ctx, n, nodes, v); ok {
			if pr.Action == Keep {
				return // nothing to show: it is checked again once the upstreams are built
			}
			v.drift(pr)
		}
	case t.Probe != nil && v.probe.Action == "":
		// An External target whose inputs changed: its Probe compares the object the new
		// config wants with the real one, so the plan says create / update / replace and why,
		// in the object's own words (old → new), rather than only which input changed. Its
		// upstreams are built, so an error is the build's (another lab's network in the way).
		pr, err := b.probe(ctx, n, v.epoch, nodes)
		if err != nil {
			b.fail(n, err)
			return
		}
		v.drift(pr)
		v.decideAction()
	}
	if !v.pending {
		if v.entry != nil {
			n.outDig, n.files = v.entry.OutputDigest, entryNames(v.entry)
		} else {
			n.pending = true
			if t.Gate && v.prev != nil {
				n.outDig = v.prev.OutDigest // a passing gate writes the same bytes again
			}
		}
	}
	n.plan = newPlanItem(t, v.state, v.action, v.reasons)
	b.explain(n)
}

func (planRunner) failed(_ *builder, n *node, _ string) { n.state = StateBlocked }

func (planRunner) undo(context.Context, *Target, *Step) (DestroyOutcome, bool, error) {
	return RecordOnly, true, nil
}

func (planRunner) close(*builder) {}

// probeStale runs the Probe of External target n while some of its upstreams would build
// first, against the upstreams' outputs as they are materialized now (every dep must have a
// record): terraform's "known after apply", narrowed to what the object itself needs. ok is
// false when that cannot be done: n made nothing yet, an upstream object is created or
// replaced (its current state says nothing of what sits on it), or the Probe failed.
func (b *builder) probeStale(ctx context.Context, n *node, nodes []*node, v *verdict) (ProbeResult, bool) {
	t := n.t
	if !t.External || t.Probe == nil || v.prev == nil || v.action == Create {
		return ProbeResult{}, false
	}
	for _, j := range b.p.Graph.Deps(n.id) {
		if p := nodes[j].plan; nodes[j].unknownOutput() && p != nil && (p.Action == Create || p.Action == Replace) {
			return ProbeResult{}, false // remade: whatever sits on it builds again
		}
	}
	s := b.newStep(ctx, n, nodes, v.prev.Epoch)
	for dn, d := range s.deps {
		if d.files == nil {
			ps := b.state.Target(dn)
			if ps == nil {
				return ProbeResult{}, false
			}
			d.files = outputNames(ps.Outputs)
			s.deps[dn] = d
		}
	}
	r, err := t.Probe(ctx, s)
	if err != nil {
		return ProbeResult{}, false
	}
	if r.Action == "" {
		r.Action = Keep
	}
	return r, true
}

// waiting says, once, that the build waits for the output directory's lock and who holds it.
func (b *builder) waiting(pid int) {
	fmt.Fprintf(b.stderr, "labbuild: waiting for the lock on %s %s\n", b.out, LockHolder(pid))
	b.o.Stamp.Fail("waited for the lock") // the notice is this run's, never a replay's
}

// LockHolder words who holds an output directory's lock, as a waiting build says it: "held by
// process 1234" (the holder the kernel names, cache.Holders), or "held by another process".
func LockHolder(pid int) string {
	if pid <= 0 {
		return "held by another process"
	}
	return fmt.Sprintf("held by process %d", pid)
}
