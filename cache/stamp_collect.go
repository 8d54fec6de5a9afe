package cache

import (
	"errors"
	"os"
	"sync"
	"time"
)

// StampCollector collects, during one build, what its null-build verdict rested on (see Stamp).
// The engine's fast path adds each fingerprint it compared; the CLI adds the files it read
// whole before the build (the lab config, pull secret, SSH key) and the engine the state file,
// with their digests when racy (see RacyWindow). A nil *StampCollector records nothing. Safe for
// concurrent use.
type StampCollector struct {
	mu       sync.Mutex
	start    int64 // ns: the run's start (SetStart), for the racy rule
	files    []byte
	n        int
	until    int64  // ns; 0: no limit yet
	bad      string // why no stamp may be written ("" if one may)
	out      string // absolute output directory
	base     string // absolute base directory of StampBase entries
	statePth string
}

// SetStart records when the run started (ns since the epoch), before it consulted any file.
func (r *StampCollector) SetStart(ns int64) {
	if r != nil {
		r.start = ns
	}
}

// Add appends n entries encoded by AppendStampFile (one fast-path worker's share).
func (r *StampCollector) Add(entries []byte, n int) {
	if r == nil || n == 0 {
		return
	}
	r.mu.Lock()
	r.files = append(r.files, entries...)
	r.n += n
	r.mu.Unlock()
}

// Stat records, before the run reads it whole, path's fingerprint as it is now, or its absence.
// A relative path is taken from the working directory as the kernel has it (Abs). A regular
// file changed within RacyWindow of the run's start is recorded with the digest of its bytes.
func (r *StampCollector) Stat(path string) {
	if r == nil {
		return
	}
	abs, err := Abs(path)
	if err != nil {
		r.Fail("cannot make " + path + " absolute")
		return
	}
	fp, err := Stat(abs)
	base := byte(StampAbs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		r.Add(AppendStampFile(nil, base|StampAbsent, []byte(abs), fp), 1)
		return
	case err != nil:
		r.Fail(err.Error())
		return
	}
	if fp.Changed() < r.start-RacyWindow || !regular(abs) {
		r.Add(AppendStampFile(nil, base, []byte(abs), fp), 1)
		return
	}
	d, _, err := HashFile(abs)
	if err != nil {
		r.Fail(err.Error())
		return
	}
	if fp2, _ := Stat(abs); fp2 != fp {
		r.Fail(path + " changed while read")
		return
	}
	r.Add(append(AppendStampFile(nil, base|StampDigest, []byte(abs), fp), d[:]...), 1)
}

// regular reports whether path is a regular file (only those get a digest: a directory or a
// device is consulted for its existence, which its fingerprint records).
func regular(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// Until lowers the stamp's validity limit to ns (since the epoch).
func (r *StampCollector) Until(ns int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.until == 0 || ns < r.until {
		r.until = ns
	}
	r.mu.Unlock()
}

// Fail says why this run's verdict must not be stamped (the first reason is kept).
func (r *StampCollector) Fail(why string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	if r.bad == "" {
		r.bad = why
	}
	r.mu.Unlock()
}

// Failed returns why no stamp may be written, or "".
func (r *StampCollector) Failed() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

// SetDirs records the absolute output directory and the base directory of StampBase entries.
func (r *StampCollector) SetDirs(out, base string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.out, r.base = out, base
	r.mu.Unlock()
}

// StateLoaded notes the state file the build reads under the lock; StateClosing, called
// after the build closed it and before the lock is released, records it as it is then. A null
// build may have written it (an input file hashed again, recorded with its new fingerprint);
// it wrote no target, or recordVerdict failed the recording, so the state on disk then is one
// whose verdict is this run's.
func (r *StampCollector) StateLoaded(path string) {
	if r != nil {
		r.statePth = path
	}
}

// StateClosing: see StateLoaded.
func (r *StampCollector) StateClosing() {
	if r == nil || r.statePth == "" {
		return
	}
	r.Stat(r.statePth)
}

// File records an input file or output the engine compared outside its fast path: its
// fingerprint, and with digest the bytes it hashed (a file the state does not vouch for).
func (r *StampCollector) File(path string, fp Fingerprint, digest *Digest) {
	if r == nil {
		return
	}
	if digest == nil {
		r.Add(AppendStampFile(nil, StampAbs, []byte(path), fp), 1)
		return
	}
	r.Add(append(AppendStampFile(nil, StampAbs|StampDigest, []byte(path), fp), digest[:]...), 1)
}

// Fill copies what was recorded into s (Files, NFiles, ValidUntil, OutDir, BaseDir). It
// returns the reason no stamp may be written, or "": a file recorded with its digest whose
// fingerprint changed since is such a reason (the run may have read other bytes).
//
// The entries the engine's fast path added need no racy rule: each is a fingerprint equal to
// the one the state holds, so while it stays equal the full binary's own comparison finds the
// same, and the front can no more be fooled than the full binary. Files read whole (Stat) and
// the state are different: the full binary sees their bytes, so those bytes are checked.
func (r *StampCollector) Fill(s *Stamp) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad != "" {
		return r.bad
	}
	s.Files, s.NFiles = uniqueStampFiles(r.files, r.n)
	s.OutDir, s.BaseDir = r.out, r.base
	if r.until != 0 && (s.ValidUntil == 0 || r.until < s.ValidUntil) {
		s.ValidUntil = r.until
	}
	why := ""
	StampFiles(s.Files, func(base byte, path []byte, fp Fingerprint, digest []byte) bool {
		if digest == nil {
			return true
		}
		if got, err := Stat(string(path)); err != nil || got != fp {
			why = string(path) + " changed during the run"
			return false
		}
		return true
	})
	return why
}

// uniqueStampFiles returns files (n entries) without the entries equal to an earlier one, and
// how many are left: a file every target reads (the pull secret) is compared by each, and the
// front need stat it once. Entries that do not decode are left as they are.
func uniqueStampFiles(files []byte, n int) ([]byte, int) {
	seen := make(map[string]bool, n)
	out := make([]byte, 0, len(files))
	d := stampDec{b: files, ok: true}
	kept := 0
	for len(d.b) > 0 {
		rest := d.b
		d.entry()
		if !d.ok {
			return files, n
		}
		if e := rest[:len(rest)-len(d.b)]; !seen[string(e)] {
			seen[string(e)] = true
			out = append(out, e...)
			kept++
		}
	}
	return out, kept
}

// Stamps kept per output directory: WriteStamp removes the oldest past StampKeep, and any
// unused for StampMaxAge (a stamp is rewritten each time its command line is a null build of
// the full binary, and its mtime is then new).
const (
	StampKeep   = 64
	StampMaxAge = 30 * 24 * time.Hour // the content store's TrimAge
	stampTmpAge = time.Minute         // a temporary file this old belongs to a killed write
)
