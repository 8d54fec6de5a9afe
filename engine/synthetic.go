package engine

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
)

// MapValues is a Values over a flat map from dotted path to JSON value; it backs synthetic
// graphs, which have no lab config.
type MapValues map[string]json.RawMessage

// Lookup implements Values.
func (m MapValues) Lookup(p string) ([]byte, bool) {
	v, ok := m[p]
	return v, ok
}

// SyntheticSpec shapes a synthetic graph: N targets in layers of 50, each depending on up to
// three targets of the layer before (graph construction in graph.Synthetic has the same
// shape), reading config field syn.v<i mod Fields> and, when SrcDir is set, the file
// <SrcDir>/<i>.txt through config field syn.src<i>.
type SyntheticSpec struct {
	N      int
	Fields int
	SrcDir string
	// Delay is slept in every Run, so that tests can kill a build in the middle.
	Delay time.Duration
}

// SyntheticName returns the name of synthetic target i: syn/t00042.
func SyntheticName(i int) string {
	var b [16]byte
	n := strconv.AppendInt(b[:0], int64(i), 10)
	out := append([]byte("syn/t"), "00000"[min(len(n), 5):]...)
	return string(append(out, n...))
}

// SyntheticDeps returns the indexes synthetic target i depends on.
func SyntheticDeps(i int) []int {
	const width = 50
	if i < width {
		return nil
	}
	layerStart := (i/width - 1) * width
	var out []int
	for k := 0; k < 3; k++ {
		d := layerStart + (i*7+k*13)%width
		if len(out) == 0 || out[len(out)-1] != d {
			out = append(out, d)
		}
	}
	return out
}

// Synthetic returns the targets and values of a synthetic graph. A target's output (out.txt)
// is its name, its config value lower-cased (so "A" and "a" give the same bytes: early
// cutoff), its source file, and a digest of each upstream output.
func Synthetic(spec SyntheticSpec, values MapValues) []*Target {
	if spec.Fields <= 0 {
		spec.Fields = 10
	}
	ts := make([]*Target, spec.N)
	fields := make([]string, spec.Fields)
	for k := range fields {
		fields[k] = "syn.v" + strconv.Itoa(k)
	}
	names := make([]string, spec.N)
	for i := range names {
		names[i] = SyntheticName(i)
	}
	for i := range ts {
		t := &Target{Name: names[i], Doc: "synthetic target", Version: 1}
		field := fields[i%spec.Fields]
		t.Reads = []string{field}
		if _, ok := values[field]; !ok {
			values[field] = json.RawMessage(`"x"`)
		}
		var src string
		if spec.SrcDir != "" {
			src = "syn.src" + strconv.Itoa(i)
			t.Files = []string{src}
			values[src] = strconv.AppendQuote(nil, filepath.Join(spec.SrcDir, strconv.Itoa(i)+".txt"))
		}
		for _, d := range SyntheticDeps(i) {
			t.Deps = append(t.Deps, names[d])
		}
		delay := spec.Delay
		t.Run = func(ctx context.Context, s *Step) error {
			if delay > 0 {
				s.Progress(Progress{Phase: "sleeping (--synthetic-delay)", Limit: delay}) // the status display's wait row
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			var b strings.Builder
			v, err := s.String(field)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s\n%s\n", s.Target().Name, strings.ToLower(v))
			if src != "" {
				c, err := s.File(src)
				if err != nil {
					return err
				}
				b.Write(c)
			}
			deps := append([]string(nil), s.Target().Deps...)
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
		ts[i] = t
	}
	return ts
}
