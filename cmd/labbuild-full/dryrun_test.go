package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// dryRunCases are the command lines TestDryRunEveryVerb runs with -n, per verb, with the exit
// status each must end with: 0 (honoured: it did nothing, or printed what it would do), 2
// (refused, saying so: verbs.noDryRun, or a request -n cannot serve). Every verb of the table
// must have an entry, so a new verb is run too.
var dryRunCases = map[string][]struct {
	args []string
	code int
	says string // a piece of its output
}{
	"build": {{nil, 0, "to restore"}, {[]string{"pki"}, 0, ""}, {[]string{"-B", "pki"}, 0, "forced (-B)"},
		{[]string{"--regenerate", "pki/key/root", "pki"}, 0, "--regenerate"}, {[]string{"--json", "pki"}, 0, "[]"}},
	"clean": {{nil, 0, "would clean"}, {[]string{"pki"}, 0, "would clean pki/ca/root"}, {[]string{"--cache"}, 0, "would remove from the content store"},
		{[]string{"--cache", "--regenerate", "all"}, 0, "sticky secrets included"}, {[]string{"--trim"}, 0, "would trim the store"}},
	"destroy":    {{nil, 0, "nothing recorded to destroy"}, {[]string{"--json"}, 0, `"destroyed"`}},
	"init":       {{nil, 2, "lab.yaml exists"}, {[]string{"-f", "new.yaml"}, 0, "would write new.yaml"}},
	"graph":      {{nil, 0, "digraph"}, {[]string{"--format", "tree", "pki"}, 0, "pki/ca/root"}, {[]string{"--output", "g.dot"}, 2, "-n writes nothing"}},
	"list":       {{nil, 0, "pki/ca/root"}},
	"explain":    {{[]string{"pki/ca/root"}, 0, "pki/ca/root"}},
	"config":     {{nil, 0, "keyAlgorithm"}, {[]string{"--json"}, 0, "keyAlgorithm"}},
	"certs":      {{nil, 0, "pki/ca/root"}, {[]string{"--json"}, 0, "pki/ca/root"}},
	"log":        {{[]string{"pki/ca/root"}, 0, ""}},
	"status":     {{[]string{"--json", "pki"}, 0, "pki/ca/root"}, {nil, 1, "build kubeconfig/admin first"}},
	"ssh":        {{[]string{"master-0"}, 2, "-n: ssh"}},
	"console":    {{[]string{"master-0"}, 2, "-n: console"}},
	"gather":     {{nil, 2, "-n: gather"}},
	"version":    {{nil, 0, "labbuild "}},
	"completion": {{[]string{"bash"}, 0, "complete"}},
	"help":       {{nil, 0, "Usage"}, {[]string{"clean"}, 0, "--regenerate all"}},
}

// TestDryRunEveryVerb: every verb of the table, run with -n on a built lab, either honours it
// (exit 0) or refuses it (exit 2, saying so), and leaves the lab directory and its out/
// byte-identical: every path's kind and mode, size, mtime (ns) and content digest.
func TestDryRunEveryVerb(t *testing.T) {
	dir := t.TempDir()
	writeLab(t, dir)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	cli := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := run(context.Background(), append([]string{"-C", dir}, args...), &out, &out)
		os.Chdir(wd)
		return code, out.String()
	}
	if code, out := cli("-q", "pki", "manifests/cluster/pull-secret", "manifests/cluster/ssh"); code != 0 {
		t.Fatalf("build: %d\n%s", code, out)
	}
	before := treeSnapshot(t, dir)
	if !strings.Contains(before, "out/.labbuild/state") || !strings.Contains(before, "out/pki/key/root/tls.key") {
		t.Fatalf("the built lab lacks its state or keys:\n%s", before)
	}
	var verbsRun []string
	n, honoured, refused := 0, 0, 0
	for _, name := range verbNames() {
		cases, ok := dryRunCases[name]
		if !ok {
			t.Errorf("verb %s has no -n case in dryRunCases: add what it does with -n", name)
			continue
		}
		verbsRun = append(verbsRun, name)
		for _, tc := range cases {
			args := append([]string{"-n"}, tc.args...)
			if name != "build" {
				args = append([]string{name, "-n"}, tc.args...)
			}
			code, out := cli(args...)
			n++
			switch {
			case code != tc.code:
				t.Errorf("labbuild %s: exit %d, want %d\n%s", strings.Join(args, " "), code, tc.code, out)
			case !strings.Contains(out, tc.says):
				t.Errorf("labbuild %s: output lacks %q:\n%s", strings.Join(args, " "), tc.says, out)
			case code == 2:
				refused++
			default:
				honoured++
			}
			if after := treeSnapshot(t, dir); after != before {
				t.Errorf("labbuild %s changed the lab directory:\n%s", strings.Join(args, " "), diffLines(before, after))
				before = after
			}
		}
	}
	if len(verbsRun) != len(verbs) {
		t.Errorf("ran %d verbs of %d", len(verbsRun), len(verbs))
	}
	t.Logf("-n on every verb: %d command lines over %d verbs, %d honoured, %d refused, the tree unchanged after each", n, len(verbsRun), honoured, refused)
}

// writeLab writes a lab (ECDSA keys: quick) with its pull secret and SSH key into dir.
func writeLab(t *testing.T, dir string) {
	t.Helper()
	writeGoodAccess(t, dir)
	must(t, os.Rename(filepath.Join(dir, ".pull-secret.json"), filepath.Join(dir, "ps.json")))
	must(t, os.Rename(filepath.Join(dir, ".ssh", "id_rsa.pub"), filepath.Join(dir, "key.pub")))
	must(t, os.Remove(filepath.Join(dir, ".ssh")))
	must(t, os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte("pki: {keyAlgorithm: ECDSA-P256}\naccess: {pullSecretFile: ps.json, sshKeyFile: key.pub}\n"), 0o644))
}

// treeSnapshot lists every path under dir, sorted: kind and mode, size, mtime in ns, and the
// content's SHA-256 for a regular file (a symlink: its target).
func treeSnapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := fmt.Sprintf("%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		case fi.Mode()&os.ModeSymlink != 0:
			to, _ := os.Readlink(p)
			v += " -> " + to
		}
		lines = append(lines, v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// diffLines returns the lines only in a ("- ") and only in b ("+ ").
func diffLines(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for l := range ma {
		if !mb[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range mb {
		if !ma[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
