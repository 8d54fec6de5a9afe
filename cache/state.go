package cache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// stateHeader starts every state file; a file with another header reads as empty (a new
// format after an upgrade costs one rebuild-from-cache, not a crash).
const stateHeader = "labbuild-state 2\n"

// TargetState is what the last build recorded for one target.
type TargetState struct {
	Key       Digest // action key of the outputs now materialized
	OutDigest Digest
	Epoch     int64 // ns; generation time (see Entry.Epoch)
	StaleAt   int64 // ns; 0 = never
	Failed    bool  // the last attempt failed (outputs, if any, are from before)
	Outputs   []OutputState
}

// OutputState is one materialized output file and its fingerprint when written.
type OutputState struct {
	Rel string
	FP  Fingerprint
}

// FileState is a declared input file's fingerprint and the digest it had then.
type FileState struct {
	FP     Fingerprint
	Digest Digest
}

// State is the journal of one output directory: per target, its last action key, output
// digest and output fingerprints; per input file, a fingerprint and digest. It is read with one
// ReadFile at the start of a build, appended to as targets finish (a crash loses at most the
// line being written), and compacted when it has grown to twice its live size, as ninja does
// with .ninja_log. Methods are safe for concurrent use.
type State struct {
	mu      sync.Mutex
	path    string
	targets map[string]*TargetState
	files   map[string]FileState
	lines   int // records in the file, live or not
	f       *os.File
}

// LoadState reads the state file at path; a missing file is an empty state, and damaged
// records (a torn last line, an unknown header) are skipped.
func LoadState(path string) (*State, error) {
	s := &State{path: path, targets: map[string]*TargetState{}, files: map[string]FileState{}}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state %s: %w", path, err)
	}
	if !bytes.HasPrefix(data, []byte(stateHeader)) {
		return s, nil
	}
	s.parse(string(data[len(stateHeader):]))
	return s, nil
}

// parse reads records; substrings share the one string, so names cost no allocation each.
func (s *State) parse(text string) {
	var cur *TargetState
	var curName string
	want := 0
	for len(text) > 0 {
		nl := strings.IndexByte(text, '\n')
		if nl < 0 {
			break // torn last line
		}
		line := text[:nl]
		text = text[nl+1:]
		s.lines++
		if want > 0 && (len(line) == 0 || line[0] != 'O') {
			cur, want = nil, 0 // record cut short: drop it
		}
		if len(line) < 2 || line[1] != '\t' {
			continue
		}
		var buf [8]string
		f := splitTabs(buf[:0], line[2:])
		switch line[0] {
		case 'T':
			if len(f) != 7 {
				continue
			}
			var ts TargetState
			var err1, err2 error
			ts.Key, err1 = ParseDigest(f[1])
			ts.OutDigest, err2 = ParseDigest(f[2])
			e, err3 := strconv.ParseInt(f[3], 10, 64)
			st, err4 := strconv.ParseInt(f[4], 10, 64)
			n, err5 := strconv.Atoi(f[6])
			if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil {
				continue
			}
			ts.Epoch, ts.StaleAt, ts.Failed = e, st, f[5] == "f"
			ts.Outputs = make([]OutputState, 0, n)
			cur, curName, want = &ts, f[0], n
			if n == 0 {
				s.targets[curName] = cur
				cur = nil
			}
		case 'O':
			if cur == nil || len(f) != 5 {
				continue
			}
			fp, ok := parseFP(f[1:])
			if !ok {
				cur, want = nil, 0
				continue
			}
			cur.Outputs = append(cur.Outputs, OutputState{Rel: f[0], FP: fp})
			want--
			if want == 0 {
				s.targets[curName] = cur
				cur = nil
			}
		case 'F':
			if len(f) != 6 {
				continue
			}
			fp, ok := parseFP(f[1:5])
			d, err := ParseDigest(f[5])
			if !ok || err != nil {
				continue
			}
			s.files[f[0]] = FileState{FP: fp, Digest: d}
		case 'D':
			if len(f) == 1 {
				delete(s.targets, f[0])
			}
		}
	}
}

// splitTabs appends the tab-separated fields of s to out (a caller's array: no allocation).
func splitTabs(out []string, s string) []string {
	for {
		i := strings.IndexByte(s, '\t')
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		s = s[i+1:]
	}
}

func parseFP(f []string) (Fingerprint, bool) {
	size, e1 := strconv.ParseInt(f[0], 10, 64)
	mt, e2 := strconv.ParseInt(f[1], 10, 64)
	ino, e3 := strconv.ParseUint(f[2], 10, 64)
	var mode uint64
	var e4 error
	if len(f) > 3 {
		mode, e4 = strconv.ParseUint(f[3], 8, 32)
	}
	if e1 != nil || e2 != nil || e3 != nil || e4 != nil {
		return Fingerprint{}, false
	}
	return Fingerprint{Size: size, Mtime: mt, Ino: ino, Mode: uint32(mode)}, true
}

// Target returns the recorded state of target name, or nil.
func (s *State) Target(name string) *TargetState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.targets[name]
}

// File returns the recorded fingerprint and digest of input file path.
func (s *State) File(path string) (FileState, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[path]
	return f, ok
}

// Names returns the recorded target names, sorted.
func (s *State) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.targets))
	for n := range s.targets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func appendTarget(b []byte, name string, ts *TargetState) []byte {
	flag := "-"
	if ts.Failed {
		flag = "f"
	}
	b = fmt.Appendf(b, "T\t%s\t%s\t%s\t%d\t%d\t%s\t%d\n", name, ts.Key, ts.OutDigest, ts.Epoch, ts.StaleAt, flag, len(ts.Outputs))
	for _, o := range ts.Outputs {
		b = fmt.Appendf(b, "O\t%s\t%d\t%d\t%d\t%o\n", o.Rel, o.FP.Size, o.FP.Mtime, o.FP.Ino, o.FP.Mode)
	}
	return b
}

func appendFile(b []byte, path string, fs FileState) []byte {
	return fmt.Appendf(b, "F\t%s\t%d\t%d\t%d\t%o\t%s\n", path, fs.FP.Size, fs.FP.Mtime, fs.FP.Ino, fs.FP.Mode, fs.Digest)
}

func (s *State) appendLocked(b []byte, records int) error {
	if s.f == nil {
		if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		if st, err := f.Stat(); err == nil && st.Size() == 0 {
			b = append([]byte(stateHeader), b...)
		}
		s.f = f
	}
	_, err := s.f.Write(b) // one write per record: a crash tears at most this record
	s.lines += records
	return err
}

// SetTarget records ts for name, in memory and in the journal.
func (s *State) SetTarget(name string, ts *TargetState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets[name] = ts
	return s.appendLocked(appendTarget(nil, name, ts), 1+len(ts.Outputs))
}

// DeleteTarget forgets name (its outputs were removed).
func (s *State) DeleteTarget(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.targets[name]; !ok {
		return nil
	}
	delete(s.targets, name)
	return s.appendLocked([]byte("D\t"+name+"\n"), 1)
}

// SetFile records an input file's fingerprint and digest.
func (s *State) SetFile(path string, fs FileState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.files[path]; ok && old == fs {
		return nil
	}
	s.files[path] = fs
	return s.appendLocked(appendFile(nil, path, fs), 1)
}

// Compact rewrites the journal with only live records, through a temporary file and a rename,
// when it holds more than twice as many lines as live records (or force is set).
func (s *State) Compact(force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	live := len(s.files)
	for _, t := range s.targets {
		live += 1 + len(t.Outputs)
	}
	if !force && s.lines <= 2*live+16 {
		return nil
	}
	b := []byte(stateHeader)
	names := make([]string, 0, len(s.targets))
	for n := range s.targets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b = appendTarget(b, n, s.targets[n])
	}
	paths := make([]string, 0, len(s.files))
	for p := range s.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		b = appendFile(b, p, s.files[p])
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return err
	}
	s.lines = live
	return nil
}

// Close closes the journal.
func (s *State) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
