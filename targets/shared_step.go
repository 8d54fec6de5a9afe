package targets

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
)

// Shared by several families: small reads and writes through the Step that are not any one
// family's (a release target's pull spec, the node-count classes, an integer value, rendered
// manifest files, a read list without duplicates, an error's text for a log line).

// depPullspec reads the digest pull spec an upstream release target wrote.
func depPullspec(s *engine.Step, dep string) (string, error) {
	b, err := s.DepFile(dep, "pullspec")
	if err != nil {
		return "", err
	}
	p := strings.TrimSpace(string(b))
	if p == "" {
		return "", fmt.Errorf("%s: %s wrote an empty pullspec (rebuild it: labbuild -B %s)", s.Target().Name, dep, dep)
	}
	return p, nil
}

// roleCountReads declares what the replica counts (topologies, schedulable masters, the
// install-config's controlPlane replicas) follow from: the derived master count and the
// worker count capped at 2 (DerivedMasters, DerivedWorkers), not every node's role, so that
// appending a third worker reruns none of the targets that read them.
func roleCountReads(*lab.Config) []string { return []string{lab.DerivedMasters, lab.DerivedWorkers} }

// roleCounts reads the master count and the capped worker count (0, 1, or 2 for "two or more")
// through the declared derived reads.
func roleCounts(s *engine.Step, _ []string) (masters, workers int, err error) {
	if masters, err = intValue(s, lab.DerivedMasters); err != nil {
		return 0, 0, err
	}
	if workers, err = intValue(s, lab.DerivedWorkers); err != nil {
		return 0, 0, err
	}
	return masters, workers, nil
}

// intValue reads an integer config value.
func intValue(s *engine.Step, p string) (int, error) {
	var v int
	err := s.Value(p, &v)
	return v, err
}

// writeManifests writes rendered manifest files, 0600 when they hold secrets.
func writeManifests(s *engine.Step, fs ...manifests.File) error {
	for _, f := range fs {
		mode := os.FileMode(0o644)
		if f.Secret {
			mode = 0o600
		}
		if err := s.WriteFile(f.Name, f.Data, mode); err != nil {
			return err
		}
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

// addReads appends to reads the paths of extra it does not hold yet (a path declared twice is
// an error).
func addReads(reads []string, extra ...string) []string {
	for _, e := range extra {
		if !slices.Contains(reads, e) {
			reads = append(reads, e)
		}
	}
	return reads
}

// depFiles returns upstream dep's outputs under prefix, by their names below it.
func depFiles(s *engine.Step, dep, prefix string) (map[string][]byte, error) {
	names, err := s.DepFiles(dep)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, n := range names {
		rel, ok := strings.CutPrefix(n, prefix)
		if !ok {
			continue
		}
		if out[rel], err = s.DepFile(dep, n); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %s wrote nothing under %s; rebuild it: labbuild -B %s", s.Target().Name, dep, prefix, dep)
	}
	return out, nil
}
