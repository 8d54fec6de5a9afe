package engine

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labbuild/labbuild/cache"
)

// node is the scheduler's record of one selected target.
type node struct {
	// Read by the null-build fast path (fastpath.go), first, so that its pages hold little else.
	id      int
	t       *Target
	outDig  cache.Digest
	outcome Outcome
	waiting int32 // unfinished deps
	prio    int32 // scheduling priority (prioritize)
	seq     int32 // position in build order, the tie-break
	pending bool  // dry run: would run, so its output digest is unknown
	stopped bool  // not started, or interrupted: the build stopped (no -k, or Ctrl-C)
	started bool  // it started to run or be restored (counted in [N/M])

	err     error        // failure (root cause or upstream)
	files   []string     // output relative paths, sorted (for dependents' Steps)
	plan    *PlanItem    // set when it ran, was restored, or would be
	failDep string       // the upstream that failed, for skipped targets
	rs      *reasonState // inputs, for explain
	base    cache.Digest // the key without the epoch (see keyWith)
}

// prioritize sets each target's scheduling priority: the length of the longest chain of
// selected targets still to run that starts at it (its critical path, counted in targets, as
// ninja 1.12 orders its ready queue), ties going to earlier targets in build order. The roots
// that most work waits on — private keys, the release payload — start first, on every core.
func (b *builder) prioritize(nodes []*node) {
	g := b.p.Graph
	order := g.Order()
	for k := len(order) - 1; k >= 0; k-- {
		i := order[k]
		n := nodes[i]
		if n == nil || n.outcome != "" {
			continue
		}
		n.seq = int32(k)
		var h int32
		for _, j := range g.Dependents(i) {
			if d := nodes[j]; d != nil && d.prio > h {
				h = d.prio
			}
		}
		n.prio = h + 1
	}
}

// readyQueue holds the targets whose deps are done, highest priority first; pop blocks until
// one is ready or the queue is closed.
type readyQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	h      nodeHeap
	closed bool
}

func newReadyQueue() *readyQueue {
	q := &readyQueue{}
	q.cond.L = &q.mu
	return q
}

func (q *readyQueue) push(n *node) {
	q.mu.Lock()
	heap.Push(&q.h, n)
	q.mu.Unlock()
	q.cond.Signal()
}

// pop returns the highest-priority ready target, or nil once the queue is closed and empty.
func (q *readyQueue) pop() *node {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.h) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.h) == 0 {
		return nil
	}
	return heap.Pop(&q.h).(*node)
}

func (q *readyQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

// nodeHeap is a max-heap by priority, then build order.
type nodeHeap []*node

func (h nodeHeap) Len() int { return len(h) }
func (h nodeHeap) Less(i, j int) bool {
	if h[i].prio != h[j].prio {
		return h[i].prio > h[j].prio
	}
	return h[i].seq < h[j].seq
}
func (h nodeHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *nodeHeap) Push(x any)   { *h = append(*h, x.(*node)) }
func (h *nodeHeap) Pop() any {
	old := *h
	n := old[len(old)-1]
	*h = old[:len(old)-1]
	return n
}

type reasonState struct {
	inputs map[string]cache.Digest
}

func (b *builder) run(ctx context.Context, roots []int) (*Result, error) {
	b.runCtx = ctx
	g := b.p.Graph
	sel := g.Closure(roots)
	nodes := make([]*node, g.Len())
	slab := make([]node, g.Len()) // one allocation for every node
	for _, i := range g.Order() {
		if !sel[i] {
			continue
		}
		n := &slab[i]
		n.id, n.t, n.waiting = i, b.p.Targets[i], int32(len(g.Deps(i)))
		nodes[i] = n
		b.total++
	}
	t0 := time.Now()
	quick := b.quick(nodes)
	b.tQuick, b.nQuick = time.Since(t0), quick
	b.todo = b.total - quick
	defer func() { b.tSched = time.Since(t0) - b.tQuick }()
	jobs := b.o.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	workers := max(jobs, runtime.NumCPU())
	runSem := make(chan struct{}, jobs)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var mu sync.Mutex
	stop := false // a failure without -k: start nothing new
	ready := newReadyQueue()
	finished := make(chan *node, b.total-quick)
	// Up-to-date targets found by the fast path are finished already: release their dependents.
	for _, i := range g.Order() {
		if n := nodes[i]; n != nil && n.outcome == UpToDate {
			for _, j := range g.Dependents(i) {
				if nodes[j] != nil {
					nodes[j].waiting--
				}
			}
		}
	}
	if b.todo > 0 {
		b.prioritize(nodes)
	}
	for _, i := range g.Order() {
		if n := nodes[i]; n != nil && n.outcome == "" && n.waiting == 0 {
			ready.push(n)
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := ready.pop()
				if n == nil {
					return
				}
				mu.Lock()
				halted := stop
				mu.Unlock()
				if n.outcome == Skipped {
					// Already skipped (an upstream failed or never started): keep its reason.
				} else if halted || ctx.Err() != nil {
					n.outcome = Skipped
					n.stopped = true
					n.err = errors.New("not started: the build stopped")
				} else {
					b.visit(ctx, n, nodes, runSem)
				}
				b.ended(n)
				if n.outcome == Failed && !b.o.KeepGoing {
					mu.Lock()
					stop = true
					mu.Unlock()
				}
				finished <- n
			}
		}()
	}
	for left := b.total - quick; left > 0; left-- {
		n := <-finished
		for _, j := range g.Dependents(n.id) {
			d := nodes[j]
			if d == nil {
				continue
			}
			if n.outcome == Failed || n.outcome == Skipped {
				// d cannot have started: it waits for every dep. A failed upstream outranks
				// one that never started, whichever finishes first.
				var failDep string
				switch {
				case n.outcome == Failed:
					failDep = n.t.Name
				case n.failDep != "":
					failDep = n.failDep
				}
				switch {
				case failDep != "" && (d.outcome == "" || d.stopped):
					d.outcome, d.failDep, d.stopped = Skipped, failDep, false
				case d.outcome == "":
					// Downstream only of targets that never started: not started either.
					d.outcome, d.stopped = Skipped, true
				}
			}
			d.waiting--
			if d.waiting == 0 {
				ready.push(d) // a skipped one finishes at once, propagating the skip
			}
		}
	}
	ready.close()
	wg.Wait()
	b.clearStatus()

	if b.o.Record != nil {
		b.recordVerdict(nodes)
	}
	res := &Result{Inputs: map[string]map[string]cache.Digest{}, UpToDate: make([]string, 0, quick)}
	var skippedByFail []string
	for _, i := range g.Order() {
		n := nodes[i]
		if n == nil {
			continue
		}
		switch n.outcome {
		case Built:
			res.Executed = append(res.Executed, n.t.Name)
		case Reused:
			res.Reused = append(res.Reused, n.t.Name)
		case UpToDate:
			res.UpToDate = append(res.UpToDate, n.t.Name)
		case Failed:
			res.Failed = append(res.Failed, n.t.Name)
		case Skipped:
			if n.stopped {
				res.NotStarted = append(res.NotStarted, n.t.Name)
				break
			}
			res.Skipped = append(res.Skipped, n.t.Name)
			skippedByFail = append(skippedByFail, n.t.Name)
		case Planned:
		}
		if n.plan != nil {
			it := *n.plan
			it.External = n.t.External
			res.Plan = append(res.Plan, it)
		}
		if n.rs != nil {
			res.Inputs[n.t.Name] = n.rs.inputs
		}
	}
	for _, l := range [][]string{res.Executed, res.Reused, res.UpToDate, res.Failed, res.Skipped, res.NotStarted} {
		sort.Strings(l)
	}
	if len(skippedByFail) > 0 {
		sort.Strings(skippedByFail)
		fmt.Fprintf(b.stderr, "labbuild: skipped, upstream failed: %s\n", strings.Join(skippedByFail, ", "))
	}
	if n := len(res.NotStarted); n > 0 {
		why := "the build stopped at the first failure; -k builds what does not depend on it"
		if ctx.Err() != nil {
			why = "interrupted"
		}
		fmt.Fprintf(b.stderr, "labbuild: %d not started (%s)\n", n, why)
	}
	if len(res.Failed) > 0 {
		return res, &BuildError{Failed: res.Failed}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// visit decides and does what target n needs. Its deps are finished.
func (b *builder) visit(ctx context.Context, n *node, nodes []*node, runSem chan struct{}) {
	if n.outcome == Skipped {
		return
	}
	t := n.t
	// Dry run: a dep that would run has an unknown output, so n's key is unknown too.
	var pendingDeps []string
	remade := false // an upstream object is created or replaced: whatever sits on it runs again
	for _, j := range b.p.Graph.Deps(n.id) {
		// A gate built before passes with the same bytes (outDig kept); a never-built one is
		// an unknown like any other.
		if nodes[j].pending && !(nodes[j].t.Gate && nodes[j].outDig != (cache.Digest{})) {
			pendingDeps = append(pendingDeps, nodes[j].t.Name)
			if p := nodes[j].plan; p != nil && (p.Action == string(Create) || p.Action == string(Replace)) {
				remade = true
			}
		}
	}
	if len(pendingDeps) > 0 {
		n.pending = true
		n.outcome = Planned
		var reasons []string
		if _, inputs, _, _, err := b.key(n, nodes, true); err == nil {
			n.rs = &reasonState{inputs: inputs} // pending upstreams show as the zero digest
			if prev := b.state.Target(t.Name); prev != nil {
				for _, r := range b.diffInputs(prev.Key, inputs) {
					if !strings.HasPrefix(r, "upstream ") && r != "inputs changed" {
						reasons = append(reasons, r) // its own inputs that changed too
					}
				}
			}
		}
		// A state view (graph, explain) tells never-built and failed targets from stale ones.
		if prev := b.state.Target(t.Name); prev == nil {
			reasons = append(reasons, "never built")
		} else if prev.Failed {
			reasons = append(reasons, "last attempt failed")
		}
		reasons = append(reasons, "upstream "+strings.Join(pendingDeps, ", ")+" will change first")
		action := "run"
		if t.External && b.state.Target(t.Name) == nil {
			action = string(Create) // nothing recorded: nothing made yet
		} else if pr, ok := b.probeStale(ctx, n, nodes, remade); ok {
			// Terraform's "known after apply", narrowed: the Probe, given the upstreams'
			// outputs as they are now, says what the object itself needs. Keep: nothing to
			// show (it is checked again once the upstreams are built).
			if pr.Action == Keep {
				n.plan = nil
				return
			}
			action, reasons = string(pr.Action), []string{pr.Reason}
		}
		n.plan = &PlanItem{Target: t.Name, Action: action, Reasons: reasons}
		if prev := b.state.Target(t.Name); prev != nil && action == "run" {
			n.plan.Changes = b.changes(t, prev.Key) // a Probe's reason says old → new itself
		}
		b.explain(n)
		return
	}
	key, inputs, epoch, renew, err := b.key(n, nodes, b.o.DryRun || b.o.Explain)
	if err != nil {
		b.fail(n, err)
		return
	}
	prev := b.state.Target(t.Name)
	reasons, upToDate := b.check(n, key, prev, renew, func() map[string]cache.Digest {
		if inputs == nil {
			_, inputs, _, _, _ = b.key(n, nodes, true)
		}
		return inputs
	})
	if b.o.DryRun || b.o.Explain {
		n.rs = &reasonState{inputs: inputs}
	}

	sticky := t.Sticky && !b.regen[t.Name]
	if b.o.Force && !sticky {
		upToDate = false
		reasons = append([]string{"forced (-B)"}, reasons...)
	}
	if b.regen[t.Name] {
		upToDate = false
		reasons = []string{"--regenerate"}
		epoch = b.now.UnixNano() // a new generation, not the recorded one
	}
	var probe ProbeResult
	if upToDate {
		if t.Probe != nil {
			probe, err = b.probe(ctx, n, key, epoch, nodes)
			if err != nil {
				b.fail(n, err)
				return
			}
			if probe.Action != Keep && probe.Action != "" {
				upToDate = false
				reasons = []string{string(probe.Action) + ": " + probe.Reason}
			}
		}
		if upToDate {
			n.outcome = UpToDate
			n.outDig = prev.OutDigest
			n.files = outputNames(prev.Outputs)
			return
		}
	}
	// Not up to date: restore from the store when this exact key was built before.
	var entry *cache.Entry
	if !b.regen[t.Name] && (!b.o.Force || sticky) {
		entry, _ = b.cache.GetAction(key)
	}
	if b.o.DryRun && t.Probe != nil && probe.Action == "" {
		// An External target whose inputs changed: its Probe compares the object the new
		// config wants with the real one, so the plan says create / update / replace and why,
		// in the object's own words (old → new), rather than only which input changed. Its
		// upstreams are built, so an error is the build's (another lab's network in the way).
		pr, err := b.probe(ctx, n, key, epoch, nodes)
		if err != nil {
			b.fail(n, err)
			return
		}
		if pr.Action != Keep {
			probe, reasons = pr, []string{pr.Reason}
		}
	}
	if b.o.DryRun {
		n.outcome = Planned
		action := "run"
		if entry != nil {
			action = "restore"
			n.outDig = entry.OutputDigest
			n.files = entryNames(entry)
		} else {
			n.pending = true
			if t.Gate && prev != nil {
				n.outDig = prev.OutDigest // a passing gate writes the same bytes again
			}
		}
		if probe.Action != "" && probe.Action != Keep {
			action = string(probe.Action)
		}
		n.plan = &PlanItem{Target: t.Name, Action: action, Reasons: reasons}
		if prev != nil && (probe.Action == "" || probe.Action == Keep) {
			n.plan.Changes = b.changes(t, prev.Key) // a Probe's reason says old → new itself
		}
		b.explain(n)
		return
	}
	if entry != nil {
		b.started(n, true)
		if err := b.restore(n, entry, prev); err == nil {
			// External targets: the record is back; the real object may still differ.
			if t.Probe != nil {
				probe, err = b.probe(ctx, n, key, epoch, nodes)
				if err != nil {
					b.fail(n, err)
					return
				}
			}
			if t.Probe == nil || probe.Action == Keep || probe.Action == "" {
				n.outcome = Reused
				n.plan = &PlanItem{Target: t.Name, Action: "restore", Reasons: reasons}
				b.explain(n)
				return
			}
			reasons = []string{string(probe.Action) + ": " + probe.Reason}
		} else {
			reasons = append(reasons, "store entry unusable: "+err.Error())
		}
	}
	runSem <- struct{}{}
	defer func() { <-runSem }()
	if ctx.Err() != nil {
		n.outcome = Skipped
		return
	}
	b.started(n, false)
	action := "run"
	if probe.Action != "" && probe.Action != Keep {
		action = string(probe.Action)
	}
	n.plan = &PlanItem{Target: t.Name, Action: action, Reasons: reasons}
	b.explain(n)
	if inputs == nil {
		_, inputs, _, _, _ = b.key(n, nodes, true)
	}
	if err := b.execute(ctx, n, key, inputs, epoch, probe, nodes, prev); err != nil {
		b.fail(n, err)
		return
	}
	n.outcome = Built
}

// probeStale runs the Probe of External target n in a dry run while some upstreams would
// run first, against the upstreams' outputs as they are materialized now (every dep must
// have a record). ok is false when that cannot be done, when an upstream object is remade
// (its current state says nothing of what sits on it), or when the Probe failed.
func (b *builder) probeStale(ctx context.Context, n *node, nodes []*node, remade bool) (ProbeResult, bool) {
	t := n.t
	prev := b.state.Target(t.Name)
	if remade || !b.o.DryRun || !t.External || t.Probe == nil || prev == nil {
		return ProbeResult{}, false
	}
	s := b.newStep(ctx, n, nodes, prev.Epoch)
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
