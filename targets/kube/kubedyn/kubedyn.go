// Package kubedyn adapts a client-go dynamic client (real or fake) to kube.Interface, for
// tests. The labbuild binary must not import it: it links k8s.io/client-go/dynamic, which
// targets/kube avoids for its start-up cost (cmd/labbuild TestStartupImports).
package kubedyn

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/labbuild/labbuild/targets/kube"
)

// Wrap returns d as a kube.Interface.
func Wrap(d dynamic.Interface) kube.Interface { return wrapped{d} }

type wrapped struct{ d dynamic.Interface }

func (w wrapped) Resource(gvr schema.GroupVersionResource) kube.NamespaceableResourceInterface {
	return namespaceable{w.d.Resource(gvr)}
}

// namespaceable is a dynamic.NamespaceableResourceInterface whose Namespace returns a
// kube.ResourceInterface (a dynamic.ResourceInterface has every method of one).
type namespaceable struct {
	dynamic.NamespaceableResourceInterface
}

func (n namespaceable) Namespace(ns string) kube.ResourceInterface {
	return n.NamespaceableResourceInterface.Namespace(ns)
}
