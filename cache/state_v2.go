package cache

import (
	"strconv"
	"strings"
)

// stateHeaderV2 started the text state format of labbuild before the indexed snapshot: one
// tab-separated line per record (T target, O output, F input file, D deletion).
const stateHeaderV2 = "labbuild-state 2\n"

// parseV2 reads a version-2 (text) state file's records into the overlay: the format before
// the indexed snapshot, migrated on load (the next write rewrites the file as version 4).
// Damaged records (a torn last line, a target record cut short) are skipped.
func (s *State) parseV2(text string) {
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
				s.targets[strings.Clone(curName)] = cur
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
			cur.Outputs = append(cur.Outputs, OutputState{Rel: strings.Clone(f[0]), FP: fp})
			want--
			if want == 0 {
				s.targets[strings.Clone(curName)] = cur
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
			s.files[strings.Clone(f[0])] = FileState{FP: fp, Digest: d}
		case 'D':
			if len(f) == 1 {
				s.targets[strings.Clone(f[0])] = nil
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
