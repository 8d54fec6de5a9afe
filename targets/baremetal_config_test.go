package targets

import (
	"slices"
	"testing"

	"github.com/labbuild/labbuild/lab"
)

// TestBaremetalWorkersHandedOverEmpty: with platform baremetal the workers' disks overlay no
// RHCOS image and their domains get no Ignition (Metal3 writes both through the BMC's virtual
// media); the bootstrap and masters keep theirs, and platform none changes nothing.
func TestBaremetalWorkersHandedOverEmpty(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		baremetal  bool
	}{
		{"none", "cluster: {name: lab}\n", false},
		{"baremetal", "platform: baremetal\nnetwork: {loadBalancer: in-cluster}\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := lab.ParseConfig([]byte(tc.yaml), "lab.yaml")
			if err != nil {
				t.Fatal(err)
			}
			deps := map[string][]string{}
			for _, tg := range libvirtTargets(c, false) {
				deps[tg.Name] = tg.Deps
			}
			workers := 0
			for _, n := range c.Nodes {
				empty := tc.baremetal && n.Role == lab.RoleWorker
				if empty {
					workers++
				}
				vol, vm := deps["libvirt/volume/"+n.Name], deps["libvirt/vm/"+n.Name]
				if got := slices.Contains(vol, "rhcos/image"); got == empty {
					t.Errorf("%s (%s): volume deps %v: overlays the RHCOS image %v, want %v", n.Name, n.Role, vol, got, !empty)
				}
				if got := slices.Contains(vm, "ignition/"+n.Name); got == empty {
					t.Errorf("%s (%s): vm deps %v: Ignition %v, want %v", n.Name, n.Role, vm, got, !empty)
				}
			}
			if tc.baremetal && workers == 0 {
				t.Fatal("the default lab has no worker to hand over")
			}
		})
	}
}

// TestBaremetalManifestsInBootstrap: with platform baremetal the bootstrap's manifest tree
// gathers bmc/manifests (the installer's 99_openshift-cluster-api_* files, which bootkube.sh
// applies once the BareMetalHost CRD exists); platform none does not.
func TestBaremetalManifestsInBootstrap(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want bool
	}{
		{"network: {loadBalancer: in-cluster}\n", false},
		{"platform: baremetal\nnetwork: {loadBalancer: in-cluster}\n", true},
	} {
		c, err := lab.ParseConfig([]byte(tc.yaml), "lab.yaml")
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range manifestsTargets(c) {
			if tg.Name == "manifests/bootstrap" && slices.Contains(tg.Deps, "bmc/manifests") != tc.want {
				t.Errorf("%q: manifests/bootstrap deps %v: bmc/manifests %v", tc.yaml, tg.Deps, !tc.want)
			}
		}
	}
}
