package targets

import (
	"slices"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
)

// The in-cluster VIP mode (network.loadBalancer: in-cluster; docs/in-cluster-vips.md): the
// bare-metal networking of seed 002. Compared with the host mode:
//
//   - manifests/cluster/infrastructure and manifests/cluster/cluster-config-v1 write platform
//     BareMetal with the VIPs (render/manifests BareMetal), and so does mco/inputs, so the
//     MCO renders its on-prem templates (keepalived, haproxy, coredns static pods, the
//     resolv.conf prepender) into the master and worker configs;
//   - manifests/bootstrap copies the bootstrap's keepalived and coredns static pods and their
//     boot-time templates from the MCO bootstrap render's baremetal/ output, as bootkube.sh
//     does (vipBootkubePlace), and ignition/bootstrap places them;
//   - the haproxy family declares no targets: no haproxy.cfg, no haproxy/service, no VIP on
//     the lab bridge (the cluster family's opt() then drops its haproxy dependencies);
//   - cluster/pivot switches no haproxy: it waits until every master's keepalived and haproxy
//     static pods are Ready (the masters can take the VIP), powers the bootstrap off and waits
//     for /readyz through the VIP, which keepalived has moved.
//
// The libvirt network is the same in both modes: its dnsmasq answers api, api-int and *.apps
// with the VIPs for clients outside the cluster.

// vipReads are the config fields the platform-BareMetal renders read (in-cluster mode only:
// the host mode's targets keep their keys).
var vipReads = []string{lab.NetworkLoadBalancer, lab.NetworkAPIVIP, lab.NetworkIngressVIP, lab.NetworkMachineNetwork}

// vipPlatformReads returns vipReads in the in-cluster mode and nothing otherwise.
func vipPlatformReads(c *lab.Config) []string {
	if c.InCluster() {
		return slices.Clone(vipReads)
	}
	return nil
}

// vipBareMetal returns the BareMetal platform of the lab when the target declares
// network.loadBalancer and it is in-cluster, and nil (platform None) otherwise.
func vipBareMetal(s *engine.Step) (*manifests.BareMetal, error) {
	if in, err := vipInCluster(s); err != nil || !in {
		return nil, err
	}
	bm := &manifests.BareMetal{}
	for _, x := range []struct {
		p    string
		into *[]string
	}{{lab.NetworkAPIVIP, &bm.APIVIPs}, {lab.NetworkIngressVIP, &bm.IngressVIPs}, {lab.NetworkMachineNetwork, &bm.MachineNetworks}} {
		v, err := s.String(x.p)
		if err != nil {
			return nil, err
		}
		*x.into = []string{v}
	}
	return bm, nil
}

// The bootstrap's on-prem static pods come from the MCO's own bootstrap render, as on a real
// bootstrap: `machine-config-operator bootstrap` (mco/operator-bootstrap) writes, for platform
// BareMetal, baremetal/manifests/{keepalived,coredns}.yaml and
// baremetal/static-pod-resources/{keepalived/keepalived.conf.tmpl,coredns/Corefile.tmpl} (MCO
// 4.18 pkg/operator/bootstrap.go getPlatformManifests over manifests/on-prem/), and bootkube.sh
// (installer data/data/bootstrap/files/usr/local/bin/bootkube.sh.template,
// copy_static_resources_for) copies <platform>/manifests/* to /etc/kubernetes/manifests/ and
// <platform>/static-pod-resources/* to /etc/kubernetes/static-pod-resources/. labbuild renders
// none of them itself: manifests/bootstrap copies them (vipBootkubePlace) and ignition/bootstrap
// places them.

// Node paths the MCO's bootstrap on-prem pods read (manifests/on-prem/keepalived.yaml and
// coredns.yaml hostPath volumes and runtimecfg arguments), which bootkube.sh provides: the
// loopback admin kubeconfig it copies to /etc/kubernetes/kubeconfig (`cp auth/kubeconfig-loopback
// /etc/kubernetes/kubeconfig`) and the install-config ConfigMap at
// /opt/openshift/manifests/cluster-config.yaml (the installer's manifests/cluster-config.yaml).
const (
	vipBootstrapKubeconfig    = "/etc/kubernetes/kubeconfig"
	vipBootstrapClusterConfig = "cluster-config.yaml" // in ignition.BootstrapManifestDir
)

// vipInCluster reports whether the step's target declares network.loadBalancer and it is
// in-cluster.
func vipInCluster(s *engine.Step) (bool, error) {
	if !slices.Contains(s.Target().Reads, lab.NetworkLoadBalancer) {
		return false, nil
	}
	lb, err := s.String(lab.NetworkLoadBalancer)
	return lb == lab.LoadBalancerInCluster, err
}
