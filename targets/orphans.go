package targets

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/labbuild/labbuild/engine"
)

var _ engine.Orphaner = (*Config)(nil)

// Orphans implements engine.Orphaner: the libvirt objects of a node removed from nodes: — its
// VM, then its disk — are destroyed from their records (record.json names the URI, kind and
// object), so `labbuild libvirt` or `labbuild cluster` after deleting worker-2 from lab.yaml
// removes exactly worker-2's domain and volume; the network's records follow through
// libvirt/dns, which no longer lists it. Other families' leftovers stay recorded.
func (c *Config) Orphans(names []string) []*Target {
	rank := func(n string) int {
		switch {
		case strings.HasPrefix(n, "libvirt/vm/"):
			return 0 // a domain before the disk it uses
		case strings.HasPrefix(n, "libvirt/volume/"):
			return 1
		}
		return -1
	}
	var out []*Target
	for _, n := range names {
		if rank(n) >= 0 {
			out = append(out, &Target{Name: n, External: true, Destroy: lvDestroy, Run: lvNoRun})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return rank(out[i].Name) < rank(out[j].Name) })
	return out
}

// lvNoRun is the Run of an orphan, which is only ever destroyed.
func lvNoRun(ctx context.Context, s *Step) error {
	return fmt.Errorf("%s: no longer declared by the config; only destroy applies", s.Target().Name)
}
