package targets

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
)

// TestPKINoChurn: a certificate is a function of its declared inputs and its epoch, and the
// epoch survives `clean`, a lost state file and a trim of every unpinned store entry. After
// each, every PKI file and kubeconfig is byte-identical; after clean and a lost state file they
// are restored (nothing runs); after the trim the certificates are re-signed with the same
// epoch (same NotBefore and serial, same bytes). Only --regenerate (or expiry, TestPKIRebuilds)
// changes a certificate, and then only it and what it signs or embeds. Both key algorithms:
// RSA PKCS #1 v1.5 signatures are deterministic, and ECDSA ones are too because the signer gets
// no randomness (crypto/ecdsa then signs per RFC 6979); with crypto/rand.Reader the ECDSA
// certificates re-signed after the trim would differ in their signature bytes.
func TestPKINoChurn(t *testing.T) {
	for _, alg := range []string{"RSA-2048", "ECDSA-P256"} {
		t.Run(alg, func(t *testing.T) { testPKINoChurn(t, alg) })
	}
}

func testPKINoChurn(t *testing.T, alg string) {
	l := newPKILab(t)
	l.cfg.PKI.KeyAlgorithm = alg
	first := l.build()
	if len(first.Built) < 20 {
		t.Fatalf("first build ran only %v", first.Built)
	}
	want := outFiles(t, l.out)
	all := append([]string(nil), first.Built...)
	sort.Strings(all)
	opts := func() engine.Options {
		return engine.Options{Config: Lab{Config: l.cfg}, OutDir: l.out, Now: func() time.Time { return l.now }}
	}

	same := func(step string, r *engine.Result, restored bool) {
		t.Helper()
		got := outFiles(t, l.out)
		for p, b := range want {
			if !bytes.Equal(got[p], b) {
				t.Errorf("%s: %s changed", step, p)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d files, want %d", step, len(got), len(want))
		}
		if restored {
			reused := append([]string(nil), r.Restored...)
			sort.Strings(reused)
			if len(r.Built) != 0 || strings.Join(reused, " ") != strings.Join(all, " ") {
				t.Errorf("%s: executed %v; restored %v, want every target restored", step, r.Built, reused)
			}
		}
	}

	l.now = l.now.Add(time.Hour) // a re-issue now would carry a different NotBefore
	if _, err := engine.Clean(context.Background(), opts(), engine.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.out, "pki")); err == nil {
		t.Fatal("clean left out/pki")
	}
	same("clean, build", l.build(), true)

	l.now = l.now.Add(time.Hour)
	if err := os.Remove(filepath.Join(l.out, ".labbuild", "state")); err != nil {
		t.Fatal(err)
	}
	same("state deleted, build", l.build(), true)

	l.now = l.now.Add(time.Hour)
	st, err := engine.TrimCache(context.Background(), opts(), 0, 1) // 1 byte: every unpinned entry goes
	if err != nil {
		t.Fatal(err)
	}
	if st.EntriesRemoved == 0 {
		t.Fatalf("trim removed nothing: %+v", st)
	}
	if _, err := engine.Clean(context.Background(), opts(), engine.CleanOptions{}); err != nil {
		t.Fatal(err)
	}
	r := l.build()
	if len(r.Built) == 0 {
		t.Fatal("after a trim and clean nothing ran: the trim kept unpinned entries")
	}
	var resigned int
	for _, n := range r.Built {
		if strings.HasPrefix(n, "pki/cert/") || strings.HasPrefix(n, "pki/ca/") {
			resigned++
		}
	}
	if resigned < 10 { // 5 CAs and 11 leaves are signed again, not restored
		t.Fatalf("after a trim and clean only %d certificates were re-signed: %v", resigned, r.Built)
	}
	same("store trimmed, clean, build", r, false)

	// --regenerate a key: its certificate is re-issued (new key, new epoch); the others stay.
	l.now = l.now.Add(time.Hour)
	cfg := l.cfg
	if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: l.out, Goals: l.goals, Jobs: 2, Regenerate: []string{"pki/key/admin"},
		Now: func() time.Time { return l.now }, Stdout: &l.log, Stderr: &l.log}); err != nil {
		t.Fatal(err)
	}
	got := outFiles(t, l.out)
	var changed []string
	for p, b := range want {
		if !bytes.Equal(got[p], b) {
			changed = append(changed, p)
		}
	}
	sort.Strings(changed)
	// The admin certificate and the kubeconfigs that embed it.
	wantChanged := "kubeconfig/admin/kubeconfig kubeconfig/lb-ext/kubeconfig kubeconfig/lb-int/kubeconfig kubeconfig/localhost-recovery/kubeconfig kubeconfig/localhost/kubeconfig pki/cert/admin/tls.crt pki/key/admin/tls.key"
	if strings.Join(changed, " ") != wantChanged {
		t.Errorf("--regenerate pki/key/admin changed %v, want %s", changed, wantChanged)
	}
}

// outFiles reads every file under out except labbuild's own directory.
func outFiles(t *testing.T, out string) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		if d.IsDir() && rel == ".labbuild" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[filepath.ToSlash(rel)] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
