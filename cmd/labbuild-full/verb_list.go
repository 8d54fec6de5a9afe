package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"text/tabwriter"
)

// listItem is one target in `labbuild list --json`.
type listItem struct {
	Name     string   `json:"name"`
	Doc      string   `json:"doc"`
	Deps     []string `json:"deps"`
	Reads    []string `json:"reads"`
	Files    []string `json:"files"`
	External bool     `json:"external,omitempty"`
	Sticky   bool     `json:"sticky,omitempty"`
}

// runList lists the selected targets (default: all) sorted by name, with their doc lines or,
// with --json, their declarations.
func runList(ctx context.Context, c *cli, args []string) error {
	p, _, err := c.load(nil)
	if err != nil {
		return err
	}
	var ids []int
	if len(args) > 0 {
		if ids, err = p.Select(args); err != nil {
			return err
		}
	} else {
		for i := range p.Targets {
			ids = append(ids, i)
		}
	}
	sort.Slice(ids, func(a, b int) bool { return p.Targets[ids[a]].Name < p.Targets[ids[b]].Name })
	var items []listItem
	for _, i := range ids {
		t := p.Targets[i]
		items = append(items, listItem{Name: t.Name, Doc: t.Doc, Deps: nonNil(t.Deps), Reads: nonNil(t.Reads), Files: nonNil(t.Files), External: t.External, Sticky: t.Sticky})
	}
	if c.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if items == nil {
			items = []listItem{}
		}
		return enc.Encode(items)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	for _, it := range items {
		mark := ""
		if it.External {
			mark = " (external)"
		}
		fmt.Fprintf(tw, "%s\t%s%s\n", it.Name, it.Doc, mark)
	}
	return tw.Flush()
}
