package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestReadOnlyVerbsWriteNothing: -n and the read-only verbs leave a built output directory
// byte-identical (mtimes included: no lock rewrite, no state compaction) and create nothing in
// an empty directory.
func TestReadOnlyVerbsWriteNothing(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	good := filepath.Join(t.TempDir(), "good.yaml")
	if err := os.WriteFile(good, []byte("pki: {keyAlgorithm: ECDSA-P256}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli := func(dir string, args ...string) (int, string) {
		var out bytes.Buffer
		code := run(context.Background(), append([]string{"-C", dir, "-f", good}, args...), &out, &out)
		os.Chdir(wd)
		return code, out.String()
	}
	built, empty := t.TempDir(), t.TempDir()
	if code, out := cli(built, "-q", "pki"); code != 0 {
		t.Fatalf("build: %d\n%s", code, out)
	}
	for _, dir := range []string{built, empty} {
		before := snapshot(t, dir)
		for _, args := range [][]string{{"-n", "pki"}, {"-n", "--json", "pki"}, {"graph", "pki"}, {"graph", "--format", "tree", "pki"},
			{"explain", "pki/ca/root"}, {"list", "pki"}, {"config"}, {"config", "--json"}, {"certs"}, {"status", "--json", "pki"}} {
			code, out := cli(dir, args...)
			if code != 0 {
				t.Errorf("%v in %s: exit %d\n%s", args, dir, code, out)
			}
			if after := snapshot(t, dir); !mapsEqual(before, after) {
				t.Errorf("%v changed %s:\n%s", args, dir, diffSnap(before, after))
				before = after
			}
		}
	}
}
