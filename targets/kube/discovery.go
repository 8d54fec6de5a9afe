package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
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
	rc *RESTClient

	mu    sync.Mutex
	cache map[GroupVersion][]APIResource
}

// APIResource is one entry of a discovery document (meta/v1 APIResource): the resource's
// plural name ("nodes", "nodes/status" for a subresource), its kind and whether it is
// namespaced.
type APIResource struct {
	Name       string `json:"name"`
	Namespaced bool   `json:"namespaced"`
	Kind       string `json:"kind"`
}

// NewMapper returns a Mapper reading discovery through rc (Clients.REST).
func NewMapper(rc *RESTClient) *Mapper {
	return &Mapper{rc: rc, cache: map[GroupVersion][]APIResource{}}
}

// Resource returns the resource serving gvk and whether it is namespaced. An unknown group,
// version or kind is an error that says the CRD may not be applied yet.
func (m *Mapper) Resource(ctx context.Context, gvk GroupVersionKind) (GroupVersionResource, bool, error) {
	gv := gvk.GroupVersion()
	for fresh := false; ; fresh = true {
		list, err := m.resources(ctx, gv, fresh)
		if err != nil {
			return GroupVersionResource{}, false, err
		}
		for _, r := range list {
			// Subresources ("nodes/status") carry their parent's kind.
			if r.Kind == gvk.Kind && !strings.Contains(r.Name, "/") {
				return gv.WithResource(r.Name), r.Namespaced, nil
			}
		}
		if fresh {
			return GroupVersionResource{}, false, fmt.Errorf("no resource for kind %s in %s (is its CRD applied first?)", gvk.Kind, apiPath(gv))
		}
	}
}

// resources returns gv's resource list, from the cache unless fresh. A group-version the
// server does not serve (404) is an empty list, so the caller's message names the kind.
func (m *Mapper) resources(ctx context.Context, gv GroupVersion, fresh bool) ([]APIResource, error) {
	m.mu.Lock()
	list, ok := m.cache[gv]
	m.mu.Unlock()
	if ok && !fresh {
		return list, nil
	}
	b, err := m.rc.Get(ctx, apiPath(gv))
	switch {
	case IsNotFound(err):
		list = nil
	case err != nil:
		return nil, fmt.Errorf("discovery GET %s: %w", apiPath(gv), err)
	default:
		var l struct {
			APIResources []APIResource `json:"resources"`
		}
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
func apiPath(gv GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}
