package targets

// The cluster family's side of the in-cluster VIP mode (shared_vip.go,
// docs/in-cluster-vips.md): which targets wait differently, and how cluster/etcd and
// cluster/pivot see that the masters' keepalived and haproxy static pods can hold the VIPs.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/kube"
)

// vipModeReads is what a cluster target that waits differently in the in-cluster mode reads:
// network.loadBalancer there, nothing in the host mode (whose targets keep their keys).
func vipModeReads(c *lab.Config) []string {
	if c.InCluster() {
		return []string{lab.NetworkLoadBalancer}
	}
	return nil
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
