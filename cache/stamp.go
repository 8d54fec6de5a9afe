package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// A null-build stamp is what lets the small `labbuild` front (cmd/labbuild, package
// internal/front) answer a null build without starting the full binary, the way cmd/go's test
// cache replays a test result: the full binary, after a run whose verdict was "no work to do",
// writes every fact that verdict rested on — the stat fingerprint of each file it consulted (the
// lab config or its absence, input files, outputs, the state file), the environment variables
// labbuild reads, whether stdout and stderr were terminals, its own fingerprint, and the time
// after which the verdict may change (a certificate's renewal, the daily store trim) — together
// with the exact bytes it printed. The front replays those bytes when every fact still holds,
// and execs the full binary otherwise. The format is private to this package and its one
// reader; a stamp that does not decode is a miss.

// Stamp is one command line's recorded null build.
type Stamp struct {
	Cwd    string   // the working directory after -C, as the kernel has it (Getwd)
	Argv   []string // the arguments after the program name, verbatim
	OutDir string   // the absolute output directory
	// Config is the lab config named by -f, absolute as the kernel resolved it then (Abs: each
	// ".." taken after the links before it); "" without -f. The front resolves -f again and
	// replays only when it names the same file (a link retargeted since names another).
	Config     string
	BaseDir    string // the absolute directory StampBase entries are relative to
	Start      int64  // ns since the epoch: before the first fingerprint was taken
	ValidUntil int64  // ns since the epoch: the verdict may change from then on
	Binary     string // the full binary's path, for messages
	BinaryFP   Fingerprint
	TTY        uint8    // StampStdoutTTY | StampStderrTTY
	Env        []string // StampEnv: sorted NAME=hash of the variables labbuild reads
	Output     []StampChunk
	Files      []byte // entries as AppendStampFile writes them
	NFiles     int
}

// StampChunk is one piece of the recorded output, in the order written: Fd 1 or 2, or Fd 0 for
// the build's duration, which the replay prints as the front's own ("%.2f" seconds).
type StampChunk struct {
	Fd   uint8
	Data []byte
}

// Bits of Stamp.TTY.
const (
	StampStdoutTTY = 1
	StampStderrTTY = 2
)

// Bases of a stamp file entry: what its path is relative to. StampAbsent marks an entry whose
// file did not exist (lab.yaml absent: the embedded default was used); StampDigest one whose
// fingerprint is followed by the SHA-256 of its bytes, which the front compares too (a racy
// file, see RacyWindow).
const (
	StampAbs    = 0 // an absolute path
	StampOut    = 1 // relative to Stamp.OutDir
	StampBase   = 2 // relative to Stamp.BaseDir
	StampDigest = 0x40
	StampAbsent = 0x80
)

// RacyWindow is how close to Stamp.Start a file's last change (Fingerprint.Changed) may be
// before its fingerprint alone cannot vouch for its bytes: a file system keeps timestamps in
// its own granularity (ext4 with 128-byte inodes, and others, in whole seconds; ext4 and tmpfs
// otherwise from the kernel's coarse clock), so a file written again within the same tick as
// the stat keeps its fingerprint when its size does not change. This is cmd/go's test-cache
// rule (modTimeCutoff, 2 s, in cmd/go/internal/test: a file modified within it makes a test
// run uncacheable), where git instead compares the contents of such "racily clean" entries.
// labbuild does as git: the stamp keeps the digest of such a file, and the front hashes it
// (only files the full binary reads whole: the lab config, pull secret, SSH key, state).
const RacyWindow = 2e9 // ns

// StampDir is the directory, under the output directory's metadata directory (out/.labbuild),
// that holds the stamps.
const StampDir = "stamps"

// StampKey names the stamp of a command line: a hash of the working directory after -C (as
// the kernel resolved it: Getwd) and the arguments (not the program name), so two command lines
// share a stamp only when they run in the same directory with the same words. Every relative
// path in the arguments (-f, -o) is taken from that directory.
func StampKey(cwd string, argv []string) string {
	h := sha256.New()
	h.Write([]byte(cwd))
	for _, a := range argv {
		h.Write([]byte{0})
		h.Write([]byte(a))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// stampEnvNames are the variables labbuild reads besides LABBUILD_*: NO_COLOR (progress.go),
// HOME and XDG_CACHE_HOME (~ in config paths, the RHCOS and blob caches' defaults).
var stampEnvNames = []string{"HOME", "NO_COLOR", "XDG_CACHE_HOME"}

// StampEnvIgnored are LABBUILD_* variables that cannot change a build's verdict or output:
// the front's own switches (LABBUILD_FULL: where the full binary is; LABBUILD_FRONT: explain or
// off) and LABBUILD_STAMP, which the front sets to ask the full binary for a stamp.
var StampEnvIgnored = []string{"LABBUILD_FRONT", "LABBUILD_FULL", "LABBUILD_STAMP"}

// StampEnv returns, sorted, NAME=h for each variable in environ labbuild reads (every
// LABBUILD_* but StampEnvIgnored, and stampEnvNames), h a hash of its value: the stamp never
// holds a value itself.
func StampEnv(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		keep := strings.HasPrefix(k, "LABBUILD_")
		for _, n := range StampEnvIgnored {
			if k == n {
				keep = false
			}
		}
		for _, n := range stampEnvNames {
			if k == n {
				keep = true
			}
		}
		if keep {
			s := sha256.Sum256([]byte(v))
			out = append(out, k+"="+hex.EncodeToString(s[:8]))
		}
	}
	sort.Strings(out)
	return out
}

// AppendStampFile appends one file entry: base (StampAbs, StampOut, StampBase, optionally |
// StampAbsent or | StampDigest), the path, and unless absent its fingerprint. With StampDigest
// the caller appends the file's digest (32 bytes) next.
func AppendStampFile(b []byte, base byte, path []byte, fp Fingerprint) []byte {
	b = append(b, base)
	b = binary.AppendUvarint(b, uint64(len(path)))
	b = append(b, path...)
	if base&StampAbsent == 0 {
		b = appendStampFP(b, fp)
	}
	return b
}

func appendStampFP(b []byte, fp Fingerprint) []byte {
	b = binary.AppendVarint(b, fp.Size)
	b = binary.AppendVarint(b, fp.Mtime)
	b = binary.AppendVarint(b, fp.Ctime)
	b = binary.AppendUvarint(b, fp.Ino)
	b = binary.AppendUvarint(b, fp.Dev)
	return binary.AppendUvarint(b, uint64(fp.Mode))
}

// StampFiles iterates over the entries of files (Stamp.Files); fn returning false stops it.
// digest is the entry's content digest (StampDigest), or nil. It reports false when an entry
// does not decode or fn stopped.
func StampFiles(files []byte, fn func(base byte, path []byte, fp Fingerprint, digest []byte) bool) bool {
	d := stampDec{b: files, ok: true}
	for len(d.b) > 0 && d.ok {
		base, path, fp, dig := d.entry()
		if !d.ok || !fn(base, path, fp, dig) {
			return false
		}
	}
	return d.ok
}

// entry reads one file entry.
func (d *stampDec) entry() (base byte, path []byte, fp Fingerprint, digest []byte) {
	base = d.byte()
	path = d.bytes()
	if base&StampAbsent == 0 {
		fp = d.fp()
	}
	if base&StampDigest != 0 {
		if len(d.b) < len(Digest{}) {
			d.ok, d.b = false, nil
			return
		}
		digest, d.b = d.b[:len(Digest{})], d.b[len(Digest{}):]
	}
	return
}

// SplitStampFiles cuts files (Stamp.Files) at entry boundaries into parts of per entries each
// (the last may have fewer), so the front can check them on several CPUs. When an entry does not
// decode it returns files whole, and StampFiles over it reports the damage.
func SplitStampFiles(files []byte, per int) [][]byte {
	var parts [][]byte
	d := stampDec{b: files, ok: true}
	from, n := 0, 0
	for len(d.b) > 0 {
		d.entry()
		if !d.ok {
			return [][]byte{files}
		}
		if n++; n == per {
			pos := len(files) - len(d.b)
			parts, from, n = append(parts, files[from:pos]), pos, 0
		}
	}
	if from < len(files) {
		parts = append(parts, files[from:])
	}
	return parts
}

const stampMagic = "labbuild stamp 3\n"

// Encode returns the stamp's bytes, checksummed (CRC-32C at the end).
func (s *Stamp) Encode() []byte {
	b := make([]byte, 0, 256+len(s.Files))
	b = append(b, stampMagic...)
	str := func(v string) { b = binary.AppendUvarint(b, uint64(len(v))); b = append(b, v...) }
	str(s.Cwd)
	b = binary.AppendUvarint(b, uint64(len(s.Argv)))
	for _, a := range s.Argv {
		str(a)
	}
	str(s.OutDir)
	str(s.Config)
	str(s.BaseDir)
	b = binary.AppendVarint(b, s.Start)
	b = binary.AppendVarint(b, s.ValidUntil)
	str(s.Binary)
	b = appendStampFP(b, s.BinaryFP)
	b = append(b, s.TTY)
	b = binary.AppendUvarint(b, uint64(len(s.Env)))
	for _, e := range s.Env {
		str(e)
	}
	b = binary.AppendUvarint(b, uint64(len(s.Output)))
	for _, c := range s.Output {
		b = append(b, c.Fd)
		str(string(c.Data))
	}
	b = binary.AppendUvarint(b, uint64(s.NFiles))
	b = append(b, s.Files...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// ErrBadStamp is returned by DecodeStamp for bytes that are not a whole stamp of this version.
var ErrBadStamp = errors.New("not a valid stamp (torn, damaged or of another version)")

// DecodeStamp parses Encode's output. Stamp.Files aliases data.
func DecodeStamp(data []byte) (*Stamp, error) {
	if len(data) < len(stampMagic)+4 || string(data[:len(stampMagic)]) != stampMagic {
		return nil, ErrBadStamp
	}
	body := data[:len(data)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[len(body):]) {
		return nil, ErrBadStamp
	}
	d := stampDec{b: body[len(stampMagic):], ok: true}
	s := &Stamp{}
	s.Cwd = string(d.bytes())
	s.Argv = make([]string, d.count())
	for i := range s.Argv {
		s.Argv[i] = string(d.bytes())
	}
	s.OutDir, s.Config, s.BaseDir = string(d.bytes()), string(d.bytes()), string(d.bytes())
	s.Start, s.ValidUntil = d.varint(), d.varint()
	s.Binary = string(d.bytes())
	s.BinaryFP = d.fp()
	s.TTY = d.byte()
	s.Env = make([]string, d.count())
	for i := range s.Env {
		s.Env[i] = string(d.bytes())
	}
	s.Output = make([]StampChunk, d.count())
	for i := range s.Output {
		s.Output[i].Fd = d.byte()
		s.Output[i].Data = d.bytes()
	}
	s.NFiles = d.count()
	s.Files = d.b
	if !d.ok {
		return nil, ErrBadStamp
	}
	return s, nil
}

// stampDec reads varints and strings; ok turns false on the first short read.
type stampDec struct {
	b  []byte
	ok bool
}

func (d *stampDec) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.ok, d.b = false, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *stampDec) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.ok, d.b = false, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length that must fit in what is left (so a damaged one cannot allocate much).
func (d *stampDec) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.ok, d.b = false, nil
		return 0
	}
	return int(n)
}

func (d *stampDec) byte() uint8 {
	if len(d.b) == 0 {
		d.ok = false
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *stampDec) bytes() []byte {
	n := d.count()
	if !d.ok {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *stampDec) fp() Fingerprint {
	return Fingerprint{Size: d.varint(), Mtime: d.varint(), Ctime: d.varint(), Ino: d.uvarint(), Dev: d.uvarint(), Mode: uint32(d.uvarint())}
}

// WriteStamp writes s atomically (temp file and rename) as dir/StampDir/key, 0600, then prunes
// the directory: stamps past StampKeep or older than StampMaxAge, and temporary files a killed
// write left (older than a minute: a younger one may be another run's write in progress).
func WriteStamp(meta, key string, s *Stamp) error {
	dir := filepath.Join(meta, StampDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	err := WriteFileAtomic(filepath.Join(dir, key), s.Encode(), 0o600)
	pruneStamps(dir, time.Now())
	return err
}

// pruneStamps removes from dir what WriteStamp's comment says.
func pruneStamps(dir string, now time.Time) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type stamp struct {
		name string
		mod  time.Time
	}
	var keep []stamp
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue
		}
		age := now.Sub(info.ModTime())
		switch {
		case strings.HasPrefix(e.Name(), ".tmp-"):
			if age > stampTmpAge {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		case age > StampMaxAge:
			os.Remove(filepath.Join(dir, e.Name()))
		default:
			keep = append(keep, stamp{e.Name(), info.ModTime()})
		}
	}
	if len(keep) <= StampKeep {
		return
	}
	sort.Slice(keep, func(i, j int) bool { return keep[i].mod.After(keep[j].mod) })
	for _, st := range keep[StampKeep:] {
		os.Remove(filepath.Join(dir, st.name))
	}
}
