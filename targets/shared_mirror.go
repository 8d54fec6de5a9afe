package targets

import (
	"fmt"
	"net"
	"strconv"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/oci"
)

// mirrorHost is the mirror as the nodes reach it: network.gateway:mirror.port.
func mirrorHost(s *engine.Step) (string, error) {
	gw, err := s.String(lab.NetworkGateway)
	if err != nil {
		return "", err
	}
	var port int
	if err := s.Value(lab.MirrorPort, &port); err != nil {
		return "", err
	}
	return net.JoinHostPort(gw, strconv.Itoa(port)), nil
}

// mirrorClusterDeps and mirrorClusterReads are what a cluster manifest that names the mirror
// declares (nil when the lab has none, so its key is as before).
func mirrorClusterDeps(c *lab.Config, deps ...string) []string {
	if !c.MirrorOn() {
		return nil
	}
	return deps
}

func mirrorClusterReads(c *lab.Config) []string {
	if !c.MirrorOn() {
		return nil
	}
	return []string{lab.MirrorPort, lab.NetworkGateway}
}

// mirrorSourceDeps are the targets whose pull specs name the repositories the mirror serves:
// the release image's repository and the components' (art-dev) one.
var mirrorSourceDeps = []string{"release/resolve", "release/image/pod"}

// mirrorSources is the lab's imageDigestSources: the release repository and the component
// repository, each mirrored at network.gateway:mirror.port under the same path (MirrorRepo).
func mirrorSources(s *engine.Step) ([]manifests.MirrorSource, error) {
	host, err := mirrorHost(s)
	if err != nil {
		return nil, err
	}
	var out []manifests.MirrorSource
	for _, dep := range []string{"release/resolve", "release/image/pod"} {
		p, err := depPullspec(s, dep)
		if err != nil {
			return nil, err
		}
		d, err := name.NewDigest(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", dep, err)
		}
		src := d.Context().Name()
		if len(out) > 0 && out[0].Source == src {
			continue
		}
		out = append(out, manifests.MirrorSource{Source: src, Mirrors: []string{oci.MirrorRepo(host, d.Context())}})
	}
	return out, nil
}

// mirrorPullSecret returns the pull secret with the mirror's credentials merged in, for the
// host the nodes reach (network.gateway:mirror.port); ps unchanged without a mirror.
func mirrorPullSecret(c *lab.Config, s *engine.Step, ps []byte) ([]byte, error) {
	if !c.MirrorOn() {
		return ps, nil
	}
	host, err := mirrorHost(s)
	if err != nil {
		return nil, err
	}
	pw, err := s.DepFile("mirror/credentials", "password")
	if err != nil {
		return nil, err
	}
	return manifests.MergePullSecret(ps, host, MirrorUser, string(pw))
}

// MirrorUser is the registry's only user (htpasswd); its password is generated.
const MirrorUser = "labbuild"
