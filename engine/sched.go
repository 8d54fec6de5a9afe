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
	"sync/atomic"
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
	state   State // its verdict's
	waiting int32 // unfinished deps
	prio    int32 // scheduling priority (prioritize)
	seq     int32 // position in build order, the tie-break
	pending bool  // dry run: would build, so its output digest is unknown
	stopped bool  // not started, or interrupted: the build stopped (no -k, or Ctrl-C)
	started bool  // it started to run or be restored (counted in [N/M])

	err     error                   // failure (root cause or upstream)
	files   []string                // output relative paths, sorted (for dependents' Steps)
	plan    *PlanItem               // set when it ran, was restored, or would be
	failDep string                  // the upstream that failed, for skipped targets
	inputs  map[string]cache.Digest // its labelled key inputs, for explain (Options.Explain)
	base    cache.Digest            // the key without the epoch (see keyed)
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

// run builds (or, with a planRunner, plans) the closure of roots: the fast path finishes what
// is up to date, then workers visit the rest as their deps finish, highest priority first.
func (b *builder) run(ctx context.Context, roots []int) (*Result, error) {
	b.runCtx = ctx
	defer b.openDirs()()
	nodes := b.selectNodes(roots)
	t0 := time.Now()
	quick := b.quick(nodes)
	b.tQuick, b.nQuick = time.Since(t0), quick
	b.todo = b.total - quick
	defer func() { b.tSched = time.Since(t0) - b.tQuick }()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.schedule(ctx, nodes, b.total-quick)
	b.clearStatus()
	if b.o.Stamp != nil {
		b.recordVerdict(nodes)
	}
	res := b.result(nodes, quick)
	b.reportStopped(ctx, res)
	if len(res.Failed) > 0 {
		return res, &BuildError{Failed: res.Failed}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// selectNodes returns a node for each target in the closure of roots (nil for the others),
// all carved from one allocation.
func (b *builder) selectNodes(roots []int) []*node {
	g := b.p.Graph
	sel := g.Closure(roots)
	nodes := make([]*node, g.Len())
	slab := make([]node, g.Len())
	for _, i := range g.Order() {
		if !sel[i] {
			continue
		}
		n := &slab[i]
		n.id, n.t, n.waiting = i, b.p.Targets[i], int32(len(g.Deps(i)))
		nodes[i] = n
		b.total++
	}
	return nodes
}

// schedule visits the left targets the fast path did not finish, each once its deps are
// finished, on max(Jobs, NumCPU) workers (at most Jobs of them running a recipe at once).
func (b *builder) schedule(ctx context.Context, nodes []*node, left int) {
	g := b.p.Graph
	jobs := b.o.Jobs
	if jobs <= 0 {
		jobs = runtime.NumCPU()
	}
	runSem := make(chan struct{}, jobs)
	ready := newReadyQueue()
	finished := make(chan *node, left)
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
	if left > 0 {
		b.prioritize(nodes)
	}
	for _, i := range g.Order() {
		if n := nodes[i]; n != nil && n.outcome == "" && n.waiting == 0 {
			ready.push(n)
		}
	}
	var stop atomic.Bool // a failure without -k: start nothing new
	var wg sync.WaitGroup
	for w := 0; w < max(jobs, runtime.NumCPU()); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := ready.pop(); n != nil; n = ready.pop() {
				switch {
				case n.outcome == Skipped:
					// Already skipped (an upstream failed or never started): keep its reason.
				case stop.Load() || ctx.Err() != nil:
					n.outcome, n.stopped, n.err = Skipped, true, errors.New("not started: the build stopped")
				default:
					b.visit(ctx, n, nodes, runSem)
				}
				b.ended(n)
				if n.outcome == Failed && !b.o.KeepGoing {
					stop.Store(true)
				}
				finished <- n
			}
		}()
	}
	for ; left > 0; left-- {
		n := <-finished
		for _, j := range g.Dependents(n.id) {
			if d := nodes[j]; d != nil {
				skipAfter(n, d)
				if d.waiting--; d.waiting == 0 {
					ready.push(d) // a skipped one finishes at once, propagating the skip
				}
			}
		}
	}
	ready.close()
	wg.Wait()
}

// skipAfter skips dependent d of finished target n when n failed or was skipped. d cannot
// have started: it waits for every dep. A failed upstream outranks one that never started,
// whichever finishes first.
func skipAfter(n, d *node) {
	if n.outcome != Failed && n.outcome != Skipped {
		return
	}
	failDep := n.failDep
	if n.outcome == Failed {
		failDep = n.t.Name
	}
	switch {
	case failDep != "" && (d.outcome == "" || d.stopped):
		d.outcome, d.failDep, d.stopped = Skipped, failDep, false
	case d.outcome == "":
		// Downstream only of targets that never started: not started either.
		d.outcome, d.stopped = Skipped, true
	}
}

// visit takes target n, whose deps are finished: its verdict, then, unless it is up to date,
// what the runner does about it.
func (b *builder) visit(ctx context.Context, n *node, nodes []*node, runSem chan struct{}) {
	v, err := b.verdict(ctx, n, nodes)
	if err != nil {
		b.fail(n, err)
		return
	}
	if b.o.Explain {
		n.inputs = v.inputs
	}
	if v.state == StateUpToDate {
		n.outcome, n.state = UpToDate, StateUpToDate
		n.outDig, n.files = v.prev.OutDigest, outputNames(v.prev.Outputs)
		return
	}
	b.runner.act(ctx, b, n, v, nodes, runSem)
	if n.outcome != Failed {
		n.state = v.state // a failure's is the runner's
	}
}

// result gathers what the build did, in build order; quick targets were up to date by the
// fast path.
func (b *builder) result(nodes []*node, quick int) *Result {
	res := &Result{UpToDate: make([]string, 0, quick), p: b.p, states: make([]State, len(nodes))}
	if b.o.Explain {
		res.Inputs = map[string]map[string]cache.Digest{}
	}
	for _, i := range b.p.Graph.Order() {
		n := nodes[i]
		if n == nil {
			continue
		}
		res.states[i] = n.state
		switch n.outcome {
		case Built:
			res.Built = append(res.Built, n.t.Name)
		case Restored:
			res.Restored = append(res.Restored, n.t.Name)
		case UpToDate:
			res.UpToDate = append(res.UpToDate, n.t.Name)
		case Failed:
			res.Failed = append(res.Failed, n.t.Name) // its state is the runner's (failed)
		case Skipped:
			res.states[i] = StateBlocked
			if n.stopped {
				res.NotStarted = append(res.NotStarted, n.t.Name)
			} else {
				res.Skipped = append(res.Skipped, n.t.Name)
			}
		}
		if n.plan != nil {
			res.Plan = append(res.Plan, *n.plan)
		}
		if n.inputs != nil {
			res.Inputs[n.t.Name] = n.inputs
		}
	}
	for _, l := range [][]string{res.Built, res.Restored, res.UpToDate, res.Failed, res.Skipped, res.NotStarted} {
		sort.Strings(l)
	}
	return res
}

// reportStopped prints, once, the targets skipped because an upstream failed and how many
// were never started.
func (b *builder) reportStopped(ctx context.Context, res *Result) {
	if len(res.Skipped) > 0 {
		fmt.Fprintf(b.stderr, "labbuild: skipped, upstream failed: %s\n", strings.Join(res.Skipped, ", "))
	}
	if n := len(res.NotStarted); n > 0 {
		why := "the build stopped at the first failure; -k builds what does not depend on it"
		if ctx.Err() != nil {
			why = "interrupted"
		}
		fmt.Fprintf(b.stderr, "labbuild: %d not started (%s)\n", n, why)
	}
}
