package targets

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/labbuild/labbuild/engine"
)

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
