//go:build tools

// Package etcd pins the etcd server (and etcdctl) the rehearsal's control plane runs for a
// release: the etcd minor of that release's cluster-etcd-operator (docs/rehearsal.md), built
// from the Go module proxy by .ci/build-kube.sh. Debian's etcd is 3.4.
package etcd

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
