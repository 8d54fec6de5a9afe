package testenv

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Toolchain is the Kubernetes and etcd the rehearsal runs for one release: the Kubernetes
// minor of that release's kube-apiserver and kubelet, and the etcd minor of its
// cluster-etcd-operator, at the newest patch the Go module proxy serves whole
// (.ci/kube/<Kube>, .ci/etcd/<Etcd>, built by .ci/build-kube.sh into ToolsRoot).
type Toolchain struct {
	// Kube is the k8s.io/kubernetes version ("v1.31.13"): kube-apiserver,
	// kube-controller-manager, kube-scheduler, kubelet and kubectl (the rehearsal's oc).
	Kube string
	// Etcd is the go.etcd.io/etcd/server/v3 version ("v3.5.21").
	Etcd string
}

// Toolchains are the toolchains by release (internal/rig/payload Releases names; "" is 4.18):
//   - 4.18: Kubernetes 1.31 (machine-config-operator release-4.18 go.mod k8s.io/kubernetes
//     v1.31.x), etcd 3.5; 1.31.14 is not served whole (k8s.io/endpointslice and
//     k8s.io/kube-scheduler v0.31.14 are refused), 1.31.13 is;
//   - 4.20: Kubernetes 1.33 (MCO release-4.20 k8s.io/kubernetes v1.33.2), etcd 3.5
//     (cluster-etcd-operator release-4.20 go.etcd.io/etcd/client/v3 v3.5.21);
//   - 4.22 and OKD 4.22: Kubernetes 1.35 (MCO release-4.22 v1.35.0), etcd 3.6
//     (cluster-etcd-operator release-4.22 "Update to v3.6.5"; its bootstrap member takes
//     --feature-gates=InitialCorruptCheck=true, which 3.5 does not know).
var Toolchains = map[string]Toolchain{
	"4.18":     {Kube: "v1.31.13", Etcd: "v3.5.21"},
	"4.20":     {Kube: "v1.33.13", Etcd: "v3.5.21"},
	"4.22":     {Kube: "v1.35.4", Etcd: "v3.6.5"},
	"okd-4.22": {Kube: "v1.35.4", Etcd: "v3.6.5"},
}

// ToolchainOf returns release's toolchain ("" is 4.18), or an error naming the releases that
// have one.
func ToolchainOf(release string) (Toolchain, error) {
	if release == "" {
		release = "4.18"
	}
	tc, ok := Toolchains[release]
	if !ok {
		known := slices.Sorted(maps.Keys(Toolchains))
		return Toolchain{}, fmt.Errorf("testenv: no toolchain for release %q (have %s)", release, strings.Join(known, ", "))
	}
	return tc, nil
}

// ToolsRoot is where .ci/build-kube.sh puts the toolchains: $LABBUILD_TOOLS_ROOT, else
// ~/.cache/labbuild/tools. Kubernetes <v> is in <root>/<v>/, etcd <v> in <root>/etcd-<v>/.
func ToolsRoot() string {
	if r := os.Getenv("LABBUILD_TOOLS_ROOT"); r != "" {
		return r
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "labbuild", "tools")
}

// KubeMinor is the Kubernetes minor version of tc (31 for v1.31.13).
func (tc Toolchain) KubeMinor() int {
	parts := strings.SplitN(strings.TrimPrefix(tc.Kube, "v"), ".", 3)
	if len(parts) < 2 {
		return 0
	}
	m, _ := strconv.Atoi(parts[1])
	return m
}

// kubePrograms are the programs of the Kubernetes set; etcd is the etcd set's.
var kubePrograms = map[string]bool{"kube-apiserver": true, "kube-controller-manager": true, "kube-scheduler": true, "kubelet": true, "kubectl": true}

// Path returns where program name of tc is ("" for a program the toolchain does not hold).
func (tc Toolchain) Path(name string) string {
	switch {
	case kubePrograms[name]:
		return filepath.Join(ToolsRoot(), tc.Kube, name)
	case name == "etcd":
		return filepath.Join(ToolsRoot(), "etcd-"+tc.Etcd, name)
	}
	return ""
}

// Require returns the path of program name: the toolchain's own for its programs (skipping,
// or failing in CI, with the command that builds it when it is not there), else Require's
// lookup.
func (tc Toolchain) Require(t testing.TB, name string) string {
	t.Helper()
	p := tc.Path(name)
	if p == "" {
		return Require(t, name)
	}
	if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
		return p
	}
	v := tc.Kube
	if name == "etcd" {
		v = tc.Etcd
	}
	Missing(t, fmt.Sprintf("%s %s not built (bash .ci/build-kube.sh %s puts it in %s)", name, v, v, filepath.Dir(p)))
	return ""
}
