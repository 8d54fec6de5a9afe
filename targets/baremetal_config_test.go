package targets

import (
	"slices"
	"strings"
	"testing"
)

// TestPlatformBaremetalConfig: platform: baremetal needs network.loadBalancer: in-cluster
// (an error naming the field otherwise), an unknown platform names "platform", and seed 001's
// sizes are the platform's defaults where lab.yaml sets none, while sizes it sets are kept.
func TestPlatformBaremetalConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		errField   string // "" for valid
		master     Size
		worker     Size
	}{
		{name: "default platform", yaml: "cluster: {name: lab}\n", master: Size{4, 16384, 100}, worker: Size{2, 8192, 100}},
		{name: "baremetal in-cluster", yaml: "platform: baremetal\nnetwork: {loadBalancer: in-cluster}\n", master: Size{4, 12288, 100}, worker: Size{2, 8192, 100}},
		{name: "baremetal own master memory", yaml: "platform: baremetal\nnetwork: {loadBalancer: in-cluster}\nsizes:\n  master: {memoryMiB: 16384}\n", master: Size{4, 16384, 100}, worker: Size{2, 8192, 100}},
		{name: "baremetal host balancer", yaml: "platform: baremetal\nnetwork: {loadBalancer: host}\n", errField: "network.loadBalancer"},
		{name: "baremetal default balancer", yaml: "platform: baremetal\n", errField: "network.loadBalancer"},
		{name: "baremetal master too small", yaml: "platform: baremetal\nnetwork: {loadBalancer: in-cluster}\nsizes:\n  master: {memoryMiB: 8192}\n", errField: "sizes.master.memoryMiB"},
		{name: "unknown platform", yaml: "platform: vsphere\n", errField: "platform"},
		{name: "external bridge", yaml: "network: {externalBridge: baremetal}\n", master: Size{4, 16384, 100}, worker: Size{2, 8192, 100}},
		{name: "external bridge name too long", yaml: "network: {externalBridge: baremetal-bridge-0}\n", errField: "network.externalBridge"},
		{name: "external bridge is the lab bridge", yaml: "network: {externalBridge: virbr-ocp4}\n", errField: "network.externalBridge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.yaml), "lab.yaml")
			if err != nil {
				t.Fatal(err)
			}
			verr := c.Validate("lab.yaml")
			if tc.errField != "" {
				if verr == nil || !strings.Contains(verr.Error(), "lab.yaml") || !strings.Contains(verr.Error(), tc.errField+": ") {
					t.Fatalf("Validate: %v, want an error naming %s", verr, tc.errField)
				}
				return
			}
			if verr != nil {
				t.Fatalf("Validate: %v", verr)
			}
			if c.Sizes.Master != tc.master || c.Sizes.Worker != tc.worker {
				t.Errorf("sizes master %+v worker %+v, want %+v %+v", c.Sizes.Master, c.Sizes.Worker, tc.master, tc.worker)
			}
		})
	}
}

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
			c, err := ParseConfig([]byte(tc.yaml), "lab.yaml")
			if err != nil {
				t.Fatal(err)
			}
			deps := map[string][]string{}
			for _, tg := range libvirtTargets(c) {
				deps[tg.Name] = tg.Deps
			}
			workers := 0
			for _, n := range c.Nodes {
				empty := tc.baremetal && n.Role == RoleWorker
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
		c, err := ParseConfig([]byte(tc.yaml), "lab.yaml")
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
