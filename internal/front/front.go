// Package front is the small `labbuild` program users run (cmd/labbuild): it answers
// `labbuild version` and replays a null build from its stamp, and hands everything else to the
// full binary, labbuild-full (cmd/labbuild-full), with the same arguments and environment.
//
// The model is ninja, a small program over a generated build.ninja, and cmd/go's test cache,
// which records the files and environment variables a test run consulted and replays its
// output while none changed. The full binary links the OpenShift families, Kubernetes and
// libvirt clients; starting it costs tens of milliseconds before main. The front links only the
// standard library and labbuild's cache package, and is linked statically (CGO_ENABLED=0), so
// a null build costs a stat per recorded file and the bytes of one stamp (cache.Stamp).
//
// The front replays only when every recorded fact still holds: same working directory and
// arguments, same LABBUILD_* and other variables labbuild reads, same terminals, same full
// binary (its fingerprint), before the stamp's validity limit (a certificate's renewal, the
// next daily store trim), no build holding the output directory's lock, and every recorded
// file's fingerprint unchanged, none of them racily new. Anything else — no stamp, a stamp
// that does not decode, any other verb or flag (the full binary writes stamps only for plain
// builds of files) — execs the full binary. LABBUILD_FRONT=explain prints why on standard
// error; LABBUILD_FRONT=off always execs it.
package front

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/labbuild/labbuild/cache"
)

// FullSuffix makes the full binary's file name from the front's: labbuild → labbuild-full
// (make build), labbuild-bench → labbuild-bench-full (make bench-build), looked up in the
// front's own directory.
const FullSuffix = "-full"

// fullPath is the full binary the front execs: $LABBUILD_FULL, else its own path + FullSuffix.
func fullPath(e Env) string {
	if p := getenv(e.Environ, "LABBUILD_FULL"); p != "" {
		return p
	}
	return e.Self + FullSuffix
}

// Env is the front's world, injected by tests: cmd/labbuild fills it from the process.
type Env struct {
	Args    []string // os.Args: the program name, then the arguments
	Environ []string // os.Environ()
	Stdout  io.Writer
	Stderr  io.Writer
	// Self is the front's own executable (os.Executable); the full binary is Self+FullSuffix
	// unless LABBUILD_FULL names it.
	Self string
	// Version and Commit are what the full binary was linked with (ldflags -X main.version,
	// -X main.commit: the Makefile's), or "" (VersionString).
	Version, Commit string
	Now             func() time.Time
	// Exec replaces the process with the full binary (syscall.Exec); it returns only on error.
	Exec func(path string, argv, env []string) error
}

// Main runs the front and returns the exit status; it returns only when it answered itself
// (or Exec failed).
func Main(e Env) int {
	start := e.Now()
	args := e.Args[1:]
	why := "LABBUILD_FRONT=off"
	mode := getenv(e.Environ, "LABBUILD_FRONT")
	if mode != "off" {
		if out, ok := versionOutput(args, e.Version, e.Commit); ok {
			io.WriteString(e.Stdout, out)
			return 0
		}
		var s *cache.Stamp
		var unlock func()
		s, unlock, why = replayable(e, args, start)
		if why == "" {
			replay(e, s, start)
			unlock()
			return 0
		}
	}
	full := fullPath(e)
	if mode == "explain" {
		fmt.Fprintf(e.Stderr, "labbuild: front: running %s: %s\n", full, why)
	}
	env := append(e.Environ[:len(e.Environ):len(e.Environ)], "LABBUILD_STAMP=1")
	argv := append([]string{full}, args...) // argv[0] as a shell would set it
	err := e.Exec(full, argv, env)
	if os.IsNotExist(err) || err == syscall.ENOENT {
		fmt.Fprintf(e.Stderr, "labbuild: the full labbuild binary %s is missing: build it (make build writes both labbuild and labbuild-full; go build -o %s ./cmd/labbuild-full), or set LABBUILD_FULL to its path\n", full, full)
		return 2
	}
	fmt.Fprintf(e.Stderr, "labbuild: running the full labbuild binary %s: %v\n", full, err)
	return 2
}

// versionOutput is what the full binary prints for `labbuild version` (or --version), with
// --json too; ok is false for any other command line.
func versionOutput(args []string, version, commit string) (string, bool) {
	isJSON, isVersion := false, false
	for _, a := range args {
		switch a {
		case "version", "--version":
			isVersion = true
		case "--json":
			isJSON = true
		default:
			return "", false
		}
	}
	if !isVersion {
		return "", false
	}
	v := VersionString(version, commit)
	if isJSON {
		b, _ := json.MarshalIndent(map[string]string{"version": v}, "", "  ")
		return string(b) + "\n", true
	}
	return "labbuild " + v + "\n", true
}

// VersionString is what `labbuild version` prints after "labbuild ": the version, the commit
// the binary was built from and the Go version, "devel (commit ab5f8d232c85, modified,
// go1.26.8)". The commit and whether the tree had changes come from the build info Go stamps
// in a binary built in a git checkout (vcs.revision, vcs.modified); where it has none (a git
// worktree, whose .git is a file; -buildvcs=false), from what the Makefile links in (-X
// main.commit: the full hash, "-modified" appended for a changed tree). The version is -X
// main.version (git describe), else the module's, "devel" for an untagged build. Both binaries
// are built from the same commit with the same flags, so they print the same bytes
// (TestFrontVersion); one with neither says "commit unknown" and how to get one.
func VersionString(version, commit string) string {
	modified := false
	if c, ok := strings.CutSuffix(commit, "-modified"); ok {
		commit, modified = c, true
	}
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if version == "" {
		version = "devel"
	}
	if commit == "" {
		return version + " (commit unknown, " + goVersion + "): built without VCS information; make build names the commit"
	}
	c := "commit " + commit[:min(12, len(commit))]
	if modified {
		c += ", modified"
	}
	return version + " (" + c + ", " + goVersion + ")"
}

func getenv(environ []string, name string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == name {
			return v
		}
	}
	return ""
}

// flagValue reports, for the flags of cmd/labbuild-full (newFlags) and its benchmark build, whether
// each takes a value. The front reads only -C, -f and -o; it must know the others to skip their
// values, and gives up on a flag it does not know.
var flagValue = map[string]bool{
	"j": true, "jobs": true, "C": true, "directory": true, "f": true, "file": true, "o": true, "out": true,
	"d": true, "debug": true, "format": true, "output": true, "by": true, "regenerate": true, "now": true,
	"synthetic": true, "synthetic-delay": true, "synthetic-ninja": true,
	"k": false, "keep-going": false, "n": false, "dry-run": false, "B": false, "always-make": false,
	"explain": false, "json": false, "all-edges": false, "all": false, "cache": false, "trim": false,
	"restart": false, "v": false, "verbose": false, "q": false, "quiet": false, "h": false, "help": false,
	"version": false,
}

// pathArgs finds, as pflag would parse args, the path arguments: the directory -C changes to,
// the lab config -f names ("" without -f) and the output directory (-o, default "out"); ok is
// false for a flag it does not know.
func pathArgs(args []string) (dir, file, out string, ok bool) {
	out = "out"
	set := func(name, v string) {
		switch name {
		case "C", "directory":
			dir = v
		case "f", "file":
			file = v
		case "o", "out":
			out = v
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return dir, file, out, true
		case strings.HasPrefix(a, "--"):
			name, v, hasV := strings.Cut(a[2:], "=")
			val, known := flagValue[name]
			if !known {
				return "", "", "", false
			}
			if val && !hasV {
				if i++; i == len(args) {
					return "", "", "", false
				}
				v = args[i]
			}
			set(name, v)
		case len(a) > 1 && a[0] == '-':
			for k := 1; k < len(a); k++ {
				name := a[k : k+1]
				val, known := flagValue[name]
				if !known {
					return "", "", "", false
				}
				if !val {
					continue
				}
				v := strings.TrimPrefix(a[k+1:], "=")
				if k+1 == len(a) {
					if i++; i == len(args) {
						return "", "", "", false
					}
					v = args[i]
				}
				set(name, v)
				break
			}
		}
	}
	return dir, file, out, true
}

// replayable returns the stamp for this command line when every fact it records still holds,
// or why not.
func replayable(e Env, args []string, start time.Time) (*cache.Stamp, func(), string) {
	s, lock, why := check(e, args, start)
	if why != "" {
		if lock >= 0 {
			syscall.Close(lock)
		}
		return nil, nil, why
	}
	return s, func() { syscall.Close(lock) }, ""
}

// check is replayable; it returns the lock's descriptor (held shared) or -1.
func check(e Env, args []string, start time.Time) (*cache.Stamp, int, string) {
	dir, file, out, ok := pathArgs(args)
	if !ok {
		return nil, -1, "a flag the front does not parse"
	}
	// The directory the full binary works in: the kernel's working directory (never $PWD),
	// then -C as os.Chdir takes it, every symlink followed (what getcwd returns after it).
	cwd, err := cache.Getwd()
	if err != nil {
		return nil, -1, "no working directory: " + err.Error()
	}
	if dir != "" {
		if cwd, err = filepath.EvalSymlinks(cache.AbsIn(cwd, dir)); err != nil {
			return nil, -1, "-C: " + err.Error()
		}
	}
	out = cache.AbsIn(cwd, out) // as the engine takes -o in that directory
	meta := filepath.Join(out, ".labbuild")
	key := cache.StampKey(cwd, args)
	data, err := os.ReadFile(filepath.Join(meta, cache.StampDir, key))
	if err != nil {
		return nil, -1, "no stamp for this command line here (it was never a null build)"
	}
	s, err := cache.DecodeStamp(data)
	if err != nil {
		return nil, -1, "stamp: " + err.Error()
	}
	switch {
	case s.Cwd != cwd || !slices.Equal(s.Argv, args):
		return nil, -1, "the stamp is another command line's"
	case s.OutDir != out:
		return nil, -1, "the stamp names another output directory"
	case file != "" && s.Config != cache.AbsIn(cwd, file):
		// -f resolved again, as the full binary takes it (each ".." after the links before
		// it): a link retargeted since the stamp names another lab config (issue 39).
		return nil, -1, "-f " + file + " names another file than when stamped (" + s.Config + ")"
	case !slices.Equal(s.Env, cache.StampEnv(e.Environ)):
		return nil, -1, "the environment changed (" + envDiff(s.Env, cache.StampEnv(e.Environ)) + ")"
	case s.TTY != ttyBits(e.Stdout, e.Stderr):
		return nil, -1, "standard output or error is a terminal now and was not then, or the reverse"
	case start.UnixNano() >= s.ValidUntil:
		return nil, -1, "past the stamp's validity (a certificate's renewal or the daily store trim is due)"
	}
	full := fullPath(e)
	if fp, err := cache.Stat(full); err != nil || fp != s.BinaryFP {
		return nil, -1, "the full binary changed since the stamp (" + full + ")"
	}
	// A build holding the lock may be changing outputs: take it shared, as a dry run does,
	// without waiting, and keep it until the process exits.
	lock, err := syscall.Open(filepath.Join(meta, "lock"), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, -1, "no lock file"
	}
	if err := syscall.Flock(lock, syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		syscall.Close(lock)
		return nil, -1, "another labbuild holds the lock on " + out
	}
	why, digests := checkFiles(s)
	if why == "" && digests > 0 {
		settle(s, meta, key, start)
	}
	return s, lock, why
}

// settle rewrites the stamp without the digests of its racy entries once they are older than
// cache.RacyWindow: their bytes were just found as stamped, and from now on any write moves
// their ctime, so the fingerprint alone vouches for them and later replays hash nothing.
func settle(s *cache.Stamp, meta, key string, now time.Time) {
	var files []byte
	n, settled := 0, 0
	cache.StampFiles(s.Files, func(base byte, path []byte, fp cache.Fingerprint, digest []byte) bool {
		if digest != nil && fp.Changed() < now.UnixNano()-cache.RacyWindow {
			base, digest = base&^cache.StampDigest, nil
			settled++
		}
		files = append(cache.AppendStampFile(files, base, path, fp), digest...)
		n++
		return true
	})
	if settled == 0 {
		return
	}
	t := *s
	t.Files, t.NFiles = files, n
	cache.WriteStamp(meta, key, &t)
}

// checkFiles stats every recorded file and returns the first that changed, or "", and how many
// entries it compared by their bytes (a digest). Large stamps are checked on every CPU, in
// contiguous parts (as the full binary's fast path does).
func checkFiles(s *cache.Stamp) (string, int) {
	outfd, err := syscall.Open(s.OutDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return "no output directory", 0
	}
	defer syscall.Close(outfd)
	basefd := -1
	if s.BaseDir != "" {
		if basefd, err = syscall.Open(s.BaseDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0); err != nil {
			return "no base directory " + s.BaseDir, 0
		}
		defer syscall.Close(basefd)
	}
	// Split the entries into parts at entry boundaries.
	parts := [][]byte{s.Files}
	if workers := min(runtime.NumCPU(), 1+s.NFiles/4096); workers > 1 {
		parts = cache.SplitStampFiles(s.Files, (s.NFiles+workers-1)/workers)
	}
	var (
		wg      sync.WaitGroup
		failed  atomic.Pointer[string]
		digests atomic.Int32
	)
	for _, part := range parts {
		check := func() {
			var pathz []byte
			ok := cache.StampFiles(part, func(base byte, path []byte, fp cache.Fingerprint, digest []byte) bool {
				if failed.Load() != nil {
					return false
				}
				fd := cache.AtCWD
				switch base &^ cache.StampAbsent {
				case cache.StampOut:
					fd = outfd
				case cache.StampBase:
					fd = basefd
				}
				pathz = append(append(pathz[:0], path...), 0)
				got, err := cache.StatAt(fd, pathz)
				var why string
				switch {
				case base&cache.StampAbsent != 0:
					if err == nil {
						why = "appeared"
					}
				case err != nil:
					why = "is gone"
				case got != fp:
					why = "changed"
				case digest != nil && !sameDigest(pathz, digest):
					why = "changed (its bytes; its fingerprint was racy)"
				}
				if digest != nil {
					digests.Add(1)
				}
				if why != "" {
					msg := unsafe.String(&pathz[0], len(pathz)-1) + " " + why
					msg = strings.Clone(msg)
					failed.CompareAndSwap(nil, &msg)
					return false
				}
				return true
			})
			if !ok && failed.Load() == nil {
				msg := "stamp: damaged file list"
				failed.CompareAndSwap(nil, &msg)
			}
		}
		if len(parts) == 1 {
			check() // a small stamp: no goroutine
			break
		}
		wg.Add(1)
		go func() { defer wg.Done(); check() }()
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return *p, 0
	}
	return "", int(digests.Load())
}

// envDiff names the variables that differ between two StampEnv lists.
func envDiff(was, now []string) string {
	m := map[string]string{}
	for _, kv := range was {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	var diff []string
	for _, kv := range now {
		k, v, _ := strings.Cut(kv, "=")
		if old, ok := m[k]; !ok || old != v {
			diff = append(diff, k)
		}
		delete(m, k)
	}
	for k := range m {
		diff = append(diff, k)
	}
	return strings.Join(diff, ", ")
}

// ttyBits is cache.Stamp.TTY for these writers.
func ttyBits(stdout, stderr io.Writer) uint8 {
	var bits uint8
	if isTerminal(stdout) {
		bits |= cache.StampStdoutTTY
	}
	if isTerminal(stderr) {
		bits |= cache.StampStderrTTY
	}
	return bits
}

// isTerminal is golang.org/x/term's IsTerminal on Linux (TCGETS succeeds), without the import.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	var t syscall.Termios
	_, _, e := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&t)))
	return e == 0
}

// replay writes the recorded output in its order, with the front's own duration in place of
// the full binary's.
func replay(e Env, s *cache.Stamp, start time.Time) {
	for _, c := range s.Output {
		switch c.Fd {
		case 0:
			fmt.Fprintf(e.Stdout, "%.2f", e.Now().Sub(start).Seconds())
		case 1:
			e.Stdout.Write(c.Data)
		case 2:
			e.Stderr.Write(c.Data)
		}
	}
}

// sameDigest reports whether the file at pathz holds bytes of the SHA-256 digest: a racily
// clean entry, whose fingerprint cannot vouch for them (cache.RacyWindow). Only absolute
// entries carry a digest (cache.StampCollector.Stat); any other reads as changed.
func sameDigest(pathz []byte, digest []byte) bool {
	p := unsafe.String(&pathz[0], len(pathz)-1)
	if !filepath.IsAbs(p) {
		return false
	}
	d, _, err := cache.HashFile(p)
	return err == nil && string(d[:]) == string(digest)
}
