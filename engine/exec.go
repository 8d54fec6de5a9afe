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

	"github.com/labbuild/labbuild/cache"
)

func (b *builder) newStep(ctx context.Context, n *node, nodes []*node, epoch int64) *Step {
	s := &Step{
		ctx:      ctx,
		t:        n.t,
		values:   b.p.values,
		baseDir:  b.baseDir,
		outRoot:  b.out,
		deps:     make(map[string]depOut, len(n.t.Deps)),
		now:      b.now,
		epoch:    time.Unix(0, epoch).UTC(),
		log:      io.Discard,
		warn:     b.stderr,
		written:  map[string]os.FileMode{},
		reporter: b.o.Reporter,
	}
	for _, j := range b.p.Graph.Deps(n.id) {
		d := nodes[j]
		s.deps[d.t.Name] = depOut{dir: filepath.Join(b.out, d.t.Dir()), files: b.depFiles(d)}
	}
	if prev := b.state.Target(n.t.Name); prev != nil {
		s.prevDir = filepath.Join(b.out, n.t.Dir())
	}
	return s
}

// probe runs External target n's Probe with generation epoch: what the real object needs.
func (b *builder) probe(ctx context.Context, n *node, epoch int64, nodes []*node) (ProbeResult, error) {
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
// action entry), and moves them into place. v is n's verdict: its key, epoch, record, and
// what its Probe saw.
func (b *builder) execute(ctx context.Context, n *node, v *verdict, nodes []*node) (err error) {
	t := n.t
	key, epoch, prev := v.key, v.epoch, v.prev
	inputs := b.inputs(n, nodes, v)
	stage, err := os.MkdirTemp(filepath.Join(b.meta, tmpDir), "run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stage)
	s := b.newStep(ctx, n, nodes, epoch)
	s.stage = filepath.Join(stage, "out")
	s.probe = v.probe
	if err := os.MkdirAll(s.stage, 0o755); err != nil {
		return err
	}
	logPath := logPathIn(b.meta, t.Name)
	os.MkdirAll(filepath.Dir(logPath), 0o755)
	if lf, lerr := os.Create(logPath); lerr == nil {
		s.log = lf
		defer lf.Close()
	}
	if b.o.LogTee != nil {
		if w := b.o.LogTee(t.Name); w != nil {
			s.log = io.MultiWriter(s.log, w)
		}
	}
	// A target its Probe sent to run says why first, so its log answers "why did a null build
	// act?" (the plan prints the same reason under -n; Probe reasons never hold secrets).
	if a := s.probe.Action; a != "" && a != Keep && s.probe.Reason != "" {
		fmt.Fprintf(s.log, "probe: %s: %s\n", a, s.probe.Reason)
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
			key = epochKey(new(cache.Hasher), n.base, epoch, inputs)
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
		var d cache.Digest
		var size int64
		closed := false
		if w := s.sums[rel]; w != nil {
			d, size, closed = w.Sum()
		}
		if closed { // hashed while written
			err = b.cache.PutHashed(src, d, size, mode)
		} else { // never closed by the recipe: hash what is on disk
			d, size, err = b.cache.PutFile(src)
		}
		if err != nil {
			return fmt.Errorf("%s: store %s: %w", t.Name, rel, err)
		}
		files = append(files, cache.File{Path: rel, Mode: uint32(mode), Size: size, Digest: d})
	}
	entry := &cache.Entry{
		Key: key, Target: t.Name, Inputs: inputs, Outputs: files,
		OutputDigest: cache.OutputDigest(files), Created: b.now.UTC(), Epoch: epoch,
		StaleAt: stalens(s.staleAt), Pinned: t.Sticky, Values: b.shownValues(t),
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
	if e.StaleAt != 0 && !n.base.IsZero() {
		// The epoch outlives the state journal (see cache.EpochRecord).
		if err := b.cache.PutEpoch(n.base, cache.EpochRecord{Epoch: e.Epoch, StaleAt: e.StaleAt}); err != nil {
			return err
		}
	}
	return b.state.SetTarget(n.t.Name, ts)
}

// fail records n's failure (keeping its previous outputs) and prints the root cause once.
func (b *builder) fail(n *node, err error) {
	if b.runCtx != nil && b.runCtx.Err() != nil {
		// Ctrl-C: the target was stopped, it did not fail. Its state keeps the last good
		// build (outputs appear atomically), so the next run takes it up again.
		n.outcome = Skipped
		n.stopped = true
		n.err = err
		return
	}
	n.outcome = Failed
	n.err = err
	msg := err.Error()
	if !strings.HasPrefix(msg, n.t.Name) {
		msg = n.t.Name + ": " + msg
	}
	logPath := logPathIn(b.meta, n.t.Name)
	tail := LogTail(logPath, 10) // before the runner appends the error to the log
	b.runner.failed(b, n, msg)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clearStatusLocked()
	shown := msg
	if ref, cause, first := b.rootCause(err); ref != "" {
		// One cause shared by several targets (a pull secret that cannot be read): once.
		if first {
			fmt.Fprintf(b.stderr, "labbuild: %s\n", cause)
		}
		shown = n.t.Name + ": " + ref
	}
	fmt.Fprintf(b.stderr, "FAILED: %s\n", shown)
	if tail != "" {
		fmt.Fprintf(b.stderr, "  last lines of %s:\n    %s\n", logPath, strings.ReplaceAll(strings.TrimSuffix(tail, "\n"), "\n", "\n    "))
	}
}

// LogTail returns the last n lines of the log at path (LogPath), each ending in a newline, or ""
// when the log is missing or empty: the failure report shows ten, labbuild explain the last.
func LogTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// explain prints why n runs or is restored, with --explain.
func (b *builder) explain(n *node) {
	if !b.o.Explain || n.plan == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.clearStatusLocked()
	fmt.Fprintf(b.stderr, "labbuild explain: %s: %s: %s\n", n.t.Name, n.plan.Action, n.plan.Why())
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
