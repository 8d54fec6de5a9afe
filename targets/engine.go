package targets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/graph"
)

// Options configures one build.
type Options struct {
	// Config is the lab config; DefaultConfig() when nil.
	Config *Config
	// Values, when set, replaces Config as the source of declared values (synthetic graphs).
	Values Values
	// ConfigPath is the lab config file ("" for the embedded default); relative file paths in
	// the config are taken from its directory.
	ConfigPath string
	// OutDir is the output directory (out/); its .labbuild/ holds state, cache, logs, lock.
	OutDir string
	// Goals are target names, family names ("pki"), or name prefixes ("manifests/static-pods").
	// Empty means the default goal: every target that is not External.
	Goals []string
	// Jobs is how many targets run at once (-j); 0 means the number of CPUs.
	Jobs int
	// KeepGoing (-k) builds what does not depend on a failure instead of stopping at the first.
	KeepGoing bool
	// DryRun (-n) computes the plan and changes nothing.
	DryRun bool
	// Force (-B) runs every selected target except Sticky ones, which are restored.
	Force bool
	// Regenerate names Sticky targets to make anew (a new CA key, a new password).
	Regenerate []string
	// Now is the clock, read once per build (injected in tests); time.Now when nil.
	Now func() time.Time
	// Stdout and Stderr receive the status line, failures and the plan; io.Discard when nil.
	Stdout, Stderr io.Writer
	// Terminal selects the one-line ninja-style status ([N/M] target, rewritten in place).
	Terminal bool
	// Explain prints, for every target that runs or is restored, why.
	Explain bool
	// Targets, when non-nil, replaces the registered families (tests, synthetic graphs).
	Targets []*Target
	// Stats prints, at the end, how long each phase of the build took (-d stats).
	Stats bool
}

// Outcome is what a build did with one target.
type Outcome string

// Outcomes, as the summary line counts them.
const (
	Built    Outcome = "built"      // Run executed
	Reused   Outcome = "reused"     // restored from the content store
	UpToDate Outcome = "up to date" // nothing to do
	Failed   Outcome = "failed"
	Skipped  Outcome = "skipped" // an upstream failed
	Planned  Outcome = "planned" // dry run: would run or restore
)

// PlanItem is one target in a plan (-n) or an explanation: what would happen and why.
type PlanItem struct {
	Target  string   `json:"target"`
	Action  string   `json:"action"` // run | restore | keep, or create/update/replace for External targets
	Reasons []string `json:"reasons,omitempty"`
}

// Result is what a build did. Name lists are sorted.
type Result struct {
	Executed []string `json:"executed"`
	Reused   []string `json:"reused"`
	UpToDate []string `json:"upToDate"`
	Failed   []string `json:"failed"`
	Skipped  []string `json:"skipped"`
	// Plan lists, in build order, every target that ran, was restored or (with DryRun) would be.
	Plan     []PlanItem    `json:"plan"`
	Duration time.Duration `json:"durationNs"`
	// Inputs maps each evaluated target to its labelled key inputs ("config:network.apiVIP",
	// "file:access.pullSecretFile", "dep:pki/ca/root", "version") and their digests.
	Inputs map[string]map[string]cache.Digest `json:"-"`
}

// Summary returns the one line printed at the end of a build.
func (r *Result) Summary() string {
	s := fmt.Sprintf("%d built, %d reused, %d up to date", len(r.Executed), len(r.Reused), len(r.UpToDate))
	if len(r.Failed) > 0 {
		s += fmt.Sprintf(", %d failed", len(r.Failed))
	}
	if len(r.Skipped) > 0 {
		s += fmt.Sprintf(", %d skipped", len(r.Skipped))
	}
	return s + fmt.Sprintf(" in %.2fs", r.Duration.Seconds())
}

// BuildError is returned when targets failed; it names them. Each root cause was printed once.
type BuildError struct{ Failed []string }

func (e *BuildError) Error() string {
	return "build failed: " + strings.Join(e.Failed, ", ")
}

// UsageError is a bad request (unknown target, bad goal): the CLI exits with status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Project is a resolved set of targets and their graph for one config.
type Project struct {
	Targets []*Target
	Graph   *graph.Graph
	byName  map[string]*Target
	values  Values
}

// Load generates the targets for o (registered families over o.Config, or o.Targets),
// checks their declarations, and builds the graph.
func Load(o Options) (*Project, error) {
	cfg := o.Config
	if cfg == nil && o.Values == nil && o.Targets == nil {
		cfg = DefaultConfig()
	}
	var vals Values = cfg
	if o.Values != nil {
		vals = o.Values
	}
	ts := o.Targets
	if ts == nil {
		fams := append([]Family(nil), families...)
		sort.Slice(fams, func(i, j int) bool { return fams[i].Name < fams[j].Name })
		for _, f := range fams {
			ts = append(ts, f.Targets(cfg)...)
		}
	}
	p := &Project{Targets: ts, byName: make(map[string]*Target, len(ts)), values: vals}
	nodes := make([]graph.Node, len(ts))
	for i, t := range ts {
		if err := t.check(); err != nil {
			return nil, err
		}
		if vals != nil {
			for _, r := range append(append([]string{}, t.Reads...), t.Files...) {
				if _, ok := vals.Lookup(r); !ok {
					return nil, fmt.Errorf("%s: declares config field %q, which the config does not have", t.Name, r)
				}
			}
		}
		p.byName[t.Name] = t
		nodes[i] = graph.Node{Name: t.Name, Deps: t.Deps}
	}
	g, err := graph.New(nodes)
	if err != nil {
		return nil, err
	}
	p.Graph = g
	return p, nil
}

// Target returns the named target or nil.
func (p *Project) Target(name string) *Target { return p.byName[name] }

// Select returns the IDs named by goals (see Options.Goals), or a *UsageError naming an
// unknown goal and the closest names.
func (p *Project) Select(goals []string) ([]int, error) {
	var ids []int
	if len(goals) == 0 {
		for i, t := range p.Targets {
			if !t.External {
				ids = append(ids, i)
			}
		}
		return ids, nil
	}
	for _, goal := range goals {
		goal = strings.TrimSuffix(goal, "/")
		if id, ok := p.Graph.ID(goal); ok {
			ids = append(ids, id)
			continue
		}
		n := 0
		for i, t := range p.Targets {
			if strings.HasPrefix(t.Name, goal+"/") {
				ids = append(ids, i)
				n++
			}
		}
		if n == 0 {
			return nil, &UsageError{Msg: fmt.Sprintf("unknown target or family %q%s (labbuild list shows them)", goal, p.suggest(goal))}
		}
	}
	return ids, nil
}

func (p *Project) suggest(goal string) string {
	var close []string
	for _, t := range p.Targets {
		if strings.Contains(t.Name, goal) || strings.Contains(goal, t.Family()+"/") && strings.HasPrefix(t.Name, t.Family()+"/") && len(close) < 3 && strings.Contains(t.Name, lastSeg(goal)) {
			close = append(close, t.Name)
		}
		if len(close) >= 3 {
			break
		}
	}
	if len(close) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(close, ", ") + "?"
}

func lastSeg(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Paths inside the output directory.
const (
	metaDir   = ".labbuild"
	stateFile = "state"
	lockFile  = "lock"
	cacheDir  = "cache"
	logDir    = "log"
	tmpDir    = "tmp"
)

// Build builds o.Goals. It returns a *BuildError when targets failed, a *UsageError for a bad
// request, and other errors for trouble with the output directory.
func Build(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	// A caller that keeps a Config across builds (tests, a watch loop) may have edited its
	// fields since the last one: read values afresh.
	o.Config.Refresh()
	// Declaring the targets and reading the state are independent: overlap them.
	type opened struct {
		b   *builder
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		b, err := openBuilder(o)
		ch <- opened{b, err}
	}()
	p, err := Load(o)
	tLoad := time.Since(start)
	ob := <-ch
	tOpen := time.Since(start)
	if ob.err != nil {
		return nil, ob.err
	}
	b := ob.b
	defer b.close()
	if err != nil {
		return nil, err
	}
	if err := b.attach(p); err != nil {
		return nil, err
	}
	roots, err := p.Select(o.Goals)
	if err != nil {
		return nil, err
	}
	res, err := b.run(ctx, roots)
	if res != nil {
		res.Duration = time.Since(start)
	}
	if o.Stats {
		fmt.Fprintf(b.stderr, "labbuild stats: %d targets; declare+graph %v, lock+state %v (overlapped), fast path %v (%d up to date), scheduler %v, total %v\n",
			len(p.Targets), tLoad.Round(time.Microsecond), tOpen.Round(time.Microsecond), b.tQuick.Round(time.Microsecond), b.nQuick, b.tSched.Round(time.Microsecond), time.Since(start).Round(time.Microsecond))
	}
	return res, err
}

// builder is the state of one build.
type builder struct {
	p       *Project
	o       Options
	out     string // absolute output directory
	meta    string
	now     time.Time
	wall    time.Time // real start time, for the racy-file rule (never the injected clock)
	lock    *cache.Lock
	cache   *cache.Cache
	state   *cache.State
	baseDir string
	stdout  io.Writer
	stderr  io.Writer
	regen   map[string]bool
	tQuick  time.Duration // -d stats
	tSched  time.Duration
	nQuick  int

	mu     sync.Mutex // guards printing and the counters below
	done   int
	total  int
	status bool // a status line is on screen
}

// newBuilder opens the output directory for project p.
func newBuilder(p *Project, o Options) (*builder, error) {
	b, err := openBuilder(o)
	if err != nil {
		return nil, err
	}
	if err := b.attach(p); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// attach sets the project and checks the options that name its targets.
func (b *builder) attach(p *Project) error {
	b.p = p
	for _, r := range b.o.Regenerate {
		t := p.Target(r)
		if t == nil || !t.Sticky {
			return &UsageError{Msg: fmt.Sprintf("--regenerate %s: not a sticky target (labbuild list shows them)", r)}
		}
		b.regen[r] = true
	}
	return nil
}

// openBuilder locks the output directory and reads its state.
func openBuilder(o Options) (*builder, error) {
	out, err := filepath.Abs(o.OutDir)
	if err != nil {
		return nil, err
	}
	b := &builder{o: o, out: out, meta: filepath.Join(out, metaDir), baseDir: baseDirOf(o.ConfigPath), regen: map[string]bool{}, wall: time.Now()}
	b.stdout, b.stderr = o.Stdout, o.Stderr
	if b.stdout == nil {
		b.stdout = io.Discard
	}
	if b.stderr == nil {
		b.stderr = io.Discard
	}
	if o.Now != nil {
		b.now = o.Now()
	} else {
		b.now = time.Now()
	}
	if !o.DryRun {
		if err := os.MkdirAll(b.meta, 0o755); err != nil {
			return nil, fmt.Errorf("output directory: %w", err)
		}
	}
	if _, err := os.Stat(b.meta); err == nil {
		b.lock, err = cache.Acquire(filepath.Join(b.meta, lockFile), func(pid int) {
			fmt.Fprintf(b.stderr, "labbuild: waiting for the lock on %s held by process %d\n", out, pid)
		})
		if err != nil {
			return nil, err
		}
	}
	b.cache = cache.Open(filepath.Join(b.meta, cacheDir))
	b.state, err = cache.LoadState(filepath.Join(b.meta, stateFile))
	if err != nil {
		b.close()
		return nil, err
	}
	if !o.DryRun {
		os.RemoveAll(filepath.Join(b.meta, tmpDir)) // leftovers of an interrupted build
		if err := os.MkdirAll(filepath.Join(b.meta, tmpDir), 0o700); err != nil {
			b.close()
			return nil, err
		}
		b.cache.CleanTmp()
	}
	return b, nil
}

// Trim policy for the content store: entries unused for TrimAge, then the least recently used
// past TrimBytes, go; pinned (sticky) entries stay. Checked at most once a day, after a build.
const (
	TrimAge      = 30 * 24 * time.Hour
	TrimBytes    = 10 << 30
	trimInterval = 24 * time.Hour
	trimStamp    = "trimmed"
)

func (b *builder) close() {
	if b.state != nil {
		if !b.o.DryRun {
			b.state.Compact(false)
			b.maybeTrim()
		}
		b.state.Close()
	}
	b.lock.Release()
}

// maybeTrim trims the store when the last trim is over a day old (a stamp file's mtime).
func (b *builder) maybeTrim() {
	stamp := filepath.Join(b.meta, trimStamp)
	if st, err := os.Stat(stamp); err == nil && time.Since(st.ModTime()) < trimInterval {
		return
	}
	if _, err := b.cache.Trim(TrimAge, TrimBytes, time.Now()); err == nil {
		os.WriteFile(stamp, nil, 0o644)
	}
}

// TrimCache trims the output directory's content store now (labbuild clean --trim), holding
// the lock, with the given limits (0: no limit of that kind).
func TrimCache(o Options, maxAge time.Duration, maxBytes int64) (cache.TrimStats, error) {
	b, err := openBuilder(o)
	if err != nil {
		return cache.TrimStats{}, err
	}
	defer b.close()
	return b.cache.Trim(maxAge, maxBytes, time.Now())
}

// node is the scheduler's record of one selected target.
type node struct {
	id      int
	t       *Target
	waiting int // unfinished deps
	outcome Outcome
	outDig  cache.Digest
	pending bool         // dry run: would run, so its output digest is unknown
	err     error        // failure (root cause or upstream)
	files   []string     // output relative paths, sorted (for dependents' Steps)
	plan    *PlanItem    // set when it ran, was restored, or would be
	failDep string       // the upstream that failed, for skipped targets
	rs      *reasonState // inputs, for explain
	base    cache.Digest // the key without the epoch (see keyWith)
}

type reasonState struct {
	inputs map[string]cache.Digest
}

func (b *builder) run(ctx context.Context, roots []int) (*Result, error) {
	g := b.p.Graph
	sel := g.Closure(roots)
	nodes := make([]*node, g.Len())
	for _, i := range g.Order() {
		if !sel[i] {
			continue
		}
		n := &node{id: i, t: b.p.Targets[i]}
		for _, d := range g.Deps(i) {
			_ = d
			n.waiting++
		}
		nodes[i] = n
		b.total++
	}
	t0 := time.Now()
	quick := b.quick(nodes)
	b.tQuick, b.nQuick = time.Since(t0), quick
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
	ready := make(chan *node, b.total)
	finished := make(chan *node, b.total)
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
	for _, i := range g.Order() {
		if n := nodes[i]; n != nil && n.outcome == "" && n.waiting == 0 {
			ready <- n
		}
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range ready {
				mu.Lock()
				halted := stop
				mu.Unlock()
				if halted || ctx.Err() != nil {
					n.outcome = Skipped
					n.err = errors.New("not started: the build stopped")
				} else {
					b.visit(ctx, n, nodes, runSem)
				}
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
				if d.outcome == "" {
					d.outcome = Skipped
					d.failDep = n.t.Name
					if n.failDep != "" {
						d.failDep = n.failDep
					}
				}
			}
			d.waiting--
			if d.waiting == 0 {
				if d.outcome == Skipped {
					// Propagate without running: it finishes at once.
					ready <- d
				} else {
					ready <- d
				}
			}
		}
	}
	close(ready)
	wg.Wait()
	b.clearStatus()

	res := &Result{Inputs: map[string]map[string]cache.Digest{}}
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
			res.Skipped = append(res.Skipped, n.t.Name)
			if n.failDep != "" {
				skippedByFail = append(skippedByFail, n.t.Name)
			}
		case Planned:
		}
		if n.plan != nil {
			res.Plan = append(res.Plan, *n.plan)
		}
		if n.rs != nil {
			res.Inputs[n.t.Name] = n.rs.inputs
		}
	}
	for _, l := range [][]string{res.Executed, res.Reused, res.UpToDate, res.Failed, res.Skipped} {
		sort.Strings(l)
	}
	if len(skippedByFail) > 0 {
		fmt.Fprintf(b.stderr, "labbuild: skipped, upstream failed: %s\n", strings.Join(skippedByFail, ", "))
	}
	if len(res.Failed) > 0 {
		return res, &BuildError{Failed: res.Failed}
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// quick is the null-build fast path. For every selected target with a clean record it computes
// the key it would have if its deps are up to date too (their recorded output digests) and
// stats its outputs, in parallel on every CPU; then one pass in build order marks as up to date
// each target whose guess held and whose deps are up to date. The scheduler handles the rest.
// It returns how many targets it finished.
func (b *builder) quick(nodes []*node) int {
	if b.o.Force || b.o.Explain {
		return 0
	}
	var cand []*node
	for _, n := range nodes {
		if n != nil && n.t.Probe == nil && !b.regen[n.t.Name] {
			cand = append(cand, n)
		}
	}
	ok := make([]bool, len(nodes))
	prevs := make([]*cache.TargetState, len(nodes))
	for _, n := range cand {
		prevs[n.id] = b.state.Target(n.t.Name)
	}
	depDigest := func(j int) cache.Digest {
		if p := prevs[j]; p != nil {
			return p.OutDigest
		}
		return cache.Digest{}
	}
	workers := runtime.NumCPU()
	var wg sync.WaitGroup
	chunk := (len(cand) + workers - 1) / max(workers, 1)
	for w := 0; w < workers && w*chunk < len(cand); w++ {
		part := cand[w*chunk : min((w+1)*chunk, len(cand))]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, n := range part {
				prev := prevs[n.id]
				if prev == nil || prev.Failed {
					continue
				}
				key, _, _, renew, err := b.keyWith(n, depDigest, false)
				if err != nil || renew != "" || key != prev.Key {
					continue
				}
				if _, upToDate := b.check(n, key, prev, "", nil); upToDate {
					ok[n.id] = true
				}
			}
		}()
	}
	wg.Wait()
	done := 0
	g := b.p.Graph
	for _, i := range g.Order() {
		n := nodes[i]
		if n == nil || !ok[i] {
			continue
		}
		for _, j := range g.Deps(i) {
			if nodes[j].outcome != UpToDate {
				ok[i] = false
				break
			}
		}
		if ok[i] {
			n.outcome = UpToDate
			n.outDig = prevs[i].OutDigest
			n.files = outputNames(prevs[i].Outputs)
			done++
		}
	}
	return done
}

// visit decides and does what target n needs. Its deps are finished.
func (b *builder) visit(ctx context.Context, n *node, nodes []*node, runSem chan struct{}) {
	if n.outcome == Skipped {
		return
	}
	t := n.t
	// Dry run: a dep that would run has an unknown output, so n's key is unknown too.
	var pendingDeps []string
	for _, j := range b.p.Graph.Deps(n.id) {
		if nodes[j].pending {
			pendingDeps = append(pendingDeps, nodes[j].t.Name)
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
		n.plan = &PlanItem{Target: t.Name, Action: "run", Reasons: reasons}
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
	if b.o.DryRun {
		n.outcome = Planned
		action := "run"
		if entry != nil {
			action = "restore"
			n.outDig = entry.OutputDigest
			n.files = entryNames(entry)
		} else {
			n.pending = true
		}
		if probe.Action != "" && probe.Action != Keep {
			action = string(probe.Action)
		}
		n.plan = &PlanItem{Target: t.Name, Action: action, Reasons: reasons}
		b.explain(n)
		return
	}
	if entry != nil {
		b.beginStatus(t.Name)
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
	b.beginStatus(t.Name)
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

func outputNames(os []cache.OutputState) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.Rel
	}
	return out
}

func entryNames(e *cache.Entry) []string {
	out := make([]string, len(e.Outputs))
	for i, f := range e.Outputs {
		out[i] = f.Path
	}
	return out
}

// key computes n's action key: SHA-256 over its name, recipe version, declared config values,
// declared files' digests, its deps' output digests and, for targets that have gone stale by
// time before, their generation epoch. With withInputs it also returns each labelled part's
// digest, for explanations; a null build skips that map.
func (b *builder) key(n *node, nodes []*node, withInputs bool) (key cache.Digest, inputs map[string]cache.Digest, epoch int64, renew string, err error) {
	return b.keyWith(n, func(j int) cache.Digest { return nodes[j].outDig }, withInputs)
}

// keyWith is key with the deps' output digests from depDigest (by node ID): the scheduler's
// results, or, in the null-build fast path, the digests recorded in the state.
func (b *builder) keyWith(n *node, depDigest func(j int) cache.Digest, withInputs bool) (key cache.Digest, inputs map[string]cache.Digest, epoch int64, renew string, err error) {
	t := n.t
	h := cache.NewHasher()
	if withInputs {
		inputs = make(map[string]cache.Digest, len(t.Reads)+len(t.Files)+len(t.Deps)+1)
	}
	h.Add2("name", t.Name, nil)
	v := strconv.AppendInt(nil, int64(t.Version), 10)
	h.Add("version", v)
	if withInputs {
		inputs["version"] = cache.Sum(v)
	}
	for _, r := range t.Reads {
		raw, _ := b.p.values.Lookup(r)
		h.Add2("config:", r, raw)
		if withInputs {
			inputs["config:"+r] = cache.Sum(raw)
		}
	}
	for _, f := range t.Files {
		d, ferr := b.fileDigest(f)
		if ferr != nil {
			return key, nil, 0, "", fmt.Errorf("%s: %w", t.Name, ferr)
		}
		h.Add2("file:", f, d[:])
		if withInputs {
			inputs["file:"+f] = d
		}
	}
	for _, j := range b.p.Graph.Deps(n.id) {
		name, dg := b.p.Targets[j].Name, depDigest(j)
		h.Add2("dep:", name, dg[:])
		if withInputs {
			inputs["dep:"+name] = dg
		}
	}
	// Time as an input: a target that set a stale time keeps its epoch until that time passes;
	// then it is renewed with the build's clock reading as its new epoch.
	prev := b.state.Target(t.Name)
	epoch = b.now.UnixNano()
	if prev != nil && prev.Epoch != 0 {
		epoch = prev.Epoch
		if prev.StaleAt != 0 && b.now.UnixNano() >= prev.StaleAt {
			renew = "stale since " + time.Unix(0, prev.StaleAt).UTC().Format(time.RFC3339)
			epoch = b.now.UnixNano()
		}
	}
	n.base = h.Sum()
	if prev != nil && prev.StaleAt != 0 {
		return epochKey(n.base, epoch, inputs), inputs, epoch, renew, nil
	}
	return n.base, inputs, epoch, renew, nil
}

// epochKey is the key of a target whose output depends on time (it set a stale time): its
// base key and its epoch. inputs, when non-nil, gets the epoch's digest for explanations.
func epochKey(base cache.Digest, epoch int64, inputs map[string]cache.Digest) cache.Digest {
	e := strconv.AppendInt(nil, epoch, 10)
	if inputs != nil {
		inputs["epoch"] = cache.Sum(e)
	}
	h := cache.NewHasher()
	h.Add("base", base[:])
	h.Add("epoch", e)
	return h.Sum()
}

// racyWindow is the file system's timestamp granularity with a margin: ext4 and tmpfs stamp
// mtimes from the kernel's coarse clock (one jiffy, up to 10 ms), so a file modified again
// within one tick of being read can keep its mtime.
const racyWindow = 20 * time.Millisecond

// fileDigest returns the digest of the file named by config field f, trusting the recorded
// digest when the stat fingerprint matches (so a null build reads no input file). A file whose
// mtime is not safely before the build's start is not recorded, and is hashed again next time
// (git's "racily clean" rule).
func (b *builder) fileDigest(f string) (cache.Digest, error) {
	path, err := resolveFile(b.p.values, b.baseDir, f)
	if err != nil {
		return cache.Digest{}, err
	}
	fp, err := cache.Stat(path)
	if err != nil {
		return cache.Digest{}, fmt.Errorf("%s: %v (set %s in lab.yaml to an existing file)", f, err, f)
	}
	if st, ok := b.state.File(path); ok && st.FP == fp {
		return st.Digest, nil
	}
	d, _, err := cache.HashFile(path)
	if err != nil {
		return cache.Digest{}, fmt.Errorf("%s: %v", f, err)
	}
	if !b.o.DryRun && fp.Mtime < b.wall.Add(-racyWindow).UnixNano() {
		b.state.SetFile(path, cache.FileState{FP: fp, Digest: d})
	}
	return d, nil
}

// check compares n's key and outputs with the state; it returns why n is stale, or true.
func (b *builder) check(n *node, key cache.Digest, prev *cache.TargetState, renew string, inputs func() map[string]cache.Digest) ([]string, bool) {
	t := n.t
	if prev == nil {
		return []string{"never built"}, false
	}
	if prev.Failed {
		reasons := []string{"last attempt failed"}
		if prev.Key != key {
			reasons = append(reasons, b.diffInputs(prev.Key, inputs())...)
		}
		return reasons, false
	}
	if prev.Key != key {
		if renew != "" {
			return []string{"renewal: " + renew}, false
		}
		return b.diffInputs(prev.Key, inputs()), false
	}
	dir := filepath.Join(b.out, t.Dir())
	for _, o := range prev.Outputs {
		fp, err := cache.Stat(filepath.Join(dir, filepath.FromSlash(o.Rel)))
		if err != nil {
			return []string{"output " + filepath.ToSlash(filepath.Join(t.Dir(), o.Rel)) + " missing"}, false
		}
		if fp != o.FP {
			return []string{"output " + filepath.ToSlash(filepath.Join(t.Dir(), o.Rel)) + " modified"}, false
		}
	}
	return nil, true
}

// diffInputs names the inputs that differ from those of the earlier key.
func (b *builder) diffInputs(prevKey cache.Digest, inputs map[string]cache.Digest) []string {
	e, err := b.cache.PeekAction(prevKey)
	if err != nil {
		return []string{"inputs changed (the earlier inputs are no longer recorded)"}
	}
	var out []string
	labels := make([]string, 0, len(inputs))
	for l := range inputs {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		old, ok := e.Inputs[l]
		switch {
		case !ok:
			out = append(out, describe(l)+" added")
		case old != inputs[l]:
			out = append(out, describe(l)+" changed")
		}
	}
	for l := range e.Inputs {
		if _, ok := inputs[l]; !ok {
			out = append(out, describe(l)+" removed")
		}
	}
	if len(out) == 0 {
		out = append(out, "inputs changed")
	}
	return out
}

func describe(label string) string {
	switch {
	case strings.HasPrefix(label, "config:"):
		return "config " + label[7:]
	case strings.HasPrefix(label, "file:"):
		return "file " + label[5:]
	case strings.HasPrefix(label, "dep:"):
		return "upstream " + label[4:]
	case label == "version":
		return "recipe version"
	case label == "epoch":
		return "epoch"
	}
	return label
}

func (b *builder) newStep(ctx context.Context, n *node, nodes []*node, epoch int64) *Step {
	s := &Step{
		ctx:     ctx,
		t:       n.t,
		values:  b.p.values,
		baseDir: b.baseDir,
		outRoot: b.out,
		deps:    make(map[string]depOut, len(n.t.Deps)),
		now:     b.now,
		epoch:   time.Unix(0, epoch).UTC(),
		log:     io.Discard,
		written: map[string]os.FileMode{},
	}
	for _, j := range b.p.Graph.Deps(n.id) {
		d := nodes[j]
		s.deps[d.t.Name] = depOut{dir: filepath.Join(b.out, d.t.Dir()), files: d.files}
	}
	if prev := b.state.Target(n.t.Name); prev != nil {
		s.prevDir = filepath.Join(b.out, n.t.Dir())
	}
	return s
}

func (b *builder) probe(ctx context.Context, n *node, key cache.Digest, epoch int64, nodes []*node) (ProbeResult, error) {
	s := b.newStep(ctx, n, nodes, epoch)
	r, err := n.t.Probe(ctx, s)
	if err != nil {
		return r, fmt.Errorf("%s: probe: %w", n.t.Name, err)
	}
	if r.Action == "" {
		r.Action = Keep
	}
	return r, nil
}

// execute runs n's recipe into a staging directory, stores the outputs (data first, then the
// action entry), and moves them into place.
func (b *builder) execute(ctx context.Context, n *node, key cache.Digest, inputs map[string]cache.Digest, epoch int64, probe ProbeResult, nodes []*node, prev *cache.TargetState) (err error) {
	t := n.t
	stage, err := os.MkdirTemp(filepath.Join(b.meta, tmpDir), "run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	s := b.newStep(ctx, n, nodes, epoch)
	s.stage = filepath.Join(stage, "out")
	s.probe = probe
	if err := os.MkdirAll(s.stage, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(b.meta, logDir, filepath.FromSlash(t.Name)+".log")
	os.MkdirAll(filepath.Dir(logPath), 0o755)
	if lf, lerr := os.Create(logPath); lerr == nil {
		s.log = lf
		defer lf.Close()
	}
	defer func() {
		if s.scratch != "" {
			os.RemoveAll(s.scratch)
		}
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: panic: %v", t.Name, r)
		}
	}()
	if err := t.Run(ctx, s); err != nil {
		if !strings.HasPrefix(err.Error(), t.Name+":") {
			err = fmt.Errorf("%s: %w", t.Name, err)
		}
		return err
	}
	// Whether the epoch is part of the key is known only now: a target that set a stale time
	// for the first time is keyed with its epoch from here on (and one that stopped, without),
	// so the next build computes the same key and does nothing.
	if timed, wasTimed := !s.staleAt.IsZero(), prev != nil && prev.StaleAt != 0; timed != wasTimed {
		if timed {
			key = epochKey(n.base, epoch, inputs)
		} else {
			key = n.base
			delete(inputs, "epoch")
		}
	}
	rels := s.outputs()
	files := make([]cache.File, 0, len(rels))
	for _, rel := range rels {
		src := filepath.Join(s.stage, filepath.FromSlash(rel))
		mode := s.written[rel]
		if err := os.Chmod(src, mode); err != nil { // exact bits, whatever the umask
			return err
		}
		d, size, err := b.cache.PutFile(src)
		if err != nil {
			return fmt.Errorf("%s: store %s: %w", t.Name, rel, err)
		}
		files = append(files, cache.File{Path: rel, Mode: uint32(mode), Size: size, Digest: d})
	}
	entry := &cache.Entry{
		Key: key, Target: t.Name, Inputs: inputs, Outputs: files,
		OutputDigest: cache.OutputDigest(files), Created: b.now.UTC(), Epoch: epoch,
		StaleAt: stalens(s.staleAt), Pinned: t.Sticky,
	}
	if err := b.cache.PutAction(entry); err != nil {
		return fmt.Errorf("%s: %w", t.Name, err)
	}
	// Move the staged files into place: each rename is atomic.
	dir := filepath.Join(b.out, t.Dir())
	for _, f := range files {
		dst := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Rename(filepath.Join(s.stage, filepath.FromSlash(f.Path)), dst); err != nil {
			return err
		}
	}
	return b.record(n, entry, prev)
}

func stalens(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// restore materializes a stored entry's outputs.
func (b *builder) restore(n *node, e *cache.Entry, prev *cache.TargetState) error {
	dir := filepath.Join(b.out, n.t.Dir())
	for _, f := range e.Outputs {
		if err := b.cache.Materialize(f.Digest, f.Size, filepath.Join(dir, filepath.FromSlash(f.Path)), os.FileMode(f.Mode), filepath.Join(b.meta, tmpDir)); err != nil {
			return err
		}
	}
	b.cache.Touch(e.Key, b.now)
	return b.record(n, e, prev)
}

// record removes outputs of the previous generation that the new one lacks, fingerprints the
// new outputs, and appends the target's state.
func (b *builder) record(n *node, e *cache.Entry, prev *cache.TargetState) error {
	dir := filepath.Join(b.out, n.t.Dir())
	names := entryNames(e)
	if prev != nil {
		for _, o := range prev.Outputs {
			if _, found := sort.Find(len(names), func(i int) int { return strings.Compare(o.Rel, names[i]) }); !found {
				os.Remove(filepath.Join(dir, filepath.FromSlash(o.Rel)))
			}
		}
	}
	ts := &cache.TargetState{Key: e.Key, OutDigest: e.OutputDigest, Epoch: e.Epoch, StaleAt: e.StaleAt, Outputs: make([]cache.OutputState, len(e.Outputs))}
	for i, f := range e.Outputs {
		fp, err := cache.Stat(filepath.Join(dir, filepath.FromSlash(f.Path)))
		if err != nil {
			return err
		}
		ts.Outputs[i] = cache.OutputState{Rel: f.Path, FP: fp}
	}
	n.outDig = e.OutputDigest
	n.files = names
	return b.state.SetTarget(n.t.Name, ts)
}

// fail records n's failure (keeping its previous outputs) and prints the root cause once.
func (b *builder) fail(n *node, err error) {
	n.outcome = Failed
	n.err = err
	if !b.o.DryRun {
		if prev := b.state.Target(n.t.Name); prev != nil {
			cp := *prev
			cp.Failed = true
			b.state.SetTarget(n.t.Name, &cp)
		} else {
			b.state.SetTarget(n.t.Name, &cache.TargetState{Failed: true})
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clearStatusLocked()
	msg := err.Error()
	if !strings.HasPrefix(msg, n.t.Name) {
		msg = n.t.Name + ": " + msg
	}
	fmt.Fprintf(b.stderr, "FAILED: %s\n", msg)
	logPath := filepath.Join(b.meta, logDir, filepath.FromSlash(n.t.Name)+".log")
	if tail := lastLines(logPath, 10); tail != "" {
		fmt.Fprintf(b.stderr, "  last lines of %s:\n%s", logPath, tail)
	}
}

func lastLines(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ") + "\n"
}

// explain prints why n runs or is restored, with --explain.
func (b *builder) explain(n *node) {
	if !b.o.Explain || n.plan == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clearStatusLocked()
	fmt.Fprintf(b.stderr, "labbuild explain: %s: %s: %s\n", n.t.Name, n.plan.Action, strings.Join(n.plan.Reasons, "; "))
}

// beginStatus shows "[N/M] target" as a target starts to run or be restored.
func (b *builder) beginStatus(name string) {
	if b.o.DryRun {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done++
	if b.o.Terminal {
		fmt.Fprintf(b.stdout, "\r[%d/%d] %s\x1b[K", b.done, b.total, name)
		b.status = true
	} else {
		fmt.Fprintf(b.stdout, "[%d/%d] %s\n", b.done, b.total, name)
	}
}

func (b *builder) clearStatus() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clearStatusLocked()
}

func (b *builder) clearStatusLocked() {
	if b.status {
		fmt.Fprint(b.stdout, "\r\x1b[K")
		b.status = false
	}
}
