package cache

import (
	"os"
	"syscall"
	"unsafe"
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
	return fingerprintOf(&st), nil
}

// AtCWD is the directory descriptor that makes StatAt resolve a relative path from the working
// directory (AT_FDCWD).
const AtCWD = -100

// StatAt is Stat of path relative to the directory open as dirfd (absolute paths ignore it),
// for callers that stat many files: path is a NUL-terminated byte string the caller reuses, so
// nothing is allocated, and the kernel walks only the path's own components. On error, the
// error names the path.
func StatAt(dirfd int, pathz []byte) (Fingerprint, error) {
	if len(pathz) == 0 || pathz[len(pathz)-1] != 0 {
		return Fingerprint{}, &os.PathError{Op: "stat", Path: string(pathz), Err: syscall.EINVAL}
	}
	var st syscall.Stat_t
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_NEWFSTATAT, uintptr(dirfd), uintptr(unsafe.Pointer(&pathz[0])), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return Fingerprint{}, &os.PathError{Op: "stat", Path: string(pathz[:len(pathz)-1]), Err: e}
		}
		break
	}
	return fingerprintOf(&st), nil
}

// fingerprintOf is what a Fingerprint keeps of a stat: size, mtime in ns, inode, permission bits.
func fingerprintOf(st *syscall.Stat_t) Fingerprint {
	return Fingerprint{
		Size:  st.Size,
		Mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		Ino:   st.Ino,
		Mode:  st.Mode & 0o7777,
	}
}
