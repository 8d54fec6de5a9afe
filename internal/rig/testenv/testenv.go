// Package testenv finds and starts the real programs labbuild's tests talk to (openssl, etcd,
// kube-apiserver, libvirtd, haproxy, dnsmasq). A missing program skips the test on a developer
// machine and fails it in CI (CI=true), where .ci/run installs everything.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/labbuild/labbuild/internal/rig/repo"
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

// RequireShared returns ../shared or skips (fails in CI) when it is absent.
func RequireShared(t testing.TB) string {
	t.Helper()
	s := repo.Shared()
	if s == "" {
		Missing(t, "../shared is absent (a fresh clone): this test needs its fixtures")
	}
	return s
}
