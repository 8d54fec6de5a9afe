package targets

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/labbuild/labbuild/render/pki"
)

// TestPKIOperatorSignerAlgorithm: under pki.keyAlgorithm ECDSA-P256 the CAs that operators sign
// with after the pivot (pkiOperatorSigners) have RSA-2048 keys, because library-go's
// certificate templates fix SHA256WithRSA; every other key has the lab's algorithm. Under
// RSA-4096 every key, signers included, is RSA-4096.
func TestPKIOperatorSignerAlgorithm(t *testing.T) {
	for _, tc := range []struct {
		alg              string
		signer, otherKey string // "rsa2048", "rsa4096" or "ecdsa"
	}{
		{pki.ECDSAP256, "rsa2048", "ecdsa"},
		{pki.RSA4096, "rsa4096", "rsa4096"},
	} {
		t.Run(tc.alg, func(t *testing.T) {
			l := newPKILab(t)
			l.cfg.PKI.KeyAlgorithm = tc.alg
			l.build()
			ids := pkiKeyIDs(l.cfg)
			for _, id := range pkiOperatorSigners {
				if !slices.Contains(ids, id) {
					t.Fatalf("pkiOperatorSigners names %s, which is no key of the lab", id)
				}
			}
			for _, id := range ids {
				want := tc.otherKey
				if slices.Contains(pkiOperatorSigners, id) {
					want = tc.signer
				}
				if got := keyKind(t, filepath.Join(l.out, "pki", "key", id, "tls.key")); got != want {
					t.Errorf("pki/key/%s is %s, want %s", id, got, want)
				}
			}
		})
	}
}

func keyKind(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	switch blk.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if k.N.BitLen() == 4096 {
			return "rsa4096"
		}
		return "rsa2048"
	case "EC PRIVATE KEY":
		if _, err := x509.ParseECPrivateKey(blk.Bytes); err != nil {
			t.Fatal(err)
		}
		return "ecdsa"
	}
	t.Fatalf("%s: PEM type %s", path, blk.Type)
	return ""
}
