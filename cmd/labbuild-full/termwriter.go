package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// termWriter is the status area's mpb.ConsoleWriter on the user's terminal. mpb's default
// writer finds the terminal only when its output is an *os.File; the CLI's stdout is wrapped
// (the front's stamp captures what is printed, stamp.go), so mpb saw no terminal: no cursor
// movement, every frame appended to the scrollback, rows wrapped at its default 80 columns
// (issue 27). termWriter draws into the wrapped stdout and learns the terminal from the real
// file descriptor.
//
// It also draws each frame differently from mpb's writer (vbauerster/cupwriter: cursor up,
// erase to the end of the screen, the rows). When the area sits at the top of the screen, that
// erase runs with the cursor at the top-left corner, which tmux (scroll-on-clear, on by default)
// and some other terminals take for a screen clear and push the whole screen into the
// scrollback: every frame then stays in the scrollback. Here the rows overwrite the old ones in
// place, each line ended by erase-to-end-of-line, and the erase below comes after the first row;
// an empty frame (the area closing) erases its old lines one by one.
//
// The size is read at start and again on SIGWINCH, which also redraws at once; frames are
// otherwise drawn every refreshEvery. mpb truncates each row to the width reported here
// (decorators end in "…"), so a narrow terminal never wraps a row: a wrapped row would put the
// cursor-up count of the next frame off by one per wrap and leave rows behind.
type termWriter struct {
	bytes.Buffer // what is to be drawn: lines printed above the area, then the frame's rows
	out          io.Writer
	fd           int
	lines        int // rows of the frame being drawn
	prev         int // rows of the frame on the screen

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
		out:     out,
		fd:      int(tty.Fd()),
		refresh: make(chan any, 1),
		winch:   make(chan os.Signal, 1),
		done:    make(chan struct{}),
	}
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

// Flush draws what was buffered over the frame on the screen. The row count is counted here:
// mpb's own (the argument) is short by one for each row it leaves out when the area is taller
// than the terminal (mpb v8.16.2 pState.render: a discarded row reads as empty and is
// subtracted again), which scrolled rows into the scrollback on a 10-row terminal.
func (t *termWriter) Flush(int) error {
	var b bytes.Buffer
	if t.prev > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\r", t.prev) // to the first row of the frame on the screen
	}
	body := t.Bytes()
	b.Write(bytes.ReplaceAll(body, []byte{'\n'}, []byte("\x1b[K\n")))
	switch {
	case bytes.IndexByte(body, '\n') >= 0:
		b.WriteString("\x1b[J") // what the old frame had below: the cursor is past one line
	case t.prev > 0:
		b.WriteString(strings.Repeat("\x1b[2K\n", t.prev))
		fmt.Fprintf(&b, "\x1b[%dA", t.prev)
	}
	t.Reset()
	t.prev, t.lines = t.lines, 0
	_, err := t.out.Write(b.Bytes())
	return err
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
