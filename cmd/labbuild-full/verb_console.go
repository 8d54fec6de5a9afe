package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/labbuild/labbuild/targets"
	"github.com/labbuild/labbuild/targets/virt"
)

// consoleEscape is the byte that leaves the console: Ctrl-] (GS), as virsh console and telnet.
const consoleEscape = 0x1d

// runConsole is labbuild console NODE: the VM's serial console over the libvirt stream, as
// virsh console, left with Ctrl-].
func runConsole(ctx context.Context, c *cli, args []string) error {
	if len(args) != 1 {
		return usagef("console: name one node (labbuild console master-0)")
	}
	cfg, n, err := c.labNode("console", args[0])
	if err != nil {
		return err
	}
	conn, err := virt.Connect(cfg.NodeURI(n.Name)) // the node's host (libvirt.uri on a one-host lab)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	defer conn.Close()
	dom := targets.DomainName(cfg.Cluster.Name, n.Name)
	fd := int(os.Stdin.Fd())
	if term.IsTerminal(fd) {
		// Raw: every key goes to the guest (Ctrl-C included), Ctrl-] reaches us as a byte.
		if old, err := term.MakeRaw(fd); err == nil {
			defer term.Restore(fd, old)
		}
	}
	fmt.Fprintf(c.stderr, "Connected to domain %s (%s)\r\nEscape character is ^] (Ctrl + ])\r\n", dom, n.Name)
	err = conn.Console(ctx, dom, &escapeReader{r: os.Stdin}, c.stdout, false)
	fmt.Fprint(c.stderr, "\r\n")
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}

// escapeReader passes r through until the escape byte, then ends (io.EOF).
type escapeReader struct {
	r    io.Reader
	done bool
}

func (e *escapeReader) Read(p []byte) (int, error) {
	if e.done {
		return 0, io.EOF
	}
	n, err := e.r.Read(p)
	if i := bytes.IndexByte(p[:n], consoleEscape); i >= 0 {
		e.done = true
		if i == 0 {
			return 0, io.EOF
		}
		return i, nil
	}
	return n, err
}
