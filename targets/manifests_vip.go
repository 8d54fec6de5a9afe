package targets

// The manifests family's side of the in-cluster VIP mode (shared_vip.go): which of the MCO
// bootstrap render's on-prem files manifests/bootstrap places, as bootkube.sh does.

import (
	"slices"
	"strings"
)

// vipBootkubePlatforms are the platform folders bootkube.sh copies, in its order.
var vipBootkubePlatforms = []string{"baremetal", "openstack", "ovirt", "vsphere", "kubevirt"}

// vipBootkubePlace maps an output of mco/operator-bootstrap to its place in manifests/bootstrap's
// tree as copy_static_resources_for does: <platform>/manifests/<file> → static-pods/<file> (only
// files directly in manifests/: `cp .../manifests/*`), <platform>/static-pod-resources/<path> →
// resources/<path> (`cp --recursive`). ok is false for every other output.
func vipBootkubePlace(rel string) (dst string, ok bool) {
	platform, rest, found := strings.Cut(rel, "/")
	if !found || !slices.Contains(vipBootkubePlatforms, platform) {
		return "", false
	}
	if f, ok := strings.CutPrefix(rest, "manifests/"); ok && f != "" && !strings.Contains(f, "/") {
		return "static-pods/" + f, true
	}
	if r, ok := strings.CutPrefix(rest, "static-pod-resources/"); ok && r != "" {
		return "resources/" + r, true
	}
	return "", false
}
