package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// Mapper maps a kind to its resource the way kubectl's discovery-backed REST mapper does, but
// per group-version: it reads GET /api/<version> or /apis/<group>/<version> (an
// APIResourceList) the first time a group-version is asked for, caches it, and reads it again
// once when a kind is missing, because a CRD applied a moment ago adds kinds to a group the
// cache already holds. It is safe for concurrent use.
//
// labbuild uses it instead of client-go's restmapper and discovery packages, which link the
// typed clientset's scheme into the binary (see the package comment).
type Mapper struct {
	rc rest.Interface

	mu    sync.Mutex
	cache map[schema.GroupVersion][]metav1.APIResource
}

// NewMapper returns a Mapper reading discovery through rc (Clients.REST).
func NewMapper(rc rest.Interface) *Mapper {
	return &Mapper{rc: rc, cache: map[schema.GroupVersion][]metav1.APIResource{}}
}

// Resource returns the resource serving gvk and whether it is namespaced. An unknown group,
// version or kind is an error that says the CRD may not be applied yet.
func (m *Mapper) Resource(ctx context.Context, gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	gv := gvk.GroupVersion()
	for fresh := false; ; fresh = true {
		list, err := m.resources(ctx, gv, fresh)
		if err != nil {
			return schema.GroupVersionResource{}, false, err
		}
		for _, r := range list {
			// Subresources ("nodes/status") carry their parent's kind.
			if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
				return gv.WithResource(r.Name), r.Namespaced, nil
			}
		}
		if fresh {
			return schema.GroupVersionResource{}, false, fmt.Errorf("no resource for kind %s in %s (is its CRD applied first?)", gvk.Kind, apiPath(gv))
		}
	}
}

// resources returns gv's resource list, from the cache unless fresh. A group-version the
// server does not serve (404) is an empty list, so the caller's message names the kind.
func (m *Mapper) resources(ctx context.Context, gv schema.GroupVersion, fresh bool) ([]metav1.APIResource, error) {
	m.mu.Lock()
	list, ok := m.cache[gv]
	m.mu.Unlock()
	if ok && !fresh {
		return list, nil
	}
	b, err := m.rc.Get().AbsPath(apiPath(gv)).DoRaw(ctx)
	switch {
	case apierrors.IsNotFound(err):
		list = nil
	case err != nil:
		return nil, fmt.Errorf("discovery GET %s: %w", apiPath(gv), err)
	default:
		var l metav1.APIResourceList
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("discovery GET %s: %w", apiPath(gv), err)
		}
		list = l.APIResources
	}
	m.mu.Lock()
	m.cache[gv] = list
	m.mu.Unlock()
	return list, nil
}

// apiPath is the discovery path of gv: /api/v1 for the core group, /apis/<group>/<version>
// otherwise.
func apiPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}
