package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/labbuild/labbuild/engine"
)

// runLog prints TARGET's last log: what its last run wrote, ending with FAILED: and the error
// when it failed. Logs live in OUT/.labbuild/log/<target>.log; each run replaces its target's.
func runLog(ctx context.Context, c *cli, args []string) error {
	if len(args) != 1 {
		return usagef("log takes one target (labbuild list shows them)")
	}
	p, o, err := c.load(nil)
	if err != nil {
		return err
	}
	if p.Target(args[0]) == nil {
		return usagef("log: %q is not a target (labbuild list shows them)", args[0])
	}
	path := engine.LogPath(o.OutDir, args[0])
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return usagef("log: %s has no log yet: it has not run in %s (a target restored from the store or up to date does not run)", args[0], o.OutDir)
	}
	if err != nil {
		return err
	}
	return writeOut(c.stdout, b)
}

// logStream is -v: every line a running target writes to its log, prefixed with its name, on
// the display (above the status area on a terminal).
type logStream struct {
	mu sync.Mutex
	w  io.Writer
}

// For returns the writer the engine tees target name's log into.
func (l *logStream) For(name string) io.Writer { return &prefixWriter{s: l, prefix: name + "| "} }

type prefixWriter struct {
	s      *logStream
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.s.mu.Lock()
		fmt.Fprintf(p.s.w, "%s%s\n", p.prefix, p.buf[:i])
		p.s.mu.Unlock()
		p.buf = p.buf[i+1:]
	}
}
