package targets

import (
	"context"
	"time"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/engine"
)

// The engine lives in package engine (docs/layout.md says why); these names keep the
// families' declarations and the CLI reading as before. Options.Config defaults to the
// embedded default lab here, which the engine cannot know of.
type (
	Target       = engine.Target
	Step         = engine.Step
	Action       = engine.Action
	ProbeResult  = engine.ProbeResult
	Options      = engine.Options
	Result       = engine.Result
	PlanItem     = engine.PlanItem
	Outcome      = engine.Outcome
	BuildError   = engine.BuildError
	UsageError   = engine.UsageError
	Project      = engine.Project
	CleanOptions = engine.CleanOptions
	Values       = engine.Values
	MapValues    = engine.MapValues
	Progress     = engine.Progress
	Reporter     = engine.Reporter

	DestroyOutcome = engine.DestroyOutcome
	DestroyReport  = engine.DestroyReport
)

// What a Destroy found (engine.Destroyed, ...).
const (
	Destroyed     = engine.Destroyed
	AlreadyAbsent = engine.AlreadyAbsent
	RecordOnly    = engine.RecordOnly
)

// Plan actions of External targets (engine.Keep, ...).
const (
	Keep    = engine.Keep
	Create  = engine.Create
	Update  = engine.Update
	Replace = engine.Replace
)

// Outcomes (engine.Built, ...).
const (
	Built    = engine.Built
	Reused   = engine.Reused
	UpToDate = engine.UpToDate
	Failed   = engine.Failed
	Skipped  = engine.Skipped
	Planned  = engine.Planned
)

// Trim policy of the content store (engine.TrimAge, engine.TrimBytes).
const (
	TrimAge   = engine.TrimAge
	TrimBytes = engine.TrimBytes
)

// Paths inside the output directory (the engine's layout), for tests that read logs.
const (
	metaDir = ".labbuild"
	logDir  = "log"
)

// withDefault fills in the embedded default lab when o names neither a config nor targets.
func withDefault(o Options) Options {
	if o.Config == nil && o.Values == nil && o.Targets == nil {
		o.Config = DefaultConfig()
	}
	return o
}

// Load is engine.Load over the registered families (the default lab when o.Config is nil).
func Load(o Options) (*Project, error) { return engine.Load(withDefault(o)) }

// Build is engine.Build over the registered families (the default lab when o.Config is nil).
func Build(ctx context.Context, o Options) (*Result, error) {
	return engine.Build(ctx, withDefault(o))
}

// Clean is engine.Clean over the registered families.
func Clean(ctx context.Context, o Options, co CleanOptions) ([]string, error) {
	return engine.Clean(ctx, withDefault(o), co)
}

// Destroy is engine.Destroy over the registered families.
func Destroy(ctx context.Context, o Options) (*DestroyReport, error) {
	return engine.Destroy(ctx, withDefault(o))
}

// TrimCache is engine.TrimCache.
func TrimCache(o Options, maxAge time.Duration, maxBytes int64) (cache.TrimStats, error) {
	return engine.TrimCache(o, maxAge, maxBytes)
}
