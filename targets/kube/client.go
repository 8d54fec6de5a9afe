package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// Interface reads and writes any resource as unstructured objects. It has the shape of
// client-go's dynamic.Interface (the same method names and signatures, a subset of them), so
// code written against the dynamic client reads the same; labbuild implements it on one
// unversioned REST client (Dynamic) because the dynamic package links go-cmp and client-go's
// watch-list machinery, whose initializers run at every labbuild start (issue 18). Tests can
// wrap a client-go dynamic client, fake or real, with targets/kube/kubedyn.
type Interface interface {
	Resource(resource schema.GroupVersionResource) NamespaceableResourceInterface
}

// ResourceInterface is one resource, cluster-scoped or in one namespace: the methods of
// client-go's dynamic.ResourceInterface labbuild uses, with the same signatures, so a
// dynamic.ResourceInterface is one. subresources name a subresource path ("status",
// "approval").
type ResourceInterface interface {
	Create(ctx context.Context, obj *unstructured.Unstructured, options metav1.CreateOptions, subresources ...string) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured, options metav1.UpdateOptions, subresources ...string) (*unstructured.Unstructured, error)
	UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, options metav1.UpdateOptions) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, name string, options metav1.DeleteOptions, subresources ...string) error
	Get(ctx context.Context, name string, options metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
	List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, options metav1.PatchOptions, subresources ...string) (*unstructured.Unstructured, error)
	Apply(ctx context.Context, name string, obj *unstructured.Unstructured, options metav1.ApplyOptions, subresources ...string) (*unstructured.Unstructured, error)
}

// NamespaceableResourceInterface is a resource before a namespace is chosen (cluster-scoped,
// or all namespaces for List).
type NamespaceableResourceInterface interface {
	Namespace(string) ResourceInterface
	ResourceInterface
}

// Dynamic is labbuild's Interface over a REST client: JSON in and out, API errors as
// *errors.StatusError (apierrors.IsNotFound, IsConflict work as with client-go's clients).
type Dynamic struct{ rc rest.Interface }

// NewDynamic returns the client over rc (Clients.REST).
func NewDynamic(rc rest.Interface) *Dynamic { return &Dynamic{rc: rc} }

// Resource returns the client of gvr.
func (d *Dynamic) Resource(gvr schema.GroupVersionResource) NamespaceableResourceInterface {
	return &resource{rc: d.rc, gvr: gvr}
}

type resource struct {
	rc  rest.Interface
	gvr schema.GroupVersionResource
	ns  string
}

func (r *resource) Namespace(ns string) ResourceInterface {
	c := *r
	c.ns = ns
	return &c
}

// path is the URL path of the resource, object name and subresources ("" parts skipped).
func (r *resource) path(name string, sub ...string) []string {
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
	return append(p, sub...)
}

// do sends req and decodes the object it returns.
func do(ctx context.Context, req *rest.Request) (*unstructured.Unstructured, error) {
	b, err := raw(ctx, req)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return u, nil
}

func raw(ctx context.Context, req *rest.Request) ([]byte, error) {
	res := req.Do(ctx)
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

func (r *resource) params(req *rest.Request, opts runtime.Object) *rest.Request {
	return req.SpecificallyVersionedParams(opts, metav1.ParameterCodec, metav1.SchemeGroupVersion)
}

func (r *resource) body(obj *unstructured.Unstructured) ([]byte, error) {
	return obj.MarshalJSON()
}

func (r *resource) Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error) {
	b, err := r.body(obj)
	if err != nil {
		return nil, err
	}
	name := ""
	if len(sub) > 0 {
		name = obj.GetName()
	}
	return do(ctx, r.params(r.rc.Post().AbsPath(r.path(name, sub...)...).SetHeader("Content-Type", runtime.ContentTypeJSON).Body(b), &opts))
}

func (r *resource) Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error) {
	if obj.GetName() == "" {
		return nil, fmt.Errorf("update %s: the object has no name", r.gvr.Resource)
	}
	b, err := r.body(obj)
	if err != nil {
		return nil, err
	}
	return do(ctx, r.params(r.rc.Put().AbsPath(r.path(obj.GetName(), sub...)...).SetHeader("Content-Type", runtime.ContentTypeJSON).Body(b), &opts))
}

func (r *resource) UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
	return r.Update(ctx, obj, opts, "status")
}

func (r *resource) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error {
	if name == "" {
		return fmt.Errorf("delete %s: no name", r.gvr.Resource)
	}
	b, err := json.Marshal(&opts)
	if err != nil {
		return err
	}
	_, err = raw(ctx, r.rc.Delete().AbsPath(r.path(name, sub...)...).SetHeader("Content-Type", runtime.ContentTypeJSON).Body(b))
	return err
}

func (r *resource) Get(ctx context.Context, name string, opts metav1.GetOptions, sub ...string) (*unstructured.Unstructured, error) {
	if name == "" {
		return nil, fmt.Errorf("get %s: no name", r.gvr.Resource)
	}
	return do(ctx, r.params(r.rc.Get().AbsPath(r.path(name, sub...)...), &opts))
}

func (r *resource) List(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	b, err := raw(ctx, r.params(r.rc.Get().AbsPath(r.path("")...), &opts))
	if err != nil {
		return nil, err
	}
	l := &unstructured.UnstructuredList{}
	if err := l.UnmarshalJSON(b); err != nil {
		return nil, err
	}
	return l, nil
}

func (r *resource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*unstructured.Unstructured, error) {
	if name == "" {
		return nil, fmt.Errorf("patch %s: no name", r.gvr.Resource)
	}
	return do(ctx, r.params(r.rc.Patch(pt).AbsPath(r.path(name, sub...)...).Body(data), &opts))
}

func (r *resource) Apply(ctx context.Context, name string, obj *unstructured.Unstructured, opts metav1.ApplyOptions, sub ...string) (*unstructured.Unstructured, error) {
	b, err := r.body(obj)
	if err != nil {
		return nil, err
	}
	return r.Patch(ctx, name, types.ApplyPatchType, b, opts.ToPatchOptions(), sub...)
}

// jsonSerializer is the REST client's codec: JSON only, decoding into the object given or,
// with none, into a metav1.Status (what rest.Result.Error asks for to turn a failure body into
// an *errors.StatusError). Objects themselves are decoded by the callers above, as
// unstructured; nothing needs a typed scheme.
type jsonSerializer struct{}

func (jsonSerializer) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if into == nil {
		into = &metav1.Status{}
	}
	if err := json.Unmarshal(data, into); err != nil {
		return nil, nil, err
	}
	gvk := into.GetObjectKind().GroupVersionKind()
	if st, ok := into.(*metav1.Status); ok && st.Kind == "" {
		return nil, nil, fmt.Errorf("not a Status")
	}
	return into, &gvk, nil
}

func (jsonSerializer) Encode(obj runtime.Object, w io.Writer) error {
	return json.NewEncoder(w).Encode(obj)
}

func (jsonSerializer) Identifier() runtime.Identifier { return "labbuild-json" }

// jsonNegotiator offers jsonSerializer for application/json.
type jsonNegotiator struct{}

func (jsonNegotiator) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{MediaType: runtime.ContentTypeJSON, MediaTypeType: "application", MediaTypeSubType: "json",
		EncodesAsText: true, Serializer: jsonSerializer{}}}
}

func (jsonNegotiator) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

func (jsonNegotiator) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}
