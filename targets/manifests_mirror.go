package targets

import (
	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
)

// mirrorManifestTargets is the mirror's cluster manifest, in the manifests family's collector:
// the ImageDigestMirrorSet. The mirror CA is in the lab's trust bundle (targets/shared_trust.go:
// manifests/cluster/user-ca-bundle).
func mirrorManifestTargets(c *lab.Config) []*engine.Target {
	if !c.MirrorOn() {
		return nil
	}
	return []*engine.Target{mfCluster("mirror", "the release mirror: ImageDigestMirrorSet image-digest-mirror (release and art-dev repositories)",
		mirrorSourceDeps, mirrorClusterReads(c), func(s *engine.Step) ([]manifests.File, error) {
			srcs, err := mirrorSources(s)
			if err != nil {
				return nil, err
			}
			return mfOne(manifests.ImageDigestMirrorSet(srcs))
		})}
}

// labInstallConfig fills the install-config's imageDigestSources when the lab has a mirror,
// and its additionalTrustBundle when it has a trust bundle (targets/shared_trust.go), as
// cluster-config-v1 carries them.
func labInstallConfig(c *lab.Config, s *engine.Step, ic *manifests.InstallConfig) error {
	if c.MirrorOn() {
		srcs, err := mirrorSources(s)
		if err != nil {
			return err
		}
		ic.ImageDigestSources = srcs
	}
	b, err := trustBundle(c, s)
	ic.AdditionalTrustBundle = string(b)
	return err
}
