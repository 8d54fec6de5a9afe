// Package kubeconfig renders kubeconfig files with client-go's clientcmd API: pure, bytes in,
// bytes out.
//
// The shape is openshift-the-hard-way stage 06 (../shared/spec/stages.md §6): one cluster with
// the CA that signs the serving certificate its server URL reaches, one user with its client
// certificate and key embedded, one context named after the user, which is current.
package kubeconfig

import (
	"errors"
	"fmt"
	"net/url"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Input is one kubeconfig.
type Input struct {
	// Cluster is the cluster entry's name: the cluster name for admin and the control-plane
	// identities, "localhost", "lb-int", ... for the others (OTHW stage 06 table).
	Cluster string
	// Server is the API URL, e.g. https://api-int.ocp4.example.com:6443.
	Server string
	// CA is the PEM bundle that verifies the server's serving certificate.
	CA []byte
	// User is the user entry's (and the context's) name, e.g. "admin", "system:kube-scheduler".
	User string
	// CertPEM and KeyPEM are the client certificate and its private key.
	CertPEM, KeyPEM []byte
}

// Render returns the kubeconfig YAML for in. Errors name the empty or malformed field; they
// never contain key bytes.
func Render(in Input) ([]byte, error) {
	switch {
	case in.Cluster == "":
		return nil, errors.New("kubeconfig: empty cluster name")
	case in.User == "":
		return nil, errors.New("kubeconfig: empty user name")
	case len(in.CA) == 0:
		return nil, errors.New("kubeconfig: empty CA bundle")
	case len(in.CertPEM) == 0 || len(in.KeyPEM) == 0:
		return nil, errors.New("kubeconfig: client certificate and key are both required")
	}
	u, err := url.Parse(in.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("kubeconfig: server %q is not an https URL", in.Server)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[in.Cluster] = &clientcmdapi.Cluster{Server: in.Server, CertificateAuthorityData: in.CA}
	cfg.AuthInfos[in.User] = &clientcmdapi.AuthInfo{ClientCertificateData: in.CertPEM, ClientKeyData: in.KeyPEM}
	cfg.Contexts[in.User] = &clientcmdapi.Context{Cluster: in.Cluster, AuthInfo: in.User}
	cfg.CurrentContext = in.User
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", in.User, err)
	}
	return out, nil
}
