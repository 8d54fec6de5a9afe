// Package vip renders, as baremetal-runtimecfg does on a node at boot, the second-stage
// templates (keepalived.conf.tmpl, Corefile.tmpl, keepalived check scripts) of the MCO's on-prem
// assets, for the lab's bare-metal networking mode (network.loadBalancer: in-cluster; seed 002,
// docs/in-cluster-vips.md). labbuild itself writes none of those assets: the masters' come from
// the MCO's templates/*/on-prem, the bootstrap's from the MCO bootstrap render's baremetal/
// output (MCO 4.18 manifests/on-prem/), placed as bootkube.sh places them. This package is the
// template step that tests and the runtimecfg stand-in run over them.
//
// Sources followed (read, not copied): openshift/baremetal-runtimecfg release-4.18 pkg/config
// (Node, Cluster, LBConfig: the template data), pkg/render (RenderFile), and the installer's
// files/usr/local/bin/fletcher8 (the VRRP router ids).
//
// It is pure: values in, bytes out.
package vip

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"text/template"
)

// KeepalivedConfig is the node path runtimecfg renders keepalived.conf to (the keepalived
// container reads it).
const KeepalivedConfig = "/etc/keepalived/keepalived.conf"

// FletcherChecksum8 is the VRRP virtual router id of s: Fletcher's 8-bit checksum, as the
// installer's files/usr/local/bin/fletcher8 and runtimecfg compute it, so two clusters on one
// network get different ids.
func FletcherChecksum8(s string) uint8 {
	var a, b uint8
	for i := 0; i < len(s); i++ {
		a = (a + s[i]) & 0xf
		b = (b + a) & 0xf
	}
	return b<<4 | a
}

// Cluster is runtimecfg's per-cluster template data (pkg/config Cluster): what the
// keepalived.conf and Corefile templates of the bootstrap and of the MCO's on-prem assets read.
type Cluster struct {
	Name, Domain                              string
	APIVIP, IngressVIP                        string
	APIVirtualRouterID                        uint8
	IngressVirtualRouterID                    uint8
	VIPNetmask                                int
	APIVIPRecordType, APIVIPEmptyType         string
	IngressVIPRecordType, IngressVIPEmptyType string
}

// Backend is one API backend (runtimecfg's LBConfig.Backends entry): a control-plane address.
type Backend struct {
	Host, Address string
	Port          int
}

// LBConfig holds the API backends and the ports of the masters' haproxy: ApiPort the
// kube-apiserver's (6443), LbPort haproxy's frontend (9445), StatPort its health endpoint
// (9444, /haproxy_ready, which the masters' keepalived check script polls).
type LBConfig struct {
	ApiPort, LbPort, StatPort int
	Backends                  []Backend
}

// IngressConfig holds the nodes that may hold the ingress VIP (with a router).
type IngressConfig struct {
	Peers []string
}

// Node is runtimecfg's template data for one node (pkg/config Node): the cluster, the node's
// own address (NonVirtualIP) and VRRP interface, unicast on or off, the API backends and
// ingress peers, the DNS upstreams and, for dual-stack, one Node per address family in Configs
// (one here: IPv4).
type Node struct {
	Cluster       Cluster
	NonVirtualIP  string
	VRRPInterface string
	EnableUnicast bool
	DNSUpstreams  []string
	LBConfig      LBConfig
	IngressConfig IngressConfig
	Configs       []Node
}

// NodeData is what runtimecfg computes on a node at boot, from the install-config (cluster
// name and domain), the VIPs, the interface that carries the machine network and the API's
// endpoints: the input of Render.
type NodeData struct {
	ClusterName, Domain    string
	APIVIP, IngressVIP     string
	MachineNetwork         string
	NodeIP, Interface      string
	Backends, IngressPeers []string
	DNSUpstreams           []string
	Unicast                bool
}

// NewNode builds the runtimecfg template data for d. The router ids are the Fletcher-8 sums of
// "<cluster>-api" and "<cluster>-ingress"; the VIP netmask is the machine network's prefix.
func NewNode(d NodeData) (Node, error) {
	pfx, err := netip.ParsePrefix(d.MachineNetwork)
	if err != nil {
		return Node{}, fmt.Errorf("vip: machine network %q: %w", d.MachineNetwork, err)
	}
	c := Cluster{Name: d.ClusterName, Domain: d.Domain, APIVIP: d.APIVIP, IngressVIP: d.IngressVIP,
		APIVirtualRouterID: FletcherChecksum8(d.ClusterName + "-api"), IngressVirtualRouterID: FletcherChecksum8(d.ClusterName + "-ingress"),
		VIPNetmask: pfx.Bits(), APIVIPRecordType: "A", APIVIPEmptyType: "AAAA", IngressVIPRecordType: "A", IngressVIPEmptyType: "AAAA"}
	n := Node{Cluster: c, NonVirtualIP: d.NodeIP, VRRPInterface: d.Interface, EnableUnicast: d.Unicast, DNSUpstreams: d.DNSUpstreams,
		IngressConfig: IngressConfig{Peers: d.IngressPeers}, LBConfig: LBConfig{ApiPort: 6443, LbPort: 9445, StatPort: 9444}}
	for _, b := range d.Backends {
		n.LBConfig.Backends = append(n.LBConfig.Backends, Backend{Host: b, Address: b, Port: 6443})
	}
	n.Configs = []Node{n}
	return n, nil
}

// Render renders a runtimecfg template (keepalived.conf.tmpl, Corefile.tmpl) for node n, as
// `runtimecfg render` and `dynkeepalived` do at boot. baremetal-runtimecfg itself is not served
// by the module proxy here; this is its template step over the same data shape.
func Render(tmpl []byte, n Node) ([]byte, error) {
	t, err := template.New("runtimecfg").Option("missingkey=error").Funcs(template.FuncMap{"join": strings.Join}).Parse(string(tmpl))
	if err != nil {
		return nil, fmt.Errorf("vip: parse template: %w", err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, n); err != nil {
		return nil, fmt.Errorf("vip: render: %w", err)
	}
	return b.Bytes(), nil
}
