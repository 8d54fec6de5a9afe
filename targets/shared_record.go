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

// Outputs one family writes and another reads: rhcos/image's record (a node disk's
// libvirt/volume overlays the image it names), release/coreos-stream's qemu.json (the image
// rhcos/image fetches).

// rhcosRecordFile is rhcos/image's output: an rhcosRecord, where the verified image is.
const rhcosRecordFile = "image.json"

// rhcosRecord is rhcos/image's output image.json: where the verified image is.
type rhcosRecord struct {
	Path   string `json:"path"`   // the uncompressed qcow2 in the cache
	SHA256 string `json:"sha256"` // rhcos.imageSHA256, of the file as downloaded
	Size   int64  `json:"size"`   // bytes of Path, checked by the Probe
}

// rhcosLiveRecordFile is rhcos/live-iso's output: an rhcosLiveRecord, where the live ISO a
// single node boots first is (libvirt/vm/<master> puts it in the domain's CD-ROM).
const rhcosLiveRecordFile = "live-iso.json"

// rhcosLiveRecord is rhcos/live-iso's output live-iso.json.
type rhcosLiveRecord struct {
	Path   string `json:"path"`   // the ISO with the qemu platform in its karg areas, in the cache
	SHA256 string `json:"sha256"` // of the ISO as downloaded (the stream's, or rhcos.liveISOSHA256)
	Size   int64  `json:"size"`   // bytes of Path, checked by the Probe
	Kargs  string `json:"kargs"`  // the kernel arguments the ISO now boots with
}

// coreOSArtifact is one downloadable file of a stream: URL, sha256 of the file as published,
// and of its uncompressed content when it is compressed.
type coreOSArtifact struct {
	Location           string `json:"location"`
	SHA256             string `json:"sha256"`
	UncompressedSHA256 string `json:"uncompressed-sha256,omitempty"`
}

// coreOSImage is release/coreos-stream's qemu.json: the artifact rhcos/image fetches.
type coreOSImage struct {
	Stream  string `json:"stream"`
	Release string `json:"release"` // RHCOS build, "418.94.202501221327-0"
	coreOSArtifact
}
