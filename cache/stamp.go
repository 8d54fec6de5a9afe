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
	"sync"
)

// A null-build stamp is what lets the small `labbuild` front (cmd/labbuild-front, package
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
	Cwd        string   // the working directory the command started in (before -C)
	Argv       []string // the arguments after the program name, verbatim
	OutDir     string   // the absolute output directory
	BaseDir    string   // the absolute directory StampBase entries are relative to
	Start      int64    // ns since the epoch: before the first fingerprint was taken
	ValidUntil int64    // ns since the epoch: the verdict may change from then on
	Binary     string   // the full binary's path, for messages
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
// file did not exist (lab.yaml absent: the embedded default was used).
const (
	StampAbs    = 0 // an absolute path
	StampOut    = 1 // relative to Stamp.OutDir
	StampBase   = 2 // relative to Stamp.BaseDir
	StampAbsent = 0x80
)

// RacyWindow is how close to Stamp.Start a recorded mtime may be before the file counts as
// changed: ext4 and tmpfs take mtimes from the kernel's coarse clock (one jiffy, up to 10 ms),
// so a file written again within one tick of being statted can keep its fingerprint (git's
// "racily clean" rule; the engine's racyWindow is the same figure).
const RacyWindow = 20e6 // ns

// StampDir is the directory, under the output directory's metadata directory (out/.labbuild),
// that holds the stamps.
const StampDir = "stamps"

// StampKey names the stamp of a command line: a hash of the starting working directory and
// the arguments (not the program name), so two command lines share a stamp only when equal.
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
// StampAbsent), the path, and unless absent its fingerprint.
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
	b = binary.AppendUvarint(b, fp.Ino)
	return binary.AppendUvarint(b, uint64(fp.Mode))
}

// StampFiles iterates over the entries of files (Stamp.Files); fn returning false stops it. It
// reports false when an entry does not decode or fn stopped.
func StampFiles(files []byte, fn func(base byte, path []byte, fp Fingerprint) bool) bool {
	d := stampDec{b: files, ok: true}
	for len(d.b) > 0 && d.ok {
		base := d.byte()
		path := d.bytes()
		var fp Fingerprint
		if base&StampAbsent == 0 {
			fp = d.fp()
		}
		if !d.ok || !fn(base, path, fp) {
			return false
		}
	}
	return d.ok
}

// SplitStampFiles cuts files (Stamp.Files) at entry boundaries into parts of per entries each
// (the last may have fewer), so the front can check them on several CPUs. When an entry does not
// decode it returns files whole, and StampFiles over it reports the damage.
func SplitStampFiles(files []byte, per int) [][]byte {
	var parts [][]byte
	d := stampDec{b: files, ok: true}
	from, n := 0, 0
	for len(d.b) > 0 {
		base := d.byte()
		d.bytes()
		if base&StampAbsent == 0 {
			d.fp()
		}
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

const stampMagic = "labbuild stamp 1\n"

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
	s.OutDir, s.BaseDir = string(d.bytes()), string(d.bytes())
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
	return Fingerprint{Size: d.varint(), Mtime: d.varint(), Ino: d.uvarint(), Mode: uint32(d.uvarint())}
}

// Recorder collects, during one build, what its null-build verdict rested on (see Stamp).
// The engine's fast path adds each fingerprint it compared; the CLI adds the files it read
// before the build (the lab config). A nil *Recorder records nothing. Safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	files    []byte
	n        int
	until    int64  // ns; 0: no limit yet
	bad      string // why no stamp may be written ("" if one may)
	out      string // absolute output directory
	base     string // absolute base directory of StampBase entries
	stateFP  Fingerprint
	statePth string
}

// Add appends n entries encoded by AppendStampFile (one fast-path worker's share).
func (r *Recorder) Add(entries []byte, n int) {
	if r == nil || n == 0 {
		return
	}
	r.mu.Lock()
	r.files = append(r.files, entries...)
	r.n += n
	r.mu.Unlock()
}

// Stat records path's fingerprint as it is now, or its absence. A relative path is taken from
// the working directory.
func (r *Recorder) Stat(path string) {
	if r == nil {
		return
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		r.Fail("cannot make " + path + " absolute")
		return
	}
	fp, err := Stat(abs)
	base := byte(StampAbs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		base |= StampAbsent
	case err != nil:
		r.Fail(err.Error())
		return
	}
	r.Add(AppendStampFile(nil, base, []byte(abs), fp), 1)
}

// Until lowers the stamp's validity limit to ns (since the epoch).
func (r *Recorder) Until(ns int64) {
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
func (r *Recorder) Fail(why string) {
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
func (r *Recorder) Failed() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

// SetDirs records the absolute output directory and the base directory of StampBase entries.
func (r *Recorder) SetDirs(out, base string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.out, r.base = out, base
	r.mu.Unlock()
}

// StateLoaded records the state file's fingerprint as the build read it, under the lock;
// StateClosing, called before the lock is released, fails the recording when the build wrote
// it since (then the verdict rested on a state that is no longer on disk).
func (r *Recorder) StateLoaded(path string) {
	if r == nil {
		return
	}
	r.statePth = path
	r.Stat(path)
	r.stateFP, _ = Stat(path)
}

// StateClosing: see StateLoaded.
func (r *Recorder) StateClosing() {
	if r == nil || r.statePth == "" {
		return
	}
	if fp, _ := Stat(r.statePth); fp != r.stateFP {
		r.Fail("the build wrote its state")
	}
}

// Fill copies what was recorded into s (Files, NFiles, ValidUntil, OutDir, BaseDir). It
// returns the reason no stamp may be written, or "". A recorded mtime within RacyWindow of
// s.Start is such a reason: that file could change again without its fingerprint changing.
func (r *Recorder) Fill(s *Stamp) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bad != "" {
		return r.bad
	}
	s.Files, s.NFiles, s.OutDir, s.BaseDir = r.files, r.n, r.out, r.base
	if r.until != 0 && (s.ValidUntil == 0 || r.until < s.ValidUntil) {
		s.ValidUntil = r.until
	}
	why := ""
	StampFiles(s.Files, func(base byte, path []byte, fp Fingerprint) bool {
		if base&StampAbsent == 0 && fp.Mtime >= s.Start-RacyWindow {
			why = "racy: " + string(path) + " changed less than 20 ms before the build started"
			return false
		}
		return true
	})
	return why
}

// WriteStamp writes s atomically (temp file and rename) as dir/StampDir/key, 0600.
func WriteStamp(meta, key string, s *Stamp) error {
	dir := filepath.Join(meta, StampDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-"+key)
	if err != nil {
		return err
	}
	_, werr := f.Write(s.Encode())
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(dir, key))
	}
	if werr != nil {
		os.Remove(f.Name())
	}
	return werr
}
