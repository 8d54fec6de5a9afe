package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/labbuild/labbuild/engine"
)

// explanation is what explain says of one target (--json prints it as is).
type explanation struct {
	Target  string               `json:"target"`
	State   engine.State         `json:"state"`
	Action  engine.Action        `json:"action,omitempty"`
	Reasons []engine.Reason      `json:"reasons,omitempty"`
	Changes []engine.FieldChange `json:"changes,omitempty"`
	// Inputs maps each key input ("config:network.apiVIP", "file:access.pullSecretFile",
	// "dep:pki/ca/root", "version") to its digest; Values maps config and file inputs to their
	// value (a file input's value is its path), secrets as <redacted>.
	Inputs map[string]string `json:"inputs"`
	Values map[string]string `json:"values"`
	Deps   []string          `json:"deps"`
	Doc    string            `json:"doc"`
	// Error is why the target failed last time, or why it cannot be evaluated now (blocked);
	// Log is its log file, when it has one.
	Error string `json:"error,omitempty"`
	Log   string `json:"log,omitempty"`
}

func runExplain(ctx context.Context, c *cli, args []string) error {
	if len(args) != 1 {
		return usagef("explain takes one target (labbuild list shows them)")
	}
	p, res, o, err := c.status(ctx, args, true)
	if err != nil {
		return err
	}
	t := p.Target(args[0])
	if t == nil {
		return usagef("explain: %q is not a target (a family? explain one of its targets: labbuild list %s)", args[0], args[0])
	}
	ex := explanation{Target: t.Name, Doc: t.Doc, State: res.State(t.Name), Deps: nonNil(t.Deps),
		Inputs: map[string]string{}, Values: map[string]string{}}
	for _, pl := range res.Plan {
		if pl.Target == t.Name {
			ex.Action, ex.Reasons, ex.Changes = pl.Action, pl.Reasons, pl.Changes
		}
	}
	for l, d := range res.Inputs[t.Name] {
		ex.Inputs[l] = d.Short()
		if d.IsZero() {
			ex.Inputs[l] = "pending (upstream will change first)"
		}
		if f, ok := strings.CutPrefix(l, "config:"); ok {
			ex.Values[l], _ = p.Value(f)
		} else if f, ok := strings.CutPrefix(l, "file:"); ok {
			v, _ := p.Value(f)
			var path string
			if json.Unmarshal([]byte(v), &path) == nil {
				v = path
			}
			ex.Values[l] = v
		}
	}
	logPath := engine.LogPath(o.OutDir, t.Name)
	if tail := engine.LogTail(logPath, 1); tail != "" || ex.State == engine.StateFailed {
		ex.Log = logPath
		if e, ok := strings.CutPrefix(strings.TrimSpace(tail), "FAILED: "); ok && ex.State == engine.StateFailed {
			ex.Error = e
		}
	}
	if ex.State == engine.StateBlocked {
		ex.Error = blockedBy(c.dryErr.String(), t.Name, res)
	}
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ex)
	}
	return printExplanation(c, ex)
}

// blockedBy says why a dry run could not evaluate name: its own error, or the upstream that
// could not be evaluated.
func blockedBy(dryErr, name string, res *engine.Result) string {
	// A cause shared by several targets is printed once, before the first FAILED line that
	// refers to it ("… (above)"): explain shows the cause itself.
	cause := ""
	for _, l := range strings.Split(dryErr, "\n") {
		if c, ok := strings.CutPrefix(l, "labbuild: cannot read "); ok {
			cause = c
		}
		if e, ok := strings.CutPrefix(l, "FAILED: "+name+": "); ok {
			if strings.HasSuffix(e, "(above)") && cause != "" {
				return "cannot read " + cause
			}
			return e
		}
	}
	for _, l := range strings.Split(dryErr, "\n") {
		if rest, ok := strings.CutPrefix(l, "FAILED: "); ok {
			if up, _, ok := strings.Cut(rest, ": needs "); ok && strings.HasSuffix(rest, "(above)") && cause != "" {
				rest = up + ": cannot read " + cause
			}
			return "an upstream cannot be evaluated: " + rest
		}
	}
	return "an upstream cannot be evaluated"
}

func printExplanation(c *cli, ex explanation) error {
	w := c.stdout
	color := c.color()
	state := ex.State.String()
	switch ex.State {
	case engine.StateFailed, engine.StateBlocked:
		state = paint(color, sgrRed, state)
	case engine.StateUpToDate:
		state = paint(color, sgrGreen, state)
	}
	fmt.Fprintf(w, "%s: %s\n  %s\n", ex.Target, state, ex.Doc)
	if ex.Error != "" {
		fmt.Fprintf(w, "error: %s\n", ex.Error)
	}
	if ex.Log != "" {
		fmt.Fprintf(w, "log: %s (labbuild log %s)\n", ex.Log, ex.Target)
	}
	if ex.Action != "" {
		fmt.Fprintf(w, "would %s because:\n", ex.Action)
		for _, r := range ex.Reasons {
			fmt.Fprintf(w, "  - %s\n", r)
		}
		for _, ch := range ex.Changes {
			fmt.Fprintf(w, "      %s: %s → %s\n", ch.Field, ch.Old, ch.New)
		}
	}
	fmt.Fprintf(w, "inputs (value, then the digest the key uses):\n")
	labels := make([]string, 0, len(ex.Inputs))
	for l := range ex.Inputs {
		labels = append(labels, l)
	}
	sort.Slice(labels, func(a, b int) bool {
		if ra, rb := inputRank(labels[a]), inputRank(labels[b]); ra != rb {
			return ra < rb
		}
		return labels[a] < labels[b]
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, l := range labels {
		kind, name, _ := strings.Cut(l, ":")
		if name == "" {
			kind, name = "recipe", l
		}
		if kind == "dep" {
			kind = "upstream"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", kind, name, ex.Values[l], ex.Inputs[l])
	}
	return tw.Flush()
}

// inputRank orders explain's inputs: config, files, upstreams, then the recipe version/epoch.
func inputRank(l string) int {
	switch {
	case strings.HasPrefix(l, "config:"):
		return 0
	case strings.HasPrefix(l, "file:"):
		return 1
	case strings.HasPrefix(l, "dep:"):
		return 2
	}
	return 3
}

// printPlan prints a dry run's plan: one row per target (action, target, reasons), the changed
// config fields as old → new below it, then the plan's count (engine.PlanCount: the count line,
// and terraform's when External targets are in it). Actions are coloured on a terminal as
// Terraform colours them: build/create green, update and restore yellow/cyan, replace red.
func printPlan(c *cli, res *engine.Result) {
	color := c.color()
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	for _, p := range res.Plan {
		// tabwriter counts escape bytes as width: pad the action first, then colour it.
		fmt.Fprintf(tw, "%s\t%s\t%s\n", paint(color, actionColor(p.Action), fmt.Sprintf("%-7s", p.Action)), p.Target, p.Why())
		for _, ch := range p.Changes {
			fmt.Fprintf(tw, "\t\t  %s: %s → %s\n", ch.Field, ch.Old, ch.New)
		}
	}
	tw.Flush()
	count := res.PlanCount()
	fmt.Fprintf(c.stdout, "labbuild: %s\n", count)
	if tf := count.Terraform(); tf != "" { // External targets, in Terraform's words
		fmt.Fprintln(c.stdout, tf)
	}
}

// printPlanJSON prints a dry run's plan as JSON (-n --json): every item, then what could not
// be planned (engine.Result.Unplanned), which is part of the plan, never an empty list.
func printPlanJSON(c *cli, res *engine.Result) error {
	plan := append(append([]engine.PlanItem{}, res.Plan...), res.Unplanned()...)
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(plan)
}

func actionColor(a engine.Action) string {
	switch a {
	case engine.ActionBuild, engine.Create:
		return sgrGreen
	case engine.Update:
		return sgrYellow
	case engine.ActionRestore:
		return sgrCyan
	case engine.Replace, engine.ActionDestroy:
		return sgrRed
	}
	return ""
}
