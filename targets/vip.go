package targets

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/kube"
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

// vipModeReads is what a cluster target that waits differently in the in-cluster mode reads:
// network.loadBalancer there, nothing in the host mode (whose targets keep their keys).
func vipModeReads(c *lab.Config) []string {
	if c.InCluster() {
		return []string{lab.NetworkLoadBalancer}
	}
	return nil
}

// vipInCluster reports whether the step's target declares network.loadBalancer and it is
// in-cluster.
func vipInCluster(s *engine.Step) (bool, error) {
	if !slices.Contains(s.Target().Reads, lab.NetworkLoadBalancer) {
		return false, nil
	}
	lb, err := s.String(lab.NetworkLoadBalancer)
	return lb == lab.LoadBalancerInCluster, err
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

// vipBootkubePlatforms are the platform folders bootkube.sh copies, in its order.
var vipBootkubePlatforms = []string{"baremetal", "openstack", "ovirt", "vsphere", "kubevirt"}

// vipBootkubePlace maps an output of mco/operator-bootstrap to its place in manifests/bootstrap's
// tree as copy_static_resources_for does: <platform>/manifests/<file> → static-pods/<file> (only
// files directly in manifests/: `cp .../manifests/*`), <platform>/static-pod-resources/<path> →
// resources/<path> (`cp --recursive`). ok is false for every other output.
func vipBootkubePlace(rel string) (dst string, ok bool) {
	platform, rest, found := strings.Cut(rel, "/")
	if !found || !slices.Contains(vipBootkubePlatforms, platform) {
		return "", false
	}
	if f, ok := strings.CutPrefix(rest, "manifests/"); ok && f != "" && !strings.Contains(f, "/") {
		return "static-pods/" + f, true
	}
	if r, ok := strings.CutPrefix(rest, "static-pod-resources/"); ok && r != "" {
		return "resources/" + r, true
	}
	return "", false
}

// Node paths the MCO's bootstrap on-prem pods read (manifests/on-prem/keepalived.yaml and
// coredns.yaml hostPath volumes and runtimecfg arguments), which bootkube.sh provides: the
// loopback admin kubeconfig it copies to /etc/kubernetes/kubeconfig (`cp auth/kubeconfig-loopback
// /etc/kubernetes/kubeconfig`) and the install-config ConfigMap at
// /opt/openshift/manifests/cluster-config.yaml (the installer's manifests/cluster-config.yaml).
const (
	vipBootstrapKubeconfig    = "/etc/kubernetes/kubeconfig"
	vipBootstrapClusterConfig = "cluster-config.yaml" // in ignition.BootstrapManifestDir
)

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

// vipKeepalivedStateRE matches keepalived's state-change log line for an API VRRP instance,
// "(<cluster>_API_<i>) Entering BACKUP STATE (init)" or "… Entering MASTER STATE" (keepalived 2.x
// vrrp/vrrp.c; the instances are `vrrp_instance <cluster name>_API_<i>`, one per API VIP, in the
// MCO's templates/master/00-master/on-prem/files/keepalived-keepalived.yaml). The keepalived
// container runs keepalived with --log-console, so the line is in the container's log.
// Compiled on first use, not at every process start (docs/performance.md, issue 18).
var vipKeepalivedStateRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\((\S+_API_\d+)\) Entering (BACKUP|MASTER|FAULT) STATE`)
})

// vipKeepalivedState returns the state the API VRRP instances of a keepalived container log are
// in: "BACKUP" or "MASTER" when every API instance's last state is one of them (MASTER if any
// is), the first other state ("FAULT") otherwise, or "" when keepalived has not run an API
// instance: its keepalived-monitor has not written keepalived.conf yet (the container starts
// keepalived only once that file is non-empty, MCO templates/common/on-prem/files/keepalived.yaml).
func vipKeepalivedState(log []byte) string {
	last := map[string]string{}
	var order []string
	for _, line := range strings.Split(string(log), "\n") {
		if m := vipKeepalivedStateRE().FindStringSubmatch(line); m != nil {
			if _, seen := last[m[1]]; !seen {
				order = append(order, m[1])
			}
			last[m[1]] = m[2]
		}
	}
	state := ""
	for _, inst := range order {
		switch st := last[inst]; {
		case st != "BACKUP" && st != "MASTER":
			return st
		case st == "MASTER" || state == "":
			state = st
		}
	}
	return state
}

// vipMastersKeepalived reports whether every master's keepalived runs the API VRRP instance in
// BACKUP or MASTER state, read from the log of container keepalived of its mirror pod
// keepalived-<node> (GET pods/log through the kubelet, as `oc logs` reads it). Until then a
// master cannot take the VIP: its keepalived-monitor writes keepalived.conf only from the API
// (baremetal-runtimecfg release-4.18 pkg/monitor/dynkeepalived.go KeepalivedWatch: the unicast
// peers come from GetIngressConfig over the node's kubeconfig, api-int, which is the VIP, with no
// fall back to localhost), so if the bootstrap gave up the VIP first no master would ever be
// configured. status says which masters are not ready and why.
func vipMastersKeepalived(ctx context.Context, rest *kube.RESTClient, masters []string) (bool, string) {
	var waiting []string
	states := map[string]int{}
	for _, m := range masters {
		b, err := rest.Do(ctx, http.MethodGet, "/api/v1/namespaces/"+vipInfraNamespace+"/pods/keepalived-"+m+"/log",
			url.Values{"container": {"keepalived"}, "tailLines": {"2000"}}, "", nil)
		if err != nil {
			waiting = append(waiting, fmt.Sprintf("%s (log: %v)", m, err))
			continue
		}
		switch st := vipKeepalivedState(b); st {
		case "BACKUP", "MASTER":
			states[st]++
		case "":
			waiting = append(waiting, m+" (keepalived not started: no keepalived.conf yet)")
		default:
			waiting = append(waiting, m+" (API instance in "+st+" state)")
		}
	}
	if len(waiting) > 0 {
		return false, "masters' keepalived not running the API VRRP instance: " + strings.Join(waiting, "; ")
	}
	return true, fmt.Sprintf("keepalived runs the API VRRP instance on %d masters (%d BACKUP, %d MASTER)", len(masters), states["BACKUP"], states["MASTER"])
}
