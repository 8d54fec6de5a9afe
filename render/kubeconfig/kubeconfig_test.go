package kubeconfig

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// clientcmdRender is what Render wrote before it stopped linking client-go: clientcmd.Write of
// the same config. The test keeps client-go as the reference.
func clientcmdRender(t *testing.T, in Input) []byte {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[in.Cluster] = &clientcmdapi.Cluster{Server: in.Server, CertificateAuthorityData: in.CA}
	cfg.AuthInfos[in.User] = &clientcmdapi.AuthInfo{ClientCertificateData: in.CertPEM, ClientKeyData: in.KeyPEM}
	cfg.Contexts[in.User] = &clientcmdapi.Context{Cluster: in.Cluster, AuthInfo: in.User}
	cfg.CurrentContext = in.User
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRenderMatchesClientcmd: byte equality with clientcmd.Write for the shapes labbuild
// writes (every kcSpecs user and cluster name form, a multi-certificate CA bundle) and names
// YAML must quote; the result loads back through clientcmd with the same entries.
func TestRenderMatchesClientcmd(t *testing.T) {
	ca := []byte(strings.Repeat("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", 4))
	tests := []Input{
		{Cluster: "ocp4", Server: "https://api.ocp4.example.com:6443", CA: ca, User: "admin", CertPEM: []byte("crt"), KeyPEM: []byte("key")},
		{Cluster: "localhost", Server: "https://localhost:6443", CA: ca, User: "admin", CertPEM: []byte("crt\n"), KeyPEM: []byte("key\n")},
		{Cluster: "lb-int", Server: "https://api-int.ocp4.example.com:6443", CA: ca, User: "system:kube-controller-manager", CertPEM: []byte("c"), KeyPEM: []byte("k")},
		{Cluster: "ocp4", Server: "https://api-int.ocp4.example.com:6443", CA: ca, User: "system:bootstrapper", CertPEM: []byte("c"), KeyPEM: []byte("k")},
		{Cluster: "yes", Server: "https://[fd00::1]:6443", CA: []byte("x"), User: "on", CertPEM: []byte("c"), KeyPEM: []byte("k")},
		{Cluster: "a: b", Server: "https://h:6443/", CA: []byte("x"), User: "- u #", CertPEM: []byte("c"), KeyPEM: []byte("k")},
	}
	for _, in := range tests {
		got, err := Render(in)
		if err != nil {
			t.Fatalf("%s: %v", in.User, err)
		}
		if want := clientcmdRender(t, in); !bytes.Equal(got, want) {
			t.Errorf("%s@%s:\n%s\nclientcmd.Write:\n%s", in.User, in.Cluster, got, want)
		}
		cfg, err := clientcmd.Load(got)
		if err != nil || cfg.CurrentContext != in.User || cfg.Clusters[in.Cluster].Server != in.Server ||
			!bytes.Equal(cfg.AuthInfos[in.User].ClientKeyData, in.KeyPEM) || !bytes.Equal(cfg.Clusters[in.Cluster].CertificateAuthorityData, in.CA) {
			t.Errorf("%s: clientcmd.Load: %+v %v", in.User, cfg, err)
		}
	}
}

// TestRenderErrors: each missing field is named, no key bytes appear, nothing is returned.
func TestRenderErrors(t *testing.T) {
	ok := Input{Cluster: "c", Server: "https://h:6443", CA: []byte("ca"), User: "u", CertPEM: []byte("c"), KeyPEM: []byte("SECRETKEY")}
	tests := []struct {
		mod  func(*Input)
		want string
	}{
		{func(i *Input) { i.Cluster = "" }, "empty cluster name"},
		{func(i *Input) { i.User = "" }, "empty user name"},
		{func(i *Input) { i.CA = nil }, "empty CA bundle"},
		{func(i *Input) { i.CertPEM = nil }, "client certificate and key"},
		{func(i *Input) { i.Server = "http://h:6443" }, "not an https URL"},
	}
	for _, tt := range tests {
		in := ok
		tt.mod(&in)
		b, err := Render(in)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "SECRETKEY") || b != nil {
			t.Errorf("%s: %q %v", tt.want, b, err)
		}
	}
}
