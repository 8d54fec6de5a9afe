// Command labbuild builds an OpenShift 4 lab on libvirt the hard way, as a graph of
// content-hashed targets: after an edit of lab.yaml only what the edit affects is rebuilt.
//
//	labbuild                      build every file artifact (through ignition); no libvirt
//	labbuild ignition/master-0    build one target and what it needs
//	labbuild pki                  build a family
//	labbuild cluster              everything, up to a converged cluster
//	labbuild -n cluster           the plan: what would run, and why
//	labbuild graph --format tree  the dependency graph
//
// Exit status: 0 success, 1 a target failed, 2 bad usage or bad lab config.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/labbuild/labbuild/targets"
)

// version is set at link time (-ldflags "-X main.version=...") or read from build info.
var version = ""

// cli holds the parsed command line.
type cli struct {
	jobs        int
	keepGoing   bool
	dryRun      bool
	force       bool
	dir         string
	file        string
	outDir      string
	explain     bool
	stats       bool
	debug       []string
	json        bool
	format      string
	output      string
	all         bool
	cacheToo    bool
	trim        bool
	regenerate  []string
	now         string
	synthetic   int
	synthDelay  time.Duration
	synthNinja  string
	quiet       bool
	help        bool
	showVersion bool

	stdout, stderr io.Writer
	terminal       bool

	cfgName string // the lab config as the user named it (-f bad.yaml), for messages
	cfgBase string // the directory its relative paths are taken from
}

// exit codes
const (
	exitOK      = 0
	exitFailed  = 1
	exitUsage   = 2
	exitSignals = 130
)

func main() {
	// labbuild is short-lived and allocates a few tens of MB even at 10,000 targets: collect
	// garbage only past 1 GiB, which saves a fifth of a null build's time.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(1 << 30)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func newFlags(c *cli) *pflag.FlagSet {
	fs := pflag.NewFlagSet("labbuild", pflag.ContinueOnError)
	fs.SetInterspersed(true)
	fs.IntVarP(&c.jobs, "jobs", "j", runtime.NumCPU(), "run `N` targets at once")
	fs.BoolVarP(&c.keepGoing, "keep-going", "k", false, "keep going after a failure: build what does not depend on it")
	fs.BoolVarP(&c.dryRun, "dry-run", "n", false, "print the plan (each target that would run, and why); change nothing")
	fs.BoolVarP(&c.force, "always-make", "B", false, "rebuild every selected target (sticky keys are restored, not regenerated)")
	fs.StringVarP(&c.dir, "directory", "C", "", "change to `dir` before doing anything")
	fs.StringVarP(&c.file, "file", "f", "", "lab config `file` (default: lab.yaml if present, else the embedded default)")
	fs.StringVarP(&c.outDir, "out", "o", "out", "output `dir`ectory")
	fs.BoolVar(&c.explain, "explain", false, "print why each target runs (the config field, file or upstream that changed)")
	fs.StringSliceVarP(&c.debug, "debug", "d", nil, "debug `mode`: explain (same as --explain), stats (time per phase)")
	fs.BoolVar(&c.json, "json", false, "JSON output for list, explain, certs and the plan (-n)")
	fs.StringVar(&c.format, "format", "dot", "graph output `format`: dot, svg, png, tree, json")
	fs.StringVar(&c.output, "output", "", "write graph output to `file` instead of standard output")
	fs.BoolVar(&c.all, "all", false, "graph/list: include every target, not only the default goal")
	fs.BoolVar(&c.cacheToo, "cache", false, "clean: also remove the content store (sticky keys are lost)")
	fs.BoolVar(&c.trim, "trim", false, "clean: only trim the content store (old entries; keys are kept)")
	fs.StringSliceVar(&c.regenerate, "regenerate", nil, "make sticky `target`s anew (a new CA key, a new password)")
	fs.BoolVarP(&c.quiet, "quiet", "q", false, "no status lines; only failures and the summary")
	fs.BoolVarP(&c.help, "help", "h", false, "show help")
	fs.BoolVar(&c.showVersion, "version", false, "print the version")
	fs.StringVar(&c.now, "now", "", "pretend the time is `RFC3339` (testing certificate expiry)")
	fs.IntVar(&c.synthetic, "synthetic", 0, "build a synthetic graph of `N` targets from src/ (benchmarks)")
	fs.DurationVar(&c.synthDelay, "synthetic-delay", 0, "sleep this long in every synthetic target (crash tests)")
	fs.StringVar(&c.synthNinja, "synthetic-ninja", "", "write the synthetic graph as an equivalent build.ninja to `file` (make bench-ninja)")
	for _, h := range []string{"now", "synthetic", "synthetic-delay", "synthetic-ninja"} {
		fs.MarkHidden(h)
	}
	fs.SortFlags = false
	return fs
}

// run is main without os.Exit, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	fs := newFlags(c)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "labbuild: %v\nRun 'labbuild --help' for usage.\n", err)
		return exitUsage
	}
	for _, d := range c.debug {
		switch d {
		case "explain":
			c.explain = true
		case "stats":
			c.stats = true
		default:
			fmt.Fprintf(stderr, "labbuild: unknown debug mode %q (known: explain, stats)\n", d)
			return exitUsage
		}
	}
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) && !c.quiet {
		c.terminal = true
	}
	rest := fs.Args()
	verb := ""
	if len(rest) > 0 {
		if _, ok := verbs[rest[0]]; ok {
			verb, rest = rest[0], rest[1:]
		}
	}
	if verb == "help" {
		if len(rest) > 0 {
			verb, rest = rest[0], nil
		} else {
			verb = ""
		}
		c.help = true
	}
	if c.showVersion {
		verb = "version"
	}
	if c.help {
		printHelp(stdout, verb, fs)
		return exitOK
	}
	if c.dir != "" {
		if err := os.Chdir(c.dir); err != nil {
			fmt.Fprintf(stderr, "labbuild: -C: %v\n", err)
			return exitUsage
		}
	}
	if verb == "" {
		verb = "build"
	}
	if c.synthNinja != "" {
		return report(stderr, writeNinja(c.synthNinja, c.synthetic))
	}
	err := verbs[verb].run(ctx, c, rest)
	return report(stderr, err)
}

// report prints err once and maps it to an exit status.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var be *targets.BuildError
	var ue *targets.UsageError
	var ce *targets.ConfigError
	var ces targets.ConfigErrors
	switch {
	case errors.As(err, &be):
		// Each failure was printed as it happened; the summary line names the count.
		return exitFailed
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "labbuild: interrupted")
		return exitSignals
	case errors.As(err, &ces):
		fmt.Fprintf(stderr, "labbuild: bad lab config:\n%s\n", indent(ces.Error()))
		return exitUsage
	case errors.As(err, &ue), errors.As(err, &ce), errors.As(err, new(*usage)):
		fmt.Fprintf(stderr, "labbuild: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "labbuild: %v\n", err)
	return exitFailed
}

// usage is a command-line mistake (exit status 2).
type usage struct{ msg string }

func (u *usage) Error() string { return u.msg }

func usagef(format string, args ...any) error { return &usage{fmt.Sprintf(format, args...)} }

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

// options loads and validates the lab config and fills the engine options. With --synthetic
// it builds the synthetic benchmark graph instead.
func (c *cli) options(goals []string) (targets.Options, error) {
	o := targets.Options{
		OutDir: c.outDir, Goals: goals, Jobs: c.jobs, KeepGoing: c.keepGoing, DryRun: c.dryRun,
		Force: c.force, Regenerate: c.regenerate, Explain: c.explain, Terminal: c.terminal,
		Stdout: c.stdout, Stderr: c.stderr, Stats: c.stats,
	}
	if c.quiet {
		o.Stdout = io.Discard
	}
	if c.now != "" {
		t, err := time.Parse(time.RFC3339, c.now)
		if err != nil {
			return o, usagef("--now: %v", err)
		}
		o.Now = func() time.Time { return t }
	}
	if c.synthetic > 0 {
		vals := targets.MapValues{}
		if err := targets.LoadSyntheticValues("synthetic.yaml", vals); err != nil {
			return o, &targets.ConfigError{File: "synthetic.yaml", Msg: err.Error()}
		}
		src := ""
		if st, err := os.Stat("src"); err == nil && st.IsDir() {
			src, _ = filepath.Abs("src")
		}
		o.Values = vals
		o.Targets = targets.Synthetic(targets.SyntheticSpec{N: c.synthetic, Fields: 10, SrcDir: src, Delay: c.synthDelay}, vals)
		return o, nil
	}
	path := c.file
	if path == "" {
		if _, err := os.Stat("lab.yaml"); err == nil {
			path = "lab.yaml"
		}
	}
	name := path
	if name == "" {
		name = "default lab.yaml"
	}
	c.cfgName, c.cfgBase = name, "."
	if path != "" {
		c.cfgBase = filepath.Dir(path)
	}
	if abs, err := filepath.Abs(c.cfgBase); err == nil {
		c.cfgBase = abs
	}
	cfg, err := targets.LoadAndValidate(path, name)
	if err != nil {
		return o, err
	}
	o.Config, o.ConfigPath = cfg, path
	return o, nil
}

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v := bi.Main.Version
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " " + s.Value[:12]
			}
		}
		return strings.TrimSpace(v + " " + bi.GoVersion)
	}
	return "devel"
}

// writeNinja writes the synthetic graph of n targets as a build.ninja doing the same work (each
// output holds digests of its source and its upstream outputs, as a synthetic target's does;
// concatenating them instead would triple the size at every layer), for comparing null builds.
func writeNinja(path string, n int) error {
	var b strings.Builder
	b.WriteString("# Generated by labbuild --synthetic-ninja: the synthetic graph for make bench-ninja.\n")
	b.WriteString("rule syn\n  command = sha256sum $in > $out\n\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "build out-ninja/%s/out.txt: syn src/%d.txt", targets.SyntheticName(i), i)
		for _, d := range targets.SyntheticDeps(i) {
			fmt.Fprintf(&b, " out-ninja/%s/out.txt", targets.SyntheticName(d))
		}
		b.WriteString("\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// checkFiles checks, before anything is written, the files the config names (pull secret,
// SSH key, oci: mirrors) that the targets selected by o.Goals and their upstreams read. It
// loads the project once and hands it to the build (o.Targets), so a build does not declare
// its targets twice.
func (c *cli) checkFiles(o *targets.Options) error {
	if o.Config == nil {
		return nil
	}
	p, err := targets.Load(*o)
	if err != nil {
		return err
	}
	ids, err := p.Select(o.Goals)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for i, in := range p.Graph.Closure(ids) {
		if !in {
			continue
		}
		for _, f := range p.Targets[i].Files {
			want[f] = true
		}
		for _, r := range p.Targets[i].Reads {
			if r == "release.mirrors" {
				want[r] = true
			}
		}
	}
	var fields []string
	for _, f := range append(append([]string{}, targets.FileFields...), "release.mirrors") {
		if want[f] {
			fields = append(fields, f)
		}
	}
	if err := o.Config.CheckFiles(c.cfgName, c.cfgBase, fields); err != nil {
		return err
	}
	o.Targets = p.Targets
	return nil
}
