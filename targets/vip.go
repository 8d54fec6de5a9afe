package targets

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/render/vip"
	"github.com/labbuild/labbuild/targets/kube"
)

// The in-cluster VIP mode (network.loadBalancer: in-cluster; docs/in-cluster-vips.md): the
// bare-metal networking of seed 002. Compared with the host mode:
//
//   - manifests/cluster/infrastructure and manifests/cluster/cluster-config-v1 write platform
//     BareMetal with the VIPs (render/manifests BareMetal), and so does mco/inputs, so the
//     MCO renders its on-prem templates (keepalived, haproxy, coredns static pods, the
//     resolv.conf prepender) into the master and worker configs;
//   - manifests/vip/bootstrap writes the bootstrap's keepalived and coredns static pods and
//     their boot-time templates (render/vip), which manifests/bootstrap collects and
//     ignition/bootstrap places;
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
var vipReads = []string{"network.loadBalancer", "network.apiVIP", "network.ingressVIP", "network.machineNetwork"}

// vipPlatformReads returns vipReads in the in-cluster mode and nothing otherwise.
func vipPlatformReads(c *Config) []string {
	if c.InCluster() {
		return slices.Clone(vipReads)
	}
	return nil
}

// addReads appends to reads the paths of extra it does not hold yet (a path declared twice is
// an error).
func addReads(reads []string, extra ...string) []string {
	for _, e := range extra {
		if !slices.Contains(reads, e) {
			reads = append(reads, e)
		}
	}
	return reads
}

// vipBareMetal returns the BareMetal platform of the lab when the target declares
// network.loadBalancer and it is in-cluster, and nil (platform None) otherwise.
func vipBareMetal(s *engine.Step) (*manifests.BareMetal, error) {
	if !slices.Contains(s.Target().Reads, "network.loadBalancer") {
		return nil, nil
	}
	lb, err := s.String("network.loadBalancer")
	if err != nil || lb != LoadBalancerInCluster {
		return nil, err
	}
	bm := &manifests.BareMetal{}
	for _, x := range []struct {
		p    string
		into *[]string
	}{{"network.apiVIP", &bm.APIVIPs}, {"network.ingressVIP", &bm.IngressVIPs}, {"network.machineNetwork", &bm.MachineNetworks}} {
		v, err := s.String(x.p)
		if err != nil {
			return nil, err
		}
		*x.into = []string{v}
	}
	return bm, nil
}

// vipBootstrapTarget is the name of the target writing the bootstrap's VIP assets.
const vipBootstrapTarget = "manifests/vip/bootstrap"

// vipTargets declares manifests/vip/bootstrap in the in-cluster mode. Outputs:
// static-pods/keepalived.yaml, static-pods/coredns.yaml (→ /etc/kubernetes/manifests) and
// resources/keepalived/keepalived.conf.tmpl, resources/coredns/Corefile.tmpl
// (→ /etc/kubernetes/static-pod-resources).
func vipTargets(c *Config) []*engine.Target {
	if !c.InCluster() {
		return nil
	}
	return []*engine.Target{{
		Name:    vipBootstrapTarget,
		Doc:     "bootstrap keepalived (API VIP, VRRP priority 70) and coredns (api-int) static pods with their boot-time templates (in-cluster VIPs)",
		Deps:    []string{"release/image/keepalived-ipfailover", "release/image/baremetal-runtimecfg", "release/image/coredns"},
		Reads:   []string{"network.apiVIP", "network.ingressVIP", "network.machineNetwork"},
		Version: 1,
		Run: func(ctx context.Context, s *engine.Step) error {
			b := vip.Bootstrap{
				Kubeconfig:    manifests.KubeconfigsDir + "/localhost.kubeconfig",
				ClusterConfig: manifests.ManifestsDir + "/" + manifests.OrderObjects + "-kube-system-configmap-cluster-config-v1.yaml",
			}
			var err error
			for _, x := range []struct {
				dep  string
				into *string
			}{{"release/image/keepalived-ipfailover", &b.KeepalivedImage}, {"release/image/baremetal-runtimecfg", &b.RuntimeCfgImage}, {"release/image/coredns", &b.CorednsImage}} {
				if *x.into, err = mfPullspec(s, x.dep); err != nil {
					return err
				}
			}
			if b.APIVIP, err = s.String("network.apiVIP"); err != nil {
				return err
			}
			if b.IngressVIP, err = s.String("network.ingressVIP"); err != nil {
				return err
			}
			if b.MachineNetwork, err = s.String("network.machineNetwork"); err != nil {
				return err
			}
			files, err := vip.BootstrapFiles(b)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Target().Name, err)
			}
			for _, f := range files {
				dir := "resources/"
				if f.StaticPod {
					dir = "static-pods/"
				}
				if err := s.WriteFile(dir+f.Path, f.Data, 0o644); err != nil {
					return err
				}
			}
			return nil
		},
	}}
}

// vipInfraNamespace is where the MCO's on-prem static pods run on platform BareMetal
// (openshift-<onPremPlatformShortName>-infra; "kni" for BareMetal, MCO
// pkg/controller/template/render.go).
const vipInfraNamespace = "openshift-kni-infra"

// vipMastersReady reports whether every master can take the API VIP: its keepalived and
// haproxy mirror pods (<pod>-<node name>) in openshift-kni-infra are Ready. The masters'
// keepalived then adds the haproxy check's weight to its priority (chk_ocp_lb), and is the
// highest bidder once the bootstrap (priority 70, nopreempt) stops. status says what is
// missing.
func vipMastersReady(pods []vipPod, masters []string) (bool, string) {
	ready := map[string]bool{}
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" && p.Status.Phase == "Running" {
				ready[p.Metadata.Name] = true
			}
		}
	}
	var missing []string
	for _, m := range masters {
		for _, pod := range []string{"keepalived", "haproxy"} {
			if !ready[pod+"-"+m] {
				missing = append(missing, pod+"-"+m)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		return false, "not Ready in " + vipInfraNamespace + ": " + strings.Join(missing, ", ")
	}
	return true, fmt.Sprintf("keepalived and haproxy Ready on %d masters", len(masters))
}

// vipPod is the part of a core/v1 Pod that vipMastersReady reads: metadata.name,
// status.phase ("Running") and status.conditions (PodCondition type "Ready", status "True").
// A local type, not k8s.io/api's, so this family links no typed API package (issue 18).
type vipPod struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

// vipListInfraPods lists the pods of openshift-kni-infra.
func vipListInfraPods(ctx context.Context, dyn kube.Interface) ([]vipPod, error) {
	return kube.List[vipPod](ctx, dyn, kube.Pods, vipInfraNamespace, "")
}
