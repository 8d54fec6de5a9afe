package targets

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"

	"github.com/labbuild/labbuild/engine"
)

// recordFile is the output in which an External target (libvirt, haproxy/service, host/*,
// cluster/*) records what it made, so that its Probe can compare it with reality and its
// Destroy can undo exactly that (docs/how-it-works.md, "External state").
const recordFile = "record.json"

// readRecord decodes the JSON output name (recordFile; rhcos/image's image.json) that the
// target's last run wrote (its Prev output): ok false when there is none (never built, or
// forgotten); a record that does not parse is an error naming the target and the file.
func readRecord[T any](s *engine.Step, name string) (r T, ok bool, err error) {
	b, err := s.Prev(name)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		var zero T
		return zero, false, fmt.Errorf("%s: %s: %w", s.Target().Name, name, err)
	}
	return r, true, nil
}

// depRecord decodes the JSON output name of the upstream target dep (a volume's record for
// its VM, rhcos/image's image.json for a volume); an error names both targets and the file.
func depRecord[T any](s *engine.Step, dep, name string) (T, error) {
	var r T
	b, err := s.DepFile(dep, name)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		var zero T
		return zero, fmt.Errorf("%s: %s's %s: %w", s.Target().Name, dep, name, err)
	}
	return r, nil
}

// writeRecord writes v as the output name: indented JSON and a newline, so the same state
// gives the same bytes and the engine's early cutoff holds.
func writeRecord(s *engine.Step, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %s: %w", s.Target().Name, name, err)
	}
	return s.WriteFile(name, append(b, '\n'), 0o644)
}
