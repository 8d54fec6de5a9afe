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
	"os"
	"sync"
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

// HashCount counts bytes hashed from files by HashFile, so tests can prove a null build
// hashes nothing.
var HashCount struct{ Files, Bytes int64 }

// HashFile returns the digest and size of the file at path.
func HashFile(path string) (Digest, int64, error) {
	f, err := os.Open(path)
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
	HashCount.Files++
	HashCount.Bytes += n
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
