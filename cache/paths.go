package cache

import (
	"path/filepath"
	"syscall"
)

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
