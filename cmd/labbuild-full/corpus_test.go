package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"golang.org/x/crypto/ssh"
)

// TestBadConfigCorpus runs every bad lab config of testdata/badconfig through the CLI (run, as
// main calls it), in an empty directory and in one with a built out/, as `labbuild` and as
// `labbuild -n`. Each must exit 2, name its field (the corpus file's "field:" line), print no
// secret, and leave both directories byte-identical, mtimes and modes included.
//
// A corpus file is a txtar archive: comment lines "field: <text the message must name>",
// optionally "home: empty" (no default pull secret or SSH key in $HOME), then lab.yaml and
// any files it names. The good pull secret and SSH key live in $HOME, as the defaults say.
func TestBadConfigCorpus(t *testing.T) {
	corpus, err := filepath.Glob("../../testdata/badconfig/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(corpus) < 80 {
		t.Fatalf("corpus has %d bad configs, want at least 80", len(corpus))
	}
	home, emptyHome := t.TempDir(), t.TempDir()
	secrets := writeGoodAccess(t, home)
	secrets = append(secrets, "SECRETMARK")
	t.Setenv("HOME", home)

	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	cli := func(dir string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"-C", dir}, args...), &out, &errb)
		if err := os.Chdir(wd); err != nil {
			t.Fatal(err)
		}
		return code, out.String() + errb.String()
	}

	// A built out/: the PKI of a good config (ECDSA keys: quick).
	built := t.TempDir()
	good := filepath.Join(t.TempDir(), "good.yaml")
	if err := os.WriteFile(good, []byte("pki: {keyAlgorithm: ECDSA-P256}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := cli(built, "-f", good, "-q", "pki"); code != 0 {
		t.Fatalf("building the reference out/: exit %d\n%s", code, out)
	}
	empty := t.TempDir()
	before := map[string]map[string]string{built: snapshot(t, built), empty: snapshot(t, empty)}
	if len(before[built]) < 20 {
		t.Fatalf("reference out/ has only %d entries", len(before[built]))
	}

	for _, path := range corpus {
		name := strings.TrimSuffix(filepath.Base(path), ".txtar")
		t.Run(name, func(t *testing.T) {
			ar, err := txtar.ParseFile(path)
			if err != nil {
				t.Fatal(err)
			}
			meta := map[string]string{}
			for _, l := range strings.Split(string(ar.Comment), "\n") {
				if k, v, ok := strings.Cut(l, ": "); ok {
					meta[k] = v
				}
			}
			field := meta["field"]
			if field == "" {
				t.Fatal("no field: line")
			}
			if meta["home"] == "empty" {
				t.Setenv("HOME", emptyHome)
			}
			cfgDir := t.TempDir()
			for _, f := range ar.Files {
				p := filepath.Join(cfgDir, f.Name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, f.Data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			lab := filepath.Join(cfgDir, "lab.yaml")
			for _, dir := range []string{empty, built} {
				for _, extra := range [][]string{nil, {"-n"}} {
					code, out := cli(dir, append([]string{"-f", lab}, extra...)...)
					what := fmt.Sprintf("labbuild %s in %s", strings.Join(extra, " "), map[bool]string{true: "an empty dir", false: "a built dir"}[dir == empty])
					if code != exitUsage {
						t.Errorf("%s: exit %d, want 2\n%s", what, code, out)
					}
					if !strings.Contains(out, field) {
						t.Errorf("%s: output does not name %q:\n%s", what, field, out)
					}
					if !strings.Contains(out, lab) {
						t.Errorf("%s: output does not name the file %s:\n%s", what, lab, out)
					}
					for _, s := range secrets {
						if strings.Contains(out, s) {
							t.Errorf("%s: output shows a secret (%.12s…):\n%s", what, s, out)
						}
					}
					if after := snapshot(t, dir); !mapsEqual(before[dir], after) {
						t.Errorf("%s: the directory changed:\n%s", what, diffSnap(before[dir], after))
					}
				}
			}
		})
	}
}

// writeGoodAccess writes a valid pull secret and SSH public key where the default lab looks
// (~/.pull-secret.json, ~/.ssh/id_rsa.pub) and returns the strings that must never be printed.
func writeGoodAccess(t *testing.T, home string) []string {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte("labuser:SECRETMARK-password"))
	if err := os.WriteFile(filepath.Join(home, ".pull-secret.json"), []byte(`{"auths":{"quay.io":{"auth":"`+auth+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	key := ssh.MarshalAuthorizedKey(sp)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id_rsa.pub"), key, 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{auth, strings.Fields(string(key))[1]}
}

// snapshot maps every path under dir (dir itself as ".") to its mode, mtime and content digest.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := fmt.Sprintf("%v %d", fi.Mode(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		m[rel] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func diffSnap(a, b map[string]string) string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "- "+k)
		} else if w != v {
			out = append(out, "~ "+k+": "+v+" -> "+w)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "+ "+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
