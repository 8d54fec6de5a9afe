package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/labbuild/labbuild/cache"
)

// CleanOptions says what Clean removes.
type CleanOptions struct {
	// Cache also removes the content store and action cache, but for the sticky secrets (CA
	// keys, the kubeadmin password, the cluster's IDs), whose entries and objects stay (and
	// the certificates' epochs): the next build restores them, and what was made from them
	// comes out the same.
	Cache bool
	// Sticky, with Cache, removes the sticky secrets too (`clean --cache --regenerate all`):
	// the next build makes new ones, and so replaces everything made from them.
	Sticky bool
}

// CleanReport is what Clean removed (with DryRun: would remove).
type CleanReport struct {
	// Cleaned lists the targets whose outputs and state were removed, sorted.
	Cleaned []string
	// Files counts the output files removed.
	Files int
	// Store is what left the content store (Cache): entries, objects, bytes; and what stayed.
	Store cache.TrimStats
	// Sticky lists the sticky targets of the config, sorted: kept in the store by Cache, or
	// removed with it (Sticky).
	Sticky []string
	// StickyUsers counts the targets that depend on a sticky one (what regenerating them all
	// replaces).
	StickyUsers int
}

// Clean removes the materialized outputs and state of the selected targets (o.Goals; all when
// empty), holding the lock. The content store stays (unless co.Cache), so a rebuild restores
// everything, keys included, without running anything. External targets are not touched:
// `labbuild destroy` removes what they made. With o.DryRun it removes nothing (and takes the
// lock shared, writing nothing) and reports what it would remove.
func Clean(ctx context.Context, o Options, co CleanOptions) (*CleanReport, error) {
	p, err := Load(o)
	if err != nil {
		return nil, err
	}
	rep := &CleanReport{}
	var stickyIDs []int
	for i, t := range p.Targets {
		if t.Sticky {
			rep.Sticky = append(rep.Sticky, t.Name)
			stickyIDs = append(stickyIDs, i)
		}
	}
	sort.Strings(rep.Sticky)
	for i, in := range p.Graph.Downstream(stickyIDs) {
		if in && !p.Targets[i].Sticky {
			rep.StickyUsers++
		}
	}
	sel := map[string]bool{}
	if len(o.Goals) > 0 {
		ids, err := p.Select(o.Goals)
		if err != nil {
			return nil, err
		}
		for _, i := range ids {
			sel[p.Targets[i].Name] = true
		}
	}
	out, err := cache.Abs(o.OutDir)
	if err != nil {
		return nil, err
	}
	meta := filepath.Join(out, metaDir)
	if _, err := os.Stat(meta); os.IsNotExist(err) {
		return rep, nil
	}
	waiting := func(pid int) {
		if o.Stderr != nil {
			fmt.Fprintf(o.Stderr, "labbuild: waiting for the lock on %s %s\n", out, LockHolder(pid))
		}
	}
	var lock *cache.Lock
	if o.DryRun {
		if _, err := os.Stat(filepath.Join(meta, lockFile)); err == nil {
			lock, err = cache.AcquireShared(ctx, filepath.Join(meta, lockFile), waiting)
			if err != nil {
				return nil, err
			}
		}
	} else if lock, err = cache.Acquire(ctx, filepath.Join(meta, lockFile), waiting); err != nil {
		return nil, err
	}
	defer lock.Release()
	st, err := cache.LoadState(filepath.Join(meta, stateFile))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if o.DryRun {
		st.SetReadOnly()
	}
	for _, name := range st.Names() {
		if len(sel) > 0 && !sel[name] {
			continue
		}
		t := p.Target(name)
		dir := filepath.Join(out, name)
		if t != nil {
			if t.External {
				continue
			}
			dir = filepath.Join(out, t.Dir())
		}
		for _, o := range st.Target(name).Outputs {
			if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(o.Rel))); err == nil {
				rep.Files++
			}
		}
		rep.Cleaned = append(rep.Cleaned, name)
		if o.DryRun {
			continue
		}
		for _, o := range st.Target(name).Outputs {
			os.Remove(filepath.Join(dir, filepath.FromSlash(o.Rel)))
		}
		removeEmptyDirs(dir, out)
		st.DeleteTarget(name)
	}
	sort.Strings(rep.Cleaned)
	if co.Cache {
		c := cache.Open(filepath.Join(meta, cacheDir))
		if co.Sticky {
			rep.Store = c.Usage()
			if !o.DryRun {
				err = os.RemoveAll(filepath.Join(meta, cacheDir))
			}
		} else {
			rep.Store, err = c.ClearUnpinned(o.DryRun)
		}
		if err != nil {
			return rep, err
		}
	}
	if o.DryRun {
		return rep, nil
	}
	os.RemoveAll(filepath.Join(meta, logDir))
	return rep, st.Compact(true)
}

// removeEmptyDirs removes dir and its empty parents up to (not including) root.
func removeEmptyDirs(dir, root string) {
	var dirs []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Remove(dirs[i])
	}
	for d := filepath.Dir(dir); d != root && len(d) > len(root); d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
}

// DestroyReport is what Destroy did, per External target, each list in the order handled
// (reverse dependency order). With DryRun only Planned is set.
type DestroyReport struct {
	// Destroyed lists targets whose objects existed and were removed.
	Destroyed []string `json:"destroyed"`
	// Absent lists targets whose recorded objects were already gone; their records are removed.
	Absent []string `json:"absent"`
	// Forgotten lists targets with nothing of their own outside the filesystem (a check, a
	// shared cache, a cluster's state that lives in its VMs); their records are removed.
	Forgotten []string `json:"forgotten"`
	// Failed lists targets whose objects could not be reached or removed; they stay recorded,
	// and the error Destroy returns names each one and its cause.
	Failed []string `json:"failed"`
	// Kept lists targets left alone, still recorded, because something that uses them failed
	// (the disk and pool under a VM that could not be removed). KeptFor names that user.
	Kept    []string          `json:"kept"`
	KeptFor map[string]string `json:"keptFor,omitempty"`
	// Planned lists what a dry run would destroy.
	Planned []string `json:"planned,omitempty"`
}

// Destroy undoes External targets (o.Goals; every recorded External target when empty) in
// reverse dependency order — VMs before volumes before the pool — from their recorded outputs,
// then forgets them. It is safe to rerun: targets with no record are skipped. A target whose
// Destroy fails stays recorded, and so does everything it depends on (Kept: the disk and pool
// under a VM that could not be removed); Destroy then returns an error naming each failed
// target and its cause.
func Destroy(ctx context.Context, o Options) (*DestroyReport, error) {
	rep := &DestroyReport{}
	p, err := Load(o)
	if err != nil {
		return rep, err
	}
	b, err := newBuilder(ctx, p, o)
	if err != nil {
		return rep, err
	}
	defer b.close()
	sel := map[int]bool{}
	if len(o.Goals) > 0 {
		ids, err := p.Select(o.Goals)
		if err != nil {
			return rep, err
		}
		// Destroying a network means destroying what sits on it first.
		down := p.Graph.Downstream(ids)
		for i, in := range down {
			if in {
				sel[i] = true
			}
		}
	}
	order := p.Graph.Order()
	var errs []error
	nodes := make([]*node, p.Graph.Len())
	for _, i := range order {
		nodes[i] = &node{id: i, t: p.Targets[i]}
	}
	for k := len(order) - 1; k >= 0; k-- {
		i := order[k]
		t := p.Targets[i]
		if !t.External || (len(sel) > 0 && !sel[i]) {
			continue
		}
		prev := b.state.Target(t.Name)
		if prev == nil {
			continue
		}
		if by := rep.keptBy(p, i); by != "" {
			// What still uses it stays, so it stays: a pool under a VM's disk, a network under a VM.
			rep.Kept = append(rep.Kept, t.Name)
			if rep.KeptFor == nil {
				rep.KeptFor = map[string]string{}
			}
			rep.KeptFor[t.Name] = by
			continue
		}
		s := b.newStep(ctx, nodes[i], nodes, prev.Epoch)
		for dn := range s.deps { // upstream records are where they were materialized
			if ps := b.state.Target(dn); ps != nil {
				d := s.deps[dn]
				d.files = outputNames(ps.Outputs)
				s.deps[dn] = d
			}
		}
		got, planned, err := b.runner.undo(ctx, t, s)
		switch {
		case planned:
			rep.Planned = append(rep.Planned, t.Name)
			continue
		case err != nil:
			rep.Failed = append(rep.Failed, t.Name)
			errs = append(errs, fmt.Errorf("%s: not destroyed (still recorded): %w", t.Name, err))
			continue
		}
		b.forget(t, prev)
		rep.add(t.Name, got)
	}
	return rep, errors.Join(errs...)
}

// PlanCount is the destroy plan's count (a dry run's: Planned), in the one plan summary's
// words: "Plan: 0 to create, 0 to update in place, 0 to replace, 17 to destroy."
func (r *DestroyReport) PlanCount() PlanCount {
	plan := make([]PlanItem, len(r.Planned))
	for i, n := range r.Planned {
		plan[i] = PlanItem{Target: n, Action: ActionDestroy, External: true}
	}
	return CountPlan(plan)
}

// keptBy returns the first target that depends on target i directly and failed or was kept
// (the one that failed at the root of the chain), or "".
func (r *DestroyReport) keptBy(p *Project, i int) string {
	for _, d := range p.Graph.Dependents(i) {
		n := p.Targets[d].Name
		if slices.Contains(r.Failed, n) {
			return n
		}
		if by, ok := r.KeptFor[n]; ok {
			return by
		}
	}
	return ""
}

func (r *DestroyReport) add(name string, got DestroyOutcome) {
	switch got {
	case Destroyed:
		r.Destroyed = append(r.Destroyed, name)
	case AlreadyAbsent:
		r.Absent = append(r.Absent, name)
	default:
		r.Forgotten = append(r.Forgotten, name)
	}
}

// forget removes a destroyed External target's recorded outputs (its record of what it made)
// and its state entry, so neither destroy nor a later build sees it again.
func (b *builder) forget(t *Target, prev *cache.TargetState) {
	dir := filepath.Join(b.out, t.Dir())
	for _, o := range prev.Outputs {
		os.Remove(filepath.Join(dir, filepath.FromSlash(o.Rel)))
	}
	removeEmptyDirs(dir, b.out)
	b.state.DeleteTarget(t.Name)
}
