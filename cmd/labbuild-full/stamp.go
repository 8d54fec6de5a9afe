package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// The null-build stamp (cache.Stamp, docs/how-it-works.md "The front"): when the small
// `labbuild` front execs this binary it sets LABBUILD_STAMP=1, and a build whose verdict is
// "no work to do" then leaves behind every fact that verdict rested on and the bytes it
// printed, so the front can answer the same command line next time without starting this
// binary. Run directly (tests, `go run`), this binary writes no stamp.

// stamper records one run for its stamp.
type stamper struct {
	rec   cache.StampCollector
	start time.Time
	argv  []string
	tty   uint8
	out   io.Writer // the real stdout, for the summary line written around the capture
	// config is the lab config -f names, absolute as resolved when it was read (Stamp.Config).
	config string

	mu     sync.Mutex
	chunks []cache.StampChunk
}

// newStamper returns nil unless the front asked for a stamp (LABBUILD_STAMP=1). It is called
// first thing, so the stamp's start time precedes every fingerprint taken.
func newStamper(args []string, stdout, stderr io.Writer) *stamper {
	if os.Getenv("LABBUILD_STAMP") != "1" {
		return nil
	}
	s := &stamper{start: time.Now(), argv: args, out: stdout}
	s.rec.SetStart(s.start.UnixNano())
	if isTTY(stdout) {
		s.tty |= cache.StampStdoutTTY
	}
	if isTTY(stderr) {
		s.tty |= cache.StampStderrTTY
	}
	return s
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// recorder is the StampCollector the build fills (nil without a stamp).
func (s *stamper) collector() *cache.StampCollector {
	if s == nil {
		return nil
	}
	return &s.rec
}

// wrap returns w, also capturing what is written to it as file descriptor fd's output.
func (s *stamper) wrap(fd uint8, w io.Writer) io.Writer {
	if s == nil {
		return w
	}
	return &captured{s: s, fd: fd, w: w}
}

type captured struct {
	s  *stamper
	fd uint8
	w  io.Writer
}

func (c *captured) Write(p []byte) (int, error) {
	c.s.add(c.fd, p)
	return c.w.Write(p)
}

func (s *stamper) add(fd uint8, p []byte) {
	s.mu.Lock()
	if n := len(s.chunks); n > 0 && s.chunks[n-1].Fd == fd && fd != 0 {
		s.chunks[n-1].Data = append(s.chunks[n-1].Data, p...)
	} else {
		s.chunks = append(s.chunks, cache.StampChunk{Fd: fd, Data: append([]byte(nil), p...)})
	}
	s.mu.Unlock()
}

// stampable says why c's command line is never stamped, or "": only a plain build of files
// qualifies — not a plan, forced or regenerating build, an explanation, statistics, JSON, a
// pretend clock, a lab config on stdin, or a profiled run (the replay would leave no profile).
func (c *cli) stampable() string {
	switch {
	case c.dryRun || c.force || c.explain || c.stats || c.json || c.restart:
		return "-n, -B, --explain, -d, --json or --restart"
	case len(c.regenerate) > 0 || c.now != "":
		return "--regenerate or --now"
	case c.file == "-":
		return "the lab config is read from standard input"
	}
	for _, e := range []string{"LABBUILD_CPUPROFILE", "LABBUILD_MEMPROFILE", "LABBUILD_TIMES", "LABBUILD_RSS"} {
		if os.Getenv(e) != "" {
			return e + " is set"
		}
	}
	return ""
}

// recordConfigFiles records, before they are read, the files options and checkFiles consult
// besides the targets' own inputs: the pull secret and SSH key checked for content, and each
// oci: mirror's index.json.
func (c *cli) recordConfigFiles(fields []string) {
	r := c.stamp.collector()
	if r == nil || c.cfg == nil {
		return
	}
	for _, f := range fields {
		switch f {
		case lab.AccessPullSecretFile:
			r.Stat(lab.ExpandPath(c.cfg.Access.PullSecretFile, c.cfgBase))
		case lab.AccessSSHKeyFile:
			r.Stat(lab.ExpandPath(c.cfg.Access.SSHKeyFile, c.cfgBase))
		case lab.ReleaseMirrors:
			for _, m := range c.cfg.Release.Mirrors {
				if dir, ok := strings.CutPrefix(m, "oci:"); ok && filepath.IsAbs(dir) {
					r.Stat(filepath.Join(dir, "index.json"))
				}
			}
		}
	}
}

// noWork prints a null build's summary line, and with a stamper writes the stamp: the line is
// recorded with its duration as a placeholder the front fills with its own.
func (c *cli) noWork(res *engine.Result) {
	line := "labbuild: no work to do (" + res.Summary() + ")\n"
	s := c.stamp
	if s == nil {
		io.WriteString(c.stdout, line)
		return
	}
	io.WriteString(s.out, line)
	i := strings.LastIndex(line, " in ") + len(" in ") // Summary ends " in %.2fs"
	j := i + strings.IndexByte(line[i:], 's')
	s.add(1, []byte(line[:i]))
	s.add(0, nil)
	s.add(1, []byte(line[j:]))
	cwd, err := cache.Getwd() // after -C: the directory the command line's paths are taken from
	if err != nil {
		return
	}
	st := &cache.Stamp{Cwd: cwd, Argv: s.argv, Start: s.start.UnixNano(), TTY: s.tty, Env: cache.StampEnv(os.Environ()), Output: s.chunks}
	if c.file != "" {
		// -f as resolved when the run read it (options): the front resolves it again, and a
		// retargeted link then names another file.
		if st.Config = s.config; st.Config == "" {
			return
		}
	}
	why := c.stampable()
	if why == "" {
		why = s.rec.Fill(st)
	}
	if why != "" {
		if os.Getenv("LABBUILD_FRONT") == "explain" { // the front's switch: say why no stamp
			fmt.Fprintf(c.stderr, "labbuild: front: no stamp: %s\n", why)
		}
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if st.BinaryFP, err = cache.Stat(exe); err != nil {
		return
	}
	st.Binary = exe
	cache.WriteStamp(filepath.Join(st.OutDir, ".labbuild"), cache.StampKey(cwd, s.argv), st)
}
