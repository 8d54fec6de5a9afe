package cache

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// TrimStats reports what Trim removed and kept.
type TrimStats struct {
	EntriesRemoved, EntriesKept int
	ObjectsRemoved              int
	BytesRemoved, BytesKept     int64
}

// Touch marks the action entry for key as used now, for Trim's age rule. Like the Go build
// cache it only writes when the recorded use is over an hour old, so a null build writes
// nothing.
func (c *Cache) Touch(key Digest, now time.Time) {
	p := c.actionPath(key)
	if st, err := os.Stat(p); err == nil && now.Sub(st.ModTime()) > time.Hour {
		os.Chtimes(p, now, now)
	}
}

// Trim removes action entries unused for longer than maxAge, then the least recently used
// ones until the objects they keep add up to at most maxBytes (0: no size limit), and then
// every object no remaining entry names. Pinned entries (sticky secrets) are always kept.
// Call it holding the output directory's lock.
func (c *Cache) Trim(maxAge time.Duration, maxBytes int64, now time.Time) (TrimStats, error) {
	type ent struct {
		path string
		used time.Time
		e    Entry
	}
	var ents []ent
	root := filepath.Join(c.dir, "actions")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		var e Entry
		if b, err := os.ReadFile(p); err != nil || json.Unmarshal(b, &e) != nil {
			os.Remove(p) // corrupt: it would only ever be a miss
			return nil
		}
		ents = append(ents, ent{p, info.ModTime(), e})
		return nil
	})
	if err != nil {
		return TrimStats{}, err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].used.After(ents[j].used) }) // newest first
	var st TrimStats
	keep := map[Digest]int64{}
	var kept int64
	for _, x := range ents {
		var size int64
		for _, f := range x.e.Outputs {
			if _, ok := keep[f.Digest]; !ok {
				size += f.Size
			}
		}
		tooOld := maxAge > 0 && now.Sub(x.used) > maxAge
		tooBig := maxBytes > 0 && kept+size > maxBytes
		if !x.e.Pinned && (tooOld || tooBig) {
			os.Remove(x.path)
			st.EntriesRemoved++
			continue
		}
		st.EntriesKept++
		kept += size
		for _, f := range x.e.Outputs {
			keep[f.Digest] = f.Size
		}
	}
	filepath.WalkDir(filepath.Join(c.dir, "objects"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		dg, err := ParseDigest(d.Name())
		info, ierr := d.Info()
		if ierr != nil {
			return nil
		}
		if _, ok := keep[dg]; ok && err == nil {
			st.BytesKept += info.Size()
			return nil
		}
		if os.Remove(p) == nil {
			st.ObjectsRemoved++
			st.BytesRemoved += info.Size()
		}
		return nil
	})
	return st, nil
}
