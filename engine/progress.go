package engine

import (
	"fmt"
	"time"
)

// Progress is what a running target is doing, reported through Step.Progress for the status
// display: the bytes of a transfer (the RHCOS image, registry layers) or a phase with its
// elapsed time against its limit (a cluster/* wait).
type Progress struct {
	// Phase says what the target does now, as a phrase: "downloading rhcos-418.qcow2.gz",
	// "waiting for every master Ready (2/3)".
	Phase string
	// Done and Total are the bytes transferred and expected; Total is 0 when unknown, and both
	// are 0 for a phase that is not a transfer.
	Done, Total int64
	// Elapsed is how long the phase has run as of this report (on the target's clock); Limit is
	// its timeout, 0 for none. The display adds the time since the report, so a wait that polls
	// every 15 s still shows its elapsed time ticking.
	Elapsed, Limit time.Duration
}

// Reporter receives one build's events and draws them: a status area on a terminal, plain lines
// elsewhere (the CLI's). Methods are called from the targets' goroutines, concurrently, and must
// return quickly; Progress may be called for every chunk a download reads. When Options.Reporter
// is nil the engine prints "[N/M] target" lines itself.
type Reporter interface {
	// Start: target name starts to run (restore false) or to be restored from the store. It is
	// the n-th to start of the m that will (m is known after the null-build fast path and
	// shrinks when a target turns out to be up to date, as ninja's count does).
	Start(name string, n, m int, restore bool)
	// Progress: a running target reported progress.
	Progress(name string, p Progress)
	// Finish: a started target ended with outcome (Built, Restored or Failed).
	Finish(name string, outcome Outcome)
}

// Progress reports what the running target is doing to the status display (see Progress). It
// does nothing without a display, and costs one interface call with one: the display samples.
func (s *Step) Progress(p Progress) {
	if s.reporter != nil {
		s.reporter.Progress(s.t.Name, p)
	}
}

// started notes that n starts to run or be restored, and shows it.
func (b *builder) started(n *node, restore bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n.started { // restored, then the probe said run: still the same one of M
		return
	}
	n.started = true
	b.done++
	if r := b.o.Reporter; r != nil {
		r.Start(n.t.Name, b.done, b.todo, restore)
		return
	}
	if b.o.Terminal {
		fmt.Fprintf(b.stdout, "\r[%d/%d] %s\x1b[K", b.done, b.todo, n.t.Name)
		b.status = true
	} else {
		fmt.Fprintf(b.stdout, "[%d/%d] %s\n", b.done, b.todo, n.t.Name)
	}
}

// ended is called once per visited target: a started one is finished on the display; one that
// turned out up to date (or was skipped) no longer counts among the targets that will run.
func (b *builder) ended(n *node) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !n.started {
		b.todo--
		return
	}
	if r := b.o.Reporter; r != nil {
		r.Finish(n.t.Name, n.outcome)
	}
}
