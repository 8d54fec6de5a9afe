package kube

// The value types of the API as labbuild speaks it: resources, objects as JSON maps, request
// options and API errors. They carry the names k8s.io/apimachinery gives the same things
// (schema.GroupVersionResource, unstructured.Unstructured, metav1.PatchOptions,
// errors.IsNotFound), so code reads as it would against client-go; they are local so that the
// labbuild binary links no apimachinery or client-go package, whose initializers (runtime
// schemes, CBOR and protobuf tables, klog, the exec credential plugin's scheme) ran at every
// start, `labbuild version` and the null build included (issue 18, docs/kube-client.md).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// GroupVersion is an API group and version ("" group = the core API).
type GroupVersion struct{ Group, Version string }

// String is "group/version", or "version" for the core group (an apiVersion field's value).
func (gv GroupVersion) String() string {
	if gv.Group == "" {
		return gv.Version
	}
	return gv.Group + "/" + gv.Version
}

// WithResource returns gv's resource r.
func (gv GroupVersion) WithResource(r string) GroupVersionResource {
	return GroupVersionResource{Group: gv.Group, Version: gv.Version, Resource: r}
}

// ParseGroupVersion splits an apiVersion ("v1", "config.openshift.io/v1").
func ParseGroupVersion(apiVersion string) GroupVersion {
	if g, v, ok := strings.Cut(apiVersion, "/"); ok {
		return GroupVersion{Group: g, Version: v}
	}
	return GroupVersion{Version: apiVersion}
}

// GroupVersionResource names a resource: the plural of its URL path ("nodes").
type GroupVersionResource struct{ Group, Version, Resource string }

// GroupVersion returns r's group and version.
func (r GroupVersionResource) GroupVersion() GroupVersion {
	return GroupVersion{Group: r.Group, Version: r.Version}
}

// GroupVersionKind names a kind ("Node", "ClusterOperator").
type GroupVersionKind struct{ Group, Version, Kind string }

// GroupVersion returns k's group and version.
func (k GroupVersionKind) GroupVersion() GroupVersion {
	return GroupVersion{Group: k.Group, Version: k.Version}
}

// Unstructured is one API object as decoded JSON: maps, slices, strings, bools, int64 and
// float64 (integers stay int64, as apimachinery's unstructured decoding keeps them).
type Unstructured struct {
	Object map[string]any
}

// UnstructuredList is a list response: its own fields (metadata) and the items.
type UnstructuredList struct {
	Object map[string]any
	Items  []Unstructured
}

// OwnerReference is the part of metadata.ownerReferences drain reads.
type OwnerReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
	Controller *bool  `json:"controller,omitempty"`
}

func (u *Unstructured) meta(field string) string {
	s, _, _ := NestedString(u.Object, "metadata", field)
	return s
}

func (u *Unstructured) str(field string) string {
	s, _ := u.Object[field].(string)
	return s
}

// GetName returns metadata.name.
func (u *Unstructured) GetName() string { return u.meta("name") }

// GetNamespace returns metadata.namespace.
func (u *Unstructured) GetNamespace() string { return u.meta("namespace") }

// GetUID returns metadata.uid.
func (u *Unstructured) GetUID() string { return u.meta("uid") }

// GetResourceVersion returns metadata.resourceVersion.
func (u *Unstructured) GetResourceVersion() string { return u.meta("resourceVersion") }

// GetKind returns kind.
func (u *Unstructured) GetKind() string { return u.str("kind") }

// GetAPIVersion returns apiVersion.
func (u *Unstructured) GetAPIVersion() string { return u.str("apiVersion") }

// SetKind sets kind.
func (u *Unstructured) SetKind(k string) { u.set("kind", k) }

// SetAPIVersion sets apiVersion.
func (u *Unstructured) SetAPIVersion(v string) { u.set("apiVersion", v) }

func (u *Unstructured) set(k string, v any) {
	if u.Object == nil {
		u.Object = map[string]any{}
	}
	u.Object[k] = v
}

// GroupVersionKind returns the object's apiVersion and kind.
func (u *Unstructured) GroupVersionKind() GroupVersionKind {
	gv := ParseGroupVersion(u.GetAPIVersion())
	return GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: u.GetKind()}
}

// GetAnnotations returns metadata.annotations (string values only).
func (u *Unstructured) GetAnnotations() map[string]string { return u.stringMap("annotations") }

// GetLabels returns metadata.labels (string values only).
func (u *Unstructured) GetLabels() map[string]string { return u.stringMap("labels") }

func (u *Unstructured) stringMap(field string) map[string]string {
	m, _, _ := NestedMap(u.Object, "metadata", field)
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// GetOwnerReferences returns metadata.ownerReferences.
func (u *Unstructured) GetOwnerReferences() []OwnerReference {
	refs, _, _ := NestedSlice(u.Object, "metadata", "ownerReferences")
	var out []OwnerReference
	for _, r := range refs {
		m, _ := r.(map[string]any)
		o := OwnerReference{}
		o.APIVersion, _ = m["apiVersion"].(string)
		o.Kind, _ = m["kind"].(string)
		o.Name, _ = m["name"].(string)
		o.UID, _ = m["uid"].(string)
		if c, ok := m["controller"].(bool); ok {
			o.Controller = &c
		}
		out = append(out, o)
	}
	return out
}

// MarshalJSON encodes the object.
func (u *Unstructured) MarshalJSON() ([]byte, error) { return json.Marshal(u.Object) }

// UnmarshalJSON decodes one object; a JSON null or a non-object is an error.
func (u *Unstructured) UnmarshalJSON(b []byte) error {
	m, err := decodeObject(b)
	if err != nil {
		return err
	}
	u.Object = m
	return nil
}

// UnmarshalJSON decodes a list response. Items without kind get the list's kind minus "List"
// and its apiVersion, as the API omits them in typed lists and apimachinery fills them in.
func (l *UnstructuredList) UnmarshalJSON(b []byte) error {
	m, err := decodeObject(b)
	if err != nil {
		return err
	}
	items, _ := m["items"].([]any)
	delete(m, "items")
	l.Object = m
	l.Items = make([]Unstructured, 0, len(items))
	kind, _ := m["kind"].(string)
	kind = strings.TrimSuffix(kind, "List")
	apiVersion, _ := m["apiVersion"].(string)
	for i, it := range items {
		o, ok := it.(map[string]any)
		if !ok {
			return fmt.Errorf("list item %d is not an object", i)
		}
		if _, ok := o["kind"]; !ok && kind != "" {
			o["kind"] = kind
		}
		if _, ok := o["apiVersion"]; !ok && apiVersion != "" {
			o["apiVersion"] = apiVersion
		}
		l.Items = append(l.Items, Unstructured{Object: o})
	}
	return nil
}

// decodeObject decodes a JSON object keeping integers exact (int64) and other numbers float64.
func decodeObject(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	fixNumbers(m)
	return m, nil
}

func fixNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = fixNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = fixNumbers(e)
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, _ := strconv.ParseFloat(string(x), 64)
		return f
	}
	return v
}

func nested(obj map[string]any, fields ...string) (any, bool) {
	var v any = obj
	for _, f := range fields {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[f]; !ok {
			return nil, false
		}
	}
	return v, true
}

// NestedString returns the string at fields; found is false when a field is missing, err is
// set when the value is not a string.
func NestedString(obj map[string]any, fields ...string) (string, bool, error) {
	return nestedAs[string](obj, fields)
}

// NestedBool is NestedString for a bool.
func NestedBool(obj map[string]any, fields ...string) (bool, bool, error) {
	return nestedAs[bool](obj, fields)
}

// NestedSlice is NestedString for a list.
func NestedSlice(obj map[string]any, fields ...string) ([]any, bool, error) {
	return nestedAs[[]any](obj, fields)
}

// NestedMap is NestedString for an object.
func NestedMap(obj map[string]any, fields ...string) (map[string]any, bool, error) {
	return nestedAs[map[string]any](obj, fields)
}

func nestedAs[T any](obj map[string]any, fields []string) (T, bool, error) {
	var zero T
	v, ok := nested(obj, fields...)
	if !ok || v == nil {
		return zero, false, nil
	}
	t, ok := v.(T)
	if !ok {
		return zero, true, fmt.Errorf("%s is %T, not %T", strings.Join(fields, "."), v, zero)
	}
	return t, true, nil
}

// PatchType is a patch's Content-Type.
type PatchType string

// The patch types of the API (k8s.io/apimachinery/pkg/types).
const (
	JSONPatchType           PatchType = "application/json-patch+json"
	MergePatchType          PatchType = "application/merge-patch+json"
	StrategicMergePatchType PatchType = "application/strategic-merge-patch+json"
	ApplyPatchType          PatchType = "application/apply-patch+yaml"
)

// DryRunAll is the dryRun value that validates without persisting.
const DryRunAll = "All"

// GetOptions are a GET's query parameters.
type GetOptions struct{ ResourceVersion string }

// ListOptions select what a list returns (labelSelector, fieldSelector: "spec.nodeName=x").
type ListOptions struct{ LabelSelector, FieldSelector, ResourceVersion string }

// CreateOptions are a POST's query parameters.
type CreateOptions struct {
	DryRun       []string
	FieldManager string
}

// UpdateOptions are a PUT's query parameters.
type UpdateOptions struct {
	DryRun       []string
	FieldManager string
}

// PatchOptions are a PATCH's query parameters; Force is required to be set for apply patches
// that take over other managers' fields.
type PatchOptions struct {
	DryRun       []string
	Force        *bool
	FieldManager string
}

// ApplyOptions are server-side apply's options (a PATCH of type ApplyPatchType).
type ApplyOptions struct {
	DryRun       []string
	Force        bool
	FieldManager string
}

// ToPatchOptions returns o as the PATCH's options.
func (o ApplyOptions) ToPatchOptions() PatchOptions {
	f := o.Force
	return PatchOptions{DryRun: o.DryRun, Force: &f, FieldManager: o.FieldManager}
}

// DeleteOptions is a DELETE's body (meta/v1 DeleteOptions).
type DeleteOptions struct {
	GracePeriodSeconds *int64   `json:"gracePeriodSeconds,omitempty"`
	PropagationPolicy  *string  `json:"propagationPolicy,omitempty"`
	DryRun             []string `json:"dryRun,omitempty"`
}

func (o GetOptions) query() url.Values {
	q := url.Values{}
	if o.ResourceVersion != "" {
		q.Set("resourceVersion", o.ResourceVersion)
	}
	return q
}

func (o ListOptions) query() url.Values {
	q := url.Values{}
	if o.LabelSelector != "" {
		q.Set("labelSelector", o.LabelSelector)
	}
	if o.FieldSelector != "" {
		q.Set("fieldSelector", o.FieldSelector)
	}
	if o.ResourceVersion != "" {
		q.Set("resourceVersion", o.ResourceVersion)
	}
	return q
}

func writeQuery(dryRun []string, force *bool, fieldManager string) url.Values {
	q := url.Values{}
	for _, d := range dryRun {
		q.Add("dryRun", d)
	}
	if force != nil {
		q.Set("force", strconv.FormatBool(*force))
	}
	if fieldManager != "" {
		q.Set("fieldManager", fieldManager)
	}
	return q
}

// Status is the API's meta/v1 Status: what a failed request answers.
type Status struct {
	Status  string         `json:"status,omitempty"`
	Message string         `json:"message,omitempty"`
	Reason  string         `json:"reason,omitempty"`
	Code    int32          `json:"code,omitempty"`
	Details map[string]any `json:"details,omitempty"`
}

// StatusError is an API error: the server's Status, or one made from the HTTP status when the
// body is not a Status. Error() is the server's message (`configmaps "x" not found`).
type StatusError struct{ ErrStatus Status }

func (e *StatusError) Error() string { return e.ErrStatus.Message }

// The reasons the API gives (meta/v1 StatusReason) that labbuild tests for.
const (
	ReasonNotFound        = "NotFound"
	ReasonAlreadyExists   = "AlreadyExists"
	ReasonConflict        = "Conflict"
	ReasonTooManyRequests = "TooManyRequests"
	ReasonForbidden       = "Forbidden"
	ReasonUnauthorized    = "Unauthorized"
	ReasonInvalid         = "Invalid"
)

// knownReasons are the reasons apimachinery knows; an unknown reason defers to the HTTP code,
// as its errors.IsNotFound does.
var knownReasons = map[string]bool{"": false, ReasonNotFound: true, ReasonAlreadyExists: true, ReasonConflict: true,
	ReasonTooManyRequests: true, ReasonForbidden: true, ReasonUnauthorized: true, ReasonInvalid: true,
	"Gone": true, "ServerTimeout": true, "Timeout": true, "BadRequest": true, "MethodNotAllowed": true,
	"NotAcceptable": true, "RequestEntityTooLarge": true, "UnsupportedMediaType": true, "InternalError": true,
	"Expired": true, "ServiceUnavailable": true}

func hasReason(err error, reason string, code int32) bool {
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	r := se.ErrStatus.Reason
	return r == reason || code != 0 && !knownReasons[r] && se.ErrStatus.Code == code
}

// IsNotFound reports whether err is an API error with reason NotFound (or HTTP 404).
func IsNotFound(err error) bool { return hasReason(err, ReasonNotFound, http.StatusNotFound) }

// IsAlreadyExists reports whether err is an API error with reason AlreadyExists.
func IsAlreadyExists(err error) bool { return hasReason(err, ReasonAlreadyExists, 0) }

// IsConflict reports whether err is an API error with reason Conflict (or HTTP 409).
func IsConflict(err error) bool { return hasReason(err, ReasonConflict, http.StatusConflict) }

// IsTooManyRequests reports whether err is an API error with reason TooManyRequests (or HTTP
// 429): an eviction a PodDisruptionBudget forbids now.
func IsTooManyRequests(err error) bool {
	return hasReason(err, ReasonTooManyRequests, http.StatusTooManyRequests)
}

// Message returns an API error's message, or err.Error() for other errors.
func Message(err error) string {
	var se *StatusError
	if errors.As(err, &se) && se.ErrStatus.Message != "" {
		return se.ErrStatus.Message
	}
	return err.Error()
}
