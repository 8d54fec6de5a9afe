package targets

// cluster/etcd: the cluster-etcd-operator's etcd on every master, and the bootstrap member's
// removal read from etcd's member list (cluster.go declares the targets).

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/wait"
)

// clusterEtcd is cluster/etcd's Run: wait until openshift-install would report bootstrap
// complete (bootstrapCompleteGate: cluster-bootstrap's required pods and HA pollers, etcd,
// wait_for_ha_api) and, in the in-cluster mode, until every master's keepalived
// runs the API VRRP instance (vipMastersKeepalived), then mark it so the operator removes the
// etcd-bootstrap member.
func clusterEtcd(ctx context.Context, s *engine.Step, masters []string, bootstrap string) error {
	timeout, err := clusterMinutes(s, lab.WaitEtcdMinutes)
	if err != nil {
		return err
	}
	k, err := clusterClients(s)
	if err != nil {
		return err
	}
	want, err := clusterNodeNames(s, masters)
	if err != nil {
		return err
	}
	slices.Sort(want)
	var gate string
	var selfHostedSince time.Time // when cluster-bootstrap's conditions first held (zero: not yet)
	if _, err := clusterWait(ctx, s, wait.Spec{
		What: fmt.Sprintf("the masters' control plane and the CVO running, etcd on %d masters and the API served beside the bootstrap's "+
			"(what cluster-bootstrap and openshift-install wait for before bootstrap complete)", len(want)),
		Inspect: "oc get pods -A -o wide | grep -E 'kube-apiserver|kube-scheduler|kube-controller-manager|cluster-version-operator'; " +
			"oc get kubeapiserver,kubescheduler,kubecontrollermanager cluster -o jsonpath='{.items[*].status.nodeStatuses}'; " +
			"oc get pods -n openshift-etcd -l app=etcd -o wide; oc get co etcd; oc get endpoints -n default kubernetes; oc get infrastructure cluster -o jsonpath='{.status.controlPlaneTopology}'",
		Timeout:  timeout,
		Interval: clusterPollNodes,
	}, func(ctx context.Context) (bool, string, error) {
		g := bootstrapGate{masters: len(want)}
		var err error
		if g.podsNotReady, err = kube.PodsNotReady(ctx, k.Dynamic, kube.RequiredPods, want); err != nil {
			return false, "listing the required pods", err
		}
		if len(want) > 1 { // cluster-bootstrap's isSingleNodeControlPlane skips the HA pollers
			for _, gvr := range kube.StaticPodOperators {
				n, st, err := kube.NodesAtRevision(ctx, k.Dynamic, gvr)
				if err != nil {
					return false, "reading " + gvr.Resource + "/cluster", err
				}
				g.atRevision = append(g.atRevision, n)
				g.revisionStatus = append(g.revisionStatus, st)
			}
		}
		if g.selfHosted() {
			if selfHostedSince.IsZero() {
				selfHostedSince = clusterEnv.clock.Now()
			}
			g.selfHostedFor = clusterEnv.clock.Now().Sub(selfHostedSince)
		}
		on, err := kube.EtcdOn(ctx, k.Dynamic, want)
		if err != nil {
			return false, "listing etcd pods", err
		}
		g.etcdOn = len(on)
		if g.topology, err = kube.ControlPlaneTopology(ctx, k.Dynamic); err != nil {
			return false, "reading the control-plane topology", err
		}
		if g.apiAddrs, err = kube.APIAddresses(ctx, k.Dynamic); err != nil {
			return false, "reading the API endpoints", err
		}
		ok, st := bootstrapCompleteGate(g)
		gate = st
		return ok, st, nil
	}); err != nil {
		return err
	}
	inCluster, err := vipInCluster(s)
	if err != nil {
		return err
	}
	if inCluster {
		// labbuild's own step, not openshift-install's: on a real install bootstrap-complete comes
		// minutes after the masters' keepalived is configured, but nothing orders the two. If the
		// bootstrap's keepalived stops (its API gone with etcd-bootstrap) before a master's
		// keepalived-monitor has read its peers through the VIP, no master ever takes the VIP.
		if _, err := clusterWait(ctx, s, wait.Spec{
			What:     "every master's keepalived running the API VRRP instance (it can take the VIP once the bootstrap's API goes)",
			Inspect:  "oc logs -n " + vipInfraNamespace + " keepalived-<master> -c keepalived; oc logs -n " + vipInfraNamespace + " keepalived-<master> -c keepalived-monitor",
			Timeout:  timeout,
			Interval: clusterPollNodes,
		}, func(ctx context.Context) (bool, string, error) {
			ok, st := vipMastersKeepalived(ctx, k.REST, want)
			return ok, st, nil
		}); err != nil {
			return err
		}
	}
	if err := kube.MarkBootstrapComplete(ctx, k.Dynamic); err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	s.Logf("%s", gate)
	s.Logf("created ConfigMap kube-system/bootstrap status=complete: the cluster-etcd-operator now removes the etcd-bootstrap member")
	// The pivot stops the bootstrap VM: while it is still an etcd member, that would take a
	// voting member away from a 2- or 4-member cluster (quorum lost with one more failure),
	// so wait for the operator's bootstrap teardown to remove it first.
	if clusterEnv.etcdMembers == nil {
		s.Logf("no etcd client in this build: not waiting for the etcd-bootstrap member to leave")
		return clusterRecord(s, map[string]any{"etcdOn": want, "bootstrapComplete": true})
	}
	if _, err := clusterWait(ctx, s, wait.Spec{
		What:     "the bootstrap to leave etcd's member list",
		Inspect:  "oc rsh -n openshift-etcd <etcd pod> etcdctl member list -w table; oc get etcd cluster -o yaml",
		Timeout:  timeout,
		Interval: clusterPollAPI,
	}, func(ctx context.Context) (bool, string, error) {
		in, members, err := etcdBootstrapMember(ctx, s, masters, bootstrap)
		if err != nil {
			return false, "listing etcd members", err
		}
		st := fmt.Sprintf("etcd members: %s", strings.Join(members, ", "))
		return !in, st, nil
	}); err != nil {
		return err
	}
	s.Logf("the bootstrap is no longer an etcd member")
	return clusterRecord(s, map[string]any{"etcdOn": want, "bootstrapComplete": true, "bootstrapMemberRemoved": true})
}

// bootstrapMinimumTeardownDelay is cluster-bootstrap's minimumTeardownDelay (release-4.18
// pkg/start/start.go): with more than one master it waits at least this long after the
// self-hosted control plane is available, "to give load-balancers time to observe" it.
const bootstrapMinimumTeardownDelay = 30 * time.Second

// bootstrapGate is what cluster/etcd observed in one poll: the required pods not Running and
// Ready on a master, the static-pod operators' nodes at a revision (kube.StaticPodOperators
// order; empty with one master), how long cluster-bootstrap's conditions have held, etcd's
// Ready masters, the control-plane topology and the API's endpoint addresses.
type bootstrapGate struct {
	masters        int
	podsNotReady   []string
	atRevision     []int
	revisionStatus []string
	selfHostedFor  time.Duration
	etcdOn         int
	topology       string
	apiAddrs       []string
}

// selfHosted reports whether cluster-bootstrap's own waits hold: every required pod Running
// and Ready on a master and, with more than one master, each static-pod operator's revision on
// at least two nodes.
func (g bootstrapGate) selfHosted() bool {
	if len(g.podsNotReady) > 0 {
		return false
	}
	if g.masters > 1 {
		if len(g.atRevision) != len(kube.StaticPodOperators) {
			return false
		}
		for _, n := range g.atRevision {
			if n < 2 {
				return false
			}
		}
	}
	return true
}

// bootstrapCompleteGate decides when cluster/etcd may create kube-system/bootstrap, the
// signal after which the cluster-etcd-operator's BootstrapTeardownController removes the
// bootstrap's etcd member and the bootstrap kube-apiserver (which uses only localhost:2379)
// loses its storage. openshift-install's bootstrap creates it only after, in this order:
//
//  1. bootkube.sh's `cluster-bootstrap start --required-pods=$REQUIRED_PODS`
//     (cluster-bootstrap release-4.18 pkg/start/start.go startBootkube): every required pod
//     (kube.RequiredPods: the masters' kube-apiserver, kube-scheduler, kube-controller-manager
//     and the CVO) Running and Ready (waitUntilPodsRunning); unless the control plane is a single
//     node, kubeapiservers, kubeschedulers and kubecontrollermanagers "cluster" each with at
//     least two nodeStatuses at currentRevision >= 1
//     (waitForSelfHostedControlPlaneAvailabilityBeforeTearDown); then, with more than one
//     master, bootstrapMinimumTeardownDelay;
//  2. /opt/openshift/.bootkube.done, which bootkube.sh writes after its wait-for-ceo stage:
//     in labbuild's flow cluster/bootstrap has applied the manifests (a dependency), and the
//     cluster-etcd-operator's etcd is Ready on every master;
//  3. wait_for_ha_api (wait-for-ha-api.sh): when Infrastructure cluster's
//     status.controlPlaneTopology is HighlyAvailable, at least two addresses in the
//     default/kubernetes Endpoints, that is a kube-apiserver besides the bootstrap's; with any
//     other non-empty topology (SingleReplica) it does not wait; an empty one is an error the
//     script retries.
//
// Without 1, labbuild marked bootstrap complete as soon as etcd ran on the masters, and the
// bootstrap's API could go before any master ran a kube-apiserver, scheduler or controller
// manager of its own (issue 38 #3). It returns whether to mark, and a status line for the wait
// and the log.
func bootstrapCompleteGate(g bootstrapGate) (bool, string) {
	switch {
	case len(g.podsNotReady) > 0:
		return false, fmt.Sprintf("cluster-bootstrap --required-pods: no pod Running and Ready on a master for %s", strings.Join(g.podsNotReady, ", "))
	case !g.selfHosted():
		return false, "cluster-bootstrap waits for the self-hosted control plane on at least two masters:" + strings.Join(g.revisionStatus, ";")
	case g.masters > 1 && g.selfHostedFor < bootstrapMinimumTeardownDelay:
		return false, fmt.Sprintf("self-hosted control plane available for %v; cluster-bootstrap waits %v for load balancers to observe it", g.selfHostedFor.Round(time.Second), bootstrapMinimumTeardownDelay)
	case g.etcdOn < g.masters:
		return false, fmt.Sprintf("bootkube not done: etcd Ready on %d/%d masters (wait-for-ceo)", g.etcdOn, g.masters)
	case g.topology == "":
		return false, "Infrastructure cluster has no status.controlPlaneTopology yet"
	case g.topology == "HighlyAvailable" && len(g.apiAddrs) < 2:
		return false, fmt.Sprintf("HighlyAvailable control plane: default/kubernetes has %d address(es) %v, want at least 2 (wait_for_ha_api)", len(g.apiAddrs), g.apiAddrs)
	case g.topology == "HighlyAvailable":
		return true, fmt.Sprintf("bootstrap complete as openshift-install reports it: control plane and CVO running on the masters, etcd on %d/%d masters, API endpoints %v", g.etcdOn, g.masters, g.apiAddrs)
	}
	return true, fmt.Sprintf("bootstrap complete as openshift-install reports it: control plane and CVO running on the masters, etcd on %d/%d masters, %s control plane (no wait for a second API address)", g.etcdOn, g.masters, g.topology)
}

// etcdClientDeps are the PKI targets cluster/etcd reads to talk to etcd as its operator does
// (openshift-config/etcd-client, trusted through etcd-signer).
var etcdClientDeps = []string{"pki/ca/etcd-signer", "pki/cert/etcd-client", "pki/key/etcd-client"}

// EtcdTLSFiles are the PEM files of an etcd client: CA bundle, certificate and key.
type EtcdTLSFiles struct{ CA, Cert, Key string }

// EtcdMember is one entry of etcd's member list (etcdserverpb.Member, as the v3 JSON gateway
// returns it).
type EtcdMember struct {
	ID         string   `json:"ID"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
}

// etcdBootstrapMember lists etcd's members through the masters and reports whether one of them
// is the bootstrap: named etcd-bootstrap (as the installer's bootstrap etcd calls itself) or
// with a peer URL on the bootstrap's IP. members are the names, for the wait's status.
func etcdBootstrapMember(ctx context.Context, s *engine.Step, masters []string, bootstrap string) (in bool, members []string, err error) {
	if clusterEnv.etcdMembers == nil {
		return false, nil, errors.New("no etcd client")
	}
	var tf EtcdTLSFiles
	for i, p := range []*string{&tf.CA, &tf.Cert, &tf.Key} {
		dep, rel := etcdClientDeps[i], "tls.crt"
		if i == 2 {
			rel = "tls.key"
		}
		if *p, err = s.DepPath(dep, rel); err != nil {
			return false, nil, err
		}
	}
	var endpoints []string
	for _, m := range masters {
		ip, err := s.String(lab.NodePath(m, lab.NodeIP))
		if err != nil {
			return false, nil, err
		}
		endpoints = append(endpoints, "https://"+net.JoinHostPort(ip, "2379"))
	}
	bip, err := s.String(lab.NodePath(bootstrap, lab.NodeIP))
	if err != nil {
		return false, nil, err
	}
	ms, err := clusterEnv.etcdMembers(ctx, endpoints, tf)
	if err != nil {
		return false, nil, err
	}
	for _, m := range ms {
		members = append(members, m.Name)
		if m.Name == "etcd-bootstrap" {
			in = true
		}
		for _, u := range m.PeerURLs {
			if pu, err := url.Parse(u); err == nil && pu.Hostname() == bip {
				in = true
			}
		}
	}
	return in, members, nil
}

// etcdMemberList is the production etcdMembers: POST /v3/cluster/member/list on etcd's gRPC
// JSON gateway (on by default on the client port), over mutual TLS, trying each endpoint in
// turn until one answers.
func etcdMemberList(ctx context.Context, endpoints []string, tf EtcdTLSFiles) ([]EtcdMember, error) {
	cert, err := tls.LoadX509KeyPair(tf.Cert, tf.Key)
	if err != nil {
		return nil, fmt.Errorf("etcd client certificate: %w", err)
	}
	ca, err := os.ReadFile(tf.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
	var errs []error
	for _, ep := range endpoints {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(ep, "/")+"/v3/cluster/member/list", strings.NewReader("{}"))
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			errs = append(errs, fmt.Errorf("%s: %s %s%s", ep, resp.Status, bytes.TrimSpace(body[:min(len(body), 200)]), errText(err)))
			continue
		}
		var out struct {
			Members []EtcdMember `json:"members"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			errs = append(errs, fmt.Errorf("%s: member list: %w", ep, err))
			continue
		}
		return out.Members, nil
	}
	return nil, fmt.Errorf("no etcd endpoint answered: %w", errors.Join(errs...))
}
