package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/labbuild/labbuild/graph"
)

// Project is a resolved set of targets and their graph for one config.
type Project struct {
	Targets []*Target
	Graph   *graph.Graph
	values  Values
}

// Load generates the targets for o (o.Targets, or o.Config's), checks their declarations, and
// builds the graph. Declared config fields must exist in the values (o.Values, or o.Config).
func Load(o Options) (*Project, error) {
	var vals Values = o.Config
	if o.Values != nil {
		vals = o.Values
	}
	ts := o.Targets
	if ts == nil {
		if o.Config == nil {
			return nil, errors.New("engine: no targets: set Options.Config or Options.Targets")
		}
		ts = o.Config.Declare()
	}
	p := &Project{Targets: ts, values: vals}
	// A lab config's Lookup encodes the value afresh each time (canonical JSON); every declared
	// field is looked up here anyway, so keep the encodings for the build's keys (a synthetic
	// graph's Values is a map already: no copy of it).
	var memo memoValues
	if o.Values == nil && vals != nil {
		memo = memoValues{under: vals, m: map[string][]byte{}}
		p.values = memo
	}
	nodes := make([]graph.Node, len(ts))
	for i, t := range ts {
		if err := t.Check(); err != nil {
			return nil, err
		}
		if vals != nil {
			for _, rs := range [2][]string{t.Reads, t.Files} {
				for _, r := range rs {
					if _, seen := memo.m[r]; seen {
						continue
					}
					raw, ok := vals.Lookup(r)
					if !ok {
						return nil, fmt.Errorf("%s: declares config field %q, which the config does not have", t.Name, r)
					}
					if memo.m != nil {
						memo.m[r] = raw
					}
				}
			}
		}
		nodes[i] = graph.Node{Name: t.Name, Deps: t.Deps}
	}
	g, err := graph.New(nodes)
	if err != nil {
		return nil, err
	}
	p.Graph = g
	return p, nil
}

// Target returns the named target or nil.
func (p *Project) Target(name string) *Target {
	if id, ok := p.Graph.ID(name); ok {
		return p.Targets[id]
	}
	return nil
}

// Select returns the IDs named by goals (see Options.Goals), or a *UsageError naming an
// unknown goal and the closest names.
func (p *Project) Select(goals []string) ([]int, error) {
	var ids []int
	if len(goals) == 0 {
		for i, t := range p.Targets {
			if !t.External {
				ids = append(ids, i)
			}
		}
		return ids, nil
	}
	for _, goal := range goals {
		goal = strings.TrimSuffix(goal, "/")
		if id, ok := p.Graph.ID(goal); ok {
			ids = append(ids, id)
			continue
		}
		n := 0
		for i, t := range p.Targets {
			if strings.HasPrefix(t.Name, goal+"/") {
				ids = append(ids, i)
				n++
			}
		}
		if n == 0 {
			return nil, &UsageError{Msg: fmt.Sprintf("unknown target or family %q%s (labbuild list shows them)", goal, p.suggest(goal)), Goal: goal}
		}
	}
	return ids, nil
}

func (p *Project) suggest(goal string) string {
	var close []string
	for _, t := range p.Targets {
		if strings.Contains(t.Name, goal) || strings.Contains(goal, t.Family()+"/") && strings.HasPrefix(t.Name, t.Family()+"/") && len(close) < 3 && strings.Contains(t.Name, lastSeg(goal)) {
			close = append(close, t.Name)
		}
		if len(close) >= 3 {
			break
		}
	}
	if len(close) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(close, ", ") + "?"
}

func lastSeg(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// memoValues answers the declared fields from the encodings Load made, and anything else from
// the config. The map is written only by Load: lookups during the build need no lock.
type memoValues struct {
	under Values
	m     map[string][]byte
}

// Lookup implements Values.
func (v memoValues) Lookup(p string) ([]byte, bool) {
	if raw, ok := v.m[p]; ok {
		return raw, true
	}
	return v.under.Lookup(p)
}

// Where implements FieldSource when the wrapped values do, so wrapping a lab config for its
// encodings keeps messages naming the -f file and line ("bad.yaml:3"), not "lab.yaml".
func (v memoValues) Where(field string) string { return where(v.under, field) }

// Source implements FieldSource when the wrapped values do ("lab.yaml" otherwise).
func (v memoValues) Source() string {
	if fs, ok := v.under.(FieldSource); ok {
		return fs.Source()
	}
	return "lab.yaml"
}
