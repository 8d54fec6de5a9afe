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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
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
	restart     bool
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
	mirror      bool // destroy --mirror: delete the release mirror's storage too
	trim        bool
	regenerate  []string
	now         string
	synth       syntheticFlags // nil unless withSynthetic
	quiet       bool
	help        bool
	showVersion bool
	allEdges    bool
	verbose     bool
	by          string

	stdout, stderr io.Writer
	terminal       bool         // stdout is a terminal and not -q: the live status area
	stdoutTTY      bool         // stdout is a terminal (graph images go to a file)
	tty            *os.File     // stdout's terminal, when it is one: the status area's size
	dryErr         bytes.Buffer // what status's dry run printed to stderr (why targets are blocked)

	stamp *stamper // records a null build for the front (stamp.go); nil unless it asked

	cfg     *lab.Config // the validated lab config (nil with --synthetic)
	cfgName string      // the lab config as the user named it (-f bad.yaml), for messages
	cfgBase string      // the directory its relative paths are taken from

	cleanup []func() // run when run returns (a dry run's temporary files: release.go)
}

// withSynthetic adds the synthetic benchmark graph's flags (--synthetic N, --synthetic-delay,
// --synthetic-ninja; the rig's package internal/rig/synthetic) to a flag set. The benchmark
// build (bench.go, -tags bench) and the tests (synthetic_test.go) set it; in the production
// binary it is nil: no such flags, and no rig linked (TestNoRigInProduct).
var withSynthetic func(fs *pflag.FlagSet) syntheticFlags

// syntheticFlags is what the CLI asks of the synthetic graph's flags (synthetic.Flags).
type syntheticFlags interface {
	// Size is --synthetic N: 0 for the lab config.
	Size() int
	// Apply sets o's targets and values to the synthetic graph; an error names synthetic.yaml.
	Apply(o *engine.Options) error
	// WriteNinjaFile writes --synthetic-ninja's build.ninja; ok is false without that flag.
	WriteNinjaFile() (ok bool, err error)
}

// syntheticExtra are targets the tests add to the synthetic graph (a download and a wait for
// the status area's terminal test, progress_vt_test.go); nil in every other build.
var syntheticExtra []*engine.Target

// atExit runs before the process exits (the benchmark build's profiles).
var atExit []func()

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
	if len(os.Args) == 3 && os.Args[1] == bmcServeVerb {
		os.Exit(bmcServe(ctx, os.Args[2])) // bmc/service's daemon (bmcserve.go), not a user verb
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	for _, f := range atExit {
		f()
	}
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
	fs.BoolVar(&c.allEdges, "all-edges", false, "graph: draw every edge, not the transitive reduction")
	fs.StringVar(&c.by, "by", "target", "graph view: `view` target (a node per target) or family (a node per family)")
	fs.BoolVar(&c.all, "all", false, "graph/list: include every target, not only the default goal")
	fs.BoolVar(&c.cacheToo, "cache", false, "clean: also remove the content store (sticky keys are lost)")
	fs.BoolVar(&c.mirror, "mirror", false, "destroy: also delete the release mirror's storage (mirror.storage, shared by every lab of the host)")
	fs.BoolVar(&c.trim, "trim", false, "clean: only trim the content store (old entries; keys are kept)")
	fs.BoolVar(&c.restart, "restart", false, "power-cycle running VMs whose size changed, draining each node through the Kubernetes API first when the cluster answers")
	fs.StringSliceVar(&c.regenerate, "regenerate", nil, "make sticky `target`s anew (a new CA key, a new password)")
	fs.BoolVarP(&c.verbose, "verbose", "v", false, "stream the logs of running targets (labbuild log TARGET shows one afterwards)")
	fs.BoolVarP(&c.quiet, "quiet", "q", false, "no status lines; only failures and the summary")
	fs.BoolVarP(&c.help, "help", "h", false, "show help")
	fs.BoolVar(&c.showVersion, "version", false, "print the version")
	fs.StringVar(&c.now, "now", "", "pretend the time is `RFC3339` (testing certificate expiry)")
	fs.MarkHidden("now")
	if withSynthetic != nil {
		c.synth = withSynthetic(fs)
	}
	fs.SortFlags = false
	return fs
}

// run is main without os.Exit, for tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	defer startProfiling()() // LABBUILD_CPUPROFILE, LABBUILD_MEMPROFILE: see profile.go
	c := &cli{stdout: stdout, stderr: stderr, stamp: newStamper(args, stdout, stderr)}
	defer func() {
		for _, f := range c.cleanup {
			f()
		}
	}()
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
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		c.stdoutTTY = true
		c.terminal = !c.quiet
		c.tty = f
	}
	c.stdout, c.stderr = c.stamp.wrap(1, stdout), c.stamp.wrap(2, stderr)
	stderr = c.stderr
	rest := fs.Args()
	verb := ""
	if len(rest) > 0 {
		if _, ok := verbs[rest[0]]; ok {
			verb, rest = rest[0], rest[1:]
		}
	}
	if verb == "help" {
		switch {
		case len(rest) > 1:
			return report(stderr, usagef("help: one verb at a time, not %q", strings.Join(rest, " ")))
		case len(rest) == 1:
			if _, ok := verbs[rest[0]]; !ok {
				return report(stderr, unknownVerb(rest[0]))
			}
			verb, rest = rest[0], nil
		default:
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
	if c.synth != nil {
		if ok, err := c.synth.WriteNinjaFile(); ok {
			return report(stderr, err)
		}
	}
	if c.json {
		// --json is honoured or refused, never ignored.
		switch {
		case verb == "build" && !c.dryRun:
			return report(stderr, usagef("--json: a build has no JSON output; use -n --json for the plan"))
		case verb == "graph":
			if c.format != "dot" && c.format != "json" {
				return report(stderr, usagef("--json and --format %s disagree", c.format))
			}
			c.format = "json"
		case verbs[verb].json:
		default:
			return report(stderr, usagef("--json: %s has no JSON output", verb))
		}
	}
	err := verbs[verb].run(ctx, c, rest)
	if verb == "build" && len(rest) > 0 && len(fs.Args()) > 0 && fs.Args()[0] == rest[0] {
		err = orVerb(err, rest[0])
	}
	return report(stderr, err)
}

// report prints err once and maps it to an exit status.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var be *engine.BuildError
	var es exitStatus
	var ue *engine.UsageError
	var ce *lab.ConfigError
	var ces lab.ConfigErrors
	switch {
	case errors.As(err, &es):
		// A remote command's own status (labbuild ssh NODE -- COMMAND), passed on silently.
		return int(es)
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
func (c *cli) options(goals []string) (engine.Options, error) {
	o := engine.Options{
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
	if c.synth != nil && c.synth.Size() > 0 {
		c.stamp.collector().Stat("synthetic.yaml") // what Apply reads, present or not
		c.stamp.collector().Stat("src")
		if err := c.synth.Apply(&o); err != nil {
			return o, &lab.ConfigError{File: "synthetic.yaml", Msg: err.Error()}
		}
		o.Targets = append(o.Targets, syntheticExtra...)
		return o, nil
	}
	path := c.file
	if path == "" {
		if _, err := os.Stat("lab.yaml"); err == nil {
			path = "lab.yaml"
		}
	}
	if path == "" {
		c.stamp.collector().Stat("lab.yaml") // its absence too: the embedded default is used
	} else if path != "-" {
		c.stamp.collector().Stat(path) // before it is read: a later edit shows as a change
	}
	name := path
	if name == "" {
		name = "default lab.yaml"
	}
	// The directory of the file the kernel opens for path, as the engine takes it (a lexical
	// "../" from a symlinked $PWD would name another file than the one read).
	c.cfgName, c.cfgBase = name, engine.BaseDir(path)
	cfg, err := lab.LoadAndValidate(path, name)
	if err != nil {
		return o, err
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(c.stderr, "labbuild: warning: %s: %s\n", name, w)
	}
	o.Config, o.ConfigPath, c.cfg = targets.Lab{Config: cfg, Restart: c.restart, DestroyMirror: c.mirror}, path, cfg
	return o, nil
}

// checkFiles checks, before anything is written, the files the config names (pull secret,
// SSH key, oci: mirrors) that the targets selected by o.Goals and their upstreams read. It
// loads the project once and hands it to the build (o.Targets), so a build does not declare
// its targets twice.
func (c *cli) checkFiles(o *engine.Options) error {
	if c.cfg == nil {
		return nil
	}
	p, err := engine.Load(*o)
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
			if r == lab.ReleaseMirrors {
				want[r] = true
			}
		}
	}
	var fields []string
	for _, f := range append(append([]string{}, lab.FileFields...), lab.ReleaseMirrors) {
		if want[f] {
			fields = append(fields, f)
		}
	}
	c.recordConfigFiles(fields)
	if err := c.cfg.CheckFiles(c.cfgName, c.cfgBase, fields); err != nil {
		return err
	}
	o.Targets = p.Targets
	return nil
}
