package main

import (
	"context"
	"encoding/json"
	"io"

	"github.com/labbuild/labbuild/engine"
)

// What several verbs share: the lab's targets as loaded, their states from a dry run, and the
// JSON encoding every --json output uses.

// load is engine.Load of c.options(goals): the lab's targets as a verb sees them before it
// plans or builds anything. o is returned with the error too (its OutDir, for messages).
func (c *cli) load(goals []string) (*engine.Project, engine.Options, error) {
	o, err := c.options(goals)
	if err != nil {
		return nil, o, err
	}
	p, err := engine.Load(o)
	return p, o, err
}

// allTargets returns every target's name in the project's order (graph --all, status --json
// with no goals).
func (c *cli) allTargets() ([]string, error) {
	p, _, err := c.load(nil)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(p.Targets))
	for _, t := range p.Targets {
		names = append(names, t.Name)
	}
	return names, nil
}

// status computes, without building, each selected target's state for graph colouring and
// explain: a dry run.
func (c *cli) status(ctx context.Context, goals []string, inputs bool) (*engine.Project, *engine.Result, engine.Options, error) {
	p, o, err := c.load(goals)
	if err != nil {
		return nil, nil, o, err
	}
	o.Targets = p.Targets
	if err := c.releaseGate(ctx, &o, true); err != nil {
		return nil, nil, o, err
	}
	// Explain (inputs) turns off the null-build fast path, which skips computing them.
	// KeepGoing: a target that cannot be evaluated blocks its dependents, not every other target.
	// The dry run's errors (why a target is blocked) are kept for explain.
	c.dryErr.Reset()
	o.DryRun, o.KeepGoing, o.Explain, o.Stdout, o.Stderr = true, true, inputs, io.Discard, &c.dryErr
	res, err := engine.Build(ctx, o)
	if res == nil && err != nil {
		return nil, nil, o, err
	}
	return p, res, o, nil
}

func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
