package engine

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/labbuild/labbuild/cache"
)

// Options configures one build.
type Options struct {
	// Config is the lab config, as the Source of the targets and the values they read (the CLI
	// passes lab.LoadAndValidate's, which is the embedded default lab when no file is named).
	Config Source
	// Values, when set, replaces Config as the source of declared values (synthetic graphs).
	Values Values
	// ConfigPath is the lab config file ("" for the embedded default); relative file paths in
	// the config are taken from its directory.
	ConfigPath string
	// OutDir is the output directory (out/); its .labbuild/ holds state, cache, logs, lock.
	OutDir string
	// Goals are target names, family names ("pki"), or name prefixes ("manifests/static-pods").
	// Empty means the default goal: every target that is not External.
	Goals []string
	// Jobs is how many targets run at once (-j); 0 means the number of CPUs.
	Jobs int
	// KeepGoing (-k) builds what does not depend on a failure instead of stopping at the first.
	KeepGoing bool
	// DryRun (-n) computes the plan and changes nothing.
	DryRun bool
	// Force (-B) runs every selected target except Sticky ones, which are restored.
	Force bool
	// Regenerate names Sticky targets to make anew (a new CA key, a new password);
	// RegenerateAll names every one.
	Regenerate []string
	// Now is the clock, read once per build (injected in tests); time.Now when nil.
	Now func() time.Time
	// Wall is the real clock the racy-file rule (fileDigest) compares input files' change
	// times with, read once per build; time.Now when nil. Never Now: a certificate's clock is
	// not the file system's. Tests inject a later time to stand for a build that starts after
	// cache.RacyWindow has passed.
	Wall func() time.Time
	// Stdout and Stderr receive the status line, failures and the plan; io.Discard when nil.
	Stdout, Stderr io.Writer
	// Terminal selects the one-line ninja-style status ([N/M] target, rewritten in place).
	Terminal bool
	// Reporter, when set, draws the build's progress instead of the engine's own status lines
	// (see Reporter); the CLI's status area and plain progress lines.
	Reporter Reporter
	// LogTee, when set, returns a writer that also receives what target name writes to its log
	// as it runs (-v); nil for none.
	LogTee func(name string) io.Writer
	// Explain prints, for every target that runs or is restored, why.
	Explain bool
	// Targets, when non-nil, replaces Config's targets (tests, synthetic graphs).
	Targets []*Target
	// Stats prints, at the end, how long each phase of the build took (-d stats).
	Stats bool
	// Stamp, when set, collects what a null build's verdict rests on: every fingerprint the
	// fast path compared, the state file's, the time the verdict may change (a renewal, the
	// daily trim), or why this build's verdict may not be replayed (see cache.Stamp).
	Stamp *cache.StampCollector
}

// RegenerateAll, as an Options.Regenerate name (`--regenerate all`), names every Sticky
// target.
const RegenerateAll = "all"

// Source is where a build's targets and the values they read come from: package targets' Lab
// (a lab.yaml, whose registered families declare the targets), or a test's. Values are read
// at each build, so a Source edited in place between builds is seen as edited.
type Source interface {
	Values
	// Declare returns the source's targets, in a stable order.
	Declare() []*Target
}

// Outcome is what a build did with one target.
type Outcome string

// Outcomes, as the summary line counts them.
const (
	Built    Outcome = "built"      // its Run ran
	Restored Outcome = "restored"   // its outputs came back from the content store
	UpToDate Outcome = "up to date" // nothing to do
	Failed   Outcome = "failed"
	Skipped  Outcome = "skipped" // an upstream failed
	Planned  Outcome = "planned" // dry run: would build or restore
)

// Result is what a build did. Name lists are sorted.
type Result struct {
	Built    []string `json:"built"`
	Restored []string `json:"restored"`
	UpToDate []string `json:"upToDate"`
	Failed   []string `json:"failed"`
	Skipped  []string `json:"skipped"` // an upstream failed
	// NotStarted lists targets the build never reached because it stopped: at the first
	// failure without -k, or on an interrupt (then also the targets it was running). None of
	// them failed.
	NotStarted []string `json:"notStarted,omitempty"`
	// Destroyed lists External targets the config no longer declares whose objects the build
	// removed (see Orphaner).
	Destroyed []string `json:"destroyed,omitempty"`
	// Plan lists, in build order, every target that was built or restored, or (with DryRun)
	// would be, with its verdict; then the orphans to destroy.
	Plan     []PlanItem    `json:"plan"`
	Duration time.Duration `json:"durationNs"`
	// Inputs maps each evaluated target to its labelled key inputs ("config:network.apiVIP",
	// "file:access.pullSecretFile", "dep:pki/ca/root", "version") and their digests; only with
	// Options.Explain.
	Inputs map[string]map[string]cache.Digest `json:"-"`

	p      *Project // the targets, for State
	states []State  // by target ID
}

// State returns the verdict on target name: where it stood before this build acted (a dry run:
// where it stands), StateBlocked when no verdict was reached (an input could not be read, an
// upstream is blocked or failed, the build stopped first) or name was not selected.
func (r *Result) State(name string) State {
	if r.p != nil {
		if id, ok := r.p.Graph.ID(name); ok && r.states[id] != 0 {
			return r.states[id]
		}
	}
	return StateBlocked
}

// Summary returns the one line printed at the end of a build.
func (r *Result) Summary() string {
	s := fmt.Sprintf("%d built, %d restored, %d up to date", len(r.Built), len(r.Restored), len(r.UpToDate))
	if len(r.Failed) > 0 {
		s += fmt.Sprintf(", %d failed", len(r.Failed))
	}
	if len(r.Skipped) > 0 {
		s += fmt.Sprintf(", %d skipped", len(r.Skipped))
	}
	if len(r.NotStarted) > 0 {
		s += fmt.Sprintf(", %d not started", len(r.NotStarted))
	}
	if len(r.Destroyed) > 0 {
		s += fmt.Sprintf(", %d destroyed", len(r.Destroyed))
	}
	return s + fmt.Sprintf(" in %.2fs", r.Duration.Seconds())
}

// BuildError is returned when targets failed; it names them. Each root cause was printed once.
type BuildError struct{ Failed []string }

func (e *BuildError) Error() string {
	return "build failed: " + strings.Join(e.Failed, ", ")
}

// UsageError is a bad request (unknown target, bad goal): the CLI exits with status 2.
type UsageError struct {
	Msg string
	// Goal is the goal that names no target or family, when that is the mistake: the CLI adds
	// the nearest names.
	Goal string
}

func (e *UsageError) Error() string { return e.Msg }
