// Package kube is labbuild's client-go adapter: clients from a kubeconfig file, server-side
// apply of manifest files (status subresources included), and the observations the cluster/*
// targets wait on (API ready, nodes Ready, etcd pods on the masters, the bootstrap-complete
// ConfigMap, ClusterOperator convergence). It decides nothing about the lab; targets/cluster.go
// does, through targets/wait and targets/csr.
package kube

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// FieldManager is the server-side apply field manager labbuild writes as; `oc get -o yaml
// --show-managed-fields` names it.
const FieldManager = "labbuild"

// Config loads the kubeconfig file at path (its current context). When dial is not empty
// ("192.168.126.10:6443", "127.0.0.1:41234") requests go to that address instead of the
// kubeconfig's server, while TLS still verifies the kubeconfig's host name (ServerName): the
// lab's admin kubeconfig names https://api.<domain>:6443, which the build host may not resolve,
// and the API VIP answers for it. Errors name the file, never its credentials.
func Config(path, dial string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if dial != "" {
		u, err := url.Parse(cfg.Host)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("kubeconfig %s: server %q is not a URL", path, cfg.Host)
		}
		if cfg.TLSClientConfig.ServerName == "" {
			cfg.TLSClientConfig.ServerName = u.Hostname()
		}
		u.Host = dial
		cfg.Host = u.String()
	}
	// Waits poll for up to an hour; one hung request must not stall them.
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	cfg.UserAgent = "labbuild"
	return cfg, nil
}

// Clients are the typed and dynamic clients of one cluster identity.
type Clients struct {
	Config  *rest.Config
	Typed   kubernetes.Interface
	Dynamic dynamic.Interface
}

// NewClients makes both clients for cfg.
func NewClients(cfg *rest.Config) (*Clients, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client for %s: %w", cfg.Host, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", cfg.Host, err)
	}
	return &Clients{Config: cfg, Typed: cs, Dynamic: dyn}, nil
}

// Readyz asks the apiserver's /readyz (what openshift-install's wait-for bootstrap-complete
// and OTHW's wait-bootstrap.sh poll, the latter as /healthz) and returns nil when it answers
// "ok".
func Readyz(ctx context.Context, cs kubernetes.Interface) error {
	b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET /readyz: %w", err)
	}
	if string(b) != "ok" {
		return fmt.Errorf("GET /readyz: %.200s", b)
	}
	return nil
}
