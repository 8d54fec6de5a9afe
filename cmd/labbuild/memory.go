package main

import (
	"runtime/debug"
	"sync"

	"github.com/labbuild/labbuild/targets"
)

// coldBuildHeap is the soft limit on the Go heap once a build runs targets (bytes).
//
// main turns the collector off below 1 GiB because a null build allocates a few tens of MB and
// exits: collecting would only cost time. A build that runs targets allocates as it goes (the
// payload's layers stream through buffers, every Ignition config is encoded and parsed back,
// each key and certificate is parsed), and with the collector off its peak RSS was the sum of
// every allocation: 263 MiB for the sample lab. From the first target that runs, the heap is
// held near this limit instead; the live heap of a cold build is a few tens of MB, so the
// collector runs only a few times (GOGC stays off: no collection while below the limit).
const coldBuildHeap = 64 << 20

// boundHeapOnWork wraps r (nil: no display) so that the first target that starts to run or be
// restored sets the heap limit to coldBuildHeap. A null build never starts one and keeps
// main's setting.
func boundHeapOnWork(r targets.Reporter) targets.Reporter {
	return &heapBound{next: r}
}

type heapBound struct {
	next targets.Reporter
	once sync.Once
}

func (h *heapBound) Start(name string, n, m int, restore bool) {
	h.once.Do(func() { debug.SetMemoryLimit(coldBuildHeap) })
	if h.next != nil {
		h.next.Start(name, n, m, restore)
	}
}

func (h *heapBound) Progress(name string, p targets.Progress) {
	if h.next != nil {
		h.next.Progress(name, p)
	}
}

func (h *heapBound) Finish(name string, outcome targets.Outcome) {
	if h.next != nil {
		h.next.Finish(name, outcome)
	}
}
