package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

var epoch = time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)

// keys are generated once per algorithm (RSA-4096 takes a second or more).
var (
	keysMu sync.Mutex
	keys   = map[string][]byte{}
)

func testKey(t *testing.T, alg string) []byte {
	t.Helper()
	keysMu.Lock()
	defer keysMu.Unlock()
	if k, ok := keys[alg]; ok {
		return k
	}
	k, err := GenerateKey(alg, rand.Reader)
	if err != nil {
		t.Fatalf("GenerateKey(%s): %v", alg, err)
	}
	keys[alg] = k
	return k
}

func mustIssue(t *testing.T, spec Spec, key []byte, iss *Issuer, at time.Time) ([]byte, *x509.Certificate) {
	t.Helper()
	p, notAfter, err := Issue(spec, key, iss, at)
	if err != nil {
		t.Fatalf("Issue(%s): %v", spec.CommonName, err)
	}
	c, err := ParseCert(p)
	if err != nil {
		t.Fatalf("ParseCert(%s): %v", spec.CommonName, err)
	}
	if !notAfter.Equal(c.NotAfter) {
		t.Errorf("%s: Issue returned NotAfter %v, the certificate says %v", spec.CommonName, notAfter, c.NotAfter)
	}
	return p, c
}

func caSpec(cn string) Spec {
	return Spec{CommonName: cn, OrganizationalUnit: []string{"openshift"}, CA: true, Validity: 10 * 365 * 24 * time.Hour}
}

// TestGenerateKey: each algorithm lab.yaml's pki.keyAlgorithm names gives its key type and size
// in the PEM type openshift-install writes; ParseKey and PublicKeyPEM read it back; two keys of
// one algorithm differ (keys are the only random thing).
func TestGenerateKey(t *testing.T) {
	for _, c := range []struct {
		alg     string
		pemType string
		check   func(t *testing.T, k any)
	}{
		{RSA2048, "RSA PRIVATE KEY", func(t *testing.T, k any) {
			if r, ok := k.(*rsa.PrivateKey); !ok || r.N.BitLen() != 2048 {
				t.Errorf("got %T, want a 2048-bit RSA key", k)
			}
		}},
		{RSA4096, "RSA PRIVATE KEY", func(t *testing.T, k any) {
			if r, ok := k.(*rsa.PrivateKey); !ok || r.N.BitLen() != 4096 {
				t.Errorf("got %T, want a 4096-bit RSA key", k)
			}
		}},
		{ECDSAP256, "EC PRIVATE KEY", func(t *testing.T, k any) {
			if e, ok := k.(*ecdsa.PrivateKey); !ok || e.Curve != elliptic.P256() {
				t.Errorf("got %T, want a P-256 ECDSA key", k)
			}
		}},
	} {
		t.Run(c.alg, func(t *testing.T) {
			p := testKey(t, c.alg)
			b, rest := pem.Decode(p)
			if b == nil || b.Type != c.pemType || len(rest) != 0 {
				t.Fatalf("PEM: %v, rest %d bytes; want one %q block", b, len(rest), c.pemType)
			}
			k, err := ParseKey(p)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, k)
			pub, err := PublicKeyPEM(p)
			if err != nil {
				t.Fatal(err)
			}
			pb, _ := pem.Decode(pub)
			if pb == nil || pb.Type != "PUBLIC KEY" {
				t.Fatalf("PublicKeyPEM: %q, want a PUBLIC KEY block", pub)
			}
			pk, err := x509.ParsePKIXPublicKey(pb.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if !k.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pk) {
				t.Errorf("PublicKeyPEM is not the key's public half")
			}
			if c.alg == ECDSAP256 { // RSA keys are slow; one algorithm shows keys are fresh
				again, err := GenerateKey(c.alg, rand.Reader)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Equal(again, p) {
					t.Errorf("two %s keys are equal", c.alg)
				}
			}
		})
	}
}

// TestParseKeyPKCS8 reads the "PRIVATE KEY" form of each key type.
func TestParseKeyPKCS8(t *testing.T) {
	for _, alg := range []string{RSA2048, ECDSAP256} {
		k, err := ParseKey(testKey(t, alg))
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		k8, err := ParseKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
		if err != nil {
			t.Fatalf("%s as PKCS #8: %v", alg, err)
		}
		if !k8.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(k.Public()) {
			t.Errorf("%s: PKCS #8 key differs", alg)
		}
	}
}

// TestIssueDeterministic: a certificate is a function of its spec, key, issuer and epoch. The
// same arguments give the same bytes (the signature is deterministic for both key types), the
// epoch's sub-second part and location do not matter, NotBefore is the epoch less Backdate,
// NotAfter the epoch plus Validity, and the serial is the hash of those inputs.
func TestIssueDeterministic(t *testing.T) {
	for _, alg := range []string{ECDSAP256, RSA2048} {
		t.Run(alg, func(t *testing.T) {
			caKey, leafKey := testKey(t, alg), testKey(t, ECDSAP256)
			caPEM, ca := mustIssue(t, caSpec("root-ca"), caKey, nil, epoch)
			iss := &Issuer{CertPEM: caPEM, KeyPEM: caKey}
			leaf := Spec{CommonName: "kube-apiserver", DNSNames: []string{"api-int.lab.example.com"}, IPs: []string{"198.18.0.10"},
				Server: true, Validity: 30 * 24 * time.Hour}
			leafPEM, lc := mustIssue(t, leaf, leafKey, iss, epoch)

			ny, err := time.LoadLocation("America/New_York")
			if err != nil {
				ny = time.FixedZone("UTC-5", -5*3600)
			}
			for _, at := range []time.Time{epoch, epoch.Add(999 * time.Millisecond), epoch.In(ny)} {
				if again, _ := mustIssue(t, caSpec("root-ca"), caKey, nil, at); !bytes.Equal(again, caPEM) {
					t.Errorf("CA issued at %v differs from the one issued at %v", at, epoch)
				}
				if again, _ := mustIssue(t, leaf, leafKey, iss, at); !bytes.Equal(again, leafPEM) {
					t.Errorf("leaf issued at %v differs from the one issued at %v", at, epoch)
				}
			}
			for _, c := range []*x509.Certificate{ca, lc} {
				if !c.NotBefore.Equal(epoch.Add(-Backdate)) {
					t.Errorf("%s: NotBefore %v, want %v", c.Subject.CommonName, c.NotBefore, epoch.Add(-Backdate))
				}
			}
			if !ca.NotAfter.Equal(epoch.Add(caSpec("").Validity)) || !lc.NotAfter.Equal(epoch.Add(leaf.Validity)) {
				t.Errorf("NotAfter: CA %v, leaf %v; want epoch + validity", ca.NotAfter, lc.NotAfter)
			}
			if want := serial(caSpec("root-ca"), mustPKIX(t, caKey), nil, epoch); ca.SerialNumber.Cmp(want) != 0 {
				t.Errorf("CA serial %x, want the hash %x", ca.SerialNumber, want)
			}
			if want := serial(leaf, mustPKIX(t, leafKey), ca.Raw, epoch); lc.SerialNumber.Cmp(want) != 0 {
				t.Errorf("leaf serial %x, want the hash %x", lc.SerialNumber, want)
			}
			if _, err := lc.Verify(x509.VerifyOptions{Roots: pool(ca), CurrentTime: epoch}); err != nil {
				t.Errorf("leaf does not verify against its CA: %v", err)
			}
		})
	}
}

func mustPKIX(t *testing.T, keyPEM []byte) []byte {
	t.Helper()
	k, err := ParseKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func pool(cs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range cs {
		p.AddCert(c)
	}
	return p
}

// TestSerial: changing any one input — a spec field, the SAN order, the key, the issuer, the
// epoch by a second — gives another serial; each is positive and 16 octets long (RFC 5280
// §4.1.2.2: positive, at most 20 octets).
func TestSerial(t *testing.T) {
	k1, k2 := testKey(t, ECDSAP256), testKey(t, RSA2048)
	ca1PEM, _ := mustIssue(t, caSpec("ca-1"), k1, nil, epoch)
	ca2PEM, _ := mustIssue(t, caSpec("ca-2"), k1, nil, epoch)
	base := Spec{CommonName: "etcd-server", DNSNames: []string{"localhost", "etcd.lab.example.com"}, IPs: []string{"198.18.0.11", "127.0.0.1"},
		Server: true, Client: true, Validity: 24 * time.Hour}
	with := func(f func(*Spec)) Spec {
		s := base
		s.DNSNames, s.IPs = slices.Clone(base.DNSNames), slices.Clone(base.IPs)
		f(&s)
		return s
	}
	cases := []struct {
		name string
		spec Spec
		key  []byte
		iss  []byte
		at   time.Time
	}{
		{"base", base, k1, ca1PEM, epoch},
		{"common name", with(func(s *Spec) { s.CommonName = "etcd-peer" }), k1, ca1PEM, epoch},
		{"organization", with(func(s *Spec) { s.Organization = []string{"system:etcd-peers"} }), k1, ca1PEM, epoch},
		{"DNS order", with(func(s *Spec) { slices.Reverse(s.DNSNames) }), k1, ca1PEM, epoch},
		{"IP order", with(func(s *Spec) { slices.Reverse(s.IPs) }), k1, ca1PEM, epoch},
		{"no client EKU", with(func(s *Spec) { s.Client = false }), k1, ca1PEM, epoch},
		{"validity", with(func(s *Spec) { s.Validity *= 2 }), k1, ca1PEM, epoch},
		{"key", base, k2, ca1PEM, epoch},
		{"issuer", base, k1, ca2PEM, epoch},
		{"epoch", base, k1, ca1PEM, epoch.Add(time.Second)},
	}
	seen := map[string]string{}
	for _, c := range cases {
		_, cert := mustIssue(t, c.spec, c.key, &Issuer{CertPEM: c.iss, KeyPEM: k1}, c.at)
		s := cert.SerialNumber
		// 16 content octets in DER: the top bit clear (no leading zero octet), the top octet
		// not zero.
		if der, err := asn1.Marshal(s); err != nil || s.Sign() <= 0 || len(der) != 2+16 {
			t.Errorf("%s: serial %x is %d octets in DER, want positive and 16", c.name, s, len(der)-2)
		}
		if prev, ok := seen[s.String()]; ok {
			t.Errorf("%s: same serial as %s", c.name, prev)
		}
		seen[s.String()] = c.name
	}
}

// TestSANOrder: the certificate lists DNS names and IP addresses in the spec's order, not
// sorted (the family chooses the order, and it is part of the serial), IPv4 addresses as 4
// octets, IPv6 as 16; a malformed IP is an error naming it.
func TestSANOrder(t *testing.T) {
	key := testKey(t, ECDSAP256)
	spec := Spec{CommonName: "kube-apiserver", Server: true, Validity: time.Hour,
		DNSNames: []string{"kubernetes.default.svc", "api.lab.example.com", "kubernetes", "localhost"},
		IPs:      []string{"198.18.0.10", "127.0.0.1", "fd00::1", "172.30.0.1"}}
	_, c := mustIssue(t, spec, key, nil, epoch)
	if !slices.Equal(c.DNSNames, spec.DNSNames) {
		t.Errorf("DNS SANs %q, want %q in that order", c.DNSNames, spec.DNSNames)
	}
	var ips []string
	for _, ip := range c.IPAddresses {
		ips = append(ips, ip.String())
	}
	if !slices.Equal(ips, spec.IPs) {
		t.Errorf("IP SANs %q, want %q in that order", ips, spec.IPs)
	}
	// The raw extension: 4 octets for IPv4, 16 for IPv6 (not IPv4-in-IPv6).
	var lens []int
	for _, e := range c.Extensions {
		if !e.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 17}) {
			continue
		}
		var seq asn1.RawValue
		if _, err := asn1.Unmarshal(e.Value, &seq); err != nil {
			t.Fatal(err)
		}
		for rest := seq.Bytes; len(rest) > 0; {
			var v asn1.RawValue
			var err error
			if rest, err = asn1.Unmarshal(rest, &v); err != nil {
				t.Fatal(err)
			}
			if v.Tag == 7 { // iPAddress
				lens = append(lens, len(v.Bytes))
			}
		}
	}
	if !slices.Equal(lens, []int{4, 4, 16, 4}) {
		t.Errorf("iPAddress lengths %v, want [4 4 16 4]", lens)
	}
	if c.Subject.CommonName != "kube-apiserver" || c.Subject.String() != (pkix.Name{CommonName: "kube-apiserver"}).String() {
		t.Errorf("subject %q", c.Subject)
	}
}

// TestShapes: key usages, EKUs, basic constraints, the signature algorithm (the issuer's key
// decides it) and the key identifiers, per certificate kind and key algorithm.
func TestShapes(t *testing.T) {
	rsaKey, ecKey := testKey(t, RSA2048), testKey(t, ECDSAP256)
	rsaCAPEM, rsaCA := mustIssue(t, caSpec("rsa-ca"), rsaKey, nil, epoch)
	ecCAPEM, ecCA := mustIssue(t, caSpec("ec-ca"), ecKey, nil, epoch)
	rsaIss, ecIss := &Issuer{CertPEM: rsaCAPEM, KeyPEM: rsaKey}, &Issuer{CertPEM: ecCAPEM, KeyPEM: ecKey}
	leaf := func(cn string, server, client bool) Spec {
		return Spec{CommonName: cn, Server: server, Client: client, Validity: time.Hour}
	}
	const caUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	for _, c := range []struct {
		name     string
		spec     Spec
		key      []byte
		iss      *Issuer
		ca       *x509.Certificate // the issuer's certificate; nil: self-signed
		isCA     bool
		pathLen0 bool
		usage    x509.KeyUsage
		eku      []x509.ExtKeyUsage
		sigAlg   x509.SignatureAlgorithm
	}{
		{name: "RSA CA", spec: caSpec("rsa-ca"), key: rsaKey, isCA: true, usage: caUsage, sigAlg: x509.SHA256WithRSA},
		{name: "ECDSA CA", spec: caSpec("ec-ca"), key: ecKey, isCA: true, usage: caUsage, sigAlg: x509.ECDSAWithSHA256},
		{name: "path length zero", spec: func() Spec { s := caSpec("signer"); s.PathLenZero = true; return s }(), key: ecKey, iss: rsaIss, ca: rsaCA,
			isCA: true, pathLen0: true, usage: caUsage, sigAlg: x509.SHA256WithRSA},
		{name: "RSA server", spec: leaf("s", true, false), key: rsaKey, iss: rsaIss, ca: rsaCA,
			usage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, sigAlg: x509.SHA256WithRSA},
		{name: "ECDSA client", spec: leaf("system:admin", false, true), key: ecKey, iss: ecIss, ca: ecCA,
			usage: x509.KeyUsageDigitalSignature, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, sigAlg: x509.ECDSAWithSHA256},
		{name: "ECDSA serving and client under RSA CA", spec: leaf("etcd", true, true), key: ecKey, iss: rsaIss, ca: rsaCA,
			usage: x509.KeyUsageDigitalSignature, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, sigAlg: x509.SHA256WithRSA},
		{name: "RSA leaf under ECDSA CA", spec: leaf("r", true, false), key: rsaKey, iss: ecIss, ca: ecCA,
			usage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, eku: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, sigAlg: x509.ECDSAWithSHA256},
		{name: "no EKU", spec: leaf("n", false, false), key: ecKey, iss: ecIss, ca: ecCA, usage: x509.KeyUsageDigitalSignature, sigAlg: x509.ECDSAWithSHA256},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, cert := mustIssue(t, c.spec, c.key, c.iss, epoch)
			if !cert.BasicConstraintsValid || cert.IsCA != c.isCA {
				t.Errorf("basicConstraints valid %v CA %v, want valid and CA %v", cert.BasicConstraintsValid, cert.IsCA, c.isCA)
			}
			if c.pathLen0 != (cert.MaxPathLen == 0 && cert.MaxPathLenZero) {
				t.Errorf("MaxPathLen %d zero %v, want path length zero %v", cert.MaxPathLen, cert.MaxPathLenZero, c.pathLen0)
			}
			if cert.KeyUsage != c.usage {
				t.Errorf("keyUsage %b, want %b", cert.KeyUsage, c.usage)
			}
			if !slices.Equal(cert.ExtKeyUsage, c.eku) {
				t.Errorf("extKeyUsage %v, want %v", cert.ExtKeyUsage, c.eku)
			}
			if cert.SignatureAlgorithm != c.sigAlg {
				t.Errorf("signature %v, want %v", cert.SignatureAlgorithm, c.sigAlg)
			}
			var spki struct {
				Algorithm pkix.AlgorithmIdentifier
				PublicKey asn1.BitString
			}
			if _, err := asn1.Unmarshal(cert.RawSubjectPublicKeyInfo, &spki); err != nil {
				t.Fatal(err)
			}
			if skid := sha1.Sum(spki.PublicKey.Bytes); !bytes.Equal(cert.SubjectKeyId, skid[:]) {
				t.Errorf("subjectKeyId %x, want the SHA-1 of the public key bits %x (RFC 5280 method 1)", cert.SubjectKeyId, skid)
			}
			issuer := c.ca
			if issuer == nil {
				issuer = cert
			}
			if !bytes.Equal(cert.AuthorityKeyId, issuer.SubjectKeyId) && c.ca != nil {
				t.Errorf("authorityKeyId %x, want the issuer's subjectKeyId %x", cert.AuthorityKeyId, issuer.SubjectKeyId)
			}
			if err := cert.CheckSignatureFrom(issuer); err != nil {
				t.Errorf("signature does not verify with the issuer's key: %v", err)
			}
			if !MatchesKey(cert, c.key) {
				t.Errorf("MatchesKey(own key) = false")
			}
			other := ecKey
			if bytes.Equal(c.key, ecKey) {
				other = rsaKey
			}
			if MatchesKey(cert, other) || MatchesKey(cert, []byte("not a key")) {
				t.Errorf("MatchesKey is true for another key or garbage")
			}
		})
	}
}

// TestErrors: every error pki returns, each naming what is wrong (the spec's common name, the
// field, the PEM type) and none quoting key material.
func TestErrors(t *testing.T) {
	rsaKey, ecKey := testKey(t, RSA2048), testKey(t, ECDSAP256)
	caPEM, _ := mustIssue(t, caSpec("root-ca"), ecKey, nil, epoch)
	leafPEM, _ := mustIssue(t, Spec{CommonName: "leaf", Validity: time.Hour}, ecKey, &Issuer{CertPEM: caPEM, KeyPEM: ecKey}, epoch)
	x25519, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x25519DER, err := x509.MarshalPKCS8PrivateKey(x25519)
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }
	good := Spec{CommonName: "ok", Validity: time.Hour}
	issue := func(s Spec, key []byte, iss *Issuer) error { _, _, err := Issue(s, key, iss, epoch); return err }
	ecBlock, _ := pem.Decode(ecKey)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"unknown algorithm", func() error { _, err := GenerateKey("RSA-1024", rand.Reader); return err }(),
			`unknown key algorithm "RSA-1024" (want RSA-2048, RSA-4096 or ECDSA-P256)`},
		{"algorithm is case-sensitive", func() error { _, err := GenerateKey("ecdsa-p256", rand.Reader); return err }(),
			`unknown key algorithm "ecdsa-p256"`},
		{"no PEM", func() error { _, err := ParseKey([]byte("not a key")); return err }(), "private key: no PEM block"},
		{"public key as private", func() error { _, err := ParseKey(pemOf("PUBLIC KEY", mustPKIX(t, ecKey))); return err }(),
			`private key: unsupported PEM type "PUBLIC KEY"`},
		{"malformed PKCS #1", func() error { _, err := ParseKey(pemOf("RSA PRIVATE KEY", []byte{0x30, 0})); return err }(),
			"private key: malformed PKCS #1"},
		{"malformed SEC 1", func() error { _, err := ParseKey(pemOf("EC PRIVATE KEY", []byte{0x30, 0})); return err }(),
			"private key: malformed SEC 1"},
		{"SEC 1 bytes labelled PKCS #1", func() error { _, err := ParseKey(pemOf("RSA PRIVATE KEY", ecBlock.Bytes)); return err }(),
			"private key: malformed PKCS #1"},
		{"malformed PKCS #8", func() error { _, err := ParseKey(pemOf("PRIVATE KEY", []byte{0x30, 0})); return err }(),
			"private key: malformed PKCS #8"},
		{"PKCS #8 key that cannot sign", func() error { _, err := ParseKey(pemOf("PRIVATE KEY", x25519DER)); return err }(),
			"private key: a *ecdh.PrivateKey cannot sign certificates"},
		{"public key of a bad key", func() error { _, err := PublicKeyPEM([]byte("junk")); return err }(), "private key: no PEM block"},
		{"Issue: bad key", issue(good, []byte("junk"), nil), "private key: no PEM block"},
		{"Issue: empty common name", issue(Spec{Validity: time.Hour}, ecKey, nil), "spec: empty common name"},
		{"Issue: zero validity", issue(Spec{CommonName: "x"}, ecKey, nil), "spec x: validity 0s must be positive"},
		{"Issue: negative validity", issue(Spec{CommonName: "x", Validity: -time.Hour}, ecKey, nil), "spec x: validity -1h0m0s must be positive"},
		{"Issue: bad IP", issue(Spec{CommonName: "x", Validity: time.Hour, IPs: []string{"198.18.0.1", "198.18.0.300"}}, ecKey, nil),
			`spec x: IP SAN "198.18.0.300" is not an IP address`},
		{"Issue: hostname as IP", issue(Spec{CommonName: "x", Validity: time.Hour, IPs: []string{"api.lab"}}, ecKey, nil),
			`spec x: IP SAN "api.lab" is not an IP address`},
		{"Issue: issuer without certificate", issue(good, ecKey, &Issuer{KeyPEM: ecKey}), "spec ok: issuer: certificate: no PEM CERTIFICATE block"},
		{"Issue: issuer certificate is a key", issue(good, ecKey, &Issuer{CertPEM: ecKey, KeyPEM: ecKey}), "spec ok: issuer: certificate: no PEM CERTIFICATE block"},
		{"Issue: issuer certificate malformed", issue(good, ecKey, &Issuer{CertPEM: pemOf("CERTIFICATE", []byte{0x30, 0}), KeyPEM: ecKey}), "spec ok: issuer: certificate: x509: malformed"},
		{"Issue: issuer key", issue(good, ecKey, &Issuer{CertPEM: caPEM, KeyPEM: []byte("junk")}), "spec ok: issuer key: private key: no PEM block"},
		{"Issue: issuer not a CA", issue(good, ecKey, &Issuer{CertPEM: leafPEM, KeyPEM: ecKey}), "spec ok: issuer leaf is not a CA"},
		{"Issue: issuer key is not the CA's", issue(good, ecKey, &Issuer{CertPEM: caPEM, KeyPEM: rsaKey}), "spec ok: sign: "},
		{"ParseCert: no block", func() error { _, err := ParseCert(ecKey); return err }(), "certificate: no PEM CERTIFICATE block"},
		{"ParseCert: malformed", func() error { _, err := ParseCert(pemOf("CERTIFICATE", []byte("junk"))); return err }(), "certificate: x509: malformed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.err == nil {
				t.Fatalf("no error; want %q", c.want)
			}
			if !strings.Contains(c.err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", c.err, c.want)
			}
			for _, k := range [][]byte{rsaKey, ecKey} {
				b, _ := pem.Decode(k)
				if s := base64.StdEncoding.EncodeToString(b.Bytes)[:16]; strings.Contains(c.err.Error(), s) || strings.Contains(c.err.Error(), "PRIVATE KEY-----") {
					t.Errorf("error quotes key material: %q", c.err)
				}
			}
		})
	}
	// GenerateKey's own error: since Go 1.26 crypto/rsa and crypto/ecdsa ignore the reader
	// unless GODEBUG=cryptocustomrand=1, so a failing reader reaches it only then.
	t.Run("randomness fails", func(t *testing.T) {
		t.Setenv("GODEBUG", "cryptocustomrand=1")
		_, err := GenerateKey(ECDSAP256, failingReader{})
		if err == nil || !strings.Contains(err.Error(), "generate ECDSA-P256 key: ") || !errors.Is(err, errNoRandom) {
			t.Errorf("GenerateKey with failing randomness: %v; want generate ECDSA-P256 key: wrapping the reader's error", err)
		}
	})
}

var errNoRandom = errors.New("no randomness")

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errNoRandom }

// TestParseCertSkipsOtherBlocks: a bundle whose first block is not a certificate (a key, as in
// a combined PEM) still yields its first certificate.
func TestParseCertSkipsOtherBlocks(t *testing.T) {
	key := testKey(t, ECDSAP256)
	caPEM, ca := mustIssue(t, caSpec("root-ca"), key, nil, epoch)
	leafPEM, _ := mustIssue(t, Spec{CommonName: "leaf", Validity: time.Hour}, key, &Issuer{CertPEM: caPEM, KeyPEM: key}, epoch)
	pub, _ := PublicKeyPEM(key)
	c, err := ParseCert(slices.Concat(pub, caPEM, leafPEM))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c.Raw, ca.Raw) {
		t.Errorf("got %s, want the first certificate, root-ca", c.Subject.CommonName)
	}
}
