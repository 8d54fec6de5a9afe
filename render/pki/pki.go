// Package pki makes the lab's keys and certificates: pure functions over crypto/x509.
//
// Keys are the only random thing (GenerateKey). A
// certificate is a function of its Spec, its key, its issuer and an epoch: the serial is a hash
// of those, NotBefore is the epoch minus a fixed backdate, and the signature is deterministic
// (RSA PKCS #1 v1.5; ECDSA per RFC 6979, which crypto/ecdsa uses when given no randomness), so
// a rebuild with the same inputs yields the same bytes and the engine's early cutoff stops there.
//
// The shapes follow openshift-the-hard-way stage 05 (../shared/spec/stages.md §5) with its
// fixes, and openshift-install's pkg/asset/tls where labbuild follows the installer instead:
// every CA is self-signed (installer signers), leaves carry basicConstraints CA:FALSE, keyUsage
// digitalSignature+keyEncipherment (digitalSignature only for ECDSA keys) and SHA-256 signatures.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"time"
)

// Key algorithms, as lab.yaml's pki.keyAlgorithm names them.
const (
	RSA2048   = "RSA-2048" // openshift-install's keySize (pkg/asset/tls/tls.go)
	RSA4096   = "RSA-4096" // openshift-the-hard-way's `openssl genrsa 4096`
	ECDSAP256 = "ECDSA-P256"
)

// Backdate is how far before its epoch a certificate's NotBefore lies, so that a host whose
// clock is a little behind the build host's still accepts it (kubeadm uses the same idea).
const Backdate = 5 * time.Minute

// GenerateKey returns a new private key as PEM: PKCS #1 ("RSA PRIVATE KEY", as
// openshift-install 4.18 writes) for RSA, SEC 1 ("EC PRIVATE KEY") for ECDSA. alg is one of
// RSA2048, RSA4096, ECDSAP256; any other is an error listing them. rand is passed to
// crypto/rsa and crypto/ecdsa, which since Go 1.26 ignore it and use a secure source unless
// GODEBUG=cryptocustomrand=1 (tests that need fixed keys use testing/cryptotest).
func GenerateKey(alg string, rand io.Reader) ([]byte, error) {
	switch alg {
	case RSA2048, RSA4096:
		bits := 2048
		if alg == RSA4096 {
			bits = 4096
		}
		k, err := rsa.GenerateKey(rand, bits)
		if err != nil {
			return nil, fmt.Errorf("generate %s key: %w", alg, err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}), nil
	case ECDSAP256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand)
		if err != nil {
			return nil, fmt.Errorf("generate %s key: %w", alg, err)
		}
		der, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			return nil, fmt.Errorf("encode %s key: %w", alg, err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
	}
	return nil, fmt.Errorf("unknown key algorithm %q (want %s, %s or %s)", alg, RSA2048, RSA4096, ECDSAP256)
}

// ParseKey decodes a PEM private key (PKCS #1, SEC 1 or PKCS #8 holding an RSA, ECDSA or
// Ed25519 key). Errors ("private key: ...") name the PEM type and what is wrong, never quote
// the key.
func ParseKey(keyPEM []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("private key: no PEM block")
	}
	switch b.Type {
	case "RSA PRIVATE KEY":
		k, err := x509.ParsePKCS1PrivateKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("private key: malformed PKCS #1: %w", err)
		}
		return k, nil
	case "EC PRIVATE KEY":
		k, err := x509.ParseECPrivateKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("private key: malformed SEC 1: %w", err)
		}
		return k, nil
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, errors.New("private key: malformed PKCS #8")
		}
		s, ok := k.(crypto.Signer)
		if !ok { // an X25519 key, say
			return nil, fmt.Errorf("private key: a %T cannot sign certificates", k)
		}
		return s, nil
	}
	return nil, fmt.Errorf("private key: unsupported PEM type %q", b.Type)
}

// PublicKeyPEM returns the PKIX ("PUBLIC KEY") PEM of a private key's public half: the
// service-account.pub the kube-apiserver's --service-account-key-file reads.
func PublicKeyPEM(keyPEM []byte) ([]byte, error) {
	k, err := ParseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(k.Public())
	if err != nil {
		return nil, fmt.Errorf("public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// Spec is what a certificate says. Its JSON encoding (with the key and issuer) is hashed into
// the serial, so two different specs never share a serial under one issuer.
type Spec struct {
	CommonName   string   `json:"cn"`
	Organization []string `json:"o,omitempty"`
	// OrganizationalUnit is set on CAs as openshift-install does ("openshift").
	OrganizationalUnit []string `json:"ou,omitempty"`
	DNSNames           []string `json:"dns,omitempty"`
	// IPs are dotted quads (or IPv6); a malformed one is an error naming it.
	IPs []string `json:"ips,omitempty"`
	// CA makes a signer: basicConstraints CA:TRUE (critical), keyUsage keyCertSign+cRLSign
	// (+digitalSignature), MaxPathLen 0 when PathLenZero.
	CA          bool `json:"ca,omitempty"`
	PathLenZero bool `json:"pathLenZero,omitempty"`
	// Server and Client select the extended key usages serverAuth and clientAuth.
	Server bool `json:"server,omitempty"`
	Client bool `json:"client,omitempty"`
	// Validity is the lifetime from the epoch (NotAfter = epoch + Validity).
	Validity time.Duration `json:"validity"`
}

// Issuer is the signing CA: its certificate and private key, PEM. A nil *Issuer self-signs.
type Issuer struct {
	CertPEM, KeyPEM []byte
}

// Issue returns the PEM certificate for spec, for the key keyPEM, signed by issuer (nil:
// self-signed), issued at epoch, and its NotAfter. The same arguments give the same bytes.
// Errors name the bad field of spec or the bad PEM, never key bytes.
func Issue(spec Spec, keyPEM []byte, issuer *Issuer, epoch time.Time) ([]byte, time.Time, error) {
	key, err := ParseKey(keyPEM)
	if err != nil {
		return nil, time.Time{}, err
	}
	if spec.CommonName == "" {
		return nil, time.Time{}, errors.New("spec: empty common name")
	}
	if spec.Validity <= 0 {
		return nil, time.Time{}, fmt.Errorf("spec %s: validity %v must be positive", spec.CommonName, spec.Validity)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("spec %s: public key: %w", spec.CommonName, err)
	}
	epoch = epoch.UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: spec.CommonName, Organization: spec.Organization, OrganizationalUnit: spec.OrganizationalUnit},
		DNSNames:              spec.DNSNames,
		NotBefore:             epoch.Add(-Backdate),
		NotAfter:              epoch.Add(spec.Validity),
		BasicConstraintsValid: true,
		SignatureAlgorithm:    signatureAlgorithm(key),
	}
	// In the spec's order; crypto/x509 writes an IPv4 address as 4 octets (marshalSANs).
	for _, s := range spec.IPs {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, time.Time{}, fmt.Errorf("spec %s: IP SAN %q is not an IP address", spec.CommonName, s)
		}
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	}
	// SKID as RFC 5280 method 1 (SHA-1 of the subjectPublicKey bits), as Go itself computes
	// it for CAs; set for every cert so leaves and CAs alike are linkable.
	tmpl.SubjectKeyId = subjectKeyID(pubDER)
	_, isRSA := key.Public().(*rsa.PublicKey)
	if spec.CA {
		tmpl.IsCA = true
		tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
		if spec.PathLenZero {
			tmpl.MaxPathLen, tmpl.MaxPathLenZero = 0, true
		}
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		if isRSA {
			tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment // RSA key transport (TLS 1.2 RSA kex)
		}
		if spec.Server {
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		}
		if spec.Client {
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
		}
	}
	parent, signer := tmpl, key
	var issuerDER []byte
	if issuer != nil {
		ic, err := ParseCert(issuer.CertPEM)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("spec %s: issuer: %w", spec.CommonName, err)
		}
		ik, err := ParseKey(issuer.KeyPEM)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("spec %s: issuer key: %w", spec.CommonName, err)
		}
		if !ic.IsCA {
			return nil, time.Time{}, fmt.Errorf("spec %s: issuer %s is not a CA", spec.CommonName, ic.Subject.CommonName)
		}
		parent, signer, issuerDER = ic, ik, ic.Raw
		tmpl.SignatureAlgorithm = signatureAlgorithm(ik)
	}
	tmpl.SerialNumber = serial(spec, pubDER, issuerDER, epoch)
	// nil randomness: RSA PKCS #1 v1.5 needs none, and crypto/ecdsa then signs per RFC 6979.
	der, err := x509.CreateCertificate(nil, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("spec %s: sign: %w", spec.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), tmpl.NotAfter, nil
}

func signatureAlgorithm(k crypto.Signer) x509.SignatureAlgorithm {
	if _, ok := k.Public().(*ecdsa.PublicKey); ok {
		return x509.ECDSAWithSHA256
	}
	return x509.SHA256WithRSA
}

func subjectKeyID(pubDER []byte) []byte {
	var spki struct {
		Algorithm pkix.AlgorithmIdentifier
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(pubDER, &spki); err != nil {
		h := sha1.Sum(pubDER)
		return h[:]
	}
	h := sha1.Sum(spki.PublicKey.Bytes)
	return h[:]
}

// serial is a positive 127-bit number from the hash of everything that makes the certificate,
// so it is unique per (spec, key, issuer, epoch) and stable across rebuilds (RFC 5280 allows up
// to 20 octets; CAB forum asks for 64 bits of entropy, which a hash over a fresh key gives).
func serial(spec Spec, pubDER, issuerDER []byte, epoch time.Time) *big.Int {
	h := sha256.New()
	js, _ := json.Marshal(spec)
	for _, p := range [][]byte{js, pubDER, issuerDER, []byte(epoch.Format(time.RFC3339))} {
		fmt.Fprintf(h, "%d:", len(p))
		h.Write(p)
	}
	sum := h.Sum(nil)[:16]
	sum[0] &= 0x7f
	if sum[0] == 0 {
		sum[0] = 1 // keep it 16 octets and positive
	}
	return new(big.Int).SetBytes(sum)
}

// ParseCert decodes the first PEM certificate of data, skipping other blocks (a key before it).
// Errors begin "certificate: ".
func ParseCert(data []byte) (*x509.Certificate, error) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, errors.New("certificate: no PEM CERTIFICATE block")
		}
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("certificate: %w", err)
			}
			return c, nil
		}
	}
}

// MatchesKey reports whether cert's public key is keyPEM's.
func MatchesKey(cert *x509.Certificate, keyPEM []byte) bool {
	k, err := ParseKey(keyPEM)
	if err != nil {
		return false
	}
	type eq interface{ Equal(crypto.PublicKey) bool }
	p, ok := k.Public().(eq)
	return ok && p.Equal(cert.PublicKey)
}
