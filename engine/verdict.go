package engine

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/labbuild/labbuild/cache"
)

// verdict is the engine's one decision about a target before a build acts on it: its state,
// why (the reasons), and what a build does (the action), with what that took — the key, the
// record, the store's entry for the key, what the Probe saw.
type verdict struct {
	state   State
	action  Action
	reasons []Reason
	keyed
	rec     cache.TargetView // the record, read in place (found: there is one)
	found   bool
	prev    *cache.TargetState // the record, decoded; nil: none
	entry   *cache.Entry       // the store's outputs for the key (ActionRestore)
	probe   ProbeResult        // what the Probe saw; Action "" when it did not run
	pending bool               // an upstream will change first (a dry run): the key is not known
}

// judge compares target t's key now (kd) with its record rec: the core of every verdict and
// the whole of the null build's. The state is up to date when the keys are equal and every
// recorded output is as recorded (one stat each, relative to ws's output directory); else it
// is missing, failed or stale. When why is non-nil the reasons are appended to it (inputs
// gives the labelled inputs, for the ones that changed); the fast path passes nil, so it
// allocates nothing and stops at the first difference. An up-to-date target's outputs and
// stale time are recorded in ws for the front's stamp.
func (b *builder) judge(t *Target, rec cache.TargetView, found bool, kd *keyed, ws *scratch, why *[]Reason, inputs func() map[string]cache.Digest) State {
	switch {
	case !found:
		if why != nil {
			*why = append(*why, Reason{Kind: NeverBuilt})
		}
		return StateMissing
	case rec.Failed():
		if why != nil {
			*why = append(*why, Reason{Kind: LastFailed})
			if rec.Key() != kd.key {
				*why = append(*why, b.diffInputs(t, rec.Key(), inputs())...)
			}
		}
		return StateFailed
	case rec.Key() != kd.key:
		if why != nil {
			if kd.renewed != 0 {
				*why = append(*why, Reason{Kind: Renewal, Old: time.Unix(0, kd.renewed).UTC().Format(time.RFC3339)})
			} else {
				*why = append(*why, b.diffInputs(t, rec.Key(), inputs())...)
			}
		}
		return StateStale
	}
	dir := t.Dir()
	var bad ReasonKind
	var badRel []byte
	if !rec.Outputs(func(rel []byte, fp cache.Fingerprint) bool {
		got, err := ws.statOutput(dir, rel)
		switch {
		case err != nil:
			bad, badRel = OutputMissing, rel
		case got != fp:
			bad, badRel = OutputModified, rel
		default:
			return true
		}
		return false
	}) {
		if why != nil {
			*why = append(*why, Reason{Kind: bad, Input: dir + "/" + string(badRel)})
		}
		return StateStale
	}
	ws.staleAt(rec.StaleAt())
	return StateUpToDate
}

// verdict decides target n's state, why, and what a build does about it, its deps being
// decided (and, in a build, done): the one verdict, shared by the scheduler's two runners
// and, through Result, by explain, the plan and the graph — as ninja's
// DependencyScan::RecomputeDirty decides dirtiness in one place, the explanations apart. The
// null-build fast path is its first part (judge) alone. An error (an input file that cannot
// be read, a Probe that fails) means no verdict: the target is blocked.
func (b *builder) verdict(ctx context.Context, n *node, nodes []*node) (*verdict, error) {
	t := n.t
	rec, found := b.state.View(t.Name)
	if pending := pendingDeps(n, nodes, b.p); pending != "" {
		return b.pendingVerdict(n, nodes, rec, found, pending), nil
	}
	k := keying{}
	if b.o.Explain {
		k.inputs = make(map[string]cache.Digest, len(t.Reads)+len(t.Files)+len(t.Deps)+2)
	}
	kd, err := b.key(&k, n, nodes, rec, found)
	if err != nil {
		return nil, err
	}
	n.base = kd.base
	v := &verdict{keyed: kd, rec: rec, found: found}
	if found {
		v.prev = rec.State()
	}
	ws := b.newScratch()
	v.state = b.judge(t, rec, found, &v.keyed, ws, &v.reasons, func() map[string]cache.Digest { return b.inputs(n, nodes, v) })
	ws.flush(b.o.Stamp)
	regen := b.regen[t.Name]
	sticky := t.Sticky && !regen
	switch {
	case regen:
		v.reasons = []Reason{{Kind: Regenerate}}
		v.epoch = b.now.UnixNano() // a new generation, not the recorded one
	case b.o.Force && !sticky:
		v.reasons = append([]Reason{{Kind: Forced}}, v.reasons...)
	}
	if (regen || b.o.Force && !sticky) && v.state == StateUpToDate {
		v.state = StateStale
	}
	if v.state == StateUpToDate && t.Probe != nil {
		// Up to date on disk: the real object may still have drifted.
		pr, err := b.probe(ctx, n, v.epoch, nodes)
		if err != nil {
			return nil, err
		}
		v.drift(pr)
	}
	if v.state == StateUpToDate {
		v.action = Keep
		return v, nil
	}
	// Not up to date: restored from the store when this exact key was built before; a sticky
	// secret that was and cannot be is an error, never made anew (verdict_sticky.go).
	if !regen && (!b.o.Force || sticky) {
		var err error
		v.entry, err = b.cache.GetAction(v.key)
		if sticky {
			if err := b.checkSticky(n, v, err); err != nil {
				return nil, err
			}
		}
	}
	v.decideAction()
	return v, nil
}

// drift takes what the Probe saw: an action other than Keep makes the target stale, for that
// reason alone.
func (v *verdict) drift(pr ProbeResult) {
	v.probe = pr
	if pr.Action != Keep {
		v.reasons = []Reason{{Kind: Drift, Detail: pr.Reason}}
		if v.state == StateUpToDate || v.state == StateRestorable {
			v.state = StateStale
		}
		v.action = pr.Action
	}
}

// decideAction sets what a build does to a target that is not up to date: what its Probe
// asked for, else restore when the store holds its key, else build. A stale target whose
// outputs the store holds is restorable.
func (v *verdict) decideAction() {
	switch {
	case v.probe.Action != "" && v.probe.Action != Keep:
		v.action = v.probe.Action
	case v.entry != nil:
		v.action = ActionRestore
	default:
		v.action = ActionBuild
	}
	if v.action == ActionRestore && v.state == StateStale {
		v.state = StateRestorable
	}
	if v.action != ActionRestore && v.state == StateRestorable {
		v.state = StateStale
	}
}

// pendingDeps names, comma-separated, n's upstreams whose outputs are not known yet: in a dry
// run, those that would build first.
func pendingDeps(n *node, nodes []*node, p *Project) string {
	var names []string
	for _, j := range p.Graph.Deps(n.id) {
		if nodes[j].unknownOutput() {
			names = append(names, nodes[j].t.Name)
		}
	}
	return strings.Join(names, ", ")
}

// unknownOutput reports whether n's output is not known yet: a dry run would build it. A gate
// built before is known: a passing gate writes the same bytes again.
func (n *node) unknownOutput() bool {
	return n.pending && !(n.t.Gate && n.outDig != (cache.Digest{}))
}

// pendingVerdict is the verdict of a target an upstream of which will change first (a dry
// run): its key is not known until then, so it is stale (or missing, or failed) for that
// reason and for those of its own inputs that changed, and a build builds it — creates it, for
// an External target with nothing made yet.
func (b *builder) pendingVerdict(n *node, nodes []*node, rec cache.TargetView, found bool, pending string) *verdict {
	v := &verdict{state: StateStale, action: ActionBuild, rec: rec, found: found, pending: true}
	switch {
	case !found:
		v.state, v.reasons = StateMissing, []Reason{{Kind: NeverBuilt}}
		if n.t.External {
			v.action = Create // nothing recorded: nothing made yet
		}
	case rec.Failed():
		v.state, v.reasons = StateFailed, []Reason{{Kind: LastFailed}}
	}
	k := keying{inputs: map[string]cache.Digest{}}
	if kd, err := b.key(&k, n, nodes, rec, found); err == nil {
		v.keyed = kd // pending upstreams show as the zero digest
		if found {
			for _, r := range b.diffInputs(n.t, rec.Key(), kd.inputs) {
				// Its own inputs that changed too; the upstreams are said below.
				if r.Kind != InputsChanged && !isDep(r.Input) {
					v.reasons = append(v.reasons, r)
				}
			}
		}
	}
	if found {
		v.prev = rec.State()
	}
	v.reasons = append(v.reasons, Reason{Kind: UpstreamPending, Input: pending})
	return v
}

// isDep reports whether key input label names an upstream's output ("dep:pki/ca/root").
func isDep(label string) bool { return strings.HasPrefix(label, "dep:") }

// inputs returns n's labelled key inputs: v's, or, when its key was computed without them
// (not explaining), the key computed again with them. Only a target that is not up to date
// needs them (its reasons, its store entry), so a null build never pays for them.
func (b *builder) inputs(n *node, nodes []*node, v *verdict) map[string]cache.Digest {
	if v.inputs == nil {
		k := keying{inputs: map[string]cache.Digest{}}
		b.key(&k, n, nodes, v.rec, v.found)
		v.inputs = k.inputs
	}
	return v.inputs
}

// diffInputs says which inputs differ from those of the earlier key prevKey (as the store
// recorded them), with a config field's values before and now where recorded.
func (b *builder) diffInputs(t *Target, prevKey cache.Digest, inputs map[string]cache.Digest) []Reason {
	e, err := b.cache.PeekAction(prevKey)
	if err != nil {
		return []Reason{{Kind: InputsUnrecorded}}
	}
	var out []Reason
	labels := make([]string, 0, len(inputs))
	for l := range inputs {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	for _, l := range labels {
		old, ok := e.Inputs[l]
		switch {
		case !ok:
			out = append(out, Reason{Kind: InputAdded, Input: l})
		case old != inputs[l]:
			r := Reason{Kind: InputChanged, Input: l}
			if f, ok := strings.CutPrefix(l, "config:"); ok {
				if was, ok := e.Values[f]; ok {
					raw, _ := b.p.values.Lookup(f)
					r.Old, r.New = was, DisplayValue(f, raw)
				}
			}
			out = append(out, r)
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
		out = append(out, Reason{Kind: InputRemoved, Input: l})
	}
	if len(out) == 0 {
		out = append(out, Reason{Kind: InputsChanged})
	}
	return out
}
