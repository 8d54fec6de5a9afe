package cache

import (
	"os"
	"syscall"
)

// Fingerprint is what a stat says about a file: enough to trust a recorded digest without
// reading the file again (size, modification time in ns, inode, permission bits), as ninja and
// git do.
type Fingerprint struct {
	Size  int64
	Mtime int64 // ns since the epoch
	Ino   uint64
	Mode  uint32 // permission bits
}

// Stat returns path's fingerprint. It does not follow a final symlink's target's target; it
// follows the link itself like os.Stat.
func Stat(path string) (Fingerprint, error) {
	var st syscall.Stat_t
	for {
		err := syscall.Stat(path, &st)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return Fingerprint{}, &os.PathError{Op: "stat", Path: path, Err: err}
		}
		break
	}
	return Fingerprint{
		Size:  st.Size,
		Mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		Ino:   st.Ino,
		Mode:  st.Mode & 0o7777,
	}, nil
}
