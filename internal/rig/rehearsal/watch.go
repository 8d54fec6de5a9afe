package rehearsal

import (
	"context"
	"sync"
	"time"

	"github.com/labbuild/labbuild/targets/virt"
)

// Watch is the seam between labbuild's VMs and the rehearsal's nodes: it polls the libvirt
// domains <cluster>-<node> that labbuild defined (through the same go-libvirt client labbuild
// uses, targets/virt) and calls up when a domain becomes running and down when it stops
// running. The guest itself (software-emulated QEMU with the node's Ignition on fw_cfg) boots
// no OS here; the node's namespaces stand in for it. labbuild's code is not changed: it starts
// and stops real domains, and nothing tells it a rehearsal is watching.
type Watch struct {
	URI, Cluster string
	Nodes        []string
	// Up and Down run in the watch's goroutine, one call at a time.
	Up, Down func(node string)
	// Every is the poll interval (default 300 ms).
	Every time.Duration

	mu      sync.Mutex
	running map[string]bool
	errs    []error
}

// Run polls until ctx ends. A libvirt error is remembered (Errs) and the poll retried: labbuild
// itself may be restarting the daemon's objects.
func (w *Watch) Run(ctx context.Context) {
	every := w.Every
	if every == 0 {
		every = 300 * time.Millisecond
	}
	w.mu.Lock()
	w.running = map[string]bool{}
	w.mu.Unlock()
	for {
		w.poll()
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func (w *Watch) poll() {
	c, err := virt.Connect(w.URI)
	if err != nil {
		w.remember(err)
		return
	}
	defer c.Close()
	for _, n := range w.Nodes {
		_, st, found, err := c.Domain(w.Cluster + "-" + n)
		if err != nil {
			w.remember(err)
			continue
		}
		on := found && st == virt.DomainRunning
		w.mu.Lock()
		was := w.running[n]
		w.running[n] = on
		w.mu.Unlock()
		switch {
		case on && !was && w.Up != nil:
			w.Up(n)
		case !on && was && w.Down != nil:
			w.Down(n)
		}
	}
}

func (w *Watch) remember(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) < 20 {
		w.errs = append(w.errs, err)
	}
}

// Errs returns the libvirt errors seen so far (at most 20).
func (w *Watch) Errs() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]error(nil), w.errs...)
}
