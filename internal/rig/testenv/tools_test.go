package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// TestToolchains: every release of the rig has a toolchain whose Kubernetes and etcd have a
// module under .ci (what .ci/build-kube.sh builds), programs are looked up by version under
// ToolsRoot, and an unknown release is an error naming the known ones.
func TestToolchains(t *testing.T) {
	for rel, tc := range Toolchains {
		for _, m := range []string{filepath.Join("kube", tc.Kube, "go.mod"), filepath.Join("etcd", tc.Etcd, "go.mod")} {
			if _, err := os.Stat(filepath.Join("..", "..", "..", ".ci", m)); err != nil {
				t.Errorf("release %s: no .ci/%s: %v", rel, m, err)
			}
		}
	}
	for _, tc := range []struct {
		release string
		minor   int
	}{{"", 31}, {"4.18", 31}, {"4.20", 33}, {"4.22", 35}, {"okd-4.22", 35}} {
		got, err := ToolchainOf(tc.release)
		if err != nil || got.KubeMinor() != tc.minor {
			t.Errorf("ToolchainOf(%q) = %+v (minor %d), %v; want minor %d", tc.release, got, got.KubeMinor(), err, tc.minor)
		}
	}
	if _, err := ToolchainOf("4.16"); err == nil {
		t.Error("a toolchain for 4.16")
	}
	t.Setenv("LABBUILD_TOOLS_ROOT", "/opt/t")
	tc := Toolchains["4.22"]
	for name, want := range map[string]string{"kubelet": "/opt/t/v1.35.4/kubelet", "etcd": "/opt/t/etcd-v3.6.5/etcd", "containerd": ""} {
		if got := tc.Path(name); got != want {
			t.Errorf("Path(%s) = %q, want %q", name, got, want)
		}
	}
}
