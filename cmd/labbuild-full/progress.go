package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/labbuild/labbuild/engine"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// The build's progress display, as ninja, docker pull and openshift-install show it: on a
// terminal a status area (vbauerster/mpb) with one row per running target, a bar with bytes,
// rate and ETA for downloads, and "waiting for … — 4m10s of 30m" for waits; off a terminal plain
// "[N/M] target" lines and one progress line per tenth of a download or per minute of a wait.
// Neither is on the engine's hot path: the engine calls a Reporter only for targets that run,
// and the status area starts its goroutine on the first one, so a null build pays nothing.

// progressDisplay is a Reporter that is closed before the summary line is printed.
type progressDisplay interface {
	engine.Reporter
	// Stderr wraps the engine's error writer so failures print above the status area.
	Stderr(w io.Writer) io.Writer
	// Close removes the status area; the summary line then takes its place.
	Close()
}

// newProgress returns the display for c: nil with -q (the engine's own lines go to a discarded
// writer), the status area on a terminal, plain lines elsewhere.
func newProgress(c *cli) progressDisplay {
	switch {
	case c.quiet:
		return nil
	case c.terminal && c.tty != nil && !dumbTerminal():
		return &statusArea{out: c.stdout, tty: c.tty, color: c.color(), rows: map[string]*statusRow{}, now: time.Now}
	}
	return &progressLines{w: c.stdout, now: time.Now, st: map[string]*lineState{}}
}

// dumbTerminal reports TERM=dumb (or unset): a terminal that cannot move the cursor (Emacs
// shell buffers, some CI consoles), which gets the plain lines, as ninja and git do.
func dumbTerminal() bool {
	t := os.Getenv("TERM")
	return t == "" || t == "dumb"
}

// color reports whether output may be coloured: on a terminal, unless NO_COLOR is set
// (no-color.org).
func (c *cli) color() bool {
	return c.stdoutTTY && os.Getenv("NO_COLOR") == "" && !dumbTerminal()
}

// SGR sequences for the few coloured words (FAILED, plan actions).
const (
	sgrRed    = "\x1b[31m"
	sgrGreen  = "\x1b[32m"
	sgrYellow = "\x1b[33m"
	sgrCyan   = "\x1b[36m"
	sgrBold   = "\x1b[1m"
	sgrReset  = "\x1b[0m"
)

func paint(on bool, sgr, s string) string {
	if !on {
		return s
	}
	return sgr + s + sgrReset
}

// statusArea draws the running targets with mpb.
type statusArea struct {
	out   io.Writer // stdout as the CLI writes it (captured for the front's stamp)
	tty   *os.File  // the terminal under out: its size, and SIGWINCH
	color bool
	now   func() time.Time

	mu   sync.Mutex
	p    *mpb.Progress
	cw   *termWriter
	rows map[string]*statusRow
}

// statusRow is one running target: its label and its latest progress report.
type statusRow struct {
	label string // "[3/12] rhcos/image"
	bar   *mpb.Bar

	mu       sync.Mutex
	last     engine.Progress
	at       time.Time // when last arrived
	download bool      // the row is a byte bar
}

func (a *statusArea) Start(name string, n, m int, restore bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.p == nil {
		a.cw = newTermWriter(a.out, a.tty)
		a.p = mpb.New(mpb.WithConsoleWriter(a.cw), mpb.WithManualRefresh(a.cw.refresh))
	}
	verb := ""
	if restore {
		verb = " (restore)"
	}
	r := &statusRow{label: fmt.Sprintf("[%d/%d] %s%s", n, m, name, verb)}
	r.bar = a.p.New(0, mpb.NopStyle(), mpb.PrependDecorators(decor.Any(func(decor.Statistics) string { return r.text(a.now()) })))
	a.rows[name] = r
}

// text is a row without a bar: the label, and the phase with its elapsed time and limit.
func (r *statusRow) text(now time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last.Phase == "" && r.last.Total == 0 {
		return r.label
	}
	s := r.label + ": " + r.last.Phase
	if r.last.Limit > 0 || r.last.Total == 0 {
		el := r.last.Elapsed + now.Sub(r.at)
		s += " — " + shortDur(el)
		if r.last.Limit > 0 {
			s += " of " + shortDur(r.last.Limit)
		}
	}
	return s
}

func (a *statusArea) Progress(name string, p engine.Progress) {
	a.mu.Lock()
	r := a.rows[name]
	a.mu.Unlock()
	if r == nil {
		return
	}
	r.mu.Lock()
	r.last, r.at = p, a.now()
	toBar := p.Total > 0 && !r.download
	if toBar {
		r.download = true
	}
	bar := r.bar
	r.mu.Unlock()
	if toBar {
		// A transfer of known size: the row becomes a bar with bytes, rate and ETA.
		a.mu.Lock()
		old := bar
		bar = a.p.New(p.Total, mpb.BarStyle().Lbound("[").Rbound("]"),
			mpb.BarQueueAfter(old), mpb.BarRemoveOnComplete(),
			mpb.PrependDecorators(decor.Name(r.label+" ")),
			mpb.AppendDecorators(
				decor.CountersKibiByte(" % .1f / % .1f"),
				decor.AverageSpeed(decor.SizeB1024(0), "  % .1f"),
				decor.Name("  ETA "), decor.AverageETA(decor.ET_STYLE_MMSS),
			))
		old.Abort(true)
		r.mu.Lock()
		r.bar = bar
		r.mu.Unlock()
		a.mu.Unlock()
	}
	if r.download {
		bar.SetCurrent(p.Done)
	}
}

func (a *statusArea) Finish(name string, _ engine.Outcome) {
	a.mu.Lock()
	r := a.rows[name]
	delete(a.rows, name)
	a.mu.Unlock()
	if r != nil {
		r.mu.Lock()
		r.bar.Abort(true)
		r.mu.Unlock()
	}
}

// Close drops every row and waits for mpb to erase the area.
func (a *statusArea) Close() {
	a.mu.Lock()
	p := a.p
	for n, r := range a.rows {
		r.bar.Abort(true)
		delete(a.rows, n)
	}
	cw := a.cw
	a.mu.Unlock()
	if p != nil {
		p.Wait()
		cw.stop()
	}
}

// Stderr prints the engine's lines (FAILED, explanations) above the area, FAILED in red.
func (a *statusArea) Stderr(w io.Writer) io.Writer { return &aboveArea{a: a, w: w} }

type aboveArea struct {
	a *statusArea
	w io.Writer
}

func (x *aboveArea) Write(b []byte) (int, error) {
	s := string(b)
	if x.a.color && strings.HasPrefix(s, "FAILED") {
		s = paint(true, sgrRed+sgrBold, "FAILED") + s[len("FAILED"):]
	}
	x.a.mu.Lock()
	p := x.a.p
	x.a.mu.Unlock()
	if p != nil {
		if _, err := p.Write([]byte(s)); err == nil {
			return len(b), nil
		}
	}
	if _, err := io.WriteString(x.w, s); err != nil {
		return 0, err
	}
	return len(b), nil
}

// progressLines is the display off a terminal: the lines a log file or CI wants.
type progressLines struct {
	w   io.Writer
	now func() time.Time
	mu  sync.Mutex
	st  map[string]*lineState
}

type lineState struct {
	start time.Time // first report: the rate's start
	tenth int64     // tenths of a transfer printed
	phase string    // last phase printed
	last  time.Time // when it was printed
}

func (l *progressLines) Start(name string, n, m int, restore bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "[%d/%d] %s\n", n, m, name)
}

// Progress prints one line per tenth of a transfer, and for a phase one when it changes and
// then one a minute.
func (l *progressLines) Progress(name string, p engine.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	st := l.st[name]
	if st == nil {
		st = &lineState{start: now}
		l.st[name] = st
	}
	if p.Total > 0 {
		t := p.Done * 10 / p.Total
		if t <= st.tenth {
			return
		}
		st.tenth = t
		rate := ""
		if d := now.Sub(st.start).Seconds(); d > 0 {
			rate = fmt.Sprintf(", %s/s", ibytes(int64(float64(p.Done)/d)))
		}
		fmt.Fprintf(l.w, "  %s: %s %d%% (%s of %s%s)\n", name, p.Phase, t*10, ibytes(p.Done), ibytes(p.Total), rate)
		return
	}
	if p.Phase == st.phase && now.Sub(st.last) < time.Minute {
		return
	}
	st.phase, st.last = p.Phase, now
	line := fmt.Sprintf("  %s: %s — %s", name, p.Phase, shortDur(p.Elapsed))
	if p.Limit > 0 {
		line += " of " + shortDur(p.Limit)
	}
	fmt.Fprintln(l.w, line)
}

func (l *progressLines) Finish(name string, _ engine.Outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.st, name)
}

func (l *progressLines) Stderr(w io.Writer) io.Writer { return w }
func (l *progressLines) Close()                       {}

// shortDur prints a duration to the second without zero units: 4m10s, 30m, 1h5m.
func shortDur(d time.Duration) string {
	d = d.Round(time.Second)
	if d < time.Second {
		return "0s"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ibytes prints a byte count in binary units: 512 B, 3.4 MiB, 1.1 GiB.
func ibytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
