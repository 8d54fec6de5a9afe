// Package kubeconfig renders kubeconfig files: pure, bytes in, bytes out. The bytes are what
// client-go's clientcmd.Write gives for the same config (kubeconfig_test.go compares them);
// the package encodes the clientcmd/api/v1 shape itself with sigs.k8s.io/yaml, as clientcmd's
// codec does, so that the labbuild binary does not link client-go (issue 18,
// docs/kube-client.md).
//
// The shape is openshift-the-hard-way stage 06 (../shared/spec/stages.md §6): one cluster with
// the CA that signs the serving certificate its server URL reaches, one user with its client
// certificate and key embedded, one context named after the user, which is current.
package kubeconfig

import (
	"errors"
	"fmt"
	"net/url"

	"sigs.k8s.io/yaml"
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
	cfg := config{
		APIVersion:     "v1",
		Kind:           "Config",
		Clusters:       []namedCluster{{Name: in.Cluster, Cluster: cluster{Server: in.Server, CertificateAuthorityData: in.CA}}},
		AuthInfos:      []namedAuthInfo{{Name: in.User, AuthInfo: authInfo{ClientCertificateData: in.CertPEM, ClientKeyData: in.KeyPEM}}},
		Contexts:       []namedContext{{Name: in.User, Context: context{Cluster: in.Cluster, AuthInfo: in.User}}},
		CurrentContext: in.User,
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", in.User, err)
	}
	return out, nil
}

// config is clientcmd/api/v1 Config, the fields labbuild writes, with its JSON names and
// omitempty rules (preferences is always written, as "{}").
type config struct {
	Kind           string          `json:"kind,omitempty"`
	APIVersion     string          `json:"apiVersion,omitempty"`
	Preferences    struct{}        `json:"preferences"`
	Clusters       []namedCluster  `json:"clusters"`
	AuthInfos      []namedAuthInfo `json:"users"`
	Contexts       []namedContext  `json:"contexts"`
	CurrentContext string          `json:"current-context"`
}

type namedCluster struct {
	Name    string  `json:"name"`
	Cluster cluster `json:"cluster"`
}

type cluster struct {
	Server                   string `json:"server"`
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
}

type namedAuthInfo struct {
	Name     string   `json:"name"`
	AuthInfo authInfo `json:"user"`
}

type authInfo struct {
	ClientCertificateData []byte `json:"client-certificate-data,omitempty"`
	ClientKeyData         []byte `json:"client-key-data,omitempty"`
}

type namedContext struct {
	Name    string  `json:"name"`
	Context context `json:"context"`
}

type context struct {
	Cluster  string `json:"cluster"`
	AuthInfo string `json:"user"`
}
