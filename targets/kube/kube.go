// Package kube is labbuild's Kubernetes adapter: clients from a kubeconfig file, server-side
// apply of manifest files (status subresources included), and the observations the cluster/*
// targets wait on (API ready, nodes Ready, etcd pods on the masters, the bootstrap-complete
// ConfigMap, ClusterOperator convergence). It decides nothing about the lab; targets/cluster.go
// does, through targets/wait and targets/csr.
//
// It talks to the API with its own small client on net/http, crypto/tls and encoding/json
// (rest.go: kubeconfig loading, client-certificate and bearer-token auth, API errors as
// *StatusError; client.go: a dynamic-client-shaped Interface over it; types.go: objects as
// JSON maps), and decodes the few typed objects it reads (Node, Pod, ConfigMap) into small
// local structs (objects.go). It imports no client-go or apimachinery package: their
// initializers (client-go's scheme, apimachinery's runtime and CBOR tables, klog, the exec
// credential plugin) ran at every labbuild start, `labbuild version` and the null build
// included (issue 18). cmd/labbuild-full's TestStartupImports keeps them out (docs/kube-client.md).
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"
)

// FieldManager is the server-side apply field manager labbuild writes as; `oc get -o yaml
// --show-managed-fields` names it.
const FieldManager = "labbuild"

// Config loads the kubeconfig file at path (its current context). When dial is not empty
// ("192.168.126.10:6443", "127.0.0.1:41234") requests go to that address instead of the
// kubeconfig's server, while TLS still verifies the kubeconfig's host name (ServerName): the
// lab's admin kubeconfig names https://api.<domain>:6443, which the build host may not resolve,
// and the API VIP answers for it. Errors name the file, never its credentials.
func Config(path, dial string) (*RESTConfig, error) {
	cfg, err := LoadKubeconfig(path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if dial != "" {
		u, err := url.Parse(cfg.Host)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("kubeconfig %s: server %q is not a URL", path, cfg.Host)
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
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

// Clients are the clients of one cluster identity, sharing one HTTP client (one connection
// pool, one TLS identity).
type Clients struct {
	Config *RESTConfig
	// Dynamic reads and writes any resource as unstructured objects (client.go).
	Dynamic Interface
	// REST is the client for raw paths: /readyz, /version and discovery (/api/v1,
	// /apis/<group>/<version>). Its errors are *StatusError like Dynamic's.
	REST *RESTClient
}

// NewClients makes the clients for cfg.
func NewClients(cfg *RESTConfig) (*Clients, error) {
	rc, err := NewRESTClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("REST client for %s: %w", cfg.Host, err)
	}
	return &Clients{Config: cfg, Dynamic: NewDynamic(rc), REST: rc}, nil
}

// Readyz asks the apiserver's /readyz (what openshift-install's wait-for bootstrap-complete
// and OTHW's wait-bootstrap.sh poll, the latter as /healthz) and returns nil when it answers
// "ok".
func Readyz(ctx context.Context, k *Clients) error {
	b, err := k.REST.Get(ctx, "/readyz")
	if err != nil {
		return fmt.Errorf("GET /readyz: %w", err)
	}
	if string(b) != "ok" {
		return fmt.Errorf("GET /readyz: %.200s", b)
	}
	return nil
}

// ServerVersion returns the apiserver's gitVersion from /version ("v1.31.3").
func ServerVersion(ctx context.Context, k *Clients) (string, error) {
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	b, err := k.REST.Get(ctx, "/version")
	if err != nil {
		return "", fmt.Errorf("GET /version: %w", err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return "", fmt.Errorf("GET /version: %w", err)
	}
	return v.GitVersion, nil
}

// The core resources the waits and the CSR approval read (k8s.io/api core/v1 and
// certificates/v1).
var (
	Nodes      = GroupVersionResource{Version: "v1", Resource: "nodes"}
	Pods       = GroupVersionResource{Version: "v1", Resource: "pods"}
	ConfigMaps = GroupVersionResource{Version: "v1", Resource: "configmaps"}
	CSRs       = GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}
)

// List lists resource gvr (in namespace ns, all namespaces or cluster-scoped when ns is "";
// selector is a label selector or "") and decodes every item into T, a struct with the JSON
// shape of the object such as Pod (objects.go). Errors name the resource.
func List[T any](ctx context.Context, dyn Interface, gvr GroupVersionResource, ns, selector string) ([]T, error) {
	var ri ResourceInterface = dyn.Resource(gvr)
	if ns != "" {
		ri = dyn.Resource(gvr).Namespace(ns)
	}
	l, err := ri.List(ctx, ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list %s%s%s: %w", gvr.Resource, nsArg(ns), selArg(selector), err)
	}
	out := make([]T, len(l.Items))
	for i := range l.Items {
		if err := convert(l.Items[i].Object, &out[i]); err != nil {
			return nil, fmt.Errorf("list %s%s: %s: %w", gvr.Resource, nsArg(ns), l.Items[i].GetName(), err)
		}
	}
	return out, nil
}

// Get reads object name of resource gvr (namespace ns, "" when cluster-scoped) into T.
// A missing object is an error IsNotFound recognizes.
func Get[T any](ctx context.Context, dyn Interface, gvr GroupVersionResource, ns, name string) (*T, error) {
	var ri ResourceInterface = dyn.Resource(gvr)
	if ns != "" {
		ri = dyn.Resource(gvr).Namespace(ns)
	}
	u, err := ri.Get(ctx, name, GetOptions{})
	if err != nil {
		return nil, err
	}
	var out T
	if err := convert(u.Object, &out); err != nil {
		return nil, fmt.Errorf("%s %s%s: %w", gvr.Resource, name, nsArg(ns), err)
	}
	return &out, nil
}

func nsArg(ns string) string {
	if ns == "" {
		return ""
	}
	return " -n " + ns
}

func selArg(sel string) string {
	if sel == "" {
		return ""
	}
	return " -l " + sel
}

// convert decodes an object's map into out through its JSON form.
func convert(obj map[string]any, out any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
