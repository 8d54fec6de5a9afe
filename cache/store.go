package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Cache is a content store plus an action cache in one directory:
//
//	objects/ab/abcd…   file bytes, named by their SHA-256
//	actions/ab/abcd…   JSON Entry, named by the action key
//	tmp/               temporary files, renamed into place
type Cache struct {
	dir string
}

// Open returns the cache at dir. Nothing is created until something is stored, so a dry run
// leaves no trace.
func Open(dir string) *Cache { return &Cache{dir: dir} }

// tmp returns the directory for temporary files, creating it.
func (c *Cache) tmp() (string, error) {
	d := filepath.Join(c.dir, "tmp")
	return d, os.MkdirAll(d, 0o700)
}

// Dir returns the cache directory.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) objectPath(d Digest) string {
	h := d.String()
	return filepath.Join(c.dir, "objects", h[:2], h)
}

func (c *Cache) actionPath(key Digest) string {
	h := key.String()
	return filepath.Join(c.dir, "actions", h[:2], h)
}

// writeAtomic writes data to path through a temporary file and a rename.
func (c *Cache) writeAtomic(path string, write func(f *os.File) error, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	td, err := c.tmp()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(td, "w-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := write(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// PutFile copies the file at path into the store and returns its digest and size. Objects are
// stored 0600 whatever their output mode: the store may hold private keys.
func (c *Cache) PutFile(path string) (Digest, int64, error) {
	src, err := os.Open(path)
	if err != nil {
		return Digest{}, 0, err
	}
	defer src.Close()
	td, err := c.tmp()
	if err != nil {
		return Digest{}, 0, err
	}
	f, err := os.CreateTemp(td, "o-")
	if err != nil {
		return Digest{}, 0, err
	}
	tmp := f.Name()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return Digest{}, 0, err
	}
	countHashed(n)
	var d Digest
	h.Sum(d[:0])
	dst := c.objectPath(d)
	if st, err := os.Stat(dst); err == nil && st.Size() == n {
		os.Remove(tmp) // already stored
		return d, n, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		os.Remove(tmp)
		return Digest{}, 0, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return Digest{}, 0, err
	}
	return d, n, nil
}

// HashingWriter writes a file and computes its SHA-256 and size on the way, so that an output
// is hashed once, while it is written, and never read back to be stored (PutHashed).
type HashingWriter struct {
	f      *os.File
	h      hash.Hash
	n      int64
	closed bool
	d      Digest
}

// NewHashingWriter wraps f, a file opened for writing from its start. f must receive no other
// writes: the digest is of the bytes that went through the HashingWriter.
func NewHashingWriter(f *os.File) *HashingWriter { return &HashingWriter{f: f, h: sha256.New()} }

// Write writes p to the file and to the hash.
func (w *HashingWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.h.Write(p[:n])
	w.n += int64(n)
	return n, err
}

// Close closes the file; from then on Sum reports the digest and size.
func (w *HashingWriter) Close() error {
	if w.closed {
		return os.ErrClosed
	}
	w.closed = true
	w.h.Sum(w.d[:0])
	countHashed(w.n)
	return w.f.Close()
}

// Sum returns the digest and size of what was written; ok is false before Close.
func (w *HashingWriter) Sum() (d Digest, size int64, ok bool) { return w.d, w.n, w.closed }

// LinkMin is the size in bytes from which PutHashed links a shared (not owner-only) file into
// the store instead of copying it. Below it a copy costs little (copy_file_range, no reads into
// the process); the sample payload's MCO programs (27 MB each, written by release/mco) are what
// linking saves: before, each was written, read back, hashed and written again.
const LinkMin = 1 << 20

// PutHashed stores the file at path whose digest d and size the caller computed while writing
// it (HashingWriter), without reading it back. A file of LinkMin bytes or more whose mode lets
// group or others read it becomes the object by a hard link (the same inode: no copy); anything
// else — small files, and owner-only files such as private keys, whose objects must stay 0600
// and unshared — is copied into a 0600 object. A link shares its inode with the output, so a
// change made to the output in place changes the object too: Materialize verifies every object
// against its digest, and such an object reads as a miss (the target runs again) rather than
// restoring wrong bytes; owner-only files are never linked, so sticky keys cannot be lost that
// way. The link falls back to a copy where the file system refuses it (the store on another
// file system: EXDEV).
func (c *Cache) PutHashed(path string, d Digest, size int64, mode os.FileMode) error {
	dst := c.objectPath(d)
	if st, err := os.Stat(dst); err == nil && st.Size() == size {
		return nil // already stored
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if size >= LinkMin && mode.Perm()&0o077 != 0 {
		err := os.Link(path, dst)
		if err == nil {
			return nil
		}
		if errors.Is(err, fs.ErrExist) {
			if st, serr := os.Stat(dst); serr == nil && st.Size() == size {
				return nil // stored meanwhile by another target with the same bytes
			}
			os.Remove(dst) // a truncated object: replace it below
		}
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	td, err := c.tmp()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(td, "o-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	n, err := io.Copy(f, src) // copy_file_range: the bytes stay in the kernel
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("%s: %d bytes, written as %d", path, n, size)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Materialize writes object d (size bytes) to path with mode, through a temporary file in
// tmpDir (on path's file system, so the rename is atomic; a crash leaves debris only there,
// where the next build removes it), verifying the digest on the way: a corrupt or truncated
// object is reported as ErrMiss and path is left as it was.
func (c *Cache) Materialize(d Digest, size int64, path string, mode os.FileMode, tmpDir string) error {
	src, err := os.Open(c.objectPath(d))
	if err != nil {
		return fmt.Errorf("%w: object %s: %v", ErrMiss, d.Short(), err)
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(tmpDir, "m-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), src)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	var got Digest
	h.Sum(got[:0])
	if got != d || n != size {
		os.Remove(tmp)
		os.Remove(c.objectPath(d)) // corrupt: drop it so the next put repairs it
		return fmt.Errorf("%w: object %s is corrupt (%d bytes, digest %s)", ErrMiss, d.Short(), n, got.Short())
	}
	return os.Rename(tmp, path)
}

// HasObject reports whether object d is stored with the given size.
func (c *Cache) HasObject(d Digest, size int64) bool {
	st, err := os.Stat(c.objectPath(d))
	return err == nil && st.Size() == size
}

// File is one output in an action's manifest.
type File struct {
	Path   string `json:"path"` // slash-separated, relative to the target's output directory
	Mode   uint32 `json:"mode"` // permission bits
	Size   int64  `json:"size"`
	Digest Digest `json:"digest"`
}

// Entry is an action cache entry: what a run with this key produced, and the labelled inputs
// that made the key (digests only, never values), so a later build can say what changed.
type Entry struct {
	Key          Digest            `json:"key"`
	Target       string            `json:"target"`
	Inputs       map[string]Digest `json:"inputs"`
	Outputs      []File            `json:"outputs"`
	OutputDigest Digest            `json:"outputDigest"`
	Created      time.Time         `json:"created"`
	Epoch        int64             `json:"epoch,omitempty"`   // ns; the target's generation time
	StaleAt      int64             `json:"staleAt,omitempty"` // ns; 0 = never
	Pinned       bool              `json:"pinned,omitempty"`  // never trimmed (sticky secrets)
	// Values are the config values the target read, as shown to a person (secrets redacted),
	// so a later plan can print old → new.
	Values map[string]string `json:"values,omitempty"`
}

// OutputDigest returns the digest of a manifest: SHA-256 over the sorted (path, mode, digest)
// triples. Two runs that write the same bytes under the same names get the same output
// digest, which is what early cutoff compares.
func OutputDigest(files []File) Digest {
	h := NewHasher()
	for _, f := range files {
		h.Add(f.Path, append([]byte(fmt.Sprintf("%o:", f.Mode)), f.Digest[:]...))
	}
	return h.Sum()
}

// Entries and epoch records are JSON followed by a trailer line holding the SHA-256 of the
// JSON, in hex (sealed, unseal): a record whose bytes no longer match it — a flipped bit that
// keeps the JSON valid, a stale time moved by years — is a miss, never trusted. A record
// without the trailer was written by a labbuild before issue 39 (see GetAction, GetEpoch).

// seal returns the bytes stored for JSON document j: j, a newline, the hex SHA-256 of j, a
// newline.
func seal(j []byte) []byte {
	d := Sum(j)
	return append(append(append(j, '\n'), d.String()...), '\n')
}

// errUnsealed reports a record written before records were sealed (no trailer).
var errUnsealed = errors.New("no digest (written by an older labbuild)")

// unseal returns the JSON document of a sealed record, errUnsealed (and the whole of b) for a
// record without a trailer, or an error when the trailer does not match.
func unseal(b []byte) ([]byte, error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return b, errUnsealed
	}
	j, tr := b[:i], b[i+1:]
	if d := Sum(j); len(tr) != 65 || tr[64] != '\n' || string(tr[:64]) != d.String() {
		return nil, errors.New("its digest does not match its content")
	}
	return j, nil
}

// readEntry reads and checks the entry for key: its digest, its JSON, its key and its output
// digest. legacy reports an entry without a digest (its content could not be checked).
func (c *Cache) readEntry(key Digest) (e *Entry, legacy bool, err error) {
	b, err := os.ReadFile(c.actionPath(key))
	if err != nil {
		return nil, false, fmt.Errorf("%w: no entry", ErrMiss)
	}
	j, err := unseal(b)
	legacy = errors.Is(err, errUnsealed)
	if err != nil && !legacy {
		return nil, false, fmt.Errorf("%w: entry %s is damaged: %v", ErrMiss, key.Short(), err)
	}
	e = new(Entry)
	if err := json.Unmarshal(j, e); err != nil || e.Key != key {
		return nil, false, fmt.Errorf("%w: entry %s is damaged: not a valid entry", ErrMiss, key.Short())
	}
	if OutputDigest(e.Outputs) != e.OutputDigest {
		return nil, false, fmt.Errorf("%w: entry %s is damaged: does not match its outputs", ErrMiss, key.Short())
	}
	return e, legacy, nil
}

// GetAction returns the entry for key, checking its digest and that every object it names is
// present. Any problem is an error wrapping ErrMiss with the reason. An entry written before
// entries carried a digest is a miss (the target runs once more and is stored sealed), unless
// it is pinned (a sticky secret, whose bytes matter and are checked instead: every object is
// hashed, see Verify).
func (c *Cache) GetAction(key Digest) (*Entry, error) {
	e, legacy, err := c.readEntry(key)
	if err != nil {
		return nil, err
	}
	for _, f := range e.Outputs {
		if !c.HasObject(f.Digest, f.Size) {
			return nil, fmt.Errorf("%w: object for %s missing", ErrMiss, f.Path)
		}
	}
	if legacy {
		if !e.Pinned {
			return nil, fmt.Errorf("%w: entry %s has %v", ErrMiss, key.Short(), errUnsealed)
		}
		if err := c.Verify(e); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// HasEntry reports whether an entry file for key exists, usable or not: a sticky target whose
// entry exists but is damaged was made before, and must not be made anew in silence.
func (c *Cache) HasEntry(key Digest) bool {
	_, err := os.Stat(c.actionPath(key))
	return err == nil
}

// Verify hashes every object e names and reports, wrapping ErrMiss, the first that is missing,
// of another size or of other bytes. Materialize checks as it copies; Verify is for a plan
// (which copies nothing) and for a sticky secret, which must never be found damaged only once
// a build has begun to replace it.
func (c *Cache) Verify(e *Entry) error {
	for _, f := range e.Outputs {
		d, n, err := hashObject(c.objectPath(f.Digest))
		switch {
		case err != nil:
			return fmt.Errorf("%w: object for %s: %v", ErrMiss, f.Path, err)
		case d != f.Digest || n != f.Size:
			return fmt.Errorf("%w: object for %s is damaged (%d bytes, digest %s; recorded %d bytes, %s)", ErrMiss, f.Path, n, d.Short(), f.Size, f.Digest.Short())
		}
	}
	return nil
}

// hashObject is HashFile for the store's own files (not counted: no input is hashed).
func hashObject(p string) (Digest, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return Digest{}, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	var d Digest
	h.Sum(d[:0])
	return d, n, err
}

// PeekAction returns the entry for key without checking its objects (for explaining what an
// earlier build used), or ErrMiss, also for an entry whose digest does not match.
func (c *Cache) PeekAction(key Digest) (*Entry, error) {
	e, _, err := c.readEntry(key)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// PutAction records e, sealed with its digest. Its objects must already be stored (data before
// index).
func (c *Cache) PutAction(e *Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = seal(b)
	return c.writeAtomic(c.actionPath(e.Key), func(f *os.File) error {
		_, err := f.Write(b)
		return err
	}, 0o600)
}

// CleanTmp removes leftovers of interrupted writes. Call it holding the lock.
func (c *Cache) CleanTmp() error {
	ents, err := os.ReadDir(filepath.Join(c.dir, "tmp"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		os.RemoveAll(filepath.Join(c.dir, "tmp", e.Name()))
	}
	return nil
}

// EpochRecord is the generation of a time-dependent output (a certificate): the moment it was
// issued and the moment it goes stale (ns since 1970). It is kept by the target's base key (the
// key without the epoch), outside the state journal and the action entries, so that `clean`, a
// lost state file and a trim of the store all leave it: the next build finds the same epoch,
// hence the same key, and restores the same certificate instead of issuing a new one.
type EpochRecord struct {
	Epoch   int64 `json:"epoch"`
	StaleAt int64 `json:"staleAt"`
}

func (c *Cache) epochPath(base Digest) string {
	h := base.String()
	return filepath.Join(c.dir, "epochs", h[:2], h)
}

// GetEpoch returns the epoch recorded for base, if any. A record whose digest does not match
// its content, or that has none (an older labbuild's), is no record: the target is then keyed
// as new (a certificate is issued again), never by a damaged time.
func (c *Cache) GetEpoch(base Digest) (EpochRecord, bool) {
	var r EpochRecord
	b, err := os.ReadFile(c.epochPath(base))
	if err != nil {
		return EpochRecord{}, false
	}
	j, err := unseal(b)
	if err != nil || json.Unmarshal(j, &r) != nil || r.Epoch == 0 {
		return EpochRecord{}, false
	}
	return r, true
}

// PutEpoch records r for base (atomically, sealed; an equal record is not rewritten).
func (c *Cache) PutEpoch(base Digest, r EpochRecord) error {
	if old, ok := c.GetEpoch(base); ok && old == r {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = seal(b)
	return c.writeAtomic(c.epochPath(base), func(f *os.File) error {
		_, err := f.Write(b)
		return err
	}, 0o600)
}
