package engine

import (
	"fmt"
	"strings"
)

// Action is what a build does, or a plan says it would do, to one target: a closed set, as
// terraform's plans.Action. A Probe answers with the first four (Keep, Create, Update,
// Replace); the engine adds the rest.
type Action string

// The actions. A target's Run builds, creates, updates or replaces; ActionRestore copies its
// outputs back from the content store; ActionDestroy undoes an External target the config no
// longer declares. The last three are not actions but what a plan says of a target it could
// not plan (`-n --json`).
const (
	Keep    Action = "keep"    // up to date: nothing to do
	Create  Action = "create"  // an External object that does not exist yet
	Update  Action = "update"  // an External object changed in place
	Replace Action = "replace" // an External object destroyed and made anew

	ActionBuild   Action = "build"   // run the target's recipe
	ActionRestore Action = "restore" // the store holds this exact key: its outputs come back
	ActionDestroy Action = "destroy" // no longer declared: its object is removed

	ActionUnevaluated  Action = "unevaluated"   // its verdict could not be reached (the error is on stderr)
	ActionBlocked      Action = "blocked"       // an upstream could not be evaluated
	ActionNotEvaluated Action = "not evaluated" // the plan stopped before it (no -k)
)

// PlanItem is one target in a plan (-n) or an explanation: what would happen and why.
type PlanItem struct {
	Target string `json:"target"`
	Action Action `json:"action"`
	// State is the target's verdict before the build acts: stale, missing, failed, restorable.
	State State `json:"-"`
	// Reasons say why, each a kind and what it is about; JSON shows each one's words.
	Reasons []Reason `json:"reasons,omitempty"`
	// External is set for targets whose result lives outside the filesystem (Target.External).
	External bool `json:"external,omitempty"`
	// Changes are the config fields that changed since the last build, old → new: the Reasons
	// that know both values.
	Changes []FieldChange `json:"changes,omitempty"`
}

// Why joins the item's reasons as plans print them: "config network.apiVIP changed; upstream
// pki/ca will change first".
func (p PlanItem) Why() string {
	var b strings.Builder
	for i, r := range p.Reasons {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(r.String())
	}
	return b.String()
}

// newPlanItem is target t's plan item for verdict state, action and reasons, with the config
// changes among the reasons.
func newPlanItem(t *Target, state State, action Action, reasons []Reason) *PlanItem {
	p := &PlanItem{Target: t.Name, Action: action, State: state, Reasons: reasons, External: t.External}
	for _, r := range reasons {
		if f, ok := strings.CutPrefix(r.Input, "config:"); ok && r.Kind == InputChanged && r.Old != r.New {
			p.Changes = append(p.Changes, FieldChange{Field: f, Old: r.Old, New: r.New})
		}
	}
	return p
}

// PlanCount is the one plan summary: a plan counted by action, for the count line every plan
// ends with ("3 to build, 2 to restore, 97 up to date") and, when External targets are in it,
// terraform's ("Plan: 1 to create, 0 to update in place, 0 to replace, 0 to destroy."). The
// build's plan (-n), the orphans a build would destroy and `labbuild destroy -n` all print it.
type PlanCount struct {
	// Build counts every item that runs something: build, create, update, replace, destroy.
	Build int
	// Restore counts the items restored from the store; UpToDate the targets left alone.
	Restore, UpToDate int
	// Create, Update, Replace and Destroy count External targets' actions.
	Create, Update, Replace, Destroy int
	// Check counts External targets that build only if an upstream's output really changes
	// (their Probe runs once the upstreams are built); Files the file targets to build.
	Check, Files int
	// Blocked counts the targets the plan could not evaluate, or whose upstream it could not;
	// NotEvaluated those it did not reach (it stops at the first error without -k).
	Blocked, NotEvaluated int
	// Unevaluated names the targets it could not evaluate (their errors are on stderr).
	Unevaluated []string
}

// CountPlan counts plan's items by action.
func CountPlan(plan []PlanItem) PlanCount {
	var c PlanCount
	for _, p := range plan {
		c.add(p)
	}
	return c
}

func (c *PlanCount) add(p PlanItem) {
	switch p.Action {
	case Keep:
		return
	case ActionRestore:
		c.Restore++
		return
	case ActionUnevaluated:
		c.Blocked++
		c.Unevaluated = append(c.Unevaluated, p.Target)
		return
	case ActionBlocked:
		c.Blocked++
		return
	case ActionNotEvaluated:
		c.NotEvaluated++
		return
	case Create:
		c.Create++
	case Update:
		c.Update++
	case Replace:
		c.Replace++
	case ActionDestroy:
		c.Destroy++
	case ActionBuild:
		if p.External {
			c.Check++
		} else {
			c.Files++
		}
	}
	c.Build++
}

// PlanCount counts a dry run's plan, its up-to-date targets and the targets it could not plan
// (Unplanned).
func (r *Result) PlanCount() PlanCount {
	c := CountPlan(r.Plan)
	for _, p := range r.Unplanned() {
		c.add(p)
	}
	c.UpToDate = len(r.UpToDate)
	return c
}

// String is the count line: "3 to build, 2 to restore, 97 up to date" (and what cannot be
// evaluated now), or "nothing to do: 97 up to date".
func (c PlanCount) String() string {
	if c.Build+c.Restore+c.Blocked+c.NotEvaluated == 0 {
		return fmt.Sprintf("nothing to do: %d up to date", c.UpToDate)
	}
	s := fmt.Sprintf("%d to build, %d to restore, %d up to date", c.Build, c.Restore, c.UpToDate)
	if c.Blocked > 0 {
		s += fmt.Sprintf(", %d blocked (labbuild explain TARGET says why)", c.Blocked)
	}
	if c.NotEvaluated > 0 {
		s += fmt.Sprintf(", %d not evaluated (-k plans past the first error)", c.NotEvaluated)
	}
	if len(c.Unevaluated) > 0 {
		s += "; could not evaluate " + strings.Join(c.Unevaluated, ", ")
	}
	return s
}

// Terraform is the line in terraform's words, counting the External targets' actions:
// "Plan: 3 to create, 1 to update in place, 0 to replace, 0 to destroy." A second sentence
// counts what a dry run cannot decide yet — External targets that build only if an upstream's
// output really changes, and file targets to build — when there are any. It is empty when the
// plan touches no External target.
func (c PlanCount) Terraform() string {
	if c.Create+c.Update+c.Replace+c.Destroy+c.Check == 0 {
		return ""
	}
	s := fmt.Sprintf("Plan: %d to create, %d to update in place, %d to replace, %d to destroy.", c.Create, c.Update, c.Replace, c.Destroy)
	var more []string
	if c.Check > 0 {
		more = append(more, fmt.Sprintf("%d to check again once their upstreams are built", c.Check))
	}
	if c.Files > 0 {
		more = append(more, fmt.Sprintf("%d file targets to build", c.Files))
	}
	if len(more) > 0 {
		s += " Then " + strings.Join(more, "; ") + "."
	}
	return s
}

// Unplanned returns, for a dry run's result, an item for each target it could not plan, so
// that a plan lists them rather than leaving them out: those it could not evaluate (Failed),
// those an upstream of which it could not evaluate (Skipped), and those it never reached
// (NotStarted).
func (r *Result) Unplanned() []PlanItem {
	var out []PlanItem
	for _, l := range []struct {
		names  []string
		action Action
		kind   ReasonKind
	}{{r.Failed, ActionUnevaluated, Unevaluated}, {r.Skipped, ActionBlocked, UpstreamUnevaluated}, {r.NotStarted, ActionNotEvaluated, NotEvaluated}} {
		for _, n := range l.names {
			out = append(out, PlanItem{Target: n, Action: l.action, State: StateBlocked, Reasons: []Reason{{Kind: l.kind}}})
		}
	}
	return out
}
