package engine

import (
	"bytes"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"github.com/labbuild/labbuild/cache"
)

// quick is the null-build fast path: the verdict's first part (key and judge) for every
// selected target with a clean record, computed from what is already known — config values,
// recorded input-file digests whose stat fingerprint still matches (no file is read), the
// deps' recorded output digests (as if they are up to date too) — and one stat per recorded
// output; then one pass in build order marks as up to date each target judged so whose deps
// are up to date. The scheduler decides the rest. It returns how many targets it finished.
//
// Cost per target: one lookup in the state's index (read in place, nothing decoded), one
// SHA-256 over a few hundred bytes of names and digests (two for a target with a stale time),
// one stat per input file and per output, and no allocation: the work is split in NumCPU
// contiguous parts, each with its own buffers, on as many goroutines (not one per target).
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
	if len(cand) == 0 {
		return 0
	}
	ok := make([]bool, len(nodes))
	parallel := func(fn func(part []*node, ws *scratch)) {
		workers := min(runtime.NumCPU(), (len(cand)+255)/256)
		chunk := (len(cand) + workers - 1) / workers
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			part := cand[w*chunk : min((w+1)*chunk, len(cand))]
			wg.Add(1)
			go func() {
				defer wg.Done()
				ws := b.newScratch()
				fn(part, ws)
				ws.flush(b.o.Stamp)
			}()
		}
		wg.Wait()
	}
	// Pass 1: the recorded output digests, which dependents' keys take as their deps'.
	parallel(func(part []*node, _ *scratch) {
		for _, n := range part {
			if r, found := b.state.View(n.t.Name); found && !r.Failed() {
				n.outDig = r.OutDigest()
				ok[n.id] = true
			}
		}
	})
	// Pass 2: keys and outputs, judged.
	parallel(func(part []*node, ws *scratch) {
		k := &keying{ws: ws}
		for _, n := range part {
			if !ok[n.id] {
				continue
			}
			rec, _ := b.state.View(n.t.Name)
			kd, err := b.key(k, n, nodes, rec, true)
			ok[n.id] = err == nil && b.judge(n.t, rec, true, &kd, ws, nil, nil) == StateUpToDate
		}
	})
	done := 0
	g := b.p.Graph
	for _, i := range g.Order() {
		n := nodes[i]
		if n == nil {
			continue
		}
		if ok[i] {
			for _, j := range g.Deps(i) {
				if nodes[j].outcome != UpToDate {
					ok[i] = false
					break
				}
			}
		}
		if ok[i] {
			n.outcome, n.state = UpToDate, StateUpToDate // n.files stays nil: depFiles reads the record if a dependent runs
			done++
		} else {
			n.outDig = cache.Digest{} // the scheduler computes it
		}
	}
	return done
}

// openDirs opens the output directory, and the config's directory, as descriptors: outputs
// and input files are statted relative to them (cache.StatAt: no path allocation, a shorter
// kernel path walk). close closes them.
func (b *builder) openDirs() (close func()) {
	b.outfd, b.outPrefix, b.basefd = cache.AtCWD, b.out+"/", -1
	var fds []int
	if fd, err := syscall.Open(b.out, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
		b.outfd, b.outPrefix = fd, ""
		fds = append(fds, fd)
	}
	if b.baseDir != "" && b.baseDir[0] == '/' && filepath.Clean(b.baseDir) == b.baseDir && b.baseDir != "/" {
		if fd, err := syscall.Open(b.baseDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
			b.basefd = fd
			fds = append(fds, fd)
		}
	}
	return func() {
		for _, fd := range fds {
			syscall.Close(fd)
		}
	}
}

// scratch is one worker's reusable buffers for judging targets.
type scratch struct {
	path   []byte
	dirfd  int    // the output directory (b.outfd)
	prefix string // prepended to output paths when dirfd is not the output directory
	basefd int    // the config's directory (b.baseDir), or -1

	// With Options.Record: every fingerprint compared (cache.AppendStampFile entries), their
	// count, and the earliest stale time seen.
	record   bool
	rec      []byte
	recN     int
	minStale int64
}

func (b *builder) newScratch() *scratch {
	return &scratch{dirfd: b.outfd, prefix: b.outPrefix, basefd: b.basefd, record: b.o.Stamp != nil}
}

// statOutput stats output rel of a target whose outputs are in dir (relative to the output
// directory), and records the fingerprint for the front's stamp.
func (ws *scratch) statOutput(dir string, rel []byte) (cache.Fingerprint, error) {
	p := append(append(append(append(ws.path[:0], ws.prefix...), dir...), '/'), rel...)
	ws.path = append(p, 0)
	got, err := cache.StatAt(ws.dirfd, ws.path)
	if ws.record && err == nil {
		base := byte(cache.StampOut)
		if ws.dirfd == cache.AtCWD {
			base = cache.StampAbs // prefix is the absolute output directory
		}
		ws.rec, ws.recN = cache.AppendStampFile(ws.rec, base, ws.path[:len(ws.path)-1], got), ws.recN+1
	}
	return got, err
}

// staleAt notes an up-to-date target's stale time (ns; 0: none): the stamp is valid until the
// earliest.
func (ws *scratch) staleAt(st int64) {
	if ws.record && st != 0 && (ws.minStale == 0 || st < ws.minStale) {
		ws.minStale = st
	}
}

// flush hands what ws recorded to r.
func (ws *scratch) flush(r *cache.StampCollector) {
	if !ws.record {
		return
	}
	r.Add(ws.rec, ws.recN)
	if ws.minStale != 0 {
		r.Until(ws.minStale)
	}
	ws.rec, ws.recN, ws.minStale = ws.rec[:0], 0, 0
}

// quickFileDigest is fileDigest for the fast path: the recorded digest of the file named by
// config field f when its stat fingerprint still matches, without allocating. ok is false when
// it cannot tell (an unusual path, no record, a changed file): the scheduler then hashes it.
func (b *builder) quickFileDigest(f string, ws *scratch) (cache.Digest, bool) {
	raw, found := b.p.values.Lookup(f)
	if !found || len(raw) < 3 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return cache.Digest{}, false
	}
	name := raw[1 : len(raw)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		return cache.Digest{}, false // a JSON escape: resolveFile decodes it
	}
	p := ws.path[:0]
	switch {
	case name[0] == '/':
		p = append(p, name...) // resolveFile keeps an absolute path as written
	case simpleRel(name) && b.baseDir != "" && b.baseDir[0] == '/' && filepath.Clean(b.baseDir) == b.baseDir:
		if b.baseDir != "/" {
			p = append(p, b.baseDir...)
		}
		p = append(append(p, '/'), name...) // what filepath.Join(baseDir, name) gives
	default:
		return cache.Digest{}, false
	}
	ws.path = append(p, 0)
	path := unsafe.String(&ws.path[0], len(ws.path)-1) // only for the lookup below
	st, recorded := b.state.File(path)
	if !recorded {
		return cache.Digest{}, false
	}
	fd, rel := cache.AtCWD, ws.path
	if n := len(b.baseDir); ws.basefd >= 0 && len(path) > n+1 && path[n] == '/' && path[:n] == b.baseDir {
		fd, rel = ws.basefd, ws.path[n+1:]
	}
	fp, err := cache.StatAt(fd, rel)
	if err != nil || fp != st.FP {
		return cache.Digest{}, false
	}
	if ws.record {
		base := byte(cache.StampAbs)
		if fd != cache.AtCWD {
			base = cache.StampBase
		}
		ws.rec, ws.recN = cache.AppendStampFile(ws.rec, base, rel[:len(rel)-1], fp), ws.recN+1
	}
	return st.Digest, true
}

// simpleRel reports whether name is a relative path that filepath.Join leaves as it is: no
// empty, "." or ".." element, no "~/".
func simpleRel(name []byte) bool {
	if len(name) == 0 || name[0] == '~' {
		return false
	}
	start := 0
	for i := 0; i <= len(name); i++ {
		if i == len(name) || name[i] == '/' {
			seg := name[start:i]
			if len(seg) == 0 || string(seg) == "." || string(seg) == ".." {
				return false
			}
			start = i + 1
		}
	}
	return true
}

// depFiles returns upstream d's output names: those the scheduler learned, or, for a target
// the fast path found up to date, its record's.
func (b *builder) depFiles(d *node) []string {
	if d.files == nil && d.outcome == UpToDate {
		if r, ok := b.state.View(d.t.Name); ok {
			return r.OutputNames()
		}
	}
	return d.files
}

// recordVerdict tells Options.Record whether this build's verdict may be replayed: only when
// every selected target was up to date — by the fast path, or by the scheduler after hashing
// an input file again (fileDigest and judge record what they compared) — and none is External
// or has a Probe (its real state lives outside the filesystem).
func (b *builder) recordVerdict(nodes []*node) {
	for _, n := range nodes {
		switch {
		case n == nil:
		case n.t.External || n.t.Probe != nil:
			b.o.Stamp.Fail(n.t.Name + " is External")
			return
		case n.outcome != UpToDate:
			b.o.Stamp.Fail(n.t.Name + " was not up to date")
			return
		}
	}
}
