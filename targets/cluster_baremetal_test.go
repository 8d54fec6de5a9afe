package targets

import (
	"slices"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/lab"
)

// TestClusterBaremetalWorkers: on platform baremetal the workers are Metal3's. labbuild
// declares no cluster/install/<worker> (nothing of labbuild starts them); cluster/workers needs
// bmc/service, the workers' (empty) domains and their Ignition instead and reads the platform; the masters and the bootstrap are installed as on
// the other platforms. Platform none keeps a cluster/install per node.
func TestClusterBaremetalWorkers(t *testing.T) {
	for _, tc := range []struct {
		platform    string
		wantWorkers []string
		wantInstall []string
	}{
		{lab.PlatformBaremetal, []string{"bmc/service", "cluster/pivot", "ignition/worker-0", "ignition/worker-1", "kubeconfig/admin", "libvirt/vm/worker-0", "libvirt/vm/worker-1"},
			[]string{"cluster/install/bootstrap", "cluster/install/master-0", "cluster/install/master-1", "cluster/install/master-2"}},
		{"", []string{"cluster/install/worker-0", "cluster/install/worker-1", "cluster/pivot", "kubeconfig/admin"},
			[]string{"cluster/install/bootstrap", "cluster/install/master-0", "cluster/install/master-1", "cluster/install/master-2", "cluster/install/worker-0", "cluster/install/worker-1"}},
	} {
		c := clusterConfig(3, 2)
		c.Platform = tc.platform
		ts := clusterTargets(c, func(n string) bool {
			return n == "bmc/service" || n == adminKubeconfig || strings.HasPrefix(n, "libvirt/vm/worker-") || strings.HasPrefix(n, "ignition/worker-")
		})
		var install []string
		for _, x := range ts {
			if strings.HasPrefix(x.Name, "cluster/install/") {
				install = append(install, x.Name)
			}
			if x.Name != "cluster/workers" {
				continue
			}
			deps := slices.Clone(x.Deps)
			slices.Sort(deps)
			if !slices.Equal(deps, tc.wantWorkers) {
				t.Errorf("platform %q: cluster/workers deps %v, want %v", tc.platform, deps, tc.wantWorkers)
			}
			if got := slices.Contains(x.Reads, "platform"); got != (tc.platform == lab.PlatformBaremetal) {
				t.Errorf("platform %q: cluster/workers reads platform: %v", tc.platform, got)
			}
			if tc.platform == lab.PlatformBaremetal && !strings.Contains(x.Doc, "Metal3") {
				t.Errorf("platform %q: cluster/workers doc %q does not say Metal3 provisions the workers", tc.platform, x.Doc)
			}
		}
		slices.Sort(install)
		if !slices.Equal(install, tc.wantInstall) {
			t.Errorf("platform %q: install targets %v, want %v", tc.platform, install, tc.wantInstall)
		}
	}
}

// TestLvNotBMCOwned: on platform baremetal the BMC's CD-ROM and boot order are not drift of
// libvirt/vm/<node> (a rerun must not replace a host Metal3 is provisioning); a changed NIC or
// RHCOS disk still is, and off that platform everything counts.
func TestLvNotBMCOwned(t *testing.T) {
	diff := []string{
		`boot: want "hd", got "cdrom,hd"`,
		"disk: unexpected cdrom sda/sata /pool/rehearsal-bmc/boot-worker-0.iso",
		"disk: unexpected cdrom sda/sata ",
		"nic: missing 52:54:00:aa:bb:cc network lab virtio",
		"disk: unexpected disk vdb/virtio /pool/extra.qcow2",
	}
	if got, want := lvNotBMCOwned(diff, true), diff[3:]; !slices.Equal(got, want) {
		t.Errorf("baremetal: %q, want %q", got, want)
	}
	if got := lvNotBMCOwned(diff, false); !slices.Equal(got, diff) {
		t.Errorf("other platforms: %q, want all of it", got)
	}
	if lvNotBMCOwned(diff[:3], true) != nil {
		t.Errorf("the BMC's changes alone are still a diff")
	}
}
