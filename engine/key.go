package engine

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labbuild/labbuild/cache"
)

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
	n.base = h.Sum()
	prev := b.state.Target(t.Name)
	if prev == nil {
		// No state (after clean, or a lost state file): the epoch of this exact base key, as
		// recorded in the store, so that a certificate is restored rather than re-issued.
		if r, ok := b.cache.GetEpoch(n.base); ok {
			prev = &cache.TargetState{Epoch: r.Epoch, StaleAt: r.StaleAt}
		}
	}
	epoch = b.now.UnixNano()
	if prev != nil && prev.Epoch != 0 {
		epoch = prev.Epoch
		if prev.StaleAt != 0 && b.now.UnixNano() >= prev.StaleAt {
			renew = "stale since " + time.Unix(0, prev.StaleAt).UTC().Format(time.RFC3339)
			epoch = b.now.UnixNano()
		}
	}
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
// times from the kernel's coarse clock (one jiffy, up to 10 ms), so a file modified again
// within one tick of being read can keep its fingerprint: such a file is hashed again next
// time. It is not cache.RacyWindow (2 s, for whole-second file systems): a null build right
// after writing inputs (a benchmark, a script) would hash them all again for 2 s. The front
// does not lean on this rule: it compares a file's bytes where the state does not vouch for
// it, and the full binary's verdict, which it replays, is the one this rule gives.
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
		return cache.Digest{}, &InputError{Field: f, Where: where(b.p.values, f), Path: path, Err: err}
	}
	if st, ok := b.state.File(path); ok && st.FP == fp {
		b.o.Record.File(path, fp, nil) // the state vouches for it, as on the fast path
		return st.Digest, nil
	}
	d, _, err := cache.HashFile(path)
	if err != nil {
		return cache.Digest{}, &InputError{Field: f, Where: where(b.p.values, f), Path: path, Err: err}
	}
	if !b.o.DryRun && fp.Changed() < b.wall.Add(-racyWindow).UnixNano() {
		b.state.SetFile(path, cache.FileState{FP: fp, Digest: d})
		b.o.Record.File(path, fp, nil)
	} else {
		b.o.Record.File(path, fp, &d) // hashed again next time: the front compares bytes
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
	if r := b.o.Record; r != nil {
		if prev.StaleAt != 0 {
			r.Until(prev.StaleAt)
		}
		for _, o := range prev.Outputs {
			r.File(filepath.Join(dir, filepath.FromSlash(o.Rel)), o.FP, nil)
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
	var gone []string // sorted: a plan's text must not depend on map order
	for l := range e.Inputs {
		if _, ok := inputs[l]; !ok {
			gone = append(gone, l)
		}
	}
	sort.Strings(gone)
	for _, l := range gone {
		out = append(out, describe(l)+" removed")
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
