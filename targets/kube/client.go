package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Interface reads and writes any resource as unstructured objects. It has the shape of
// client-go's dynamic.Interface (the same method names and signatures, a subset of them, over
// this package's types), so code written against the dynamic client reads the same. labbuild
// implements it on its own RESTClient (Dynamic), because client-go's dynamic and rest packages
// and apimachinery's runtime bring initializers that ran at every labbuild start (issue 18,
// docs/kube-client.md). Tests can wrap a client-go dynamic client, fake or real, with
// targets/kube/kubedyn.
type Interface interface {
	Resource(resource GroupVersionResource) NamespaceableResourceInterface
}

// ResourceInterface is one resource, cluster-scoped or in one namespace: the methods of
// client-go's dynamic.ResourceInterface labbuild uses. subresources name a subresource path
// ("status", "approval", "eviction").
type ResourceInterface interface {
	Create(ctx context.Context, obj *Unstructured, options CreateOptions, subresources ...string) (*Unstructured, error)
	Update(ctx context.Context, obj *Unstructured, options UpdateOptions, subresources ...string) (*Unstructured, error)
	UpdateStatus(ctx context.Context, obj *Unstructured, options UpdateOptions) (*Unstructured, error)
	Delete(ctx context.Context, name string, options DeleteOptions, subresources ...string) error
	Get(ctx context.Context, name string, options GetOptions, subresources ...string) (*Unstructured, error)
	List(ctx context.Context, opts ListOptions) (*UnstructuredList, error)
	Patch(ctx context.Context, name string, pt PatchType, data []byte, options PatchOptions, subresources ...string) (*Unstructured, error)
	Apply(ctx context.Context, name string, obj *Unstructured, options ApplyOptions, subresources ...string) (*Unstructured, error)
}

// NamespaceableResourceInterface is a resource before a namespace is chosen (cluster-scoped,
// or all namespaces for List).
type NamespaceableResourceInterface interface {
	Namespace(string) ResourceInterface
	ResourceInterface
}

// Dynamic is labbuild's Interface over a RESTClient: JSON in and out, API errors as
// *StatusError (IsNotFound, IsConflict, ... recognize them).
type Dynamic struct{ rc *RESTClient }

// NewDynamic returns the client over rc (Clients.REST).
func NewDynamic(rc *RESTClient) *Dynamic { return &Dynamic{rc: rc} }

// Resource returns the client of gvr.
func (d *Dynamic) Resource(gvr GroupVersionResource) NamespaceableResourceInterface {
	return &resource{rc: d.rc, gvr: gvr}
}

type resource struct {
	rc  *RESTClient
	gvr GroupVersionResource
	ns  string
}

func (r *resource) Namespace(ns string) ResourceInterface {
	c := *r
	c.ns = ns
	return &c
}

// path is the URL path of the resource, object name and subresources ("" parts skipped).
func (r *resource) path(name string, sub ...string) string {
	p := []string{"/api"}
	if r.gvr.Group != "" {
		p = []string{"/apis", r.gvr.Group}
	}
	p = append(p, r.gvr.Version)
	if r.ns != "" {
		p = append(p, "namespaces", r.ns)
	}
	p = append(p, r.gvr.Resource)
	if name != "" {
		p = append(p, name)
	}
	return strings.Join(append(p, sub...), "/")
}

// object sends one request and decodes the object it returns.
func (r *resource) object(ctx context.Context, method, path string, q url.Values, ct string, body []byte) (*Unstructured, error) {
	b, err := r.rc.Do(ctx, method, path, q, ct, body)
	if err != nil {
		return nil, err
	}
	u := &Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return u, nil
}

const contentJSON = "application/json"

func (r *resource) Create(ctx context.Context, obj *Unstructured, opts CreateOptions, sub ...string) (*Unstructured, error) {
	b, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	name := ""
	if len(sub) > 0 {
		name = obj.GetName()
	}
	return r.object(ctx, http.MethodPost, r.path(name, sub...), writeQuery(opts.DryRun, nil, opts.FieldManager), contentJSON, b)
}

func (r *resource) Update(ctx context.Context, obj *Unstructured, opts UpdateOptions, sub ...string) (*Unstructured, error) {
	if obj.GetName() == "" {
		return nil, fmt.Errorf("update %s: the object has no name", r.gvr.Resource)
	}
	b, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return r.object(ctx, http.MethodPut, r.path(obj.GetName(), sub...), writeQuery(opts.DryRun, nil, opts.FieldManager), contentJSON, b)
}

func (r *resource) UpdateStatus(ctx context.Context, obj *Unstructured, opts UpdateOptions) (*Unstructured, error) {
	return r.Update(ctx, obj, opts, "status")
}

func (r *resource) Delete(ctx context.Context, name string, opts DeleteOptions, sub ...string) error {
	if name == "" {
		return fmt.Errorf("delete %s: no name", r.gvr.Resource)
	}
	b, err := json.Marshal(&opts)
	if err != nil {
		return err
	}
	_, err = r.rc.Do(ctx, http.MethodDelete, r.path(name, sub...), nil, contentJSON, b)
	return err
}

func (r *resource) Get(ctx context.Context, name string, opts GetOptions, sub ...string) (*Unstructured, error) {
	if name == "" {
		return nil, fmt.Errorf("get %s: no name", r.gvr.Resource)
	}
	return r.object(ctx, http.MethodGet, r.path(name, sub...), opts.query(), "", nil)
}

func (r *resource) List(ctx context.Context, opts ListOptions) (*UnstructuredList, error) {
	p := r.path("")
	b, err := r.rc.Do(ctx, http.MethodGet, p, opts.query(), "", nil)
	if err != nil {
		return nil, err
	}
	l := &UnstructuredList{}
	if err := l.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("GET %s: decoding the answer: %w", p, err)
	}
	return l, nil
}

func (r *resource) Patch(ctx context.Context, name string, pt PatchType, data []byte, opts PatchOptions, sub ...string) (*Unstructured, error) {
	if name == "" {
		return nil, fmt.Errorf("patch %s: no name", r.gvr.Resource)
	}
	return r.object(ctx, http.MethodPatch, r.path(name, sub...), writeQuery(opts.DryRun, opts.Force, opts.FieldManager), string(pt), data)
}

func (r *resource) Apply(ctx context.Context, name string, obj *Unstructured, opts ApplyOptions, sub ...string) (*Unstructured, error) {
	b, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return r.Patch(ctx, name, ApplyPatchType, b, opts.ToPatchOptions(), sub...)
}
