package main

import (
	"runtime/debug"
	"testing"

	"github.com/labbuild/labbuild/engine"
)

// recorder is a Reporter that counts calls.
type recorder struct{ starts, progress, finishes int }

func (r *recorder) Start(string, int, int, bool)     { r.starts++ }
func (r *recorder) Progress(string, engine.Progress) { r.progress++ }
func (r *recorder) Finish(string, engine.Outcome)    { r.finishes++ }

// TestBoundHeapOnWork: the collector turns on at the first target that starts, not before,
// and every event still reaches the display.
func TestBoundHeapOnWork(t *testing.T) {
	old := debug.SetGCPercent(-1)
	defer debug.SetGCPercent(old)
	rec := &recorder{}
	r := boundHeapOnWork(rec)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Fatalf("GOGC %d before any target started, want main's -1 (off)", got)
	}
	r.Start("pki/key/root", 1, 2, false)
	if got := debug.SetGCPercent(-1); got != coldBuildGOGC {
		t.Errorf("GOGC %d after a target started, want %d", got, coldBuildGOGC)
	}
	r.Progress("pki/key/root", engine.Progress{Phase: "x"})
	r.Finish("pki/key/root", engine.Built)
	r.Start("pki/ca/root", 2, 2, false)
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GOGC %d: the second start set it again, want once", got)
	}
	if *rec != (recorder{starts: 2, progress: 1, finishes: 1}) {
		t.Errorf("display saw %+v", *rec)
	}
	boundHeapOnWork(nil).Start("quiet", 1, 1, false) // -q: no display
}
