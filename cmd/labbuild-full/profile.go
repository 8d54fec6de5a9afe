package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/labbuild/labbuild/engine"
)

// Profiling a build, for scripts/bench-cold.sh and docs/performance.md; hidden, set by the
// environment so that no flag appears in --help or completion and a null build pays one
// Getenv each:
//
//	LABBUILD_CPUPROFILE=file  a pprof CPU profile of the whole process; each running target's
//	                          goroutine carries the pprof labels family=<family> and
//	                          target=<name> (go tool pprof -tagfocus family=pki)
//	LABBUILD_MEMPROFILE=file  a pprof allocation profile written at exit (-sample_index=alloc_space)
//	LABBUILD_TIMES=file       one line per target that ran: name, start and end in
//	                          milliseconds from the build's start, outcome (tab-separated);
//	                          then, when child processes ran, "# child processes: N ms CPU"
//	                          (user+sys of every reaped child, getrusage RUSAGE_CHILDREN):
//	                          what a CPU profile of labbuild cannot see, the MCO bootstrap
//	                          programs mco/* start
//
// Labels are set in the Reporter's Start, which the engine calls on the goroutine that then
// runs the target, and cleared in Finish on the same goroutine.

// startProfiling starts what the environment asks for; the returned func writes the files.
func startProfiling() (stop func()) {
	cpu, mem := os.Getenv("LABBUILD_CPUPROFILE"), os.Getenv("LABBUILD_MEMPROFILE")
	if cpu == "" && mem == "" {
		return func() {}
	}
	var cf *os.File
	if cpu != "" {
		f, err := os.Create(cpu)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "labbuild: LABBUILD_CPUPROFILE:", err)
		} else {
			cf = f
		}
	}
	return func() {
		if cf != nil {
			pprof.StopCPUProfile()
			cf.Close()
		}
		if mem != "" {
			f, err := os.Create(mem)
			if err == nil {
				err = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "labbuild: LABBUILD_MEMPROFILE:", err)
			}
		}
	}
}

// profiled wraps r (nil: no display) in a Reporter that labels and times targets when the
// environment asks for it; otherwise it returns r unchanged.
func profiled(r engine.Reporter) (engine.Reporter, func()) {
	times := os.Getenv("LABBUILD_TIMES")
	label := os.Getenv("LABBUILD_CPUPROFILE") != ""
	if times == "" && !label {
		return r, func() {}
	}
	p := &profReporter{next: r, label: label, t0: time.Now(), start: map[string]time.Duration{}}
	return p, func() {
		if times == "" {
			return
		}
		sort.Slice(p.lines, func(i, j int) bool { return p.lines[i].start < p.lines[j].start })
		var b strings.Builder
		for _, l := range p.lines {
			fmt.Fprintf(&b, "%s\t%d\t%d\t%s\n", l.name, l.start.Milliseconds(), l.end.Milliseconds(), l.outcome)
		}
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
			if ms := (ru.Utime.Nano() + ru.Stime.Nano()) / 1e6; ms > 0 {
				fmt.Fprintf(&b, "# child processes: %d ms CPU\n", ms)
			}
		}
		if err := os.WriteFile(times, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "labbuild: LABBUILD_TIMES:", err)
		}
	}
}

type profLine struct {
	name       string
	start, end time.Duration
	outcome    engine.Outcome
}

type profReporter struct {
	next  engine.Reporter
	label bool
	t0    time.Time

	mu    sync.Mutex
	start map[string]time.Duration
	lines []profLine
}

func (p *profReporter) Start(name string, n, m int, restore bool) {
	if p.label {
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("family", engine.Family(name), "target", name)))
	}
	p.mu.Lock()
	p.start[name] = time.Since(p.t0)
	p.mu.Unlock()
	if p.next != nil {
		p.next.Start(name, n, m, restore)
	}
}

func (p *profReporter) Progress(name string, pr engine.Progress) {
	if p.next != nil {
		p.next.Progress(name, pr)
	}
}

func (p *profReporter) Finish(name string, outcome engine.Outcome) {
	end := time.Since(p.t0)
	if p.label {
		pprof.SetGoroutineLabels(context.Background())
	}
	p.mu.Lock()
	p.lines = append(p.lines, profLine{name, p.start[name], end, outcome})
	p.mu.Unlock()
	if p.next != nil {
		p.next.Finish(name, outcome)
	}
}
