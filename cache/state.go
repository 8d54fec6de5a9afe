package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// stateHeader starts every state file (version 4, binary: version 3 had no ctime and device in
// its fingerprints). A version-2 (text) file is migrated on load; a file with any other header
// (version 3 too: its fingerprints could not match a new stat), or whose snapshot fails its
// checksum, reads as empty:
// a lost state costs one restore from the content store, never a re-issued certificate (the
// store keeps each sticky target's epoch, see EpochRecord).
const stateHeader = "labbuild-state 4\n"

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

// State is the record of one output directory: per target, its last action key, output digest
// and output fingerprints; per input file, a fingerprint and digest.
//
// The file (version 4) is a snapshot followed by a journal, as ninja's .ninja_log is a log
// compacted now and then, but the snapshot is indexed so that a build reads only the records
// it asks for:
//
//	header   48 bytes: "labbuild-state 4\n", padding, the snapshot's end, the offsets of
//	         its two hash tables, the snapshot's CRC-32C and the header's
//	records  binary target and file records (little-endian, fixed-width numbers)
//	tables   targets, then files: a power-of-two count and that many uint32 record offsets
//	         (0: empty), open addressing by FNV-1a of the name, linear probing
//	journal  frames appended as targets finish: uint32 length, a record, its CRC-32C (a
//	         crash tears at most the last frame, which is then ignored)
//
// LoadState maps the file (mmap) and checks the snapshot's checksum; nothing is decoded until
// asked for. Only the journal's frames are decoded at load, into an overlay that shadows the
// snapshot. Close compacts (rewrites snapshot + empty journal through a rename) once the
// journal outgrows an eighth of the snapshot. Methods are safe for concurrent use.
type State struct {
	mu      sync.RWMutex
	path    string
	snap    []byte                  // the mapped file (nil: no snapshot), valid until Close
	mapped  bool                    // snap is an mmap, to be unmapped
	tTab    []byte                  // target table: uint32 offsets into snap
	fTab    []byte                  // file table
	targets map[string]*TargetState // overlay; a nil value: deleted
	files   map[string]FileState    // overlay
	over    atomic.Bool             // the overlay is not empty: readers must look there first
	snapEnd int64                   // the snapshot's size in bytes (journal frames follow)
	jBytes  int64                   // journal bytes, in the file and appended since
	rewrite bool                    // the file is not a valid version-4 file: rewrite before appending
	f       *os.File
	memOnly bool // SetReadOnly: changes stay in memory, the file is never written
}

const stateHeaderSize = 48

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// LoadState opens the state file at path; a missing file is an empty state. A torn or damaged
// journal frame ends the journal; a damaged snapshot or an unknown header reads as empty.
func LoadState(path string) (*State, error) {
	s := &State{path: path, targets: map[string]*TargetState{}, files: map[string]FileState{}}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("state %s: %w", path, err)
	}
	size := st.Size()
	if size == 0 {
		return s, nil
	}
	var data []byte
	if size < 1<<31 {
		data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
		s.mapped = err == nil
	}
	if !s.mapped {
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("state %s: %w", path, err)
		}
	}
	switch {
	case bytes.HasPrefix(data, []byte(stateHeader)):
		if !s.open(data) {
			s.release(data)
			s.rewrite = true // damaged: read as empty, start a new file on the first write
		}
	case bytes.HasPrefix(data, []byte(stateHeaderV2)):
		s.parseV2(string(data[len(stateHeaderV2):]))
		s.release(data)
		s.rewrite = true // migrated: the first write (or Close) rewrites it as version 4
		s.over.Store(len(s.targets)+len(s.files) > 0)
	default:
		s.release(data)
		s.rewrite = true
	}
	return s, nil
}

func (s *State) release(data []byte) {
	if s.mapped {
		syscall.Munmap(data)
	}
	s.mapped, s.snap, s.tTab, s.fTab = false, nil, nil, nil
}

// open checks a version-4 file's header and snapshot, and reads its journal into the overlay.
func (s *State) open(data []byte) bool {
	if len(data) < stateHeaderSize {
		return false
	}
	le := binary.LittleEndian
	h := data[:stateHeaderSize]
	if crc32.Checksum(h[:44], castagnoli) != le.Uint32(h[44:]) {
		return false
	}
	// The file table's offset is stored relative to the target table's (see snapshotBytes).
	end, tOff, fOff := le.Uint64(h[24:]), le.Uint64(h[32:]), uint64(le.Uint32(h[40:]))
	if end < stateHeaderSize || end > uint64(len(data)) {
		return false
	}
	snap := data[:end]
	if crc32.Checksum(snap[stateHeaderSize:], castagnoli) != le.Uint32(h[20:]) {
		return false
	}
	if tOff != 0 {
		fOff += tOff
		t, ok1 := table(snap, tOff)
		f, ok2 := table(snap, fOff)
		if !ok1 || !ok2 {
			return false
		}
		s.tTab, s.fTab = t, f
	}
	s.snap, s.snapEnd = data, int64(end)
	// The journal: frames up to the first torn or damaged one.
	j := data[end:]
	for len(j) >= 4 {
		n := le.Uint32(j)
		if uint64(n)+8 > uint64(len(j)) {
			break
		}
		rec := j[4 : 4+n]
		if crc32.Checksum(rec, castagnoli) != le.Uint32(j[4+n:]) {
			break
		}
		s.applyRecord(rec)
		j = j[8+n:]
		s.jBytes += int64(8 + n)
	}
	if len(j) > 0 {
		// A torn or damaged frame: frames appended after it would never be read (the journal
		// ends there), so the first write rewrites the file (what was read, then the new).
		s.rewrite = true
	}
	s.over.Store(len(s.targets)+len(s.files) > 0)
	return true
}

// table returns the hash table at off in snap: a uint32 slot count (a power of two) and the
// slots.
func table(snap []byte, off uint64) ([]byte, bool) {
	if off+4 > uint64(len(snap)) {
		return nil, false
	}
	n := uint64(binary.LittleEndian.Uint32(snap[off:]))
	if n == 0 || n&(n-1) != 0 || off+4+4*n > uint64(len(snap)) {
		return nil, false
	}
	return snap[off+4 : off+4+4*n], true
}

// applyRecord applies one journal record to the overlay (copying its strings: the mapping goes
// away at Close).
func (s *State) applyRecord(rec []byte) {
	if len(rec) == 0 {
		return
	}
	switch rec[0] {
	case 'T':
		if name, ts, ok := decodeTarget(rec); ok {
			s.targets[string(name)] = ts
		}
	case 'F':
		if p, fs, ok := decodeFile(rec); ok {
			s.files[string(p)] = fs
		}
	case 'D':
		if name, _, ok := readName(rec[1:]); ok {
			s.targets[string(name)] = nil
		}
	}
}

// Record encodings, little-endian:
//
//	T: 'T' u16 len, name, key[32], outDigest[32], epoch i64, staleAt i64, flags u8 (1: failed),
//	   u16 count, then per output: u16 len, rel, fingerprint
//	F: 'F' u16 len, path, fingerprint, digest[32]
//
// A fingerprint is size i64, mtime i64, ctime i64, ino u64, dev u64, mode u32.
//
//	D: 'D' u16 len, name
const (
	fpSize       = 44
	targetFixed  = 32 + 32 + 8 + 8 + 1 + 2
	maxStateName = 1<<16 - 1
)

func readName(b []byte) (name, rest []byte, ok bool) {
	if len(b) < 2 {
		return nil, nil, false
	}
	n := int(binary.LittleEndian.Uint16(b))
	if len(b) < 2+n {
		return nil, nil, false
	}
	return b[2 : 2+n], b[2+n:], true
}

func appendName(b []byte, name string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(name)))
	return append(b, name...)
}

func readFP(b []byte) Fingerprint {
	le := binary.LittleEndian
	return Fingerprint{Size: int64(le.Uint64(b)), Mtime: int64(le.Uint64(b[8:])), Ctime: int64(le.Uint64(b[16:])),
		Ino: le.Uint64(b[24:]), Dev: le.Uint64(b[32:]), Mode: le.Uint32(b[40:])}
}

func appendFP(b []byte, fp Fingerprint) []byte {
	le := binary.LittleEndian
	b = le.AppendUint64(b, uint64(fp.Size))
	b = le.AppendUint64(b, uint64(fp.Mtime))
	b = le.AppendUint64(b, uint64(fp.Ctime))
	b = le.AppendUint64(b, fp.Ino)
	b = le.AppendUint64(b, fp.Dev)
	return le.AppendUint32(b, fp.Mode)
}

func appendTargetRec(b []byte, name string, ts *TargetState) []byte {
	le := binary.LittleEndian
	b = appendName(append(b, 'T'), name)
	b = append(b, ts.Key[:]...)
	b = append(b, ts.OutDigest[:]...)
	b = le.AppendUint64(b, uint64(ts.Epoch))
	b = le.AppendUint64(b, uint64(ts.StaleAt))
	var flags byte
	if ts.Failed {
		flags = 1
	}
	b = append(b, flags)
	b = le.AppendUint16(b, uint16(len(ts.Outputs)))
	for _, o := range ts.Outputs {
		b = appendFP(appendName(b, o.Rel), o.FP)
	}
	return b
}

func appendFileRec(b []byte, path string, fs FileState) []byte {
	b = appendFP(appendName(append(b, 'F'), path), fs.FP)
	return append(b, fs.Digest[:]...)
}

// TargetView is a recorded target read in place from the state's snapshot (or its overlay),
// decoded field by field without allocating: the null build's view. It is valid until the
// State is closed.
type TargetView struct {
	fixed []byte       // targetFixed bytes after the name (snapshot records)
	outs  []byte       // the outputs (snapshot records)
	ts    *TargetState // overlay records
}

// Key returns the recorded action key.
func (r TargetView) Key() (d Digest) {
	if r.ts != nil {
		return r.ts.Key
	}
	copy(d[:], r.fixed)
	return d
}

// OutDigest returns the recorded output digest.
func (r TargetView) OutDigest() (d Digest) {
	if r.ts != nil {
		return r.ts.OutDigest
	}
	copy(d[:], r.fixed[32:])
	return d
}

// Epoch returns the recorded epoch (ns).
func (r TargetView) Epoch() int64 {
	if r.ts != nil {
		return r.ts.Epoch
	}
	return int64(binary.LittleEndian.Uint64(r.fixed[64:]))
}

// StaleAt returns the recorded stale time (ns; 0: never).
func (r TargetView) StaleAt() int64 {
	if r.ts != nil {
		return r.ts.StaleAt
	}
	return int64(binary.LittleEndian.Uint64(r.fixed[72:]))
}

// Failed reports whether the last attempt failed.
func (r TargetView) Failed() bool {
	if r.ts != nil {
		return r.ts.Failed
	}
	return r.fixed[80]&1 != 0
}

// Outputs calls fn with each recorded output's relative path (valid only during the call) and
// fingerprint, in order, until fn returns false; it reports whether every call returned true.
func (r TargetView) Outputs(fn func(rel []byte, fp Fingerprint) bool) bool {
	if r.ts != nil {
		for _, o := range r.ts.Outputs {
			if !fn(unsafe.Slice(unsafe.StringData(o.Rel), len(o.Rel)), o.FP) {
				return false
			}
		}
		return true
	}
	b := r.outs
	for len(b) > 0 {
		rel, rest, _ := readName(b)
		if !fn(rel, readFP(rest)) {
			return false
		}
		b = rest[fpSize:]
	}
	return true
}

// OutputNames returns the recorded outputs' relative paths (copies).
func (r TargetView) OutputNames() []string {
	if r.ts != nil {
		out := make([]string, len(r.ts.Outputs))
		for i, o := range r.ts.Outputs {
			out[i] = o.Rel
		}
		return out
	}
	var out []string
	r.Outputs(func(rel []byte, _ Fingerprint) bool { out = append(out, string(rel)); return true })
	return out
}

// State returns the record decoded into a TargetState (copies).
func (r TargetView) State() *TargetState {
	if r.ts != nil {
		return r.ts
	}
	ts := &TargetState{Key: r.Key(), OutDigest: r.OutDigest(), Epoch: r.Epoch(), StaleAt: r.StaleAt(), Failed: r.Failed()}
	r.Outputs(func(rel []byte, fp Fingerprint) bool {
		ts.Outputs = append(ts.Outputs, OutputState{Rel: string(rel), FP: fp})
		return true
	})
	return ts
}

// decodeTarget decodes a T record (copying).
func decodeTarget(rec []byte) ([]byte, *TargetState, bool) {
	name, r, ok := splitTarget(rec)
	if !ok {
		return nil, nil, false
	}
	return name, r.State(), true
}

// splitTarget checks a T record's bounds and splits it, without copying.
func splitTarget(rec []byte) ([]byte, TargetView, bool) {
	if len(rec) < 1 || rec[0] != 'T' {
		return nil, TargetView{}, false
	}
	name, rest, ok := readName(rec[1:])
	if !ok || len(rest) < targetFixed {
		return nil, TargetView{}, false
	}
	fixed := rest[:targetFixed]
	n := int(binary.LittleEndian.Uint16(fixed[81:]))
	outs := rest[targetFixed:]
	b := outs
	for i := 0; i < n; i++ {
		_, r, ok := readName(b)
		if !ok || len(r) < fpSize {
			return nil, TargetView{}, false
		}
		b = r[fpSize:]
	}
	return name, TargetView{fixed: fixed, outs: outs[:len(outs)-len(b)]}, true
}

func decodeFile(rec []byte) ([]byte, FileState, bool) {
	if len(rec) < 1 || rec[0] != 'F' {
		return nil, FileState{}, false
	}
	p, rest, ok := readName(rec[1:])
	if !ok || len(rest) < fpSize+32 {
		return nil, FileState{}, false
	}
	fs := FileState{FP: readFP(rest)}
	copy(fs.Digest[:], rest[fpSize:])
	return p, fs, true
}

// fnv64 is FNV-1a, the tables' hash.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// find returns the snapshot record named name in table tab, or nil.
func (s *State) find(tab []byte, name string) []byte {
	slots := uint64(len(tab) / 4)
	if slots == 0 {
		return nil
	}
	le := binary.LittleEndian
	i := fnv64(name) & (slots - 1)
	for probe := uint64(0); probe < slots; probe, i = probe+1, (i+1)&(slots-1) {
		off := uint64(le.Uint32(tab[4*i:]))
		if off == 0 || off+3 > uint64(len(s.snap)) {
			return nil
		}
		rec := s.snap[off:]
		if n, _, ok := readName(rec[1:]); ok && string(n) == name {
			return rec
		}
	}
	return nil
}

// View returns what the last build recorded for target name, read in place; ok is false when none is recorded.
func (s *State) View(name string) (TargetView, bool) {
	if s.over.Load() {
		s.mu.RLock()
		ts, in := s.targets[name]
		s.mu.RUnlock()
		if in {
			return TargetView{ts: ts}, ts != nil
		}
	}
	if rec := s.find(s.tTab, name); rec != nil {
		if _, r, ok := splitTarget(rec); ok {
			return r, true
		}
	}
	return TargetView{}, false
}

// Target returns the recorded state of target name (decoded: the caller may keep it), or nil.
func (s *State) Target(name string) *TargetState {
	r, ok := s.View(name)
	if !ok {
		return nil
	}
	return r.State()
}

// File returns the recorded fingerprint and digest of input file path.
func (s *State) File(path string) (FileState, bool) {
	if s.over.Load() {
		s.mu.RLock()
		f, ok := s.files[path]
		s.mu.RUnlock()
		if ok {
			return f, true
		}
	}
	if rec := s.find(s.fTab, path); rec != nil {
		if _, fs, ok := decodeFile(rec); ok {
			return fs, true
		}
	}
	return FileState{}, false
}

// eachSnap calls fn with each record of table tab.
func (s *State) eachSnap(tab []byte, fn func(name, rec []byte)) {
	le := binary.LittleEndian
	for i := 0; i+4 <= len(tab); i += 4 {
		off := uint64(le.Uint32(tab[i:]))
		if off == 0 || off+3 > uint64(len(s.snap)) {
			continue
		}
		rec := s.snap[off:]
		if n, _, ok := readName(rec[1:]); ok {
			fn(n, rec)
		}
	}
}

// Names returns the recorded target names, sorted.
func (s *State) Names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	s.eachSnap(s.tTab, func(name, _ []byte) {
		if _, shadowed := s.targets[string(name)]; !shadowed {
			out = append(out, string(name))
		}
	})
	for n, ts := range s.targets {
		if ts != nil {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// SetReadOnly makes every later change (SetTarget, SetFile, DeleteTarget) stay in memory, and
// Compact do nothing: a dry run reads the state as a build would change it, and writes nothing.
func (s *State) SetReadOnly() {
	s.mu.Lock()
	s.memOnly = true
	s.mu.Unlock()
}

func (s *State) appendLocked(rec []byte) error {
	if s.memOnly {
		return nil
	}
	if s.rewrite {
		if err := s.compactLocked(); err != nil {
			return err
		}
	}
	if s.f == nil {
		if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(s.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		if st, err := f.Stat(); err == nil && st.Size() == 0 {
			if _, err := f.Write(snapshotBytes(nil, nil, nil)); err != nil {
				f.Close()
				return err
			}
		}
		s.f = f
	}
	le := binary.LittleEndian
	frame := make([]byte, 0, len(rec)+8)
	frame = le.AppendUint32(frame, uint32(len(rec)))
	frame = append(frame, rec...)
	frame = le.AppendUint32(frame, crc32.Checksum(rec, castagnoli))
	_, err := s.f.Write(frame) // one write per record: a crash tears at most this frame
	s.jBytes += int64(len(frame))
	return err
}

var errLongName = errors.New("state: name longer than 65535 bytes")

// SetTarget records ts for name, in memory and in the journal.
func (s *State) SetTarget(name string, ts *TargetState) error {
	if len(name) > maxStateName {
		return errLongName
	}
	for _, o := range ts.Outputs {
		if len(o.Rel) > maxStateName {
			return errLongName
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets[name] = ts
	s.over.Store(true)
	return s.appendLocked(appendTargetRec(nil, name, ts))
}

// DeleteTarget forgets name (its outputs were removed).
func (s *State) DeleteTarget(name string) error {
	if _, ok := s.View(name); !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets[name] = nil
	s.over.Store(true)
	return s.appendLocked(appendName([]byte{'D'}, name))
}

// SetFile records an input file's fingerprint and digest.
func (s *State) SetFile(path string, fs FileState) error {
	if len(path) > maxStateName {
		return errLongName
	}
	if old, ok := s.File(path); ok && old == fs {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = fs
	s.over.Store(true)
	return s.appendLocked(appendFileRec(nil, path, fs))
}

// Compact rewrites the file as a snapshot of the live records with an empty journal, through a
// temporary file and a rename, when the journal has outgrown an eighth of the snapshot (plus
// 4 KiB), when the file must be rewritten (migrated, damaged), or when force is set.
func (s *State) Compact(force bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memOnly || !force && !s.rewrite && s.jBytes <= 4096+s.snapEnd/8 {
		return nil
	}
	return s.compactLocked()
}

// compactLocked writes the snapshot. Snapshot records are copied as they are, not decoded.
func (s *State) compactLocked() error {
	type rec struct {
		name string
		b    []byte
	}
	var ts, fs []rec
	s.eachSnap(s.tTab, func(name, r []byte) {
		if _, shadowed := s.targets[string(name)]; !shadowed {
			if n, tr, ok := splitTarget(r); ok {
				ts = append(ts, rec{string(n), r[:1+2+len(n)+targetFixed+len(tr.outs)]})
			}
		}
	})
	for n, t := range s.targets {
		if t != nil {
			ts = append(ts, rec{n, appendTargetRec(nil, n, t)})
		}
	}
	s.eachSnap(s.fTab, func(name, r []byte) {
		if _, shadowed := s.files[string(name)]; !shadowed {
			fs = append(fs, rec{string(name), r[:1+2+len(name)+fpSize+32]})
		}
	})
	for p, f := range s.files {
		fs = append(fs, rec{p, appendFileRec(nil, p, f)})
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	sort.Slice(fs, func(i, j int) bool { return fs[i].name < fs[j].name })
	tn, tb := make([]string, len(ts)), make([][]byte, len(ts))
	for i, r := range ts {
		tn[i], tb[i] = r.name, r.b
	}
	fn, fb := make([]string, len(fs)), make([][]byte, len(fs))
	for i, r := range fs {
		fn[i], fb[i] = r.name, r.b
	}
	data := snapshotBytes(nil, [][]string{tn, fn}, [][][]byte{tb, fb})
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		return err
	}
	tmp := s.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return err
	}
	// The records stay readable where they are (the old mapping, the overlay); only the
	// accounting follows the new file.
	s.snapEnd, s.jBytes, s.rewrite = int64(len(data)), 0, false
	return nil
}

// snapshotBytes encodes a snapshot: header, records, then the target table and the file
// table. names[k][i] names recs[k][i] (k = 0 targets, 1 files); nil names: an empty snapshot.
func snapshotBytes(b []byte, names [][]string, recs [][][]byte) []byte {
	le := binary.LittleEndian
	b = append(b, stateHeader...)
	b = append(b, make([]byte, stateHeaderSize-len(stateHeader))...)
	var offs [2][]uint32
	for k := range names {
		offs[k] = make([]uint32, len(names[k]))
		for i, r := range recs[k] {
			offs[k][i] = uint32(len(b))
			b = append(b, r...)
		}
	}
	var tabOff [2]uint64
	for k := range names {
		tabOff[k] = uint64(len(b))
		slots := 1
		for slots < 2*len(names[k]) || slots < 2 {
			slots <<= 1
		}
		b = le.AppendUint32(b, uint32(slots))
		tab := len(b)
		b = append(b, make([]byte, 4*slots)...)
		for i, n := range names[k] {
			for j := fnv64(n) & uint64(slots-1); ; j = (j + 1) & uint64(slots-1) {
				p := b[tab+4*int(j):]
				if le.Uint32(p) == 0 {
					le.PutUint32(p, offs[k][i])
					break
				}
			}
		}
	}
	h := b[:stateHeaderSize]
	le.PutUint32(h[20:], crc32.Checksum(b[stateHeaderSize:], castagnoli))
	le.PutUint64(h[24:], uint64(len(b)))
	if len(names) == 2 {
		le.PutUint64(h[32:], tabOff[0])
		le.PutUint32(h[40:], uint32(tabOff[1]-tabOff[0]))
	}
	le.PutUint32(h[44:], crc32.Checksum(h[:44], castagnoli))
	return b
}

// Close closes the journal and unmaps the snapshot: records read in place (TargetView) are
// no longer valid.
func (s *State) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mapped {
		syscall.Munmap(s.snap)
	}
	s.mapped, s.snap, s.tTab, s.fTab = false, nil, nil, nil
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
