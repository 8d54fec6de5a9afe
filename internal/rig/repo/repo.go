// Package repo finds the labbuild repository and the ../shared reference tree beside it. It
// links no `testing`, so cmd/labbuild-sample (what `make run` runs) can use it; the test
// helpers built on it live in internal/rig/testenv.
package repo

import (
	"os"
	"path/filepath"
)

// Shared returns the path of ../shared (the project's reference data and fixtures) seen from
// the repository root, or $LABBUILD_SHARED when set, or "" when neither holds a fixtures
// directory (a fresh clone without it).
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

// Root returns the repository root: the nearest parent of the working directory holding
// go.mod, or "" outside the repository.
func Root() string {
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
	root := Root()
	if root == "" {
		return ""
	}
	return filepath.Join(filepath.Dir(root), "shared")
}
