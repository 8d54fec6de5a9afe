package engine

import (
	"errors"
	"fmt"
	"strconv"
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

// keyed is a target's action key and what went into it.
type keyed struct {
	key  cache.Digest // the action key
	base cache.Digest // the key without the epoch
	// epoch is the target's generation time (ns): its recorded one, or the build's clock for
	// a new generation. renewed is the passed stale time (ns) that started a new one; 0: none.
	epoch, renewed int64
	// inputs maps each labelled input to its digest, for explanations and the store's entry
	// (diffs against a later key); nil when not asked for.
	inputs map[string]cache.Digest
}

// keying is one key computation's working set: the part buffer (reused across a fast-path
// worker's targets, so keying allocates nothing), and how file inputs are found.
type keying struct {
	h   cache.Hasher
	num []byte
	// ws, on the fast path, makes file inputs come only from the state, by stat: a file the
	// state cannot vouch for ends the computation (errUnvouched) instead of being hashed.
	ws *scratch
	// inputs, when non-nil, receives each labelled input's digest.
	inputs map[string]cache.Digest
}

// errUnvouched ends a fast-path key computation: an input file whose digest the state cannot
// vouch for by stat (the scheduler hashes it).
var errUnvouched = errors.New("input file not vouched for by the state")

// baseKey computes n's base action key: SHA-256 over its name, recipe version, the canonical
// JSON of each declared config value, each declared file's digest and each dep's output digest
// (nodes[j].outDig: as built by this build, or recorded). It is the one key computation: the
// null-build fast path (k.ws set) and the scheduler both call it; key adds the epoch.
func (b *builder) baseKey(k *keying, n *node, nodes []*node) (cache.Digest, error) {
	t := n.t
	h := &k.h
	h.Reset()
	h.Add2("name", t.Name, nil)
	k.num = strconv.AppendInt(k.num[:0], int64(t.Version), 10)
	h.Add("version", k.num)
	if k.inputs != nil {
		k.inputs["version"] = cache.Sum(k.num)
	}
	for _, r := range t.Reads {
		raw, _ := b.p.values.Lookup(r)
		h.Add2("config:", r, raw)
		if k.inputs != nil {
			k.inputs["config:"+r] = cache.Sum(raw)
		}
	}
	for _, f := range t.Files {
		var d cache.Digest
		if k.ws != nil {
			var ok bool
			if d, ok = b.quickFileDigest(f, k.ws); !ok {
				return d, errUnvouched
			}
		} else {
			var err error
			if d, err = b.fileDigest(f); err != nil {
				return d, fmt.Errorf("%s: %w", t.Name, err)
			}
		}
		h.Add2("file:", f, d[:])
		if k.inputs != nil {
			k.inputs["file:"+f] = d
		}
	}
	for _, j := range b.p.Graph.Deps(n.id) {
		h.Add2("dep:", b.p.Targets[j].Name, nodes[j].outDig[:])
		if k.inputs != nil {
			k.inputs["dep:"+b.p.Targets[j].Name] = nodes[j].outDig
		}
	}
	return h.Sum(), nil
}

// key computes n's action key (baseKey) and, for a target that set a stale time, adds its
// epoch: the recorded one (rec; with no record, the one the store keeps for this base key, so
// that a certificate is restored rather than re-issued), or the build's clock once the stale
// time has passed (the target is then renewed: a new generation, a new key).
func (b *builder) key(k *keying, n *node, nodes []*node, rec cache.TargetView, found bool) (keyed, error) {
	base, err := b.baseKey(k, n, nodes)
	if err != nil {
		return keyed{}, err
	}
	kd := keyed{key: base, base: base, epoch: b.now.UnixNano(), inputs: k.inputs}
	var epoch, staleAt int64
	if found {
		epoch, staleAt = rec.Epoch(), rec.StaleAt()
	} else if r, ok := b.cache.GetEpoch(base); ok {
		epoch, staleAt = r.Epoch, r.StaleAt
	}
	if epoch != 0 {
		kd.epoch = epoch
		if staleAt != 0 && b.now.UnixNano() >= staleAt {
			kd.epoch, kd.renewed = b.now.UnixNano(), staleAt
		}
	}
	if staleAt != 0 {
		kd.key = epochKey(&k.h, base, kd.epoch, kd.inputs)
	}
	return kd, nil
}

// epochKey is the key of a target whose output depends on time (it set a stale time): its
// base key and its epoch, gathered in h (reset first). inputs, when non-nil, gets the epoch's
// digest for explanations.
func epochKey(h *cache.Hasher, base cache.Digest, epoch int64, inputs map[string]cache.Digest) cache.Digest {
	var buf [20]byte
	e := strconv.AppendInt(buf[:0], epoch, 10)
	if inputs != nil {
		inputs["epoch"] = cache.Sum(e)
	}
	h.Reset()
	h.Add("base", base[:])
	h.Add("epoch", e)
	return h.Sum()
}

// racyWindow is how close to the build's start (its wall clock, Options.Wall) an input file's
// last change (Fingerprint.Changed) may be before its fingerprint cannot vouch for its bytes:
// cache.RacyWindow, 2 s, cmd/go's test-cache rule. A file system keeps times in its own
// granularity (ext4 with 128-byte inodes, and others, in whole seconds), so a file edited again
// within the second the build read it, at the same size, keeps its fingerprint; such a file is
// not recorded, and is hashed again by the next build (and the next, until it is older than
// the window). Issue 39 found the full binary keeping a stale pull secret for ever with the
// 20 ms it had before. A null build more than 2 s after the last edit hashes nothing.
const racyWindow = time.Duration(cache.RacyWindow)

// fileDigest returns the digest of the file named by config field f, trusting the recorded
// digest when the stat fingerprint matches (so a null build reads no input file). A file whose
// mtime is not safely before the build's start is not recorded, and is hashed again next time
// (git's "racily clean" rule). A dry run records into its read-only state (in memory).
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
		b.o.Stamp.File(path, fp, nil) // the state vouches for it, as on the fast path
		return st.Digest, nil
	}
	d, _, err := cache.HashFile(path)
	if err != nil {
		return cache.Digest{}, &InputError{Field: f, Where: where(b.p.values, f), Path: path, Err: err}
	}
	if fp.Changed() < b.wall.Add(-racyWindow).UnixNano() {
		b.state.SetFile(path, cache.FileState{FP: fp, Digest: d})
		b.o.Stamp.File(path, fp, nil)
	} else {
		b.o.Stamp.File(path, fp, &d) // hashed again next time: the front compares bytes
	}
	return d, nil
}
