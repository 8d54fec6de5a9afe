// Package kube is labbuild's Kubernetes adapter: clients from a kubeconfig file, server-side
// apply of manifest files (status subresources included), and the observations the cluster/*
// targets wait on (API ready, nodes Ready, etcd pods on the masters, the bootstrap-complete
// ConfigMap, ClusterOperator convergence). It decides nothing about the lab; targets/cluster.go
// does, through targets/wait and targets/csr.
//
// It talks to the API through one unversioned client-go REST client (JSON, objects as
// unstructured; client.go has a dynamic-client-shaped Interface over it), and converts the few
// typed objects it reads (Node, Pod, ConfigMap, CSR) from unstructured. It does not import
// client-go's typed clientset, discovery, restmapper or dynamic packages: the first three
// register every k8s.io/api group in client-go's scheme at process start (about 10 ms of
// `labbuild version`, issue 18), the last links go-cmp and the watch-list machinery, and every
// labbuild run would pay for their initializers, a null build included. cmd/labbuild's
// TestStartupImports keeps them out (docs/performance.md).
package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// Clients are the clients of one cluster identity, sharing one HTTP client (one connection
// pool, one TLS identity).
type Clients struct {
	Config *rest.Config
	// Dynamic reads and writes any resource as unstructured objects (client.go).
	Dynamic Interface
	// REST is an unversioned REST client for raw paths: /readyz, /version and discovery
	// (/api/v1, /apis/<group>/<version>). Its errors are *errors.StatusError like Dynamic's.
	REST rest.Interface
}

// NewClients makes the clients for cfg.
func NewClients(cfg *rest.Config) (*Clients, error) {
	// JSON only, through jsonNegotiator: the REST client needs no typed scheme.
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = jsonNegotiator{}
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("REST client for %s: %w", cfg.Host, err)
	}
	return &Clients{Config: cfg, Dynamic: NewDynamic(rc), REST: rc}, nil
}

// Readyz asks the apiserver's /readyz (what openshift-install's wait-for bootstrap-complete
// and OTHW's wait-bootstrap.sh poll, the latter as /healthz) and returns nil when it answers
// "ok".
func Readyz(ctx context.Context, k *Clients) error {
	b, err := k.REST.Get().AbsPath("/readyz").DoRaw(ctx)
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
	b, err := k.REST.Get().AbsPath("/version").DoRaw(ctx)
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
	Nodes      = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	Pods       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	ConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	CSRs       = schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "certificatesigningrequests"}
)

// List lists resource gvr (in namespace ns, all namespaces or cluster-scoped when ns is "";
// selector is a label selector or "") and converts every item into T, a k8s.io/api type such
// as corev1.Pod. Errors name the resource.
func List[T any](ctx context.Context, dyn Interface, gvr schema.GroupVersionResource, ns, selector string) ([]T, error) {
	var ri ResourceInterface = dyn.Resource(gvr)
	if ns != "" {
		ri = dyn.Resource(gvr).Namespace(ns)
	}
	l, err := ri.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("list %s%s%s: %w", gvr.Resource, nsArg(ns), selArg(selector), err)
	}
	out := make([]T, len(l.Items))
	for i := range l.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &out[i]); err != nil {
			return nil, fmt.Errorf("list %s%s: %s: %w", gvr.Resource, nsArg(ns), l.Items[i].GetName(), err)
		}
	}
	return out, nil
}

// Get reads object name of resource gvr (namespace ns, "" when cluster-scoped) into T.
// A missing object is an error apierrors.IsNotFound recognizes.
func Get[T any](ctx context.Context, dyn Interface, gvr schema.GroupVersionResource, ns, name string) (*T, error) {
	var ri ResourceInterface = dyn.Resource(gvr)
	if ns != "" {
		ri = dyn.Resource(gvr).Namespace(ns)
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
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
