package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// RESTConfig is how to reach one API server as one identity: what labbuild needs of
// client-go's rest.Config. labbuild's kubeconfigs carry an embedded CA and a client
// certificate; bearer tokens (a service account's, `oc login`'s) work too.
type RESTConfig struct {
	// Host is the server URL ("https://api.ocp4.example.com:6443"); a bare host:port means https.
	Host string
	// ServerName is the name TLS verifies the serving certificate for, when Host dials an
	// address that is not that name (the API VIP); "" means Host's host name.
	ServerName string
	// CAData is the PEM bundle that verifies the server; empty means the system roots.
	CAData []byte
	// CertData and KeyData are the PEM client certificate and key (both or neither).
	CertData, KeyData []byte
	// BearerToken is sent as "Authorization: Bearer <token>" when set.
	BearerToken string
	// Insecure skips verifying the server's certificate (insecure-skip-tls-verify).
	Insecure bool
	// Timeout bounds one request, connection and body included; 0 means none.
	Timeout time.Duration
	// UserAgent is the User-Agent header ("labbuild").
	UserAgent string
	// Dial opens connections instead of a net.Dialer when set (tests dial from inside a
	// network namespace).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// kubeconfigFile is the part of a kubeconfig (clientcmd/api/v1 Config) labbuild reads.
type kubeconfigFile struct {
	Clusters []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server        string `json:"server"`
			TLSServerName string `json:"tls-server-name"`
			Insecure      bool   `json:"insecure-skip-tls-verify"`
			CAFile        string `json:"certificate-authority"`
			CAData        []byte `json:"certificate-authority-data"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			CertFile     string          `json:"client-certificate"`
			CertData     []byte          `json:"client-certificate-data"`
			KeyFile      string          `json:"client-key"`
			KeyData      []byte          `json:"client-key-data"`
			Token        string          `json:"token"`
			TokenFile    string          `json:"tokenFile"`
			Exec         json.RawMessage `json:"exec"`
			AuthProvider json.RawMessage `json:"auth-provider"`
		} `json:"user"`
	} `json:"users"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	CurrentContext string `json:"current-context"`
}

// LoadKubeconfig reads the kubeconfig file at path and returns its current context's server
// and credentials, as `oc --kubeconfig path` uses them. File references (certificate-authority,
// client-certificate, client-key, tokenFile) are relative to the kubeconfig's directory, as in
// clientcmd. exec and auth-provider credentials are not supported (labbuild's kubeconfigs embed
// certificates): the error says so. Errors name the file and the missing entry, never the
// credentials.
func LoadKubeconfig(path string) (*RESTConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f kubeconfigFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %v", err)
	}
	if f.CurrentContext == "" {
		return nil, errors.New("no current-context (the kubeconfig names no context to use)")
	}
	var clusterName, userName string
	found := false
	for _, c := range f.Contexts {
		if c.Name == f.CurrentContext {
			clusterName, userName, found = c.Context.Cluster, c.Context.User, true
		}
	}
	if !found {
		return nil, fmt.Errorf("context %q (current-context) is not in contexts", f.CurrentContext)
	}
	cfg := &RESTConfig{}
	found = false
	dir := filepath.Dir(path)
	read := func(field, p string) ([]byte, error) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return b, nil
	}
	for _, c := range f.Clusters {
		if c.Name != clusterName {
			continue
		}
		found = true
		cfg.Host, cfg.ServerName, cfg.Insecure, cfg.CAData = c.Cluster.Server, c.Cluster.TLSServerName, c.Cluster.Insecure, c.Cluster.CAData
		if len(cfg.CAData) == 0 && c.Cluster.CAFile != "" {
			if cfg.CAData, err = read("certificate-authority", c.Cluster.CAFile); err != nil {
				return nil, err
			}
		}
	}
	if !found {
		return nil, fmt.Errorf("cluster %q (of context %q) is not in clusters", clusterName, f.CurrentContext)
	}
	if cfg.Host == "" {
		return nil, fmt.Errorf("cluster %q has no server", clusterName)
	}
	found = false
	for _, u := range f.Users {
		if u.Name != userName {
			continue
		}
		found = true
		a := u.User
		if len(a.Exec) > 0 && string(a.Exec) != "null" || len(a.AuthProvider) > 0 && string(a.AuthProvider) != "null" {
			return nil, fmt.Errorf("user %q uses an exec or auth-provider credential plugin, which labbuild does not run; use a kubeconfig with a client certificate or token", userName)
		}
		cfg.CertData, cfg.KeyData, cfg.BearerToken = a.CertData, a.KeyData, a.Token
		if len(cfg.CertData) == 0 && a.CertFile != "" {
			if cfg.CertData, err = read("client-certificate", a.CertFile); err != nil {
				return nil, err
			}
		}
		if len(cfg.KeyData) == 0 && a.KeyFile != "" {
			if cfg.KeyData, err = read("client-key", a.KeyFile); err != nil {
				return nil, err
			}
		}
		if cfg.BearerToken == "" && a.TokenFile != "" {
			t, err := read("tokenFile", a.TokenFile)
			if err != nil {
				return nil, err
			}
			cfg.BearerToken = strings.TrimSpace(string(t))
		}
	}
	if !found && userName != "" {
		return nil, fmt.Errorf("user %q (of context %q) is not in users", userName, f.CurrentContext)
	}
	return cfg, nil
}

// RESTClient sends requests to one API server: JSON in and out, failures as *StatusError.
// It is safe for concurrent use (one connection pool, HTTP/2 when the server offers it).
type RESTClient struct {
	base  *url.URL
	hc    *http.Client
	token string
	ua    string
}

// NewRESTClient returns a client for cfg. Errors name the unusable field (a bad URL, a CA
// bundle without certificates, a certificate without its key), never its bytes.
func NewRESTClient(cfg *RESTConfig) (*RESTClient, error) {
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("server %q is not a URL", cfg.Host)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	tc := &tls.Config{ServerName: cfg.ServerName, InsecureSkipVerify: cfg.Insecure, MinVersion: tls.VersionTLS12}
	if len(cfg.CAData) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CAData) {
			return nil, errors.New("certificate-authority-data holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	if len(cfg.CertData) > 0 || len(cfg.KeyData) > 0 {
		crt, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			return nil, fmt.Errorf("client certificate and key: %v", err)
		}
		tc.Certificates = []tls.Certificate{crt}
	}
	// The timeouts and pool sizes are client-go's defaults (k8s.io/apimachinery
	// pkg/util/net SetTransportDefaults, rest's transport cache).
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dial,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "labbuild"
	}
	return &RESTClient{base: u, hc: &http.Client{Transport: tr, Timeout: cfg.Timeout}, token: cfg.BearerToken, ua: ua}, nil
}

// Do sends method to the absolute API path ("/api/v1/nodes") with query and body (nil: none;
// contentType says what it is) and returns the response body of a 2xx answer. Any other
// answer is a *StatusError: the server's Status when it sent one, else one made from the
// HTTP status and the first 200 bytes of the body.
func (c *RESTClient) Do(ctx context.Context, method, path string, query url.Values, contentType string, body []byte) ([]byte, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, */*")
	req.Header.Set("User-Agent", c.ua)
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return b, nil
	}
	return nil, statusError(res.StatusCode, method, path, b)
}

// Get returns the body of GET path (/readyz, /version, discovery documents).
func (c *RESTClient) Get(ctx context.Context, path string) ([]byte, error) {
	return c.Do(ctx, http.MethodGet, path, nil, "", nil)
}

// reasonByCode is the reason apimachinery gives an answer without a Status body
// (errors.NewGenericServerResponse).
var reasonByCode = map[int]string{
	http.StatusBadRequest: "BadRequest", http.StatusUnauthorized: ReasonUnauthorized, http.StatusForbidden: ReasonForbidden,
	http.StatusNotFound: ReasonNotFound, http.StatusMethodNotAllowed: "MethodNotAllowed", http.StatusConflict: ReasonConflict,
	http.StatusGone: "Gone", http.StatusUnprocessableEntity: ReasonInvalid, http.StatusTooManyRequests: ReasonTooManyRequests,
	http.StatusInternalServerError: "InternalError", http.StatusServiceUnavailable: "ServiceUnavailable", http.StatusGatewayTimeout: "Timeout",
}

func statusError(code int, method, path string, body []byte) error {
	var st struct {
		Kind string `json:"kind"`
		Status
	}
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
		if st.Code == 0 {
			st.Code = int32(code)
		}
		if st.Message == "" {
			st.Message = fmt.Sprintf("%s %s: HTTP %d %s", method, path, code, st.Reason)
		}
		return &StatusError{ErrStatus: st.Status}
	}
	text := strings.TrimSpace(string(body))
	if len(text) > 200 {
		text = text[:200] + "…"
	}
	msg := fmt.Sprintf("%s %s: HTTP %d %s", method, path, code, http.StatusText(code))
	if text != "" {
		msg += ": " + text
	}
	return &StatusError{ErrStatus: Status{Status: "Failure", Code: int32(code), Reason: reasonByCode[code], Message: msg}}
}
