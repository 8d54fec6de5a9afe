package main

import (
	"runtime/debug"
	"sync"

	"github.com/labbuild/labbuild/engine"
)

// coldBuildGOGC is the collector's setting (GOGC, percent) once a build runs targets.
//
// main turns the collector off below 1 GiB because a null build allocates a few tens of MB and
// exits: collecting would only cost time. A build that runs targets allocates as it goes (the
// payload's layers stream through buffers, every Ignition config is encoded and parsed back,
// each key and certificate is parsed), and with the collector off its peak RSS was the sum of
// every allocation: 263 MiB for the sample lab. Its live heap is ~15 MB, so from the first
// target that runs the collector works as Go's default does (a collection when the heap has
// doubled): the sample lab's cold build then peaks at ~38 MiB RSS for the same CPU, since
// reused pages cost no page faults. A soft limit alone (GOGC off, collect near N MiB) gave
// 76 MiB, and would collect without end if a build's live heap ever reached N.
const coldBuildGOGC = 100

// boundHeapOnWork wraps r (nil: no display) so that the first target that starts to run or be
// restored turns the collector on (coldBuildGOGC). A null build never starts one and keeps
// main's setting.
func boundHeapOnWork(r engine.Reporter) engine.Reporter {
	return &heapBound{next: r}
}

type heapBound struct {
	next engine.Reporter
	once sync.Once
}

func (h *heapBound) Start(name string, n, m int, restore bool) {
	h.once.Do(func() { debug.SetGCPercent(coldBuildGOGC) })
	if h.next != nil {
		h.next.Start(name, n, m, restore)
	}
}

func (h *heapBound) Progress(name string, p engine.Progress) {
	if h.next != nil {
		h.next.Progress(name, p)
	}
}

func (h *heapBound) Finish(name string, outcome engine.Outcome) {
	if h.next != nil {
		h.next.Finish(name, outcome)
	}
}
