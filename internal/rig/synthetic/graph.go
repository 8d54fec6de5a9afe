// Package synthetic is the rig's synthetic graph: N targets in layers, reading config fields
// and source files, for the engine's tests and benchmarks, the CLI's crash and script tests, and
// the benchmark build (go build -tags bench ./cmd/labbuild-full; make bench-ninja). No production
// binary links it: the product imports nothing of the rig (TestRoomImports, and
// cmd/labbuild-full's TestNoRigInProduct).
package synthetic

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/labbuild/labbuild/engine"
)

// MapValues is an engine.Values over a flat map from dotted path to JSON value; it backs
// synthetic graphs, which have no lab config.
type MapValues map[string]json.RawMessage

// Lookup implements engine.Values.
func (m MapValues) Lookup(p string) ([]byte, bool) {
	v, ok := m[p]
	return v, ok
}

// Spec shapes a synthetic graph: N targets in layers of 50, each depending on up to three
// targets of the layer before (graph construction in graph.Synthetic has the same shape),
// reading config field syn.v<i mod Fields> and, when SrcDir is set, the file <SrcDir>/<i>.txt
// through config field syn.src<i>.
type Spec struct {
	N      int
	Fields int
	SrcDir string
	// Delay is slept in every Run, so that tests can kill a build in the middle.
	Delay time.Duration
}

// Name returns the name of synthetic target i: syn/t00042.
func Name(i int) string {
	var b [24]byte
	return string(appendName(b[:0], i))
}

func appendName(b []byte, i int) []byte {
	var d [20]byte
	n := strconv.AppendInt(d[:0], int64(i), 10)
	b = append(append(b, "syn/t"...), "00000"[min(len(n), 5):]...)
	return append(b, n...)
}

// Deps returns the indexes synthetic target i depends on.
func Deps(i int) []int { return deps(nil, i) }

func deps(out []int, i int) []int {
	const width = 50
	if i < width {
		return out
	}
	layerStart := (i/width - 1) * width
	for k := 0; k < 3; k++ {
		d := layerStart + (i*7+k*13)%width
		if len(out) == 0 || out[len(out)-1] != d {
			out = append(out, d)
		}
	}
	return out
}

// Targets returns the targets of a synthetic graph and adds the values they read to values
// (the fields' defaults, and each source file's path). A target's output (out.txt) is its
// name, its config value lower-cased (so "A" and "a" give the same bytes: early cutoff), its
// source file, and a digest of each upstream output.
func Targets(spec Spec, values MapValues) []*engine.Target {
	ts, sv := Graph(spec, values)
	for i := 0; spec.SrcDir != "" && i < spec.N; i++ {
		f := ts[i].Files[0]
		values[f], _ = sv.Lookup(f)
	}
	return ts
}

// Graph is Targets without a map entry per target: the returned Values answers fields from
// fields (to which the defaults are added) and the source paths (syn.src<i>) from one buffer. Targets, names and dependency lists are carved from a few large allocations,
// as ninja's parser does for a build.ninja: declaring 100,000 targets costs a few MB.
func Graph(spec Spec, fields MapValues) ([]*engine.Target, engine.Values) {
	if spec.Fields <= 0 {
		spec.Fields = 10
	}
	reads := make([]string, spec.Fields)
	for k := range reads {
		reads[k] = "syn.v" + strconv.Itoa(k)
		if _, ok := fields[reads[k]]; !ok {
			fields[reads[k]] = json.RawMessage(`"x"`)
		}
	}
	// Names: one string, sliced.
	nb := make([]byte, 0, 12*spec.N) // buffers sized up front: growing copies them
	ends := make([]int32, spec.N)
	for i := range ends {
		nb = appendName(nb, i)
		ends[i] = int32(len(nb))
	}
	all := unsafe.String(unsafe.SliceData(nb), len(nb)) // nb is never written again
	names := make([]string, spec.N)
	for i := range names {
		start := int32(0)
		if i > 0 {
			start = ends[i-1]
		}
		names[i] = all[start:ends[i]]
	}
	sv := &values{fields: fields}
	var files []string
	if spec.SrcDir != "" {
		// Source fields and their values: one string and one buffer.
		var q, pb []byte
		dir := filepath.Clean(spec.SrcDir)
		if dir == "/" {
			dir = "" // filepath.Join("/", "0.txt") is "/0.txt"
		}
		fb := make([]byte, 0, 14*spec.N)
		sv.src = make([]byte, 0, (len(spec.SrcDir)+16)*spec.N)
		sv.srcOff = make([]int32, spec.N+1)
		for i := 0; i < spec.N; i++ {
			fb = strconv.AppendInt(append(fb, "syn.src"...), int64(i), 10)
			ends[i] = int32(len(fb))
			// (AppendQuote grows its buffer to the exact size: quote into a scratch, then append.)
			pb = append(strconv.AppendInt(append(append(pb[:0], dir...), '/'), int64(i), 10), ".txt"...)
			q = strconv.AppendQuote(q[:0], unsafe.String(unsafe.SliceData(pb), len(pb))) // filepath.Join(dir, i+".txt")
			sv.src = append(sv.src, q...)
			sv.srcOff[i+1] = int32(len(sv.src))
		}
		fall := unsafe.String(unsafe.SliceData(fb), len(fb))
		files = make([]string, spec.N)
		for i := range files {
			start := int32(0)
			if i > 0 {
				start = ends[i-1]
			}
			files[i] = fall[start:ends[i]]
		}
	}
	ndeps := 0
	var di [3]int
	for i := 0; i < spec.N; i++ {
		ndeps += len(deps(di[:0], i))
	}
	depNames := make([]string, 0, ndeps)
	slab := make([]engine.Target, spec.N)
	ts := make([]*engine.Target, spec.N)
	run := runFunc(spec.Delay)
	for i := range ts {
		t := &slab[i]
		t.Name, t.Doc, t.Version, t.Run = names[i], "synthetic target", 1, run
		k := i % spec.Fields
		t.Reads = reads[k : k+1 : k+1]
		if files != nil {
			t.Files = files[i : i+1 : i+1]
		}
		start := len(depNames)
		for _, d := range deps(di[:0], i) {
			depNames = append(depNames, names[d])
		}
		t.Deps = depNames[start:len(depNames):len(depNames)]
		ts[i] = t
	}
	return ts, sv
}

// values answers a synthetic graph's fields from a map and its source paths
// (syn.src<i>) from one buffer of quoted JSON strings.
type values struct {
	fields MapValues
	src    []byte
	srcOff []int32
}

// Lookup implements engine.Values.
func (v *values) Lookup(p string) ([]byte, bool) {
	if rest, ok := strings.CutPrefix(p, "syn.src"); ok && v.srcOff != nil {
		if i, err := strconv.Atoi(rest); err == nil && i >= 0 && i+1 < len(v.srcOff) {
			return v.src[v.srcOff[i]:v.srcOff[i+1]:v.srcOff[i+1]], true
		}
	}
	raw, ok := v.fields[p]
	return raw, ok
}

// runFunc is every synthetic target's Run: it reads what the target declares.
func runFunc(delay time.Duration) func(ctx context.Context, s *engine.Step) error {
	return func(ctx context.Context, s *engine.Step) error {
		if delay > 0 {
			s.Progress(engine.Progress{Phase: "sleeping (--synthetic-delay)", Limit: delay}) // the status display's wait row
			select {
			case <-time.After(delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		t := s.Target()
		var b strings.Builder
		v, err := s.String(t.Reads[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s\n%s\n", t.Name, strings.ToLower(v))
		if len(t.Files) > 0 {
			c, err := s.File(t.Files[0])
			if err != nil {
				return err
			}
			b.Write(c)
		}
		deps := append([]string(nil), t.Deps...)
		sort.Strings(deps)
		for _, d := range deps {
			c, err := s.DepFile(d, "out.txt")
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s %x\n", d, sha256.Sum256(c))
		}
		return s.WriteFile("out.txt", []byte(b.String()), 0o644)
	}
}
