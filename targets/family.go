// Package targets declares labbuild's OpenShift targets, one file per family (pki.go,
// ignition.go, ...), and the lab config they read. Package engine runs them.
package targets

import (
	"sort"

	"github.com/labbuild/labbuild/engine"
)

// Family is a group of targets declared in one file, generated from the lab config.
type Family struct {
	// Name is the family word users type: "pki" builds every pki/* target.
	Name string
	// Doc is one line for `labbuild list`.
	Doc string
	// Targets returns the family's targets for config c. Per-node targets come from c.Nodes.
	Targets func(c *Config) []*engine.Target
}

var families []Family

// Register adds a family; each family file calls it from init. Registering a name twice panics
// (a programming error caught by every test).
func Register(f Family) {
	for _, g := range families {
		if g.Name == f.Name {
			panic("targets: family " + f.Name + " registered twice")
		}
	}
	families = append(families, f)
}

// Declare implements engine.Source: the registered families' targets for c, families in name
// order.
func (c *Config) Declare() []*engine.Target {
	fams := append([]Family(nil), families...)
	sort.Slice(fams, func(i, j int) bool { return fams[i].Name < fams[j].Name })
	var ts []*engine.Target
	for _, f := range fams {
		ts = append(ts, f.Targets(c)...)
	}
	return ts
}

// clusterDomain returns the cluster domain <cluster.name>.<cluster.baseDomain> (the suffix of
// api, api-int, *.apps and the node FQDNs); the target must declare both fields in Reads.
func clusterDomain(s *engine.Step) (string, error) {
	name, err := s.String("cluster.name")
	if err != nil {
		return "", err
	}
	base, err := s.String("cluster.baseDomain")
	if err != nil {
		return "", err
	}
	return name + "." + base, nil
}
