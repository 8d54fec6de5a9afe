//go:build tools

// Package tools pins the modules labbuild builds on, so go.mod keeps them while the packages
// that import them are written.
package tools

import (
	_ "github.com/coreos/ignition/v2/config/v3_4"
	_ "github.com/digitalocean/go-libvirt"
	_ "github.com/dominikbraun/graph"
	_ "github.com/google/go-containerregistry/pkg/registry"
	_ "github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/openshift/api/config/v1"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/spf13/pflag"
	_ "golang.org/x/crypto/bcrypt"
	_ "golang.org/x/term"
	_ "k8s.io/api/core/v1"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "libvirt.org/go/libvirtxml"
	_ "sigs.k8s.io/yaml"
)
