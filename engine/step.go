package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/labbuild/labbuild/cache"
)

// Step is a target's view of one build: its declared config values, files and upstream
// outputs in, its output files out. A Run function gets everything through its Step and
// nothing else, which is what makes the declared inputs the whole truth about a target.
type Step struct {
	ctx     context.Context
	t       *Target
	values  Values
	baseDir string            // directory relative file paths in the config are resolved against
	outRoot string            // the output directory (absolute)
	stage   string            // staging directory for this run's outputs
	deps    map[string]depOut // declared upstream targets and their output lists
	now     time.Time
	epoch   time.Time
	staleAt time.Time
	log     io.Writer
	warn    io.Writer // the build's stderr: Warnf
	written map[string]fs.FileMode
	sums    map[string]*cache.HashingWriter // each output's writer: its digest once closed
	probe   ProbeResult
	prevDir string // where the previous outputs of this target are materialized
	scratch string
	// reporter receives Progress reports (nil: no display).
	reporter Reporter
}

// depOut is what a Step knows of one upstream target: where its outputs are and their names.
type depOut struct {
	dir   string   // absolute directory
	files []string // sorted relative paths
}

// Context returns the build's context; long waits must honour its cancellation.
func (s *Step) Context() context.Context { return s.ctx }

// Target returns the target being built.
func (s *Step) Target() *Target { return s.t }

// Now returns the build's clock reading (injected in tests; one reading per build).
func (s *Step) Now() time.Time { return s.now }

// Epoch returns the time this target's current generation was issued: the moment it was
// first built, or renewed after going stale. Certificates take NotBefore from it, so a
// rebuild with the same inputs reproduces the same bytes.
func (s *Step) Epoch() time.Time { return s.epoch }

// SetStaleAt records when this output goes stale (a certificate's NotAfter minus its renewal
// margin). A build after that time renews the target: a new Epoch, and so a new key.
func (s *Step) SetStaleAt(t time.Time) { s.staleAt = t }

// Probed returns what the target's Probe saw before this run (Keep when it has no Probe or
// the run has another reason), so an External Run can create, update or replace.
func (s *Step) Probed() ProbeResult { return s.probe }

// Log returns the writer for the target's log (out/.labbuild/log/<name>.log). Never write
// secrets to it.
func (s *Step) Log() io.Writer { return s.log }

// Logf writes one line to the target's log.
func (s *Step) Logf(format string, args ...any) {
	fmt.Fprintf(s.log, format+"\n", args...)
}

// Warnf writes one line to the target's log and, as "labbuild: warning: <target>: …", to the
// build's stderr: for what the user should see although the target succeeds (an overcommit the
// lab allowed). Its text must not hold a secret.
func (s *Step) Warnf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintf(s.log, "warning: %s\n", msg)
	if s.warn != nil {
		fmt.Fprintf(s.warn, "labbuild: warning: %s: %s\n", s.t.Name, msg)
	}
}

// Value decodes the config value at path, which must be one of the target's Reads, into v
// (as encoding/json would). Reading an undeclared path is an error: it would let an input
// change the output without changing the key.
func (s *Step) Value(p string, v any) error {
	if !slices.Contains(s.t.Reads, p) && !slices.Contains(s.t.Files, p) {
		return fmt.Errorf("%s: reads config %q, which it does not declare in Reads", s.t.Name, p)
	}
	raw, ok := s.values.Lookup(p)
	if !ok {
		return fmt.Errorf("%s: config has no field %q", s.t.Name, p)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: config %s: %w", s.t.Name, p, err)
	}
	return nil
}

// String returns the string config value at path (declared in Reads).
func (s *Step) String(p string) (string, error) {
	var v string
	err := s.Value(p, &v)
	return v, err
}

// FilePath returns the absolute path of the file named by config field p (declared in Files).
func (s *Step) FilePath(p string) (string, error) {
	if !slices.Contains(s.t.Files, p) {
		return "", fmt.Errorf("%s: reads the file named by %q, which it does not declare in Files", s.t.Name, p)
	}
	return resolveFile(s.values, s.baseDir, p)
}

// MaxFileBytes caps what Step.File reads: the files a lab names for a target to read whole
// are secrets and keys of a few KB (the pull secret, the SSH public key; lab.MaxFileBytes
// checks them first). A larger file, or one that is not a regular file, is an error saying so
// (cache.ReadRegular); a target that streams a large file takes FilePath.
const MaxFileBytes = 1 << 20

// File returns the content of the file named by config field p (declared in Files): a regular
// file of at most MaxFileBytes. The error names the field and the path, never the content.
func (s *Step) File(p string) ([]byte, error) {
	name, err := s.FilePath(p)
	if err != nil {
		return nil, err
	}
	b, err := cache.ReadRegular(name, MaxFileBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.t.Name, &InputError{Field: p, Where: s.Where(p), Path: name, Err: err})
	}
	return b, nil
}

func (s *Step) dep(name string) (depOut, error) {
	d, ok := s.deps[name]
	if !ok {
		return depOut{}, fmt.Errorf("%s: reads upstream %q, which it does not declare in Deps", s.t.Name, name)
	}
	return d, nil
}

// DepFiles returns the sorted relative paths of upstream target dep's outputs.
func (s *Step) DepFiles(dep string) ([]string, error) {
	d, err := s.dep(dep)
	return d.files, err
}

// DepPath returns the absolute path of output rel of upstream target dep, for programs that
// need a file name. The file must be one of dep's outputs.
func (s *Step) DepPath(dep, rel string) (string, error) {
	d, err := s.dep(dep)
	if err != nil {
		return "", err
	}
	if _, found := slices.BinarySearch(d.files, rel); !found {
		return "", fmt.Errorf("%s: upstream %s has no output %q", s.t.Name, dep, rel)
	}
	return filepath.Join(d.dir, filepath.FromSlash(rel)), nil
}

// DepFile returns the content of output rel of upstream target dep.
func (s *Step) DepFile(dep, rel string) ([]byte, error) {
	p, err := s.DepPath(dep, rel)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// Prev returns output rel as the previous successful run left it (for External targets, the
// record of what they created), or fs.ErrNotExist.
func (s *Step) Prev(rel string) ([]byte, error) {
	if s.prevDir == "" {
		return nil, fs.ErrNotExist
	}
	return os.ReadFile(filepath.Join(s.prevDir, filepath.FromSlash(rel)))
}

// RecordStep returns a Step outside any build that reads only target t's previous outputs,
// materialized in dir (Prev): for tools and tests that inspect what an External target
// recorded. Every other input is empty.
func RecordStep(t *Target, dir string) *Step {
	return &Step{ctx: context.Background(), t: t, prevDir: dir, log: io.Discard, written: map[string]fs.FileMode{}}
}

// Scratch returns a private temporary directory for this run (tool working files), removed
// when the run ends. Nothing in it is an output.
func (s *Step) Scratch() (string, error) {
	if s.scratch == "" {
		d, err := os.MkdirTemp(filepath.Dir(s.stage), "scratch-")
		if err != nil {
			return "", err
		}
		s.scratch = d
	}
	return s.scratch, nil
}

// checkRel validates an output path: relative, clean, slash-separated, not inside .labbuild.
func checkRel(rel string) error {
	if rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == ".." || strings.Contains(rel, `\`) {
		return fmt.Errorf("output path %q must be clean, relative and slash-separated", rel)
	}
	return nil
}

// WriteFile writes output rel with the given permission bits (0600 for private keys and other
// secrets). Writing the same path twice in one run is an error: it would hide a defect.
func (s *Step) WriteFile(rel string, data []byte, mode fs.FileMode) error {
	w, err := s.Create(rel, mode)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// Create opens output rel for streaming writes (large files); Close must be called.
func (s *Step) Create(rel string, mode fs.FileMode) (io.WriteCloser, error) {
	if err := checkRel(rel); err != nil {
		return nil, fmt.Errorf("%s: %w", s.t.Name, err)
	}
	if _, dup := s.written[rel]; dup {
		return nil, fmt.Errorf("%s: output %q written twice", s.t.Name, rel)
	}
	p := filepath.Join(s.stage, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode.Perm())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.t.Name, err)
	}
	s.written[rel] = mode.Perm()
	// The output is hashed as it is written, so storing it needs no second read (PutHashed).
	w := cache.NewHashingWriter(f)
	if s.sums == nil {
		s.sums = map[string]*cache.HashingWriter{}
	}
	s.sums[rel] = w
	return w, nil
}

// Wrote reports whether output rel was written in this run (a Run that writes some outputs
// conditionally checks before writing a default).
func (s *Step) Wrote(rel string) bool {
	_, ok := s.written[rel]
	return ok
}

// outputs returns the relative paths written so far, sorted.
func (s *Step) outputs() []string {
	out := make([]string, 0, len(s.written))
	for r := range s.written {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// resolveFile returns the absolute path named by the string config value at p: "~/" expands
// to $HOME, and relative paths are taken from the lab config's directory.
func resolveFile(v Values, baseDir, p string) (string, error) {
	raw, ok := v.Lookup(p)
	if !ok {
		return "", fmt.Errorf("config has no field %q", p)
	}
	var name string
	if len(raw) > 2 && raw[0] == '"' && raw[len(raw)-1] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		name = string(raw[1 : len(raw)-1]) // the common case, without a JSON decoder
	} else if err := json.Unmarshal(raw, &name); err != nil || bytes.Equal(raw, []byte("null")) || name == "" {
		return "", &InputError{Field: p, Where: where(v, p)}
	}
	if strings.HasPrefix(name, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("%s: %w", p, err)
		}
		name = filepath.Join(home, name[2:])
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(baseDir, name)
	}
	return name, nil
}

// BaseDir returns the directory relative paths in the config file at path are taken from:
// the directory of the file the kernel opens for path (cache.Abs: through symlinks, never a
// lexical ".." from $PWD), or the working directory for the embedded default ("").
func BaseDir(path string) string {
	if path == "" {
		wd, _ := cache.Getwd()
		return wd
	}
	abs, err := cache.Abs(path)
	if err != nil {
		return filepath.Dir(path)
	}
	return filepath.Dir(abs)
}

// Values is how the engine reads config values: the canonical JSON of the value at a dotted
// path, and whether the path exists.
type Values interface {
	Lookup(path string) ([]byte, bool)
}

// WriteFileAtomic is cache.WriteFileAtomic for the families, which reach the cache only through
// the engine (docs/how-it-works.md): data written to path by a rename in its directory, with
// mode, so a reader (dnsmasq, haproxy) sees the old file or the new one.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	return cache.WriteFileAtomic(path, data, mode)
}
