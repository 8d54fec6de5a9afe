package targets

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/manifests"
)

// The ignition family: one Ignition 3.4 config per node (openshift-the-hard-way stage 08,
// ../shared/spec/stages.md §8, target-graph.md §3.8), written to out/ignition/<node>.ign.
//
//   - ignition/bootstrap: render/ignition.Bootstrap over manifests/bootstrap's tree
//     (static-pods/ → /etc/kubernetes/manifests, manifests/ → /opt/openshift/manifests — CRDs
//     included —, crio/00-pause.conf), the TLS files and kubeconfigs at the node paths of
//     render/manifests.BootstrapTLSPaths and BootstrapKubeconfigPaths, the localhost admin
//     kubeconfig for the apply step, pull secret, SSH key, hostname and static network.
//   - ignition/master-N, ignition/worker-N: render/ignition.Node over mco/base/<role> (the
//     rendered pool config) plus what the Machine Config Server adds, the kubelet bootstrap
//     kubeconfig, /etc/kubernetes/ca.crt, SSH key, hostname, static network and, on masters,
//     the kube-proxy static pod. Additions replace entries by path; none replaces a file of
//     the rendered config (the machine-config daemon checks those on first boot).
//
// Each target reads only its own node's fields, so a change to master-1's IP rebuilds
// ignition/master-1 and (through the etcd and kube-apiserver certificates)
// ignition/bootstrap, and nothing else. Every config is validated by Ignition's own parser
// (any report entry fails) and written 0600: it carries the pull secret and client keys.

// ignOutDir is the shared output directory of every ignition/<node> target.
const ignOutDir = "ignition"

// ignPathKubernetesCA is the Kubernetes CA on masters and workers (OTHW's
// /etc/kubernetes/ca.crt; the kubelet's kubeconfig embeds the same CA).
const ignPathKubernetesCA = "/etc/kubernetes/ca.crt"

// ignNodeReads are the config fields of node name's network and hostname; on a lab spread over
// hosts also the machine network's MTU (the VXLAN tunnel's), which its keyfile sets.
func ignNodeReads(c *lab.Config, name string) []string {
	return append([]string{lab.NodePath(name, lab.NodeName), lab.NodePath(name, lab.NodeIP), lab.ClusterName, lab.ClusterBaseDomain,
		lab.NetworkMachineNetwork, lab.NetworkGateway, lab.NetworkDNS}, multiHostReads(c, lab.DerivedMachineMTU)...)
}

// ignNodeNet returns node name's FQDN and static network from its declared reads.
func ignNodeNet(s *engine.Step, name string) (string, ignition.StaticNetwork, error) {
	var n ignition.StaticNetwork
	get := func(p string) (string, error) { return s.String(p) }
	host, err := get(lab.NodePath(name, lab.NodeName))
	if err != nil {
		return "", n, err
	}
	dom, err := clusterDomain(s)
	if err != nil {
		return "", n, err
	}
	if n.Address, err = get(lab.NodePath(name, lab.NodeIP)); err != nil {
		return "", n, err
	}
	mn, err := get(lab.NetworkMachineNetwork)
	if err != nil {
		return "", n, err
	}
	pfx, err := netip.ParsePrefix(mn)
	if err != nil {
		return "", n, &lab.ConfigError{Field: lab.NetworkMachineNetwork, Msg: "not a CIDR (" + err.Error() + ")", Fix: "write it as 192.168.126.0/24"}
	}
	n.Prefix = pfx.Bits()
	if n.Gateway, err = get(lab.NetworkGateway); err != nil {
		return "", n, err
	}
	dns, err := get(lab.NetworkDNS)
	if err != nil {
		return "", n, err
	}
	n.DNS = []string{dns}
	n.Search = dom
	if n.MTU, err = stepInt(s, lab.DerivedMachineMTU); err != nil {
		return "", n, err
	}
	return host + "." + dom, n, nil
}

// ignAccess reads and checks the pull secret and SSH key files.
func ignAccess(s *engine.Step) (pull []byte, sshKey string, err error) {
	if pull, err = s.File(lab.AccessPullSecretFile); err != nil {
		return nil, "", err
	}
	if err = lab.CheckPullSecret(pull, lab.AccessPullSecretFile); err != nil {
		return nil, "", err
	}
	if sshKey, err = ignSSHKey(s); err != nil {
		return nil, "", err
	}
	return bytes.TrimSpace(pull), sshKey, nil
}

// ignSSHKey reads and checks the SSH key file.
func ignSSHKey(s *engine.Step) (string, error) {
	key, err := s.File(lab.AccessSSHKeyFile)
	if err != nil {
		return "", err
	}
	if err = lab.CheckSSHKey(key, lab.AccessSSHKeyFile); err != nil {
		return "", err
	}
	return strings.TrimSpace(string(key)), nil
}

// ignWrite writes <node>.ign (0600) and logs its size.
func ignWrite(s *engine.Step, node string, raw []byte, files, units int) error {
	s.Logf("%s.ign: %d bytes, %d files, %d units", node, len(raw), files, units)
	return s.WriteFile(node+".ign", raw, 0o600)
}

// ignNodeTarget declares ignition/<node> for a master or worker. It does not read the pull
// secret: /var/lib/kubelet/config.json is the rendered config's own file, as the real
// machine-config-server serves it (MCO release-4.18 pkg/server/server.go getAppenders adds no
// pull secret; templates/common/_base/files/pull-secret.yaml renders json.Compact of the
// cluster's pull secret plus a newline, which mco/inputs gives the bootstrap render already
// merged with the mirror's auth). Replacing it made every node Degraded on first boot
// (issue 38 #1); render/ignition.Node refuses a config the daemon would refuse.
func ignNodeTarget(c *lab.Config, n lab.Node) *engine.Target {
	name, role := n.Name, n.Role
	base := "mco/base/" + role
	deps := []string{base, "kubeconfig/kubelet-bootstrap", "pki/ca/kubernetes"}
	if role == lab.RoleMaster {
		deps = append(deps, "manifests/kube-proxy", "kubeconfig/kube-proxy")
	}
	return &engine.Target{
		Name:    "ignition/" + name,
		Doc:     "the " + role + " " + name + "'s Ignition: rendered " + role + " pool config + MCS files, network, hostname, SSH key" + map[bool]string{true: ", kube-proxy", false: ""}[role == lab.RoleMaster],
		Deps:    deps,
		Reads:   ignNodeReads(c, name),
		Files:   []string{lab.AccessSSHKeyFile},
		Version: 2,
		OutDir:  ignOutDir,
		Run: func(ctx context.Context, s *engine.Step) error {
			in := ignition.NodeInput{}
			var err error
			if in.Hostname, in.Network, err = ignNodeNet(s, name); err != nil {
				return err
			}
			if in.SSHKey, err = ignSSHKey(s); err != nil {
				return err
			}
			if in.RenderedMachineConfig, err = s.DepFile(base, "machineconfig.yaml"); err != nil {
				return err
			}
			if in.KubeletCA, err = s.DepFile(base, "kubelet-ca.crt"); err != nil {
				return err
			}
			if in.BootstrapKubeconfig, err = s.DepFile("kubeconfig/kubelet-bootstrap", "kubeconfig"); err != nil {
				return err
			}
			ca, err := s.DepFile("pki/ca/kubernetes", "tls.crt")
			if err != nil {
				return err
			}
			in.Extra = []ignition.File{{Path: ignPathKubernetesCA, Mode: ignition.ModeFile, Contents: ca}}
			if role == lab.RoleMaster {
				if in.KubeProxyPod, err = s.DepFile("manifests/kube-proxy", manifests.KubeProxyPodFile); err != nil {
					return err
				}
				kp, err := s.DepFile("kubeconfig/kube-proxy", "kubeconfig")
				if err != nil {
					return err
				}
				in.Extra = append(in.Extra, ignition.File{Path: manifests.KubeProxyKubeconfigPath, Mode: ignition.ModeSecret, Contents: kp})
			}
			res, err := ignition.Node(in)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Target().Name, err)
			}
			s.Logf("based on %s", res.Rendered)
			return ignWrite(s, name, res.JSON, res.Files, res.Units)
		},
	}
}

// ignBootstrapTarget declares ignition/bootstrap for bootstrap node boot. In the in-cluster
// mode it also places the localhost admin kubeconfig at /etc/kubernetes/kubeconfig, where the
// MCO's on-prem pods read it (bootkube.sh: `cp auth/kubeconfig-loopback /etc/kubernetes/kubeconfig`).
func ignBootstrapTarget(c *lab.Config, boot string) *engine.Target {
	return &engine.Target{
		Name: "ignition/bootstrap",
		Doc: "the bootstrap node's Ignition: standalone kubelet, static pods, TLS files, kubeconfigs, CRDs and cluster manifests, " +
			"CRI-O pause drop-in, pull secret, SSH key, hostname, network",
		Deps:    ignBootstrapDeps(c),
		Reads:   addReads(ignNodeReads(c, boot), mirrorClusterReads(c)...),
		Files:   []string{lab.AccessPullSecretFile, lab.AccessSSHKeyFile},
		Version: 1,
		OutDir:  ignOutDir,
		Run: func(ctx context.Context, s *engine.Step) error {
			in, err := ignBootstrapInput(c, s, boot)
			if err != nil {
				return err
			}
			res, err := ignition.Bootstrap(in)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Target().Name, err)
			}
			return ignWrite(s, boot, res.JSON, res.Files, res.Units)
		},
	}
}

// ignApplyKubeconfig is the node path of the kubeconfig the bootstrap's apply step uses: the
// localhost admin kubeconfig the control plane pods already get (BootstrapKubeconfigPaths);
// Bootstrap refuses a path that is not among the files.
const ignApplyKubeconfig = manifests.KubeconfigsDir + "/localhost.kubeconfig"

// ignBootstrapDeps are the upstreams of the bootstrap's config: manifests/bootstrap, every
// target of its TLS files and kubeconfigs, the mirror's and the trust bundle's.
func ignBootstrapDeps(c *lab.Config) []string {
	deps := []string{"manifests/bootstrap"}
	seen := map[string]bool{"manifests/bootstrap": true}
	for _, f := range append(append([]manifests.NodeFile{}, manifests.BootstrapTLSPaths...), manifests.BootstrapKubeconfigPaths...) {
		if !seen[f.Target] {
			seen[f.Target] = true
			deps = append(deps, f.Target)
		}
	}
	return append(append(deps, mirrorClusterDeps(c, append(mirrorSourceDeps, "mirror/credentials")...)...), trustDeps(c)...)
}

// ignBootstrapInput assembles the bootstrap config of node boot (the bootstrap node, or a
// single node's master) from its declared upstreams and reads.
func ignBootstrapInput(c *lab.Config, s *engine.Step, boot string) (ignition.BootstrapInput, error) {
	inCluster := c.InCluster()
	in := ignition.BootstrapInput{ApplyKubeconfig: ignApplyKubeconfig}
	var err error
	if in.Hostname, in.Network, err = ignNodeNet(s, boot); err != nil {
		return in, err
	}
	if in.PullSecret, in.SSHKey, err = ignAccess(s); err != nil {
		return in, err
	}
	tree, err := s.DepFiles("manifests/bootstrap")
	if err != nil {
		return in, err
	}
	for _, rel := range tree {
		b, err := s.DepFile("manifests/bootstrap", rel)
		if err != nil {
			return in, err
		}
		dir, file := path.Split(rel)
		switch {
		case dir == "static-pods/":
			in.StaticPods = append(in.StaticPods, ignition.File{Path: manifests.StaticPodDir + "/" + file, Mode: ignition.ModeFile, Contents: b})
		case strings.HasPrefix(rel, "resources/"): // in-cluster VIPs: boot-time templates
			in.Files = append(in.Files, ignition.File{Path: ignition.BootstrapStaticPodResources + "/" + strings.TrimPrefix(rel, "resources/"), Mode: ignition.ModeFile, Contents: b})
		case rel == "crio/00-pause.conf":
			in.CRIOPause = b
		case dir == "configs/":
			in.Files = append(in.Files, ignition.File{Path: manifests.BootstrapConfigsDir + "/" + file, Mode: ignition.ModeFile, Contents: b})
		case dir == "manifests/":
			mode, err := ignDepMode(s, "manifests/bootstrap", rel)
			if err != nil {
				return in, err
			}
			in.Files = append(in.Files, ignition.File{Path: manifests.ManifestsDir + "/" + file, Mode: mode, Contents: b})
		default:
			return in, fmt.Errorf("%s: manifests/bootstrap output %q has no place on the bootstrap node (want static-pods/, manifests/, resources/, configs/ or crio/00-pause.conf)", s.Target().Name, rel)
		}
	}
	nodeFiles := append(append([]manifests.NodeFile{}, manifests.BootstrapTLSPaths...), manifests.BootstrapKubeconfigPaths...)
	for _, f := range nodeFiles {
		b, err := s.DepFile(f.Target, f.File)
		if err != nil {
			return in, err
		}
		in.Files = append(in.Files, ignition.File{Path: f.Path, Mode: int(f.Mode.Perm()), Contents: b})
		if inCluster && f.Path == ignApplyKubeconfig {
			in.Files = append(in.Files, ignition.File{Path: vipBootstrapKubeconfig, Mode: ignition.ModeSecret, Contents: b})
		}
	}
	if err := mirrorBootstrapInput(c, s, &in); err != nil { // targets/mirror.go
		return in, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	if err := trustBootstrapInput(c, s, &in); err != nil {
		return in, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	return in, nil
}

// IgnBootstrapInPlace is the single node's live-ISO Ignition target (ignition_sno.go).
const IgnBootstrapInPlace = "ignition/bootstrap-in-place"

// ignDepMode returns the node mode of an upstream file: 0600 when the upstream wrote it
// private (Secrets), 0644 otherwise.
func ignDepMode(s *engine.Step, dep, rel string) (int, error) {
	p, err := s.DepPath(dep, rel)
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return 0, err
	}
	if st.Mode().Perm()&0o077 == 0 {
		return ignition.ModeSecret, nil
	}
	return ignition.ModeFile, nil
}

func ignitionTargets(c *lab.Config) []*engine.Target {
	var ts []*engine.Target
	for _, n := range c.Nodes {
		switch n.Role {
		case lab.RoleBootstrap:
			ts = append(ts, ignBootstrapTarget(c, n.Name))
		case lab.RoleMaster, lab.RoleWorker:
			ts = append(ts, ignNodeTarget(c, n))
		}
	}
	if c.SNO() {
		ts = append(ts, ignBootstrapInPlaceTarget(c, c.BootstrapHost().Name))
	}
	return ts
}

func init() {
	Register(Family{Name: "ignition", Doc: "one Ignition 3.4 config per node, out/ignition/<node>.ign (stage 08)",
		Targets: func(l Lab) []*engine.Target {
			return ignitionTargets(l.Config)
		}})
}

// TrustBundleAnchor is where the bootstrap trusts the lab's additional trust bundle: the
// installer's bootstrap writes additionalTrustBundle to this file
// (data/data/bootstrap/files/etc/pki/ca-trust/source/anchors/ca.crt.template), and
// update-ca-trust reads the anchors at boot.
const TrustBundleAnchor = "/etc/pki/ca-trust/source/anchors/ca.crt"

// trustBootstrapInput adds the lab's trust bundle to the bootstrap's Ignition as
// TrustBundleAnchor, when it has one.
func trustBootstrapInput(c *lab.Config, s *engine.Step, in *ignition.BootstrapInput) error {
	b, err := trustBundle(c, s)
	if err != nil || b == nil {
		return err
	}
	in.Files = append(in.Files, ignition.File{Path: TrustBundleAnchor, Mode: ignition.ModeFile, Contents: b})
	return nil
}

// MirrorRegistriesDropIn is the bootstrap's registries.conf drop-in for the mirror
// (containers-registries.conf(5): a drop-in, so RHCOS's own registries.conf stays).
const MirrorRegistriesDropIn = "/etc/containers/registries.conf.d/99-labbuild-mirror.conf"

// mirrorBootstrapInput adds the mirror to the bootstrap's Ignition when the lab has one: the
// registries.conf drop-in (the installer's bootstrap registries.conf, from imageDigestSources)
// and the pull secret with the mirror's auth. Its CA is in the lab's trust bundle
// (trustBootstrapInput).
func mirrorBootstrapInput(c *lab.Config, s *engine.Step, in *ignition.BootstrapInput) error {
	if !c.MirrorOn() {
		return nil
	}
	srcs, err := mirrorSources(s)
	if err != nil {
		return err
	}
	if in.PullSecret, err = mirrorPullSecret(c, s, in.PullSecret); err != nil {
		return err
	}
	in.Files = append(in.Files, ignition.File{Path: MirrorRegistriesDropIn, Mode: ignition.ModeFile, Contents: manifests.RegistriesConf(srcs)})
	return nil
}
