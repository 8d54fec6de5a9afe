package engine

import (
	"fmt"
	"strings"
)

// State is where a target stands before a build acts on it, as its verdict decides (see
// verdict): the word graph, explain, status and the plan show for it. The constants are in
// the order a legend lists them, from up to date to blocked.
type State uint8

// The states.
const (
	StateUpToDate   State = iota + 1 // its key and outputs match the record
	StateRestorable                  // not current, but the store holds this exact key: a build restores it
	StateStale                       // built before; an input or output changed, or an upstream will change first
	StateMissing                     // never built in this output directory
	StateFailed                      // its last attempt failed (a real build's, not a dry run's)
	StateBlocked                     // no verdict: an input cannot be read, a Probe failed, an upstream is blocked
)

var stateWords = [...]string{StateUpToDate: "up to date", StateRestorable: "restorable", StateStale: "stale",
	StateMissing: "missing", StateFailed: "failed", StateBlocked: "blocked"}

// States returns every State in legend order.
func States() []State {
	return []State{StateUpToDate, StateRestorable, StateStale, StateMissing, StateFailed, StateBlocked}
}

// String returns the state's word: "up to date", "restorable", "stale", "missing", "failed",
// "blocked".
func (s State) String() string {
	if int(s) < len(stateWords) && stateWords[s] != "" {
		return stateWords[s]
	}
	return "blocked"
}

// MarshalText implements encoding.TextMarshaler: the state's word.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler: a state's word (status --json read back).
func (s *State) UnmarshalText(b []byte) error {
	for i, w := range stateWords {
		if w != "" && w == string(b) {
			*s = State(i)
			return nil
		}
	}
	return fmt.Errorf("unknown state %q", b)
}

// ReasonKind is why a target is not up to date, as Bazel's ActionCacheChecker counts a miss by
// its MissReason: states, actions and counts are taken from the kind, never from a reason's
// words (TestReasonWording rewords every kind to show it).
type ReasonKind uint8

// The reason kinds; ReasonText words each.
const (
	NeverBuilt          ReasonKind = iota + 1 // no record in this output directory
	LastFailed                                // the record says the last attempt failed
	InputAdded                                // a key input the earlier key did not have (Input)
	InputChanged                              // a key input whose digest differs (Input; Old → New for config fields)
	InputRemoved                              // a key input the earlier key had (Input)
	InputsChanged                             // the key differs, no input does (the epoch's own change)
	InputsUnrecorded                          // the key differs; the earlier inputs are no longer in the store
	Renewal                                   // the stale time it set has passed (Old: that time)
	OutputMissing                             // a recorded output is gone (Input: its path)
	OutputModified                            // a recorded output was changed (Input: its path)
	UpstreamPending                           // a dry run: upstreams will change first (Input: their names)
	Forced                                    // -B
	Regenerate                                // --regenerate names it
	Drift                                     // its Probe saw the real object differ (Detail: the Probe's words)
	StoreUnusable                             // its store entry could not be restored (Detail: why)
	Undeclared                                // the config no longer declares it (an orphan to destroy)
	Unevaluated                               // a dry run could not reach its verdict
	UpstreamUnevaluated                       // a dry run could not reach an upstream's verdict
	NotEvaluated                              // a dry run stopped before reaching it
	numReasonKinds
)

// Reason is one reason a target is not up to date: its kind and what it is about.
type Reason struct {
	Kind ReasonKind
	// Input is what the reason is about: a key input's label for the Input kinds
	// ("config:network.apiVIP", "file:access.pullSecretFile", "dep:pki/ca/root", "version",
	// "epoch"), an output's path (OutputMissing, OutputModified), the upstreams that change
	// first (UpstreamPending, comma-separated).
	Input string
	// Old and New are the values before and now where known: a config field's, as
	// DisplayValue shows them (InputChanged); the passed stale time (Renewal: Old, RFC 3339).
	Old, New string
	// Detail is what the world outside the engine said: a Probe's reason (Drift), the
	// store's error (StoreUnusable).
	Detail string

	words string // read back from JSON (UnmarshalText): the words, and no kind
}

// String returns the reason's words (ReasonText).
func (r Reason) String() string {
	if r.Kind > 0 && r.Kind < numReasonKinds && ReasonText[r.Kind] != nil {
		return ReasonText[r.Kind](r)
	}
	return r.words
}

// MarshalText implements encoding.TextMarshaler: the reason's words (`-n --json`, `status
// --json`, `explain --json`).
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler for a reason read back from JSON: it
// keeps the words, which print as they were; its kind is not known (0), and is never guessed
// from the words.
func (r *Reason) UnmarshalText(b []byte) error {
	*r = Reason{words: string(b)}
	return nil
}

// ReasonText words each kind of reason: the one place a reason's text is made. Nothing may
// decide by these words (TestReasonWording replaces each entry and checks that only that
// reason's rendering changes); a test that replaces an entry restores it.
var ReasonText = [numReasonKinds]func(Reason) string{
	NeverBuilt:          func(Reason) string { return "never built" },
	LastFailed:          func(Reason) string { return "last attempt failed" },
	InputAdded:          func(r Reason) string { return describe(r.Input) + " added" },
	InputChanged:        func(r Reason) string { return describe(r.Input) + " changed" },
	InputRemoved:        func(r Reason) string { return describe(r.Input) + " removed" },
	InputsChanged:       func(Reason) string { return "inputs changed" },
	InputsUnrecorded:    func(Reason) string { return "inputs changed (the earlier inputs are no longer recorded)" },
	Renewal:             func(r Reason) string { return "renewal: stale since " + r.Old },
	OutputMissing:       func(r Reason) string { return "output " + r.Input + " missing" },
	OutputModified:      func(r Reason) string { return "output " + r.Input + " modified" },
	UpstreamPending:     func(r Reason) string { return "upstream " + r.Input + " will change first" },
	Forced:              func(Reason) string { return "forced (-B)" },
	Regenerate:          func(Reason) string { return "--regenerate" },
	Drift:               func(r Reason) string { return r.Detail },
	StoreUnusable:       func(r Reason) string { return "store entry unusable: " + r.Detail },
	Undeclared:          func(Reason) string { return "no longer declared by the config" },
	Unevaluated:         func(Reason) string { return "could not be evaluated (the error is on standard error)" },
	UpstreamUnevaluated: func(Reason) string { return "an upstream could not be evaluated" },
	NotEvaluated: func(Reason) string {
		return "the plan stopped at the first target it could not evaluate; -k plans the rest"
	},
}

// describe names a key input by its label, as reasons word it: "config network.apiVIP",
// "file access.pullSecretFile", "upstream pki/ca/root", "recipe version", "epoch".
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
	}
	return label
}
