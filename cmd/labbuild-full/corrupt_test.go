package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/cache"
)

// The corruption corpus (issue 39): every kind of file labbuild keeps about a lab — the content
// store's objects, its entries and epoch records, the state, the front's stamps, the lock —
// flipped (one byte changed), truncated (cut to half) and zeroed (its bytes set to 0), on a built
// lab. Each case is run as a user would meet it (after labbuild clean where the store is what
// a build reads), and checked for three things: the damage is detected (the outcome the case
// names, never a verdict resting on the damaged bytes), nothing damaged is served (every output
// is the bytes it was, or a certificate issued anew, never the damaged bytes; every renewal
// point inside its certificate's validity), and no sticky secret is replaced without
// --regenerate.

// corruptOutcome is what a damaged file must lead to.
type corruptOutcome int

const (
	outcomeSame     corruptOutcome = iota // exit 0; every output the bytes it was (restored or made again)
	outcomeSticky                         // exit 1 naming the secret and the ways out; after the store is restored, as before
	outcomeReissued                       // exit 0; a certificate issued anew (its epoch was unusable); keys the same
	outcomeDeferred                       // the front runs the full binary rather than replay the stamp
)

type corruptCase struct {
	what    string // the sticky key is pki/key/root, the certificate pki/cert/admin
	damage  string // flipped, truncated, zeroed, or "staleAt digit" (a flip that keeps the JSON valid)
	clean   bool   // labbuild clean first: the store is then what the build reads
	outcome corruptOutcome
}

func corruptCases() []corruptCase {
	var cs []corruptCase
	for _, d := range []string{"flipped", "truncated", "zeroed"} {
		cs = append(cs,
			corruptCase{"object of a sticky key", d, true, outcomeSticky},
			corruptCase{"entry of a sticky key", d, true, outcomeSticky},
			corruptCase{"object of a certificate", d, true, outcomeSame},
			corruptCase{"entry of a certificate", d, true, outcomeSame},
			corruptCase{"epoch of a certificate", d, true, outcomeReissued},
			corruptCase{"state", d, false, outcomeSame},
			corruptCase{"stamp", d, false, outcomeDeferred},
			corruptCase{"lock", d, false, outcomeSame},
		)
	}
	return append(cs,
		corruptCase{"entry of a certificate", "staleAt digit", true, outcomeSame},
		corruptCase{"epoch of a certificate", "staleAt digit", true, outcomeReissued})
}

// TestCorruptionCorpus runs the corpus and reports the three counts.
func TestCorruptionCorpus(t *testing.T) {
	t.Setenv("LABBUILD_STAMP", "1") // the full binary writes stamps, as the front asks it to
	t.Setenv("LABBUILD_FRONT", "explain")
	var ran, detected, notServed, keysKept int
	for _, tc := range corruptCases() {
		t.Run(tc.what+", "+tc.damage, func(t *testing.T) {
			d, s, k := runCorruptCase(t, tc)
			ran, detected, notServed, keysKept = ran+1, detected+d, notServed+s, keysKept+k
		})
	}
	t.Logf("corruption corpus, %d cases: %d/%d detected, %d/%d never served, %d/%d with no sticky secret replaced",
		ran, detected, ran, notServed, ran, keysKept, ran)
}

// corruptLab is one built lab of the corpus.
type corruptLab struct {
	t   *testing.T
	dir string
	wd  string
}

func (l *corruptLab) run(args ...string) (int, string) {
	var out bytes.Buffer
	code := run(context.Background(), append([]string{"-C", l.dir}, args...), &out, &out)
	os.Chdir(l.wd)
	return code, out.String()
}

func (l *corruptLab) p(rel string) string { return filepath.Join(l.dir, "out", rel) }

// record returns target name's state record.
func (l *corruptLab) record(name string) *cache.TargetState {
	st, err := cache.LoadState(l.p(".labbuild/state"))
	must(l.t, err)
	defer st.Close()
	return st.Target(name)
}

// storePath returns the path of a store file: actions/ or objects/ by digest.
func (l *corruptLab) storePath(kind string, d cache.Digest) string {
	h := d.String()
	return l.p(filepath.Join(".labbuild/cache", kind, h[:2], h))
}

// outputs maps each output file under out/ (not .labbuild) to its bytes.
func (l *corruptLab) outputs() map[string]string {
	m := map[string]string{}
	filepath.Walk(l.p(""), func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.IsDir() && fi.Name() == ".labbuild" {
			return filepath.SkipDir
		}
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(l.p(""), p)
			m[rel] = string(b)
		}
		return nil
	})
	return m
}

// files returns the paths tc damages.
func (l *corruptLab) files(tc corruptCase) []string {
	t := l.t
	switch {
	case strings.HasPrefix(tc.what, "object of a sticky"):
		b, err := os.ReadFile(l.p("pki/key/root/tls.key"))
		must(t, err)
		return []string{l.storePath("objects", cache.Sum(b))}
	case strings.HasPrefix(tc.what, "entry of a sticky"):
		return []string{l.storePath("actions", l.record("pki/key/root").Key)}
	case strings.HasPrefix(tc.what, "object of a cert"):
		b, err := os.ReadFile(l.p("pki/cert/admin/tls.crt"))
		must(t, err)
		return []string{l.storePath("objects", cache.Sum(b))}
	case strings.HasPrefix(tc.what, "entry of a cert"):
		return []string{l.storePath("actions", l.record("pki/cert/admin").Key)}
	case strings.HasPrefix(tc.what, "epoch"):
		// The epoch records with pki/cert/admin's epoch and stale time (certificates issued in
		// one build share them): each is damaged.
		rec := l.record("pki/cert/admin")
		want := fmt.Sprintf(`{"epoch":%d,"staleAt":%d}`, rec.Epoch, rec.StaleAt)
		var out []string
		filepath.Walk(l.p(".labbuild/cache/epochs"), func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				if b, _ := os.ReadFile(p); bytes.HasPrefix(b, []byte(want+"\n")) {
					out = append(out, p)
				}
			}
			return nil
		})
		return out
	case tc.what == "state":
		return []string{l.p(".labbuild/state")}
	case tc.what == "stamp":
		m, _ := filepath.Glob(l.p(".labbuild/stamps/*"))
		return m
	case tc.what == "lock":
		return []string{l.p(".labbuild/lock")}
	}
	t.Fatalf("unknown case %q", tc.what)
	return nil
}

// damage applies tc's damage to the file at p (its mtime put back, as a silent disk error would
// leave it).
func damage(t *testing.T, p, how string) {
	b, err := os.ReadFile(p)
	must(t, err)
	st, err := os.Stat(p)
	must(t, err)
	switch how {
	case "flipped":
		b = bytes.Clone(b)
		b[len(b)/2] ^= 0x04
	case "truncated":
		b = b[:len(b)/2]
	case "zeroed":
		b = make([]byte, len(b))
	case "staleAt digit":
		i := bytes.Index(b, []byte(`"staleAt":`))
		if i < 0 {
			t.Fatalf("%s: no staleAt", p)
		}
		i += len(`"staleAt":`) + 1 // the second digit (10^17 ns): the renewal moves by years
		b = bytes.Clone(b)
		b[i] = '0' + (b[i]-'0'+3)%10
	}
	must(t, os.WriteFile(p, b, st.Mode().Perm()))
	must(t, os.Chtimes(p, st.ModTime(), st.ModTime()))
}

// runCorruptCase builds a lab, damages it as tc says and checks the outcome. It returns 1 or 0
// for each count: detected, never served, no sticky secret replaced.
func runCorruptCase(t *testing.T, tc corruptCase) (detected, notServed, keysKept int) {
	wd, _ := os.Getwd()
	l := &corruptLab{t: t, dir: t.TempDir(), wd: wd}
	writeLab(t, l.dir)
	if code, out := l.run("-q", "pki"); code != 0 {
		t.Fatalf("build: %d\n%s", code, out)
	}
	ref := l.outputs()
	self, err := os.Executable()
	must(t, err)
	w := &frontWorld{t: t, full: self}
	if tc.what == "stamp" {
		must(t, os.Chdir(l.dir))
		w.untilReplay("-q", "pki")
		os.Chdir(wd)
	}
	backup := filepath.Join(t.TempDir(), "cache")
	if out, err := exec.Command("cp", "-a", l.p(".labbuild/cache"), backup).CombinedOutput(); err != nil {
		t.Fatalf("backup: %v %s", err, out)
	}
	paths := l.files(tc)
	if len(paths) == 0 {
		t.Fatalf("%s: nothing to damage", tc.what)
	}
	for _, p := range paths {
		damage(t, p, tc.damage)
	}
	if tc.clean {
		if code, out := l.run("-q", "clean"); code != 0 {
			t.Fatalf("clean: %d\n%s", code, out)
		}
	}
	var code int
	var out string
	if tc.what == "stamp" {
		must(t, os.Chdir(l.dir))
		r := w.front("-q", "pki")
		os.Chdir(wd)
		code, out = r.code, r.stdout+r.stderr
		if !r.deferred {
			code = -1 // replayed: the damaged stamp was served
		}
	} else if tc.outcome == outcomeReissued {
		// A clock an hour on: a certificate issued anew in the same second as the first build
		// would be byte-identical (NotBefore has whole seconds, signatures are deterministic).
		code, out = l.run("-q", "--now", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "pki")
	} else {
		code, out = l.run("-q", "pki")
	}
	got := l.outputs()
	// No sticky secret replaced: each key is the one it was, or absent (not made anew).
	keysKept = 1
	for rel, b := range ref {
		if strings.HasPrefix(rel, "pki/key/") {
			if now, ok := got[rel]; ok && now != b {
				t.Errorf("%s was replaced without --regenerate", rel)
				keysKept = 0
			}
		}
	}
	// Detected: the outcome the case names.
	ok := false
	switch tc.outcome {
	case outcomeSame, outcomeReissued:
		ok = code == 0
	case outcomeSticky:
		ok = code == exitFailed && strings.Contains(out, "pki/key/root is a sticky secret") && strings.Contains(out, "labbuild --regenerate pki/key/root") &&
			strings.Contains(out, "restore the content store")
		if _, err := os.Stat(l.p("pki/key/root/tls.key")); err == nil {
			ok = false
		}
	case outcomeDeferred:
		ok = code == 0 && strings.Contains(out, "no work to do")
	}
	if ok {
		detected = 1
	} else {
		t.Errorf("%s %s: exit %d, want outcome %d:\n%s", tc.what, tc.damage, code, tc.outcome, out)
	}
	// Never served: compare with the outputs before, after the way out for a sticky secret.
	if tc.outcome == outcomeSticky {
		must(t, os.RemoveAll(l.p(".labbuild/cache")))
		if o, err := exec.Command("cp", "-a", backup, l.p(".labbuild/cache")).CombinedOutput(); err != nil {
			t.Fatalf("restore the store: %v %s", err, o)
		}
		if c, o := l.run("-q", "pki"); c != 0 {
			t.Errorf("after restoring the store: exit %d\n%s", c, o)
		}
		got = l.outputs()
	}
	served := false
	diff := 0
	for rel, b := range ref {
		if got[rel] != b {
			diff++
			if tc.outcome != outcomeReissued || strings.HasPrefix(rel, "pki/key/") {
				t.Errorf("%s differs from before the damage", rel)
				served = true
			}
		}
	}
	if len(got) != len(ref) {
		t.Errorf("%d outputs, %d before", len(got), len(ref))
		served = true
	}
	if tc.outcome == outcomeReissued && diff == 0 {
		t.Errorf("no certificate issued anew: the damaged epoch was used")
		served = true
	}
	// Every certificate's renewal point, as recorded, inside its validity.
	if bad := l.renewalsOutside(); bad != "" {
		t.Errorf("recorded renewal points outside their certificates' validity: %s", bad)
		served = true
	}
	if c, o := l.run("pki"); c != 0 || !strings.Contains(o, "no work to do") {
		t.Errorf("the build after: exit %d, want a null build:\n%s", c, o)
		served = true
	}
	if !served {
		notServed = 1
	}
	return
}

// renewalsOutside names the certificates whose recorded stale time is not strictly between
// their NotBefore and NotAfter (a damaged stale time, trusted).
func (l *corruptLab) renewalsOutside() string {
	st, err := cache.LoadState(l.p(".labbuild/state"))
	must(l.t, err)
	defer st.Close()
	var bad []string
	for _, name := range st.Names() {
		if !strings.HasPrefix(name, "pki/cert/") && !strings.HasPrefix(name, "pki/ca/") {
			continue
		}
		b, err := os.ReadFile(l.p(name + "/tls.crt"))
		if err != nil {
			continue
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			bad = append(bad, name+" (no PEM)")
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			bad = append(bad, name+" (unparsable)")
			continue
		}
		at := time.Unix(0, st.Target(name).StaleAt)
		if !at.After(c.NotBefore) || !at.Before(c.NotAfter) {
			bad = append(bad, fmt.Sprintf("%s (renews %s; valid %s to %s)", name, at.UTC().Format(time.RFC3339), c.NotBefore.Format(time.RFC3339), c.NotAfter.Format(time.RFC3339)))
		}
	}
	return strings.Join(bad, ", ")
}
