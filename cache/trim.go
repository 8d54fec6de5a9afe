package cache

import (
	"encoding/json"
	"errors"
	"io/fs"
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
// every object no remaining entry names. Pinned entries (sticky secrets) are always kept, and
// so are damaged entries (whose digest does not match): one may be a sticky secret's, whose
// loss must stay an error naming it rather than vanish (--regenerate overwrites it). Call it
// holding the output directory's lock.
func (c *Cache) Trim(maxAge time.Duration, maxBytes int64, now time.Time) (TrimStats, error) {
	return c.trim(func(used time.Time, kept, size int64) bool {
		return maxAge > 0 && now.Sub(used) > maxAge || maxBytes > 0 && kept+size > maxBytes
	}, false)
}

// PlanTrim is Trim without removing anything: what it would remove and keep (clean --trim -n).
func (c *Cache) PlanTrim(maxAge time.Duration, maxBytes int64, now time.Time) (TrimStats, error) {
	return c.trim(func(used time.Time, kept, size int64) bool {
		return maxAge > 0 && now.Sub(used) > maxAge || maxBytes > 0 && kept+size > maxBytes
	}, true)
}

// ClearUnpinned removes every entry but the pinned and damaged ones (as Trim keeps them), every
// object they do not name, and the temporary files: `clean --cache`, which keeps the sticky
// secrets. With dry it removes nothing and reports what it would.
func (c *Cache) ClearUnpinned(dry bool) (TrimStats, error) {
	st, err := c.trim(func(time.Time, int64, int64) bool { return true }, dry)
	if err == nil && !dry {
		os.RemoveAll(filepath.Join(c.dir, "tmp"))
	}
	return st, err
}

// trim removes (unless dry) each unpinned entry drop says to, newest first (kept: the bytes the
// entries kept so far keep; size: what this one adds), then each object no kept entry names.
func (c *Cache) trim(drop func(used time.Time, kept, size int64) bool, dry bool) (TrimStats, error) {
	type ent struct {
		path string
		used time.Time
		e    Entry
	}
	var ents []ent
	var st TrimStats
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
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if j, err := unseal(b); (err != nil && !errors.Is(err, errUnsealed)) || json.Unmarshal(j, &e) != nil {
			st.EntriesKept++ // damaged: kept, see Trim
			return nil
		}
		ents = append(ents, ent{p, info.ModTime(), e})
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return TrimStats{}, err
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].used.After(ents[j].used) }) // newest first
	keep := map[Digest]int64{}
	var kept int64
	for _, x := range ents {
		var size int64
		for _, f := range x.e.Outputs {
			if _, ok := keep[f.Digest]; !ok {
				size += f.Size
			}
		}
		if !x.e.Pinned && drop(x.used, kept, size) {
			if !dry {
				os.Remove(x.path)
			}
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
		if dry || os.Remove(p) == nil {
			st.ObjectsRemoved++
			st.BytesRemoved += info.Size()
		}
		return nil
	})
	return st, nil
}

// Usage counts what the store holds, as removed: what removing its directory removes (every
// entry, damaged or not, and every object with its bytes).
func (c *Cache) Usage() TrimStats {
	var st TrimStats
	count := func(sub string, fn func(size int64)) {
		filepath.WalkDir(filepath.Join(c.dir, sub), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					fn(info.Size())
				}
			}
			return nil
		})
	}
	count("actions", func(int64) { st.EntriesRemoved++ })
	count("objects", func(n int64) { st.ObjectsRemoved++; st.BytesRemoved += n })
	return st
}
