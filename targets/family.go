// Package targets declares labbuild's OpenShift targets, one file set per family (pki.go,
// ignition.go, cluster*.go, ...), from the lab config (package lab). Package engine runs
// them. Helpers two or more families share live in files named shared_*.go.
package targets

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// Family is a group of targets declared in one file, generated from the lab config.
type Family struct {
	// Name is the family word users type: "pki" builds every pki/* target.
	Name string
	// Doc is one line for `labbuild list`.
	Doc string
	// Targets returns the family's targets for the lab l. Per-node targets come from the
	// config's Nodes. fromConfig adapts a family that reads only the config.
	Targets func(l Lab) []*engine.Target
}

// fromConfig is the Targets of a family whose targets depend on the lab config alone (no run
// option).
func fromConfig(f func(c *lab.Config) []*engine.Target) func(Lab) []*engine.Target {
	return func(l Lab) []*engine.Target { return f(l.Config) }
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

// Lab is a lab config as the engine builds it (engine.Options.Config): the config's values
// (lab.Config's Lookup, Where, Source), the targets the registered families declare for it,
// and the run options of the command line that say how some of them act. A run option is not
// the lab's content and feeds no key: it changes how a target applies what it makes (a
// resize now or at the next power cycle), or what its Destroy removes, never what the target
// makes, so it is a field the family's declaration captures, not a declared read; the plan
// says what it does (libvirt/vm's reason names --restart).
type Lab struct {
	*lab.Config
	// Restart (`labbuild --restart`) makes libvirt/vm/<node> power-cycle a running VM whose
	// size (vcpus, memoryMiB) changed, so the new size takes effect now: the node is cordoned
	// and drained through the Kubernetes API first when the cluster answers, and uncordoned
	// once the VM runs again. Unset, a resize changes the persistent definition only ("takes
	// effect at the next power cycle").
	Restart bool
	// DestroyMirror (`labbuild destroy --mirror`) makes mirror/registry's Destroy delete the
	// mirror's storage too, which is shared by every lab of the host and kept otherwise.
	DestroyMirror bool
}

// Declare implements engine.Source: the registered families' targets for the lab, families in
// name order.
func (l Lab) Declare() []*engine.Target {
	fams := append([]Family(nil), families...)
	sort.Slice(fams, func(i, j int) bool { return fams[i].Name < fams[j].Name })
	var ts []*engine.Target
	for _, f := range fams {
		ts = append(ts, f.Targets(l)...)
	}
	return ts
}

// clusterDomain returns the cluster domain <cluster.name>.<cluster.baseDomain> (the suffix of
// api, api-int, *.apps and the node FQDNs); the target must declare both fields in Reads.
func clusterDomain(s *engine.Step) (string, error) {
	name, err := s.String(lab.ClusterName)
	if err != nil {
		return "", err
	}
	base, err := s.String(lab.ClusterBaseDomain)
	if err != nil {
		return "", err
	}
	return name + "." + base, nil
}

var _ engine.Orphaner = Lab{}

// Orphans implements engine.Orphaner: of a node removed from nodes:, `labbuild cluster` first
// drains it and deletes its Node object through the Kubernetes API (the orphan of
// cluster/install/<node>, clusterRemoveNode; it says so when the API does not answer), then
// its VM and its disk are destroyed from their records (record.json names the URI, kind and
// object) — `labbuild libvirt` does only the latter. So deleting worker-2 from lab.yaml
// removes exactly worker-2's Node, domain and volume; the network's records follow through
// libvirt/dns, which no longer lists it. Other families' leftovers stay recorded.
func (Lab) Orphans(names []string) []*engine.Target {
	rank := func(n string) int {
		switch {
		case strings.HasPrefix(n, "cluster/install/"):
			return 0 // the Node drained and deleted while its VM still runs
		case strings.HasPrefix(n, "libvirt/vm/"):
			return 1 // a domain before the disk it uses
		case strings.HasPrefix(n, "libvirt/volume/"):
			return 2
		}
		return -1
	}
	var out []*engine.Target
	for _, n := range names {
		switch r := rank(n); {
		case r == 0:
			out = append(out, clusterNodeOrphan(n))
		case r > 0:
			out = append(out, &engine.Target{Name: n, External: true, Destroy: lvDestroy, Run: lvNoRun})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i].Name) < rank(out[j].Name) })
	return out
}

// lvNoRun is the Run of an orphan, which is only ever destroyed.
func lvNoRun(ctx context.Context, s *engine.Step) error {
	return fmt.Errorf("%s: no longer declared by the config; only destroy applies", s.Target().Name)
}
