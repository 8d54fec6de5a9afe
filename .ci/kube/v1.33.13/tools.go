//go:build tools

// Package kube pins the Kubernetes commands labbuild's tests run for real: kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet and kubectl (the rehearsal's stand-in for
// oc, matching the apiserver's version) have no Debian package, and
// `go install k8s.io/kubernetes/cmd/...@v` fails on k8s.io/kubernetes's replace directives, so
// this module requires k8s.io/kubernetes and replaces each staging module with its published
// version (see go.mod). .ci/build-kube.sh builds them.
package kube

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
