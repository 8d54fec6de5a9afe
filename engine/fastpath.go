package engine

import (
	"runtime"
	"sync"

	"github.com/labbuild/labbuild/cache"
)

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
