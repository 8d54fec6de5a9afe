package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair (as creack/pty does, through /dev/ptmx), 120×24.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 120}); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// throttled serves size bytes in chunks of size/8, one every 150 ms: a slow loopback mirror.
func throttled(t *testing.T, size int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		chunk := bytes.Repeat([]byte("x"), size/8)
		for i := 0; i < 8; i++ {
			w.Write(chunk)
			w.(http.Flusher).Flush()
			time.Sleep(150 * time.Millisecond)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// progressTargets are a download that reports bytes through its Step as it reads, and a wait
// that reports its phase, elapsed time and limit, as rhcos/image and cluster/masters do.
func progressTargets(url string) []*engine.Target {
	return []*engine.Target{
		{Name: "net/download", Doc: "a throttled loopback download", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
			resp, err := http.Get(url + "/rhcos.qcow2.gz")
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			var done int64
			buf := make([]byte, 8<<10)
			for {
				n, err := resp.Body.Read(buf)
				done += int64(n)
				s.Progress(engine.Progress{Phase: "downloading rhcos.qcow2.gz", Done: done, Total: resp.ContentLength})
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
			}
			return s.WriteFile("size", []byte(strconv.FormatInt(done, 10)), 0o644)
		}},
		{Name: "cluster/masters", Doc: "a wait", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
			for i := 0; i < 3; i++ {
				s.Progress(engine.Progress{Phase: "waiting for every master Ready (2/3)", Elapsed: 4*time.Minute + 10*time.Second + time.Duration(i)*400*time.Millisecond, Limit: 30 * time.Minute})
				time.Sleep(400 * time.Millisecond)
			}
			return s.WriteFile("record.json", []byte("{}"), 0o644)
		}},
	}
}

// TestStatusAreaOnPTY: on a terminal the status area shows the download's bytes and rate
// updating and the wait's elapsed time against its limit; when the build ends, the summary line
// replaces the area (the screen, replayed, holds the summary and nothing of the area).
func TestStatusAreaOnPTY(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	var mu sync.Mutex
	var raw bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			mu.Lock()
			raw.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	srv := throttled(t, 256<<10)
	t.Setenv("TERM", "xterm")
	c := &cli{stdout: slave, stderr: slave, stdoutTTY: true, terminal: true, tty: slave}
	pd := newProgress(c)
	if _, ok := pd.(*statusArea); !ok {
		t.Fatalf("newProgress on a terminal = %T, want *statusArea", pd)
	}
	res, err := engine.Build(context.Background(), engine.Options{
		Targets: progressTargets(srv.URL), OutDir: t.TempDir(), Jobs: 2,
		Stdout: slave, Stderr: pd.Stderr(slave), Terminal: true, Reporter: pd,
	})
	pd.Close()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(slave, "labbuild: %s\n", strings.Replace(res.Summary(), fmt.Sprintf("%.2fs", res.Duration.Seconds()), "1.00s", 1))
	slave.Close()
	select {
	case <-readDone:
	case <-time.After(10 * time.Second):
		t.Fatal("pty output did not end")
	}
	mu.Lock()
	out := raw.String()
	mu.Unlock()

	var seen []float64
	for _, m := range regexp.MustCompile(`(\d+\.\d) KiB / 256\.0 KiB`).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		if len(seen) == 0 || seen[len(seen)-1] != v {
			seen = append(seen, v)
		}
	}
	if len(seen) < 3 {
		t.Errorf("the download's bytes updated %d times (%v), want at least 3:\n%q", len(seen), seen, out)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Errorf("bytes went back: %v", seen)
		}
	}
	if !regexp.MustCompile(`\d+\.\d KiB/s`).MatchString(out) {
		t.Errorf("no rate in the status area:\n%q", out)
	}
	if !strings.Contains(out, "[1/2]") || !strings.Contains(out, "[2/2]") {
		t.Errorf("no [N/2] labels:\n%q", out)
	}
	els := map[string]bool{}
	for _, m := range regexp.MustCompile(`cluster/masters: waiting for every master Ready \(2/3\) — (4m1\ds) of 30m`).FindAllStringSubmatch(out, -1) {
		els[m[1]] = true
	}
	if len(els) < 2 {
		t.Errorf("the wait's elapsed time did not tick (saw %v):\n%q", els, out)
	}
	screen := replay(out)
	t.Logf("bytes seen %v; elapsed seen %v; %d escape sequences; final screen %q", seen, els, strings.Count(out, "\x1b["), screen)
	if want := []string{"labbuild: 2 built, 0 restored, 0 up to date in 1.00s"}; !slices.Equal(screen, want) {
		t.Errorf("final screen = %q, want only the summary %q", screen, want)
	}
}

// TestProgressLinesOffTerminal: off a terminal, plain lines: [N/M], a line per tenth of the
// download with its rate, the wait's phase with elapsed/limit once (not per poll), and no
// escape code at all.
func TestProgressLinesOffTerminal(t *testing.T) {
	srv := throttled(t, 256<<10)
	var out bytes.Buffer
	c := &cli{stdout: &out, stderr: &out}
	pd := newProgress(c)
	if _, ok := pd.(*progressLines); !ok {
		t.Fatalf("newProgress off a terminal = %T, want *progressLines", pd)
	}
	_, err := engine.Build(context.Background(), engine.Options{
		Targets: progressTargets(srv.URL), OutDir: t.TempDir(), Jobs: 2,
		Stdout: &out, Stderr: pd.Stderr(&out), Reporter: pd,
	})
	pd.Close()
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, "\x1b") {
		t.Errorf("escape codes off a terminal:\n%q", s)
	}
	tenths := regexp.MustCompile(`(?m)^  net/download: downloading rhcos\.qcow2\.gz (\d+)% \(\d+\.\d KiB of 256\.0 KiB, \d+\.\d [KM]iB/s\)$`).FindAllStringSubmatch(s, -1)
	if len(tenths) < 8 || len(tenths) > 10 || tenths[len(tenths)-1][1] != "100" {
		t.Errorf("want one line per tenth of the download up to 100%%, got %d:\n%s", len(tenths), s)
	}
	if n := strings.Count(s, "  cluster/masters: waiting for every master Ready (2/3) — 4m10s of 30m\n"); n != 1 {
		t.Errorf("wait line printed %d times, want once (same phase within a minute):\n%s", n, s)
	}
	for _, l := range []string{"[1/2] ", "[2/2] "} {
		if !strings.Contains(s, l) {
			t.Errorf("no %q line:\n%s", l, s)
		}
	}
}

// replay plays terminal output onto a screen and returns its non-empty lines. It knows what
// mpb's writer (vbauerster/cupwriter) sends: text, \r, \n, and ESC[nA ESC[J (cursor up n lines,
// erase to the end of the screen); other CSI sequences are ignored.
func replay(out string) []string {
	lines := []string{""}
	row, col := 0, 0
	csi := regexp.MustCompile(`^\x1b\[([0-9;?]*)([A-Za-z])`)
	for i := 0; i < len(out); {
		switch ch := out[i]; ch {
		case '\r':
			col = 0
			i++
		case '\n':
			row++
			col = 0
			for len(lines) <= row {
				lines = append(lines, "")
			}
			i++
		case 0x1b:
			m := csi.FindStringSubmatch(out[i:])
			if m == nil {
				i++
				continue
			}
			switch m[2] {
			case "A":
				n, _ := strconv.Atoi(m[1])
				if n == 0 {
					n = 1
				}
				row = max(0, row-n)
			case "J":
				lines = lines[:row+1]
				lines[row] = truncRunes(lines[row], col)
			case "K":
				lines[row] = truncRunes(lines[row], col)
			}
			i += len(m[0])
		default:
			r := []rune(lines[row])
			for len(r) < col {
				r = append(r, ' ')
			}
			j := i + 1
			for j < len(out) && out[j] != '\r' && out[j] != '\n' && out[j] != 0x1b {
				j++
			}
			text := []rune(out[i:j])
			if col+len(text) > len(r) {
				r = append(r[:col], text...)
			} else {
				copy(r[col:], text)
			}
			lines[row] = string(r)
			col += len(text)
			i = j
		}
	}
	var nonEmpty []string
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			nonEmpty = append(nonEmpty, strings.TrimRight(l, " "))
		}
	}
	return nonEmpty
}

func truncRunes(s string, n int) string {
	r := []rune(s)
	if n < len(r) {
		return string(r[:n])
	}
	return s
}
