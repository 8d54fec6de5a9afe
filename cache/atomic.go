package cache

import (
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path through a temporary file in path's directory and a
// rename, as the cache writes its own files: a reader sees the old content or the new, never
// half of it, and the file has mode. The temporary file (".tmp-<name>-<random>", which
// dnsmasq's and most conf-dir readers skip as a dot file) is removed on any error; one a killed
// writer left stays. The directory must exist. Errors are the os package's, naming the path.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
