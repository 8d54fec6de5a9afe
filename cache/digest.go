// Package cache holds labbuild's persistent build state, knowing nothing of OpenShift:
// content digests, the content store (bytes by digest), the action cache (action key → output
// manifest), the state journal read at the start of every build, stat fingerprints, the
// output-directory lock, and trimming.
//
// Writes follow the Go build cache's order: data first, then the index entry that names it, each
// through a temporary file and a rename, so a crash leaves at worst an entry that reads as a
// miss. A corrupt or missing entry is always a miss with a reason, never a crash.
package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Digest is a SHA-256 digest.
type Digest [32]byte

// Sum returns the digest of b.
func Sum(b []byte) Digest { return sha256.Sum256(b) }

// String returns the digest as 64 lowercase hex digits.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Short returns the first 12 hex digits, for humans.
func (d Digest) Short() string { return d.String()[:12] }

// IsZero reports whether d is the zero digest (no value).
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText implements encoding.TextMarshaler (hex).
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (hex).
func (d *Digest) UnmarshalText(b []byte) error {
	x, err := ParseDigest(string(b))
	*d = x
	return err
}

// ParseDigest parses 64 hex digits.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 64 {
		return d, fmt.Errorf("digest %q: want 64 hex digits", s)
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("digest %q: %w", s, err)
	}
	return d, nil
}

// hashed counts the files and bytes hashed by HashFile and PutFile (atomically: targets hash
// concurrently), so tests can prove a null build hashes nothing; see Hashed.
var hashed struct{ files, bytes atomic.Int64 }

// HashCounts is what Hashed returns: files and bytes hashed so far by this process.
type HashCounts struct{ Files, Bytes int64 }

// Hashed returns how many files and bytes HashFile and PutFile have hashed in this process.
func Hashed() HashCounts { return HashCounts{hashed.files.Load(), hashed.bytes.Load()} }

func countHashed(n int64) {
	hashed.files.Add(1)
	hashed.bytes.Add(n)
}

// HashFile returns the digest and size of the regular file at path. Anything else is refused
// (OpenRegular): a FIFO would block the build, a device never end.
func HashFile(path string) (Digest, int64, error) {
	f, _, err := OpenRegular(path)
	if err != nil {
		return Digest{}, 0, err
	}
	defer f.Close()
	h := sha256.New()
	buf := bufPool.Get().(*[]byte)
	n, err := io.CopyBuffer(h, struct{ io.Reader }{f}, *buf)
	bufPool.Put(buf)
	if err != nil {
		return Digest{}, 0, err
	}
	countHashed(n)
	var d Digest
	h.Sum(d[:0])
	return d, n, nil
}

// bufPool holds copy buffers, so hashing many small files does not allocate 32 KiB each.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// ErrMiss reports an absent or unusable cache entry; the error's text says why.
var ErrMiss = errors.New("cache miss")

// Hasher builds a key from labelled parts, unambiguously: each part is length-prefixed (an
// 8-byte little-endian length, then the bytes). The parts are gathered in a buffer and hashed
// with one SHA-256 call at Sum, so a Hasher on the stack, or reused after Reset, allocates
// nothing once its buffer has grown: a null build keys 100,000 targets without garbage.
type Hasher struct {
	b []byte
}

// NewHasher starts a key.
func NewHasher() *Hasher { return &Hasher{} }

// Reset empties k for a new key, keeping its buffer.
func (k *Hasher) Reset() { k.b = k.b[:0] }

func (k *Hasher) putLen(l int) {
	k.b = binary.LittleEndian.AppendUint64(k.b, uint64(l))
}

// Add appends a labelled part.
func (k *Hasher) Add(label string, value []byte) {
	k.putLen(len(label))
	k.b = append(k.b, label...)
	k.putLen(len(value))
	k.b = append(k.b, value...)
}

// Add2 appends a part labelled prefix+name without building that string.
func (k *Hasher) Add2(prefix, name string, value []byte) {
	k.putLen(len(prefix) + len(name))
	k.b = append(append(k.b, prefix...), name...)
	k.putLen(len(value))
	k.b = append(k.b, value...)
}

// Sum returns the key.
func (k *Hasher) Sum() Digest { return sha256.Sum256(k.b) }

// OpenRegular opens path for reading only if it is a regular file. The open does not block (a
// FIFO with no writer would block open(2) itself: O_NONBLOCK), and the kind is checked on the
// descriptor opened (fstat), so nothing is read from a FIFO, a device or a directory: each is
// an *fs.PathError whose error names what path is (NotRegular).
func OpenRegular(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, &fs.PathError{Op: "read", Path: path, Err: NotRegular(st.Mode())}
	}
	return f, st, nil
}

// NotRegular is the error for a file of mode m that is not a regular file: it names the kind.
func NotRegular(m fs.FileMode) error {
	kind := "not a regular file"
	switch {
	case m&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO), not a regular file"
	case m&fs.ModeCharDevice != 0:
		kind = "a character device, not a regular file"
	case m&fs.ModeDevice != 0:
		kind = "a block device, not a regular file"
	case m.IsDir():
		kind = "a directory, not a regular file"
	case m&fs.ModeSocket != 0:
		kind = "a socket, not a regular file"
	}
	return errors.New(kind)
}

// ErrTooLarge is wrapped by ReadRegular's error for a file over its cap.
var ErrTooLarge = errors.New("too large")

// ReadRegular reads the regular file at path (OpenRegular) when it holds at most max bytes;
// a larger one is an *fs.PathError wrapping ErrTooLarge whose text states the cap, and is not
// read past it: a file a user names is read whole, so its size is bounded.
func ReadRegular(path string, max int64) ([]byte, error) {
	f, st, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, over the %s cap", ErrTooLarge, st.Size(), SizeText(max))}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max { // grew while read
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: over the %s cap", ErrTooLarge, SizeText(max))}
	}
	return b, err
}

// SizeText writes n bytes for people: "1 MiB", "64 KiB", "512 bytes".
func SizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
