package rehearsal

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"slices"
	"testing"
	"time"

	sigsyaml "sigs.k8s.io/yaml"
)

// testSigner is a self-signed ECDSA CA shaped like labbuild's etcd-signer.
func testSigner(t *testing.T) Signer {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcd-signer", OrganizationalUnit: []string{"openshift"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return Signer{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}
}

// TestSignerIssue: the etcd member stand-in's certificates chain to the signer, carry the
// member's IPs and names, and have exactly the extended key usages asked for.
func TestSignerIssue(t *testing.T) {
	s := testSigner(t)
	cb, _ := pem.Decode(s.Cert)
	ca, _ := x509.ParseCertificate(cb.Bytes)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	tests := []struct {
		name           string
		server, client bool
		want           []x509.ExtKeyUsage
	}{
		{"etcd-serving-master-0", true, true, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{"etcd-client", false, true, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crt, key, err := s.Issue(tt.name, []string{"198.18.0.101", "127.0.0.1"}, []string{"localhost", "master-0.lab"}, tt.server, tt.client)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := pem.Decode(crt)
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range tt.want {
				if _, err := c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
					t.Errorf("verify for %v: %v", u, err)
				}
			}
			if !slices.Equal(c.ExtKeyUsage, tt.want) {
				t.Errorf("ExtKeyUsage = %v, want %v", c.ExtKeyUsage, tt.want)
			}
			if !c.IPAddresses[0].Equal(net.ParseIP("198.18.0.101")) || !slices.Equal(c.DNSNames, []string{"localhost", "master-0.lab"}) || c.Subject.CommonName != tt.name {
				t.Errorf("SANs %v %v, CN %q", c.IPAddresses, c.DNSNames, c.Subject.CommonName)
			}
			kb, _ := pem.Decode(key)
			k, err := x509.ParseECPrivateKey(kb.Bytes)
			if err != nil || !k.PublicKey.Equal(c.PublicKey) {
				t.Errorf("key does not match the certificate (%v)", err)
			}
		})
	}
}

// TestEtcdStandinPod: the stand-in's static pod is what cluster/etcd looks for (namespace
// openshift-etcd, label app=etcd), runs the pause image the rehearsal imports, and is Ready
// only while the member's /health answers on EtcdStandinHealthPort.
func TestEtcdStandinPod(t *testing.T) {
	var pod struct {
		Metadata struct {
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			HostNetwork bool `json:"hostNetwork"`
			Containers  []struct {
				Image          string `json:"image"`
				ReadinessProbe struct {
					HTTPGet struct {
						Path string `json:"path"`
						Port int    `json:"port"`
					} `json:"httpGet"`
				} `json:"readinessProbe"`
			} `json:"containers"`
		} `json:"spec"`
	}
	if err := sigsyaml.Unmarshal([]byte(etcdStandinPodYAML()), &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers
	if pod.Metadata.Namespace != "openshift-etcd" || pod.Metadata.Labels["app"] != "etcd" || !pod.Spec.HostNetwork || len(c) != 1 ||
		c[0].Image != PauseImage || c[0].ReadinessProbe.HTTPGet.Path != "/health" || c[0].ReadinessProbe.HTTPGet.Port != EtcdStandinHealthPort {
		t.Errorf("stand-in etcd pod: %+v", pod)
	}
}
