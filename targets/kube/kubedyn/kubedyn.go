// Package kubedyn adapts client-go to targets/kube, for tests: a client-go dynamic client
// (real or fake) as a kube.Interface, and a rest.Config as a kube.RESTConfig. The labbuild
// binary must not import it: it links client-go and apimachinery, which targets/kube avoids
// for their start-up cost (cmd/labbuild-full TestStartupImports, docs/kube-client.md).
package kubedyn

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/labbuild/labbuild/targets/kube"
)

// Config returns the kube.RESTConfig of c: host, TLS server name, CA, client certificate,
// bearer token, timeout (file references are read by client-go's own code paths only, so c
// must carry data, as internal/rig/testenv's configs do).
func Config(c *rest.Config) *kube.RESTConfig {
	return &kube.RESTConfig{Host: c.Host, ServerName: c.TLSClientConfig.ServerName, CAData: c.TLSClientConfig.CAData,
		CertData: c.TLSClientConfig.CertData, KeyData: c.TLSClientConfig.KeyData, BearerToken: c.BearerToken,
		Insecure: c.TLSClientConfig.Insecure, Timeout: c.Timeout, UserAgent: c.UserAgent}
}

// Wrap returns d as a kube.Interface. Objects cross as their JSON maps; client-go's API
// errors become *kube.StatusError with the same code, reason and message.
func Wrap(d dynamic.Interface) kube.Interface { return wrapped{d} }

type wrapped struct{ d dynamic.Interface }

func (w wrapped) Resource(gvr kube.GroupVersionResource) kube.NamespaceableResourceInterface {
	r := w.d.Resource(schema.GroupVersionResource{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource})
	return namespaceable{res{r}, r}
}

type namespaceable struct {
	res
	n dynamic.NamespaceableResourceInterface
}

func (n namespaceable) Namespace(ns string) kube.ResourceInterface { return res{n.n.Namespace(ns)} }

type res struct{ r dynamic.ResourceInterface }

func in(o *kube.Unstructured) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: o.Object}
}

func out(u *unstructured.Unstructured, err error) (*kube.Unstructured, error) {
	if err != nil {
		return nil, Err(err)
	}
	return &kube.Unstructured{Object: u.Object}, nil
}

// Err converts a client-go API error into a *kube.StatusError; other errors pass unchanged.
func Err(err error) error {
	var se *apierrors.StatusError
	if err == nil || !errors.As(err, &se) {
		return err
	}
	s := se.ErrStatus
	return &kube.StatusError{ErrStatus: kube.Status{Status: s.Status, Message: s.Message, Reason: string(s.Reason), Code: s.Code}}
}

func (r res) Create(ctx context.Context, o *kube.Unstructured, opts kube.CreateOptions, sub ...string) (*kube.Unstructured, error) {
	return out(r.r.Create(ctx, in(o), metav1.CreateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager}, sub...))
}

func (r res) Update(ctx context.Context, o *kube.Unstructured, opts kube.UpdateOptions, sub ...string) (*kube.Unstructured, error) {
	return out(r.r.Update(ctx, in(o), metav1.UpdateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager}, sub...))
}

func (r res) UpdateStatus(ctx context.Context, o *kube.Unstructured, opts kube.UpdateOptions) (*kube.Unstructured, error) {
	return out(r.r.UpdateStatus(ctx, in(o), metav1.UpdateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager}))
}

func (r res) Delete(ctx context.Context, name string, opts kube.DeleteOptions, sub ...string) error {
	d := metav1.DeleteOptions{GracePeriodSeconds: opts.GracePeriodSeconds, DryRun: opts.DryRun}
	if opts.PropagationPolicy != nil {
		p := metav1.DeletionPropagation(*opts.PropagationPolicy)
		d.PropagationPolicy = &p
	}
	return Err(r.r.Delete(ctx, name, d, sub...))
}

func (r res) Get(ctx context.Context, name string, opts kube.GetOptions, sub ...string) (*kube.Unstructured, error) {
	return out(r.r.Get(ctx, name, metav1.GetOptions{ResourceVersion: opts.ResourceVersion}, sub...))
}

func (r res) List(ctx context.Context, opts kube.ListOptions) (*kube.UnstructuredList, error) {
	l, err := r.r.List(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector, ResourceVersion: opts.ResourceVersion})
	if err != nil {
		return nil, Err(err)
	}
	kl := &kube.UnstructuredList{Object: l.Object}
	for i := range l.Items {
		kl.Items = append(kl.Items, kube.Unstructured{Object: l.Items[i].Object})
	}
	return kl, nil
}

func (r res) Patch(ctx context.Context, name string, pt kube.PatchType, data []byte, opts kube.PatchOptions, sub ...string) (*kube.Unstructured, error) {
	return out(r.r.Patch(ctx, name, types.PatchType(pt), data, metav1.PatchOptions{DryRun: opts.DryRun, Force: opts.Force, FieldManager: opts.FieldManager}, sub...))
}

func (r res) Apply(ctx context.Context, name string, o *kube.Unstructured, opts kube.ApplyOptions, sub ...string) (*kube.Unstructured, error) {
	return out(r.r.Apply(ctx, name, in(o), metav1.ApplyOptions{DryRun: opts.DryRun, Force: opts.Force, FieldManager: opts.FieldManager}, sub...))
}
