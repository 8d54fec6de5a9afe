//go:build bench

package main

import (
	"os"
	"runtime"
	"runtime/pprof"
)

// The benchmark build (go build -tags bench, make bench-ninja) has the synthetic graph's flags,
// and writes a CPU profile of the whole process after main starts to $LABBUILD_CPUPROFILE and
// a heap profile at exit to $LABBUILD_MEMPROFILE (pprof; several runs' profiles merge).
func init() {
	withSynthetic = true
	if p := os.Getenv("LABBUILD_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil && pprof.StartCPUProfile(f) == nil {
			atExit = append(atExit, pprof.StopCPUProfile)
		}
	}
	if p := os.Getenv("LABBUILD_MEMPROFILE"); p != "" {
		runtime.MemProfileRate = 4096
		atExit = append(atExit, func() {
			runtime.GC() // the profile is published by a collection; main turned them off
			if f, err := os.Create(p); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		})
	}
}
