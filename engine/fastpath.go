package engine

import (
	"bytes"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"github.com/labbuild/labbuild/cache"
)

// quick is the null-build fast path. Every selected target with a clean record gets the key it
// would have if its deps are up to date too (their recorded output digests), computed from
// what is already known — config values, recorded input-file digests whose stat fingerprint
// still matches (no file is read), the deps' recorded digests — and its outputs are statted;
// then one pass in build order marks as up to date each target whose key and outputs held and
// whose deps are up to date. The scheduler handles the rest. It returns how many targets it
// finished.
//
// Cost per target: one lookup in the state's index (read in place, nothing decoded), one
// SHA-256 over a few hundred bytes of names and digests, one stat per input file and per
// output, and no allocation: the work is split in NumCPU contiguous parts, each with its own
// buffers, on as many goroutines (not one per target).
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
	// The output directory as a descriptor: outputs are statted relative to it.
	dirfd := cache.AtCWD
	prefix := b.out + "/"
	if fd, err := syscall.Open(b.out, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
		dirfd, prefix = fd, ""
		defer syscall.Close(fd)
	}
	// The config's directory likewise, for input files under it (a shorter path walk).
	basefd := -1
	if b.baseDir != "" && b.baseDir[0] == '/' && filepath.Clean(b.baseDir) == b.baseDir && b.baseDir != "/" {
		if fd, err := syscall.Open(b.baseDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err == nil {
			basefd = fd
			defer syscall.Close(fd)
		}
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
				ws := &scratch{dirfd: dirfd, prefix: prefix, basefd: basefd, record: b.o.Record != nil}
				fn(part, ws)
				if ws.record {
					b.o.Record.Add(ws.rec, ws.recN)
					if ws.minStale != 0 {
						b.o.Record.Until(ws.minStale)
					}
				}
			}()
		}
		wg.Wait()
	}
	// Pass 1: the recorded output digests, which dependents' keys take as their deps'.
	parallel(func(part []*node, _ *scratch) {
		for _, n := range part {
			if r, found := b.state.Record(n.t.Name); found && !r.Failed() {
				n.outDig = r.OutDigest()
				ok[n.id] = true
			}
		}
	})
	// Pass 2: keys and outputs.
	parallel(func(part []*node, ws *scratch) {
		for _, n := range part {
			if ok[n.id] {
				ok[n.id] = b.quickOne(n, nodes, ws)
			}
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
			n.outcome = UpToDate // n.files stays nil: depFiles reads the record if a dependent runs
			done++
		} else {
			n.outDig = cache.Digest{} // the scheduler computes it
		}
	}
	return done
}

// scratch is one fast-path worker's reusable buffers.
type scratch struct {
	h      cache.Hasher
	path   []byte
	num    []byte
	dirfd  int
	prefix string // prepended to output paths when dirfd is not the output directory
	basefd int    // the config's directory (b.baseDir), or -1

	// With Options.Record: every fingerprint compared (cache.AppendStampFile entries), their
	// count, and the earliest renewal time seen.
	record   bool
	rec      []byte
	recN     int
	minStale int64
}

// quickOne reports whether n's key, computed from its deps' recorded output digests
// (nodes[j].outDig), equals its recorded key and its recorded outputs are unchanged by stat.
func (b *builder) quickOne(n *node, nodes []*node, ws *scratch) bool {
	t := n.t
	rec, found := b.state.Record(t.Name)
	if !found {
		return false
	}
	h := &ws.h
	h.Reset()
	h.Add2("name", t.Name, nil)
	ws.num = strconv.AppendInt(ws.num[:0], int64(t.Version), 10)
	h.Add("version", ws.num)
	for _, r := range t.Reads {
		raw, _ := b.p.values.Lookup(r)
		h.Add2("config:", r, raw)
	}
	for _, f := range t.Files {
		d, ok := b.quickFileDigest(f, ws)
		if !ok {
			return false
		}
		h.Add2("file:", f, d[:])
	}
	for _, j := range b.p.Graph.Deps(n.id) {
		h.Add2("dep:", b.p.Targets[j].Name, nodes[j].outDig[:])
	}
	key := h.Sum()
	if st := rec.StaleAt(); st != 0 {
		if b.now.UnixNano() >= st {
			return false // to be renewed: the scheduler says so
		}
		if ws.record && (ws.minStale == 0 || st < ws.minStale) {
			ws.minStale = st
		}
		key = epochKey(key, rec.Epoch(), nil)
	}
	if key != rec.Key() {
		return false
	}
	// Outputs: <dir>/<rel>, relative to the output directory's descriptor.
	dir := t.Dir()
	return rec.Outputs(func(rel []byte, fp cache.Fingerprint) bool {
		p := append(append(append(append(ws.path[:0], ws.prefix...), dir...), '/'), rel...)
		ws.path = append(p, 0)
		got, err := cache.StatAt(ws.dirfd, ws.path)
		if ws.record && err == nil && got == fp {
			base := byte(cache.StampOut)
			if ws.dirfd == cache.AtCWD {
				base = cache.StampAbs // prefix is the absolute output directory
			}
			ws.rec, ws.recN = cache.AppendStampFile(ws.rec, base, ws.path[:len(ws.path)-1], got), ws.recN+1
		}
		return err == nil && got == fp
	})
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
		if r, ok := b.state.Record(d.t.Name); ok {
			return r.OutputNames()
		}
	}
	return d.files
}

// recordVerdict tells Options.Record whether this build's verdict may be replayed: only when
// every selected target was up to date — by the fast path, or by the scheduler after hashing
// an input file again (fileDigest and check record what they compared) — and none is External
// or has a Probe (its real state lives outside the filesystem).
func (b *builder) recordVerdict(nodes []*node) {
	for _, n := range nodes {
		switch {
		case n == nil:
		case n.t.External || n.t.Probe != nil:
			b.o.Record.Fail(n.t.Name + " is External")
			return
		case n.outcome != UpToDate:
			b.o.Record.Fail(n.t.Name + " was not up to date")
			return
		}
	}
}
