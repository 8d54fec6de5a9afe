package virt

import (
	"context"
	"errors"
	"fmt"
	"io"

	golibvirt "github.com/digitalocean/go-libvirt"
)

// Console attaches to the first console of the running domain name over the libvirt stream
// (REMOTE_PROC_DOMAIN_OPEN_CONSOLE, what virsh console uses), copying the guest's output to out
// and in to the guest, until in ends (the caller's escape key), ctx is done or the stream closes
// (the guest powered off). force takes the console over from another client (virsh console
// --force). The connection is closed on return: a console stream cannot be left half-open.
func (c *Conn) Console(ctx context.Context, name string, in io.Reader, out io.Writer, force bool) error {
	h, err := c.l.DomainLookupByName(name)
	if notFound(err) {
		return fmt.Errorf("domain %s: not defined at %s", name, c.uri)
	}
	if err != nil {
		return fmt.Errorf("look up domain %s: %w", name, err)
	}
	st, _, err := c.l.DomainGetState(h, 0)
	if err != nil {
		return fmt.Errorf("domain %s: %w", name, err)
	}
	if DomainState(st) != DomainRunning {
		return fmt.Errorf("domain %s is not running (state %d): start it (labbuild cluster) to use its console", name, st)
	}
	var flags uint32
	if force {
		flags = uint32(golibvirt.DomainConsoleForce)
	}
	inEnded := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- c.l.DomainOpenConsoleBidirectional(h, nil, &endSignal{r: in, ended: inEnded}, out, flags)
	}()
	select {
	case err := <-done:
		c.l.Disconnect()
		if err != nil && !errors.Is(err, golibvirt.ErrInterrupted) {
			return fmt.Errorf("console of %s: %w", name, err)
		}
		return nil
	case <-inEnded:
	case <-ctx.Done():
	}
	// Leaving: closing the connection ends the stream on both sides, as virsh's abort does.
	c.l.Disconnect()
	<-done
	return ctx.Err()
}

// endSignal is in, closing ended when it returns an error (io.EOF: the user left).
type endSignal struct {
	r     io.Reader
	ended chan struct{}
	once  bool
}

func (e *endSignal) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && !e.once {
		e.once = true
		close(e.ended)
	}
	return n, err
}
