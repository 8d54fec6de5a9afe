package engine

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/labbuild/labbuild/cache"
)

// Paths inside the output directory.
const (
	metaDir   = ".labbuild"
	stateFile = "state"
	lockFile  = "lock"
	cacheDir  = "cache"
	logDir    = "log"
	tmpDir    = "tmp"
)

// LogPath is where target name's last log is kept under the output directory outDir:
// OUT/.labbuild/log/<family>/<name>.log, replaced by each run of the target.
func LogPath(outDir, name string) string {
	return logPathIn(filepath.Join(outDir, metaDir), name)
}

// logPathIn is LogPath for the metadata directory meta (OUT/.labbuild).
func logPathIn(meta, name string) string {
	return filepath.Join(meta, logDir, filepath.FromSlash(name)+".log")
}

// Build builds o.Goals. It returns a *BuildError when targets failed, a *UsageError for a bad
// request, and other errors for trouble with the output directory.
func Build(ctx context.Context, o Options) (*Result, error) {
	start := time.Now()
	// Declaring the targets and reading the state are independent: overlap them.
	type opened struct {
		b   *builder
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		b, err := openBuilder(ctx, o)
		ch <- opened{b, err}
	}()
	p, err := Load(o)
	tLoad := time.Since(start)
	ob := <-ch
	tOpen := time.Since(start)
	if ob.err != nil {
		return nil, ob.err
	}
	b := ob.b
	defer b.close()
	if err != nil {
		return nil, err
	}
	if err := b.attach(p); err != nil {
		return nil, err
	}
	roots, err := p.Select(o.Goals)
	if err != nil {
		return nil, err
	}
	res, err := b.run(ctx, roots)
	if err == nil && res != nil {
		err = b.prune(ctx, roots, res)
	}
	if res != nil {
		res.Duration = time.Since(start)
	}
	if o.Stats {
		fmt.Fprintf(b.stderr, "labbuild stats: %d targets; declare+graph %v, lock+state %v (overlapped), fast path %v (%d up to date), scheduler %v, total %v\n",
			len(p.Targets), tLoad.Round(time.Microsecond), tOpen.Round(time.Microsecond), b.tQuick.Round(time.Microsecond), b.nQuick, b.tSched.Round(time.Microsecond), time.Since(start).Round(time.Microsecond))
	}
	return res, err
}

// builder is the state of one build.
type builder struct {
	p       *Project
	runCtx  context.Context // the build's context: a failure after it is cancelled is an interrupt
	o       Options
	runner  runner // what a verdict leads to: a build's, or a dry run's (Options.DryRun)
	out     string // absolute output directory
	meta    string
	now     time.Time
	wall    time.Time // real start time, for the racy-file rule (never the injected clock)
	lock    *cache.Lock
	cache   *cache.Cache
	state   *cache.State
	baseDir string
	stdout  io.Writer
	stderr  io.Writer
	regen   map[string]bool
	// outfd and basefd are the output directory and the config's directory, open while the
	// build runs (openDirs); outPrefix is prepended to output paths when outfd is not open.
	outfd, basefd int
	outPrefix     string
	tQuick        time.Duration // -d stats
	tSched        time.Duration
	nQuick        int

	mu     sync.Mutex // guards printing and the counters below
	done   int
	total  int
	todo   int             // targets that will run or be restored: [N/M]'s M
	status bool            // a status line is on screen
	causes map[string]bool // shared root causes printed (rootCause)
}

// newBuilder opens the output directory for project p.
func newBuilder(ctx context.Context, p *Project, o Options) (*builder, error) {
	b, err := openBuilder(ctx, o)
	if err != nil {
		return nil, err
	}
	if err := b.attach(p); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// attach sets the project and checks the options that name its targets.
func (b *builder) attach(p *Project) error {
	b.p = p
	for _, r := range b.o.Regenerate {
		if r == RegenerateAll {
			for _, t := range p.Targets {
				if t.Sticky {
					b.regen[t.Name] = true
				}
			}
			continue
		}
		t := p.Target(r)
		if t == nil || !t.Sticky {
			return &UsageError{Msg: fmt.Sprintf("--regenerate %s: not a sticky target (labbuild list shows them)", r)}
		}
		b.regen[r] = true
	}
	return nil
}

// openBuilder locks the output directory (waiting for it until ctx is done) and reads its
// state.
func openBuilder(ctx context.Context, o Options) (*builder, error) {
	out, err := cache.Abs(o.OutDir) // as the kernel resolves it: "-o ../out" from a symlink
	if err != nil {
		return nil, err
	}
	b := &builder{o: o, runner: newRunner(o), out: out, meta: filepath.Join(out, metaDir), baseDir: BaseDir(o.ConfigPath), regen: map[string]bool{}, wall: time.Now()}
	if o.Wall != nil {
		b.wall = o.Wall()
	}
	b.stdout, b.stderr = o.Stdout, o.Stderr
	if b.stdout == nil {
		b.stdout = io.Discard
	}
	if b.stderr == nil {
		b.stderr = io.Discard
	}
	if o.Now != nil {
		b.now = o.Now()
	} else {
		b.now = time.Now()
	}
	b.cache = cache.Open(filepath.Join(b.meta, cacheDir))
	if err := b.runner.open(ctx, b); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

// loadState reads the output directory's state (under the lock, as the runner took it).
func (b *builder) loadState() error {
	b.o.Stamp.SetDirs(b.out, b.baseDir)
	b.o.Stamp.StateLoaded(filepath.Join(b.meta, stateFile)) // under the lock, as read
	var err error
	b.state, err = cache.LoadState(filepath.Join(b.meta, stateFile))
	return err
}

// Trim policy for the content store: entries unused for TrimAge, then the least recently used
// past TrimBytes, go; pinned (sticky) entries stay. Checked at most once a day, after a build.
const (
	TrimAge      = 30 * 24 * time.Hour
	TrimBytes    = 10 << 30
	trimInterval = 24 * time.Hour
	trimStamp    = "trimmed"
)

func (b *builder) close() {
	if b.state != nil {
		b.runner.close(b)
		b.state.Close()
	}
	if r := b.o.Stamp; r != nil {
		r.StateClosing()
		if st, err := os.Stat(filepath.Join(b.meta, trimStamp)); err == nil {
			r.Until(st.ModTime().Add(trimInterval).UnixNano()) // the next build trims
		} else {
			r.Fail("no trim stamp")
		}
	}
	b.lock.Release()
}

// maybeTrim trims the store when the last trim is over a day old (a stamp file's mtime).
func (b *builder) maybeTrim() {
	stamp := filepath.Join(b.meta, trimStamp)
	if st, err := os.Stat(stamp); err == nil && time.Since(st.ModTime()) < trimInterval {
		return
	}
	if _, err := b.cache.Trim(TrimAge, TrimBytes, time.Now()); err == nil {
		os.WriteFile(stamp, nil, 0o644)
	}
}

// TrimCache trims the output directory's content store now (labbuild clean --trim), holding
// the lock, with the given limits (0: no limit of that kind). With o.DryRun it removes nothing
// and returns what it would remove (under a shared lock, as every dry run).
func TrimCache(ctx context.Context, o Options, maxAge time.Duration, maxBytes int64) (cache.TrimStats, error) {
	b, err := openBuilder(ctx, o)
	if err != nil {
		return cache.TrimStats{}, err
	}
	defer b.close()
	if o.DryRun {
		return b.cache.PlanTrim(maxAge, maxBytes, time.Now())
	}
	return b.cache.Trim(maxAge, maxBytes, time.Now())
}
