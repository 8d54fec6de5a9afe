package engine

import (
	"fmt"
	"strings"

	"github.com/labbuild/labbuild/cache"
)

// A sticky target (Target.Sticky: a private key, a password, the cluster's IDs) is made once
// and then only restored: the verdict never lets a build make one anew unless --regenerate
// names it. Its verdict is an error (the target is blocked in a plan, failed in a build, and
// everything under it is skipped) when the secret was made with the inputs it has now but can
// be neither kept nor restored: its store entry exists but is damaged, or names damaged or
// missing bytes, or the state recorded this very key and the store has no entry for it. The
// one case where a build makes it is the one where nothing says it was ever made with these
// inputs (a first build, a changed pki.keyAlgorithm). Issue 39 found a flipped byte in the root
// CA key's object regenerating the root of trust in silence: "12 built, 118 reused".

// StickyError is the verdict on a sticky target that cannot be kept or restored: what was found,
// and the two ways out.
type StickyError struct {
	Target string
	// Found says what is wrong: the store's entry or objects, and the outputs.
	Found string
	// Store is the content store's directory (the first way out: restore it from a backup).
	Store string
	// Dependents are the targets made from it, in build order: what --regenerate replaces.
	Dependents []string
}

// stickyShown is how many dependents a StickyError names before it counts the rest.
const stickyShown = 6

func (e *StickyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is a sticky secret, made once and never made anew unasked, and it cannot be restored: %s. ", e.Target, e.Found)
	fmt.Fprintf(&b, "Either restore the content store %s from a backup, or run `labbuild --regenerate %s`, which makes a new one", e.Store, e.Target)
	switch n := len(e.Dependents); {
	case n == 0:
		b.WriteString(" (nothing is made from it)")
	default:
		fmt.Fprintf(&b, " and so replaces the %d targets made from it: %s", n, strings.Join(e.Dependents[:min(n, stickyShown)], ", "))
		if n > stickyShown {
			fmt.Fprintf(&b, " and %d more", n-stickyShown)
		}
	}
	return b.String()
}

// checkSticky is the verdict's part for sticky target n that is not up to date and not named
// by --regenerate: it returns a *StickyError when n was made with its present inputs and
// cannot be restored, nil when it may be restored (v.entry, whose objects it has hashed) or
// made (nothing says it was ever made). getErr is the store's answer for v.key.
func (b *builder) checkSticky(n *node, v *verdict, getErr error) error {
	why := func(err error) string { return strings.TrimPrefix(err.Error(), cache.ErrMiss.Error()+": ") }
	var found string
	switch {
	case getErr == nil:
		err := b.cache.Verify(v.entry)
		if err == nil {
			return nil
		}
		v.entry = nil
		found = "its store entry names damaged bytes (" + why(err) + ")"
	case b.cache.HasEntry(v.key):
		found = "its store entry is unusable (" + why(getErr) + ")"
	case v.found && v.rec.Key() == v.key:
		found = "the store has no entry for it"
	default:
		return nil
	}
	outs := ", and its outputs are gone (labbuild clean removed them, or they were deleted)"
	if v.found && len(v.rec.OutputNames()) > 0 {
		outs = ""
		for _, r := range v.reasons {
			if r.Kind == OutputMissing || r.Kind == OutputModified {
				outs = ", and its " + r.String()
				break
			}
		}
	}
	found += outs
	down := b.p.Graph.Downstream([]int{n.id})
	var deps []string
	for _, i := range b.p.Graph.Order() {
		if down[i] && i != n.id {
			deps = append(deps, b.p.Targets[i].Name)
		}
	}
	return &StickyError{Target: n.t.Name, Found: found, Store: b.cache.Dir(), Dependents: deps}
}
