package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// The child process of the terminal tests is this test binary run as labbuild (crash_test.go's
// LABBUILD_TEST_CHILD) on the synthetic graph, with the download and wait of progressTargets
// added from the loopback server LABBUILD_TEST_PROGRESS_URL names. A variable initializer: it
// must run before crash_test.go's init starts the child's build.
var _ = func() bool {
	if u := os.Getenv("LABBUILD_TEST_PROGRESS_URL"); u != "" {
		syntheticExtra = progressTargets(u)
	}
	return true
}()

// vtRun is one build on a real pty read by a VT emulator: the screens it showed while the
// build ran, and at the end its scrollback and screen.
type vtRun struct {
	raw     string
	screens []string // the emulated screen after each read, deduplicated
	final   []string // scrollback lines, then the screen's, right-trimmed
	// topLeftErases counts erase-below sequences sent with the cursor at the top-left corner.
	topLeftErases int
}

// runOnVT runs `labbuild --synthetic 40` with the download and the wait on a pty of cols×rows,
// as the front runs it (LABBUILD_STAMP=1: stdout is wrapped to be captured), under TERM=term.
// With resize set, the terminal is resized to it (and the child gets SIGWINCH) once the
// first status row shows.
func runOnVT(t *testing.T, cols, rows int, term string, jobs int, resize *[2]int) vtRun {
	t.Helper()
	srv := throttled(t, 256<<10)
	dir := synthDir(t, 40)
	cmd := exec.Command(os.Args[0], "-C", dir, "--synthetic", "40", "--synthetic-delay", "150ms", "-j", fmt.Sprint(jobs))
	cmd.Env = append(os.Environ(), "LABBUILD_TEST_CHILD=1", "LABBUILD_STAMP=1", "LABBUILD_TEST_PROGRESS_URL="+srv.URL, "TERM="+term)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	emu := vt.NewEmulator(cols, rows)
	emu.SetScrollbackSize(10000)
	go io.Copy(io.Discard, emu) // the emulator's replies to queries, if any

	var run vtRun
	var raw bytes.Buffer
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		resized := resize == nil
		for {
			n, err := ptmx.Read(b)
			if n > 0 {
				mu.Lock()
				raw.Write(b[:n])
				// Every erase-below must leave the top-left corner alone: tmux (scroll-on-clear)
				// and others take an erase from there for a screen clear and push the screen into
				// the scrollback, where the frame would stay.
				chunk := b[:n]
				for {
					i := bytes.Index(chunk, []byte("\x1b[J"))
					if i < 0 {
						break
					}
					emu.Write(chunk[:i])
					if p := emu.CursorPosition(); p.X == 0 && p.Y == 0 {
						run.topLeftErases++
					}
					emu.Write(chunk[i : i+3])
					chunk = chunk[i+3:]
				}
				emu.Write(chunk)
				s := emu.String()
				if len(run.screens) == 0 || run.screens[len(run.screens)-1] != s {
					run.screens = append(run.screens, s)
				}
				if !resized && strings.Contains(s, "] syn/") {
					// As a terminal does: its grid first, then the kernel's SIGWINCH to the child.
					emu.Resize(resize[0], resize[1])
					if err := pty.Setsize(ptmx, &pty.Winsize{Cols: uint16(resize[0]), Rows: uint16(resize[1])}); err != nil {
						t.Error(err)
					}
					resized = true
				}
				mu.Unlock()
			}
			if err != nil { // EIO once the child has exited and closed the slave
				return
			}
		}
	}()
	werr := cmd.Wait()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the pty's output did not end")
	}
	mu.Lock()
	defer mu.Unlock()
	run.raw = raw.String()
	if werr != nil {
		t.Fatalf("labbuild on the pty: %v\n%q", werr, run.raw)
	}
	for _, l := range emu.Scrollback().Lines() {
		run.final = append(run.final, strings.TrimRight(l.String(), " "))
	}
	for _, l := range strings.Split(emu.String(), "\n") {
		run.final = append(run.final, strings.TrimRight(l, " "))
	}
	return run
}

var (
	statusLabel = regexp.MustCompile(`^\[\d+/\d+\] \S+`)
	summaryLine = regexp.MustCompile(`^labbuild: \d+ built, \d+ restored, \d+ up to date in [0-9.]+s$`)
)

// checkClean checks what a person sees once the build is over: each target's [N/M] line at
// most once across the scrollback and the screen, the summary line, and nothing after it.
func checkClean(t *testing.T, r vtRun) {
	t.Helper()
	seen := map[string]int{}
	summary := -1
	for i, l := range r.final {
		if m := statusLabel.FindString(l); m != "" {
			seen[m]++
			if seen[m] == 2 {
				t.Errorf("%q appears twice in the scrollback and screen", m)
			}
		}
		if strings.HasPrefix(l, "labbuild: ") {
			// The summary line, wrapped on a narrow terminal as any printed line is (a wrap
			// at a space leaves the space at the end of a line, trimmed above).
			for j := i; j < min(i+3, len(r.final)); j++ {
				if summaryLine.MatchString(strings.Join(r.final[i:j+1], "")) || summaryLine.MatchString(strings.Join(r.final[i:j+1], " ")) {
					summary = j
				}
			}
		}
	}
	if summary < 0 {
		t.Fatalf("no summary line in the scrollback and screen:\n%s", strings.Join(r.final, "\n"))
	}
	for _, l := range r.final[summary+1:] {
		if strings.TrimSpace(l) != "" {
			t.Errorf("left after the summary line: %q\nwhole:\n%s", l, strings.Join(r.final, "\n"))
		}
	}
}

// checkRows checks every screen shown during the build: each non-empty line is a status row (a
// row that wrapped would leave a line that does not start with its label) no wider than the
// terminal; it returns the distinct labels drawn.
func checkRows(t *testing.T, r vtRun, cols int) map[string]bool {
	t.Helper()
	labels := map[string]bool{}
	bad := 0
	summary := regexp.MustCompile(`^[a-z ]*\d*[a-z. ]*\d*[0-9.]*s?$`) // the summary's wrapped tail
	for _, s := range r.screens {
		for _, l := range strings.Split(s, "\n") {
			l = strings.TrimRight(l, " ")
			switch {
			case l == "" || strings.HasPrefix(l, "labbuild: ") || summary.MatchString(l):
			case statusLabel.MatchString(l):
				labels[statusLabel.FindString(l)] = true
			default:
				if bad++; bad < 5 {
					t.Errorf("a screen line that is not a status row (a wrapped row?): %q\nscreen:\n%s", l, s)
				}
			}
			if n := len([]rune(l)); n > cols {
				t.Errorf("a line of %d cells on a %d-column terminal: %q", n, cols, l)
			}
		}
	}
	return labels
}

var (
	downloadRow = regexp.MustCompile(`\] net/download .*\d+\.\d KiB / 256\.0 KiB +\d+\.\d [KM]iB/s +ETA \d\d:\d\d`)
	waitRow     = regexp.MustCompile(`\] cluster/masters: waiting for every master Ready \(2/3\) — 4m1\ds of 30m`)
)

// TestStatusAreaOnVT runs labbuild on a real pty, as the front runs it, and reads it through a
// VT emulator (charmbracelet/x/vt) at 150×40 and 40×10, and resized from one to the other
// midway: the status area redraws in place (no target's [N/M] line twice in the scrollback,
// nothing of it after the summary line), rows are truncated to the width, never wrapped, and
// on the wide screen the download's bar shows bytes, rate and ETA and the wait its elapsed time
// against its limit. Issue 27: before, mpb was handed the captured stdout, saw no terminal and
// appended every frame to the scrollback at 80 columns.
func TestStatusAreaOnVT(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cols, rows int
		jobs       int
		resize     *[2]int
		wide       bool // the download and wait rows fit: check their contents
	}{
		{"150x40", 150, 40, 4, nil, true},
		{"40x10", 40, 10, 12, nil, false},
		{"150x40-to-40x10", 150, 40, 4, &[2]int{40, 10}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runOnVT(t, tc.cols, tc.rows, "xterm-256color", tc.jobs, tc.resize)
			checkClean(t, r)
			cols := tc.cols
			if tc.resize != nil {
				cols = max(cols, tc.resize[0]) // screens before the resize are wide
			}
			labels := checkRows(t, r, cols)
			if len(labels) < 10 {
				t.Errorf("only %d distinct status rows were drawn: %v", len(labels), labels)
			}
			if !strings.Contains(r.raw, "\x1b[J") {
				t.Errorf("no erase sequence in the output: the area is not redrawn in place")
			}
			if r.topLeftErases > 0 {
				t.Errorf("%d erase-below sequences at the top-left corner: tmux would push each frame into the scrollback", r.topLeftErases)
			}
			if tc.wide {
				var dl, wait bool
				for _, s := range r.screens {
					dl = dl || downloadRow.MatchString(s)
					wait = wait || waitRow.MatchString(s)
				}
				if !dl || !wait {
					t.Errorf("on the emulated screen: download bar with rate and ETA %v, wait with elapsed/limit %v; last screens:\n%s",
						dl, wait, strings.Join(r.screens[max(0, len(r.screens)-3):], "\n----\n"))
				}
			}
			if tc.cols == 40 || tc.resize != nil {
				trunc := false
				for _, s := range r.screens {
					trunc = trunc || strings.Contains(s, "…")
				}
				if !trunc {
					t.Errorf("no row was truncated (…) at 40 columns")
				}
			}
			t.Logf("%d screens, %d status rows drawn, %d bytes of output", len(r.screens), len(labels), len(r.raw))
		})
	}
}

// TestStatusAreaDumbTerminal: under TERM=dumb the pty gets plain lines — every [N/M] line once,
// no escape sequence.
func TestStatusAreaDumbTerminal(t *testing.T) {
	r := runOnVT(t, 150, 40, "dumb", 4, nil)
	if strings.Contains(r.raw, "\x1b") {
		t.Errorf("escape sequences under TERM=dumb:\n%q", r.raw)
	}
	n := 0
	for _, l := range r.final {
		if statusLabel.MatchString(l) {
			n++
		}
	}
	if n != 42 {
		t.Errorf("%d [N/M] lines under TERM=dumb, want 42 (40 synthetic targets, the download, the wait):\n%s", n, strings.Join(r.final, "\n"))
	}
	checkClean(t, r)
}
