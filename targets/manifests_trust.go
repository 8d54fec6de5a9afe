package targets

import (
	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
)

// userCABundleTarget is the name of the target writing ConfigMap openshift-config/user-ca-bundle.
const userCABundleTarget = "manifests/cluster/user-ca-bundle"

// userCABundleDeps is what a manifest naming user-ca-bundle (the Proxy) depends on: the
// ConfigMap's target when the lab has a trust bundle, else nothing (its key is as before).
func userCABundleDeps(c *lab.Config) []string {
	if len(trustDeps(c)) == 0 {
		return nil
	}
	return []string{userCABundleTarget}
}

// trustManifestTargets is manifests/cluster/user-ca-bundle when the lab has a trust bundle:
// ConfigMap openshift-config/user-ca-bundle, key ca-bundle.crt (installer
// pkg/asset/manifests/additionaltrustbundleconfig.go).
func trustManifestTargets(c *lab.Config) []*engine.Target {
	if len(trustDeps(c)) == 0 {
		return nil
	}
	return []*engine.Target{mfCluster("user-ca-bundle", "ConfigMap openshift-config/user-ca-bundle: the lab's additional trust bundle (the mirror CA with a mirror, the BMC CA on platform baremetal), the Proxy's trustedCA",
		trustDeps(c), nil, func(s *engine.Step) ([]manifests.File, error) {
			b, err := trustBundle(c, s)
			if err != nil {
				return nil, err
			}
			return mfOne(manifests.UserCABundle(b))
		})}
}
