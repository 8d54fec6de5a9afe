package cache

import (
	"os"
	"syscall"
	"unsafe"
)

// Fingerprint is what a stat says about a file: enough to trust a recorded digest without
// reading the file again, as git's index does (size, mtime, ctime, device, inode, mode; ninja
// and make keep the mtime alone). The ctime is what catches an edit whose mtime was put back
// (touch -r, rsync -t, cp -p, editors that preserve it): no user call can set it, every write,
// chmod, rename or utimes moves it to the kernel's clock. The device tells apart two files
// with one inode number on two file systems (a directory mounted over, a restored copy).
type Fingerprint struct {
	Size  int64
	Mtime int64 // ns since the epoch
	Ctime int64 // ns since the epoch: the inode's last change (st_ctim)
	Ino   uint64
	Dev   uint64 // st_dev
	Mode  uint32 // permission bits
}

// Changed returns the later of the mtime and ctime (ns): when the file's bytes or inode last
// changed as far as the kernel's clock can tell; the racy rules compare it with a run's start.
func (fp Fingerprint) Changed() int64 { return max(fp.Mtime, fp.Ctime) }

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

// fingerprintOf is what a Fingerprint keeps of a stat.
func fingerprintOf(st *syscall.Stat_t) Fingerprint {
	return Fingerprint{
		Size:  st.Size,
		Mtime: st.Mtim.Sec*1e9 + st.Mtim.Nsec,
		Ctime: st.Ctim.Sec*1e9 + st.Ctim.Nsec,
		Ino:   st.Ino,
		Dev:   st.Dev,
		Mode:  st.Mode & 0o7777,
	}
}
