package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// benchProject writes n source files, builds the synthetic graph once, and then, once the
// sources are older than the racy window (a file changed within it is hashed again by every
// build: engine.RacyWindow), builds it again, which records them: the steady state a null build
// is measured in. It is called once per size, outside b.Run, so the wait is paid once.
func benchProject(b *testing.B, n int) (engine.Options, string) {
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	for i := 0; i < n; i++ {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("%d.txt", i)), []byte(fmt.Sprintf("source %d\n", i)), 0o644)
	}
	written := time.Now()
	o := engine.Options{OutDir: filepath.Join(dir, "out"), Jobs: 2}
	if _, err := engine.Build(context.Background(), withSynthetic(o, n, src)); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Until(written.Add(engine.RacyWindow + 100*time.Millisecond)))
	if _, err := engine.Build(context.Background(), withSynthetic(o, n, src)); err != nil {
		b.Fatal(err)
	}
	return o, src
}

// withSynthetic regenerates the targets as the CLI does on every run, so the measured cost
// includes declaring them.
func withSynthetic(o engine.Options, n int, src string) engine.Options {
	o.Targets, o.Values = synthetic.Graph(synthetic.Spec{N: n, Fields: 10, SrcDir: src}, synthetic.MapValues{})
	return o
}

// BenchmarkNullBuild measures a build with nothing to do: declare targets, read the state,
// stat every input and output, compute every key.
func BenchmarkNullBuild(b *testing.B) {
	for _, n := range []int{150, 1000, 10000} {
		o, src := benchProject(b, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r, err := engine.Build(context.Background(), withSynthetic(o, n, src))
				if err != nil || len(r.Built) != 0 {
					b.Fatalf("null build executed %d: %v", len(r.Built), err)
				}
			}
		})
	}
}

// BenchmarkIncrementalBuild measures a build after one source file of a target near the end of
// the graph changed: that target and its few dependents run.
func BenchmarkIncrementalBuild(b *testing.B) {
	for _, n := range []int{150, 1000, 10000} {
		o, src := benchProject(b, n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			edited := filepath.Join(src, fmt.Sprintf("%d.txt", n-60))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				os.WriteFile(edited, []byte(fmt.Sprintf("edit %d\n", i)), 0o644)
				r, err := engine.Build(context.Background(), withSynthetic(o, n, src))
				if err != nil || len(r.Built) == 0 {
					b.Fatalf("incremental build executed %d: %v", len(r.Built), err)
				}
			}
		})
	}
}
