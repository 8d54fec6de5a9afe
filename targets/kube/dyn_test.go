package kube

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// wrapDyn is kubedyn.Wrap for this package's own tests (kubedyn imports kube).
func wrapDyn(d dynamic.Interface) Interface { return dynWrapped{d} }

type dynWrapped struct{ d dynamic.Interface }

func (w dynWrapped) Resource(gvr schema.GroupVersionResource) NamespaceableResourceInterface {
	return dynNamespaceable{w.d.Resource(gvr)}
}

type dynNamespaceable struct {
	dynamic.NamespaceableResourceInterface
}

func (n dynNamespaceable) Namespace(ns string) ResourceInterface {
	return n.NamespaceableResourceInterface.Namespace(ns)
}
