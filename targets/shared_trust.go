package targets

import (
	"bytes"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// The lab's additional trust bundle is what openshift-install calls additionalTrustBundle
// (pkg/types/installconfig.go): the CAs, beyond the system's and the cluster's own, that the
// cluster must trust. It holds, in this order,
//
//	pki/ca/mirror-ca  with mirror.enabled: the nodes' CRI-O pulls from the mirror over TLS
//	pki/ca/bmc        on platform baremetal: Ironic verifies the BMC against ConfigMap
//	                  openshift-machine-api/cbo-trusted-ca, which the cluster-network-operator
//	                  fills with the system CAs plus the Proxy's trustedCA (docs/baremetal.md)
//
// and is written, as the installer writes additionalTrustBundle with policy Always, to
// manifests/cluster/user-ca-bundle (ConfigMap openshift-config/user-ca-bundle), the Proxy's
// spec.trustedCA (manifests/cluster/proxy), cluster-config-v1's install-config, mco/inputs (the
// nodes' anchor openshift-config-user-ca-bundle.crt), the bootstrap's anchor and
// ipi/install-config. A lab with neither a mirror nor platform baremetal has no bundle, and
// none of those targets declares anything more than before the bundle existed.

// trustDeps returns the CA targets whose certificates make the lab's additional trust bundle,
// in bundle order; nil when the lab has none.
func trustDeps(c *lab.Config) []string {
	var deps []string
	if c.MirrorOn() {
		deps = append(deps, "pki/ca/mirror-ca")
	}
	if c.Baremetal() {
		deps = append(deps, "pki/ca/bmc")
	}
	return deps
}

// trustBundle reads the lab's additional trust bundle: the tls.crt of each of trustDeps, in
// order, each ending in a newline (PEM). nil when the lab has none; an error when the step
// does not declare one of them.
func trustBundle(c *lab.Config, s *engine.Step) ([]byte, error) {
	var b bytes.Buffer
	for _, dep := range trustDeps(c) {
		crt, err := s.DepFile(dep, "tls.crt")
		if err != nil {
			return nil, err
		}
		b.Write(bytes.TrimSpace(crt))
		b.WriteByte('\n')
	}
	if b.Len() == 0 {
		return nil, nil
	}
	return b.Bytes(), nil
}
