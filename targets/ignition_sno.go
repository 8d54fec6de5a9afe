package targets

import (
	"context"
	"fmt"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/manifests"
)

// SNOInstallationDisk is the disk a single node's install writes (install-config
// bootstrapInPlace.installationDisk): the domain's virtio disk, vda (render/libvirt Domain).
const SNOInstallationDisk = "/dev/vda"

// ignCarriedPods are the bootstrap static pods a single node keeps running after its reboot,
// under the names the operators' installers write (installer release-4.18 master-update.fcc:
// etcd-member-pod.yaml → etcd-pod.yaml, bootstrap-manifests/kube-apiserver-pod.yaml,
// kube-controller-manager-pod.yaml, kube-scheduler-pod.yaml). The bootstrap CVO is not
// carried: after the reboot the CVO is the payload's Deployment.
var ignCarriedPods = []ignition.CarriedPod{
	{File: manifests.EtcdPodFile, As: "etcd-pod.yaml"},
	{File: manifests.KubeAPIServerPodFile, As: "kube-apiserver-pod.yaml"},
	{File: manifests.KubeControllerManagerPodFile, As: "kube-controller-manager-pod.yaml"},
	{File: manifests.KubeSchedulerPodFile, As: "kube-scheduler-pod.yaml"},
}

// ignBootstrapInPlaceTarget declares ignition/bootstrap-in-place for a single node's master:
// out/ignition/bootstrap-in-place-for-live-iso.ign, the config its live ISO boots with
// (render/ignition.BootstrapInPlace: the bootstrap's config at the master's name and address,
// the master's own Ignition, the install to disk and the reboot into it). docs/sno.md.
func ignBootstrapInPlaceTarget(c *lab.Config, master string) *engine.Target {
	return &engine.Target{
		Name: IgnBootstrapInPlace,
		Doc: "the single node's live-ISO Ignition (bootstrap in place): the bootstrap's config on " + master +
			", its master Ignition, install to disk, reboot, post-reboot",
		Deps:    append(ignBootstrapDeps(c), "ignition/"+master),
		Reads:   addReads(ignNodeReads(c, master), mirrorClusterReads(c)...),
		Files:   []string{lab.AccessPullSecretFile, lab.AccessSSHKeyFile},
		Version: 1,
		OutDir:  ignOutDir,
		Run: func(ctx context.Context, s *engine.Step) error {
			boot, err := ignBootstrapInput(c, s, master)
			if err != nil {
				return err
			}
			mi, err := s.DepFile("ignition/"+master, master+".ign")
			if err != nil {
				return err
			}
			res, err := ignition.BootstrapInPlace(ignition.BootstrapInPlaceInput{Bootstrap: boot, MasterIgnition: mi,
				InstallationDisk: SNOInstallationDisk, EtcdPod: manifests.EtcdPodFile, Carried: ignCarriedPods})
			if err != nil {
				return fmt.Errorf("%s: %w", s.Target().Name, err)
			}
			s.Logf("%s: %d bytes, %d files, %d units", ignition.BootstrapInPlaceFile, len(res.JSON), res.Files, res.Units)
			return s.WriteFile(ignition.BootstrapInPlaceFile, res.JSON, 0o600)
		},
	}
}
