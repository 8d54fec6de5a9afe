package main

import (
	"bytes"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/vbauerster/cupwriter"
	"golang.org/x/sys/unix"
)

// termWriter is the status area's mpb.ConsoleWriter on the user's terminal. mpb's default
// writer finds the terminal only when its output is an *os.File; the CLI's stdout is wrapped
// (the front's stamp captures what is printed, stamp.go), so mpb saw no terminal: no cursor
// movement, every frame appended to the scrollback, rows wrapped at its default 80 columns
// (issue 27). Here cupwriter (mpb's own writer) draws into the wrapped stdout and learns the
// terminal from the real file descriptor.
//
// The size is read at start and again on SIGWINCH, which also redraws at once; frames are
// otherwise drawn every refreshEvery. mpb truncates each row to the width reported here
// (decorators end in "…"), so a narrow terminal never wraps a row: a wrapped row would put the
// cursor-up count of the next frame off by one per wrap and leave rows behind.
type termWriter struct {
	*cupwriter.Writer
	fd    int
	lines int // newlines in the frame being drawn

	mu   sync.Mutex
	w, h int

	refresh chan any // mpb.WithManualRefresh: a tick or a resize
	winch   chan os.Signal
	done    chan struct{}
	once    sync.Once
}

// refreshEvery is the status area's frame interval: ninja's smart terminal redraws per event,
// docker's progress every 100 ms; 150 ms keeps a 2-core build's drawing under 1% of a core.
const refreshEvery = 150 * time.Millisecond

func newTermWriter(out io.Writer, tty *os.File) *termWriter {
	t := &termWriter{
		Writer:  cupwriter.New(out, false),
		fd:      int(tty.Fd()),
		refresh: make(chan any, 1),
		winch:   make(chan os.Signal, 1),
		done:    make(chan struct{}),
	}
	t.SetTermFd(t.fd)
	t.readSize()
	signal.Notify(t.winch, syscall.SIGWINCH)
	go t.loop()
	return t
}

func (t *termWriter) loop() {
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-t.winch:
			t.readSize()
		case <-tick.C:
		}
		select {
		case t.refresh <- nil:
		default: // a frame is already pending
		}
	}
}

func (t *termWriter) readSize() {
	ws, err := unix.IoctlGetWinsize(t.fd, unix.TIOCGWINSZ)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil || ws.Col == 0 || ws.Row == 0 {
		t.w, t.h = 80, 24 // a pty nobody sized: the VT100's
		return
	}
	t.w, t.h = int(ws.Col), int(ws.Row)
}

// ReadFrom takes one row of a frame (mpb draws rows with ReadFrom, lines above the area with
// Write) and counts its lines.
func (t *termWriter) ReadFrom(r io.Reader) (int64, error) {
	before := t.Len()
	n, err := t.Buffer.ReadFrom(r)
	t.lines += bytes.Count(t.Bytes()[before:], []byte{'\n'})
	return n, err
}

// Flush writes the frame and queues the cursor-up-and-erase that the next frame starts with,
// over as many lines as the frame really has. mpb's own count (the argument) is short by one
// for each row it leaves out when the area is taller than the terminal (mpb v8.16.2
// pState.render: a discarded row reads as empty and is subtracted again), which scrolled rows
// into the scrollback on a 10-row terminal.
func (t *termWriter) Flush(int) error {
	n := t.lines
	t.lines = 0
	return t.Writer.Flush(n)
}

// IsTerminal is true: a termWriter is made only for a terminal.
func (t *termWriter) IsTerminal() bool { return true }

// GetTermSize is the area's size in cells: one column short of the terminal, so a full row does
// not leave the cursor in the last column (where terminals differ on when they wrap), and one
// row short, so the line the cursor rests on after the area stays on the screen; a taller area
// would scroll its first row into the scrollback, where the next frame cannot erase it.
func (t *termWriter) GetTermSize() (width, height int, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(t.w-1, 1), max(t.h-1, 1), nil
}

// stop ends the refresh loop and SIGWINCH's delivery; mpb has drawn its last frame.
func (t *termWriter) stop() {
	t.once.Do(func() {
		signal.Stop(t.winch)
		close(t.done)
	})
}
