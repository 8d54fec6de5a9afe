package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// Applier applies manifests with server-side apply as field manager FieldManager, forcing
// conflicts (labbuild owns what it declares, as bootkube's `oc apply` did). A kind in
// StatusKinds whose document carries a status is applied again through its status subresource,
// because the main resource ignores status (openshift-install's bootkube patches Infrastructure
// status the same way). A CRD is waited for until Established before the next object, so a
// later file may create its kind.
type Applier struct {
	// StatusKinds are the kinds whose status is applied too ("Infrastructure", "FeatureGate").
	StatusKinds map[string]bool
	// DryRun sends every request with dryRun=All (the server validates, nothing persists).
	DryRun bool
	// CRDTimeout bounds the wait for a CRD to become Established; 0 means 30 s.
	CRDTimeout time.Duration

	dyn    Interface
	mapper *Mapper
	log    io.Writer
}

// NewApplier returns an Applier for cfg; log receives one line per applied object (nil
// discards).
func NewApplier(cfg *RESTConfig, log io.Writer) (*Applier, error) {
	k, err := NewClients(cfg)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	if log == nil {
		log = io.Discard
	}
	return &Applier{dyn: k.Dynamic, mapper: NewMapper(k.REST), log: log}, nil
}

// Dynamic returns the applier's dynamic client (to read back what was applied).
func (a *Applier) Dynamic() Interface { return a.dyn }

// Docs splits a YAML file into its non-empty documents as unstructured objects; name is used
// in errors ("<name>: document 3: ...").
func Docs(name string, data []byte) ([]*Unstructured, error) {
	var out []*Unstructured
	for i, doc := range bytes.Split(data, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &Unstructured{Object: m})
	}
	return out, nil
}

// Resource returns the dynamic client for o's kind (namespaced when the kind is), discovering
// kinds again once when o's is unknown (a CRD applied a moment ago).
func (a *Applier) Resource(ctx context.Context, o *Unstructured) (ResourceInterface, error) {
	gvk := o.GroupVersionKind()
	gvr, namespaced, err := a.mapper.Resource(ctx, gvk)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
	}
	if namespaced {
		return a.dyn.Resource(gvr).Namespace(o.GetNamespace()), nil
	}
	return a.dyn.Resource(gvr), nil
}

// Apply applies one object read from file and returns it as the server has it. Errors name
// the file, kind and object; the server's text never carries Secret data.
func (a *Applier) Apply(ctx context.Context, file string, o *Unstructured) (*Unstructured, error) {
	ri, err := a.Resource(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	body, err := o.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%s: %s %s: %w", file, o.GetKind(), o.GetName(), err)
	}
	force := true
	opts := PatchOptions{FieldManager: FieldManager, Force: &force}
	if a.DryRun {
		opts.DryRun = []string{DryRunAll}
	}
	got, err := ri.Patch(ctx, o.GetName(), ApplyPatchType, body, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: apply %s %s/%s: %w", file, o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	if _, hasStatus := o.Object["status"]; hasStatus && a.StatusKinds[o.GetKind()] {
		got, err = ri.Patch(ctx, o.GetName(), ApplyPatchType, body, opts, "status")
		if err != nil {
			return nil, fmt.Errorf("%s: apply status of %s %s: %w", file, o.GetKind(), o.GetName(), err)
		}
	}
	fmt.Fprintf(a.log, "applied %s %s/%s (%s)\n", o.GetKind(), o.GetNamespace(), o.GetName(), file)
	if IsCRD(o) && !a.DryRun {
		if got, err = a.waitEstablished(ctx, ri, got); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	return got, nil
}

// waitEstablished polls a CRD until Established=True. This polls a real server for seconds, so
// it uses the real clock (targets/wait is for the long, user-visible waits).
func (a *Applier) waitEstablished(ctx context.Context, ri ResourceInterface, got *Unstructured) (*Unstructured, error) {
	d := a.CRDTimeout
	if d <= 0 {
		d = 30 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	name := got.GetName()
	for !CRDEstablished(got) {
		select {
		case <-wctx.Done():
			return nil, fmt.Errorf("CRD %s not Established after %v (oc get crd %s -o yaml)", name, d, name)
		case <-time.After(50 * time.Millisecond):
		}
		g, err := ri.Get(wctx, name, GetOptions{})
		switch {
		case err == nil:
			got = g
		case !IsNotFound(err):
			return nil, fmt.Errorf("CRD %s: %w", name, err)
		}
	}
	return got, nil
}

// IsCRD reports whether o is a CustomResourceDefinition.
func IsCRD(o *Unstructured) bool {
	return o.GetKind() == "CustomResourceDefinition" && strings.HasPrefix(o.GetAPIVersion(), "apiextensions.k8s.io/")
}

// CRDEstablished reports whether a CRD object has condition Established=True.
func CRDEstablished(o *Unstructured) bool {
	return Condition(o, "Established") == "True"
}

// Condition returns the status ("True", "False", "Unknown") of condition typ in
// o.status.conditions, or "" when it is absent.
func Condition(o *Unstructured, typ string) string {
	conds, _, _ := NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			s, _ := m["status"].(string)
			return s
		}
	}
	return ""
}

// ApplyFiles applies files (name → content) in name order, every document of a file in file
// order: the order bootkube applies /opt/openshift/manifests in. A failure of one object is
// recorded and the rest continue (as bootkube's retrying apply); the joined error names every
// failed file and object. It returns how many objects were applied.
func (a *Applier) ApplyFiles(ctx context.Context, files map[string][]byte) (int, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var errs []error
	n := 0
	for _, name := range names {
		docs, err := Docs(name, files[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range docs {
			if ctx.Err() != nil {
				return n, errors.Join(append(errs, ctx.Err())...)
			}
			if _, err := a.Apply(ctx, name, o); err != nil {
				fmt.Fprintf(a.log, "failed: %v\n", err)
				errs = append(errs, err)
				continue
			}
			n++
		}
	}
	return n, errors.Join(errs...)
}

// PatchStatus server-side-applies status (the object's .status) to object name of resource
// ri through the status subresource, as `oc patch --subresource=status` does; apiVersion and
// kind identify the object in the patch body.
func PatchStatus(ctx context.Context, ri ResourceInterface, apiVersion, kind, name string, status map[string]any) (*Unstructured, error) {
	o := &Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": name}, "status": status}}
	body, err := o.MarshalJSON()
	if err != nil {
		return nil, err
	}
	force := true
	got, err := ri.Patch(ctx, name, ApplyPatchType, body, PatchOptions{FieldManager: FieldManager, Force: &force}, "status")
	if err != nil {
		return nil, fmt.Errorf("patch status of %s %s: %w", kind, name, err)
	}
	return got, nil
}
