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
	"syscall"
	"time"
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
	Cwd        string   // the working directory after -C, as the kernel has it (Getwd)
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

const stampMagic = "labbuild stamp 2\n"

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
	return Fingerprint{Size: d.varint(), Mtime: d.varint(), Ctime: d.varint(), Ino: d.uvarint(), Dev: d.uvarint(), Mode: uint32(d.uvarint())}
}

// Recorder collects, during one build, what its null-build verdict rested on (see Stamp).
// The engine's fast path adds each fingerprint it compared; the CLI adds the files it read
// whole before the build (the lab config, pull secret, SSH key) and the engine the state file,
// with their digests when racy (see RacyWindow). A nil *Recorder records nothing. Safe for
// concurrent use.
type Recorder struct {
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
func (r *Recorder) SetStart(ns int64) {
	if r != nil {
		r.start = ns
	}
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

// Stat records, before the run reads it whole, path's fingerprint as it is now, or its absence.
// A relative path is taken from the working directory as the kernel has it (Abs). A regular
// file changed within RacyWindow of the run's start is recorded with the digest of its bytes.
func (r *Recorder) Stat(path string) {
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

// StateLoaded notes the state file the build reads under the lock; StateClosing, called
// after the build closed it and before the lock is released, records it as it is then. A null
// build may have written it (an input file hashed again, recorded with its new fingerprint);
// it wrote no target, or recordVerdict failed the recording, so the state on disk then is one
// whose verdict is this run's.
func (r *Recorder) StateLoaded(path string) {
	if r != nil {
		r.statePth = path
	}
}

// StateClosing: see StateLoaded.
func (r *Recorder) StateClosing() {
	if r == nil || r.statePth == "" {
		return
	}
	r.Stat(r.statePth)
}

// File records an input file or output the engine compared outside its fast path: its
// fingerprint, and with digest the bytes it hashed (a file the state does not vouch for).
func (r *Recorder) File(path string, fp Fingerprint, digest *Digest) {
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
func (r *Recorder) Fill(s *Stamp) string {
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

// Getwd returns the working directory as the kernel has it (getcwd(2): every symlink
// resolved), never $PWD, which os.Getwd prefers when it names the same directory: a path
// taken from $PWD and cleaned (filepath.Abs) takes ".." lexically, where the kernel takes it
// from the directory the link points to.
func Getwd() (string, error) {
	for {
		wd, err := syscall.Getwd()
		if err != syscall.EINTR {
			return wd, err
		}
	}
}

// Abs returns path absolute as the kernel resolves it from the working directory: Getwd joined
// with path, and each ".." taken after the symlinks before it are followed (filepath.Abs
// would drop the element before it as text). The result is clean; when the part up to the last
// ".." does not exist, it is returned joined but not cleaned, so that a stat of it fails as the
// kernel's own lookup would.
func Abs(path string) (string, error) {
	if filepath.IsAbs(path) {
		return AbsIn("/", path), nil
	}
	wd, err := Getwd()
	if err != nil {
		return "", err
	}
	return AbsIn(wd, path), nil
}

// AbsIn is Abs with dir (absolute, as Getwd returns it) as the working directory.
func AbsIn(dir, path string) string {
	if !filepath.IsAbs(path) {
		path = dir + "/" + path
	}
	// The last ".." element: everything up to it is resolved through the file system.
	last := -1
	for i := 0; i+2 <= len(path); i++ {
		if path[i:i+2] == ".." && (i == 0 || path[i-1] == '/') && (i+2 == len(path) || path[i+2] == '/') {
			last = i + 2
		}
	}
	if last < 0 {
		return filepath.Clean(path)
	}
	real, err := filepath.EvalSymlinks(path[:last])
	if err != nil {
		return path
	}
	return filepath.Join(real, path[last:])
}
