// Package testenv finds and starts the real programs labbuild's tests talk to (openssl, etcd,
// kube-apiserver, libvirtd, haproxy, dnsmasq). A missing program skips the test on a developer
// machine and fails it in CI (CI=true), where .ci/run installs everything.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// InCI reports whether the tests run under .ci/run (CI=true), where every real tool must exist.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require returns the absolute path of program name, looked up in PATH and then in the
// directory named by $LABBUILD_TOOLS (where .ci/run puts binaries it builds, such as
// kube-apiserver). When the program is missing the test is skipped with the reason, or failed
// in CI.
func Require(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if dir := os.Getenv("LABBUILD_TOOLS"); dir != "" {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	Missing(t, name+" not found in PATH or $LABBUILD_TOOLS (bash .ci/install.sh installs it)")
	return ""
}

// Missing skips the test with why, or fails it in CI where nothing may be missing.
func Missing(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("required in CI: %s", why)
	}
	t.Skip(why)
}

// Shared returns the path of ../shared (the project's reference data and fixtures) seen from
// the repository root, or "" when it is absent (a fresh clone without it).
func Shared() string {
	for _, c := range []string{os.Getenv("LABBUILD_SHARED"), sharedFromRoot()} {
		if c == "" {
			continue
		}
		if st, err := os.Stat(filepath.Join(c, "fixtures")); err == nil && st.IsDir() {
			return c
		}
	}
	return ""
}

// RequireShared returns ../shared or skips (fails in CI) when it is absent.
func RequireShared(t testing.TB) string {
	t.Helper()
	s := Shared()
	if s == "" {
		Missing(t, "../shared is absent (a fresh clone): this test needs its fixtures")
	}
	return s
}

// RepoRoot returns the repository root: the nearest parent directory holding go.mod.
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func sharedFromRoot() string {
	root := RepoRoot()
	if root == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(root), "shared")
}
