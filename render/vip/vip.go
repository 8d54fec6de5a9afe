// Package vip renders the in-cluster VIP assets of the lab's bare-metal networking mode
// (network.loadBalancer: in-cluster; seed 002, docs/in-cluster-vips.md) for the bootstrap node,
// and renders, as baremetal-runtimecfg does on a node at boot, the second-stage templates
// (keepalived.conf.tmpl, Corefile.tmpl) of both the bootstrap and the MCO's on-prem assets.
//
// Sources followed (read, not copied):
//   - openshift/installer data/data/bootstrap/baremetal/: README.md (keepalived on the bootstrap
//     owns the API VIP first, with a higher VRRP priority than the masters; coredns answers
//     api-int), files/etc/keepalived/keepalived.conf.tmpl, files/usr/local/bin/keepalived.sh
//     (config rendered at boot from a template), systemd/units/keepalived.service,
//     files/etc/coredns/Corefile, files/usr/local/bin/coredns.sh, files/usr/local/bin/fletcher8
//     (the VRRP router ids);
//   - openshift/machine-config-operator manifests/on-prem/ (keepalived.yaml, keepalived.conf.tmpl,
//     coredns.yaml, coredns-corefile.tmpl), the 4.18 form of those assets that bootkube.sh copies
//     to the bootstrap's /etc/kubernetes/manifests: a keepalived static pod whose monitor
//     (runtimecfg dynkeepalived, IS_BOOTSTRAP=yes, ENABLE_UNICAST=yes) renders
//     /etc/keepalived/keepalived.conf from the template at boot; priority 70 and nopreempt,
//     above the masters' 40 plus their check weights (20+5+3 = 68), so the VIP leaves the
//     bootstrap only when it stops.
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

// Node paths of the bootstrap VIP assets.
const (
	StaticPodDir     = "/etc/kubernetes/manifests"
	ResourceDir      = "/etc/kubernetes/static-pod-resources"
	KeepalivedPod    = "keepalived.yaml"
	CorednsPod       = "coredns.yaml"
	KeepalivedTmpl   = "keepalived/keepalived.conf.tmpl" // under ResourceDir
	CorefileTmpl     = "coredns/Corefile.tmpl"           // under ResourceDir
	KeepalivedConfig = "/etc/keepalived/keepalived.conf"
)

// Bootstrap is what the bootstrap's VIP assets are made of.
type Bootstrap struct {
	// APIVIP and IngressVIP are IPv4 addresses inside MachineNetwork (a CIDR).
	APIVIP, IngressVIP, MachineNetwork string
	// KeepalivedImage, RuntimeCfgImage and CorednsImage are digest pull specs of the payload
	// tags keepalived-ipfailover, baremetal-runtimecfg and coredns.
	KeepalivedImage, RuntimeCfgImage, CorednsImage string
	// Kubeconfig is the node path of a kubeconfig for the local API (runtimecfg reads the
	// API's endpoints, the masters, from it: the unicast peers).
	Kubeconfig string
	// ClusterConfig is the node path of the kube-system/cluster-config-v1 manifest (runtimecfg
	// takes the cluster name and domain from its install-config).
	ClusterConfig string
}

// File is one bootstrap file: Path is relative to StaticPodDir ("keepalived.yaml") for static
// pods and to ResourceDir ("keepalived/keepalived.conf.tmpl") for resources.
type File struct {
	Path      string
	StaticPod bool
	Data      []byte
}

func (b Bootstrap) check() error {
	pfx, err := netip.ParsePrefix(b.MachineNetwork)
	if err != nil || !pfx.Addr().Is4() {
		return fmt.Errorf("vip: machine network %q is not an IPv4 CIDR", b.MachineNetwork)
	}
	for what, v := range map[string]string{"API VIP": b.APIVIP, "ingress VIP": b.IngressVIP} {
		a, err := netip.ParseAddr(v)
		if err != nil || !pfx.Contains(a) {
			return fmt.Errorf("vip: %s %q is not an address inside %s", what, v, pfx)
		}
	}
	for what, v := range map[string]string{"keepalived image": b.KeepalivedImage, "baremetal-runtimecfg image": b.RuntimeCfgImage,
		"coredns image": b.CorednsImage, "kubeconfig path": b.Kubeconfig, "cluster-config path": b.ClusterConfig} {
		if v == "" {
			return fmt.Errorf("vip: empty %s", what)
		}
	}
	return nil
}

// BootstrapFiles returns the bootstrap's VIP assets: the keepalived and coredns static pods and
// their second-stage templates, which the pods' runtimecfg containers render at boot.
func BootstrapFiles(b Bootstrap) ([]File, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	var out []File
	for _, f := range []struct {
		path   string
		pod    bool
		tmpl   string
		escape bool
	}{
		{KeepalivedPod, true, keepalivedPodTmpl, false},
		{CorednsPod, true, corednsPodTmpl, false},
		{KeepalivedTmpl, false, BootstrapKeepalivedTemplate, true},
		{CorefileTmpl, false, BootstrapCorefileTemplate, true},
	} {
		var data []byte
		if f.escape {
			data = []byte(f.tmpl) // second stage: runtimecfg renders it on the node
		} else {
			t, err := template.New(f.path).Option("missingkey=error").Parse(f.tmpl)
			if err != nil {
				return nil, err
			}
			var buf bytes.Buffer
			if err := t.Execute(&buf, b); err != nil {
				return nil, fmt.Errorf("vip: %s: %w", f.path, err)
			}
			data = buf.Bytes()
		}
		out = append(out, File{Path: f.path, StaticPod: f.pod, Data: data})
	}
	return out, nil
}

// keepalivedPodTmpl is the bootstrap keepalived static pod (MCO manifests/on-prem/keepalived.yaml
// in shape): keepalived from the payload's keepalived-ipfailover image, started once the
// monitor has written the configuration, and the runtimecfg monitor that renders it from the
// template with the API's current backends as unicast peers, every 5 s.
const keepalivedPodTmpl = `apiVersion: v1
kind: Pod
metadata:
  name: keepalived
  namespace: openshift-kni-infra
  labels:
    app: kni-infra-vrrp
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  tolerations:
  - operator: Exists
  volumes:
  - name: resource-dir
    hostPath: {path: /etc/kubernetes/static-pod-resources/keepalived}
  - name: kubeconfig
    hostPath: {path: {{.Kubeconfig}}}
  - name: conf-dir
    hostPath: {path: /etc/keepalived}
  - name: manifests
    hostPath: {path: /opt/openshift/manifests}
  - name: run-dir
    emptyDir: {}
  containers:
  - name: keepalived
    image: {{.KeepalivedImage}}
    securityContext: {privileged: true}
    command:
    - /bin/bash
    - -c
    - |
      # Wait for the monitor's first render, then run keepalived in the foreground; the
      # monitor reloads it (SIGHUP) when the rendered configuration changes.
      until [ -s /etc/keepalived/keepalived.conf ]; do sleep 1; done
      exec /usr/sbin/keepalived -f /etc/keepalived/keepalived.conf --dont-fork --vrrp --log-detail --log-console
    volumeMounts:
    - {name: conf-dir, mountPath: /etc/keepalived}
    - {name: run-dir, mountPath: /var/run/keepalived}
    resources:
      requests: {cpu: 100m, memory: 200Mi}
  - name: keepalived-monitor
    image: {{.RuntimeCfgImage}}
    env:
    - {name: ENABLE_UNICAST, value: "yes"}
    - {name: IS_BOOTSTRAP, value: "yes"}
    command:
    - dynkeepalived
    - /etc/kubernetes/kubeconfig
    - /config/keepalived.conf.tmpl
    - /etc/keepalived/keepalived.conf
    - --api-vips
    - "{{.APIVIP}}"
    - --ingress-vips
    - "{{.IngressVIP}}"
    - --cluster-config
    - "{{.ClusterConfig}}"
    - --check-interval
    - 5s
    volumeMounts:
    - {name: resource-dir, mountPath: /config}
    - {name: kubeconfig, mountPath: /etc/kubernetes/kubeconfig}
    - {name: conf-dir, mountPath: /etc/keepalived}
    - {name: run-dir, mountPath: /var/run/keepalived}
    - {name: manifests, mountPath: /opt/openshift/manifests}
    resources:
      requests: {cpu: 100m, memory: 200Mi}
`

// corednsPodTmpl is the bootstrap coredns static pod (MCO manifests/on-prem/coredns.yaml in
// shape): runtimecfg renders the Corefile at boot, coredns answers api-int, api and *.apps with
// the VIPs and forwards the rest.
const corednsPodTmpl = `apiVersion: v1
kind: Pod
metadata:
  name: coredns
  namespace: openshift-kni-infra
  labels:
    app: kni-infra-coredns
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  tolerations:
  - operator: Exists
  volumes:
  - name: resource-dir
    hostPath: {path: /etc/kubernetes/static-pod-resources/coredns}
  - name: kubeconfig
    hostPath: {path: {{.Kubeconfig}}}
  - name: conf-dir
    emptyDir: {}
  - name: manifests
    hostPath: {path: /opt/openshift/manifests}
  initContainers:
  - name: render-config
    image: {{.RuntimeCfgImage}}
    command:
    - runtimecfg
    - render
    - /etc/kubernetes/kubeconfig
    - --api-vips
    - "{{.APIVIP}}"
    - --ingress-vips
    - "{{.IngressVIP}}"
    - /config
    - --out-dir
    - /etc/coredns
    - --cluster-config
    - "{{.ClusterConfig}}"
    volumeMounts:
    - {name: kubeconfig, mountPath: /etc/kubernetes/kubeconfig}
    - {name: resource-dir, mountPath: /config}
    - {name: conf-dir, mountPath: /etc/coredns}
    - {name: manifests, mountPath: /opt/openshift/manifests}
  containers:
  - name: coredns
    image: {{.CorednsImage}}
    securityContext: {privileged: true}
    args: [--conf, /etc/coredns/Corefile]
    volumeMounts:
    - {name: conf-dir, mountPath: /etc/coredns}
    livenessProbe:
      httpGet: {path: /health, port: 18080, scheme: HTTP}
      initialDelaySeconds: 60
    resources:
      requests: {cpu: 100m, memory: 200Mi}
`

// BootstrapKeepalivedTemplate is the bootstrap's keepalived.conf.tmpl, in runtimecfg's template
// language: one API instance at priority 70 with nopreempt (above any master, whose highest is
// 40+20+5+3), unicast to the API's backends. The ingress VIP is not held by the bootstrap
// (no router runs there), as in the MCO's bootstrap template.
const BootstrapKeepalivedTemplate = `# keepalived on the bootstrap node (labbuild, in-cluster VIPs): rendered at boot by runtimecfg.
vrrp_instance {{.Cluster.Name}}_API {
    state BACKUP
    interface {{.VRRPInterface}}
    virtual_router_id {{.Cluster.APIVirtualRouterID}}
    priority 70
    advert_int 1
    nopreempt
    {{- if .EnableUnicast}}
    unicast_src_ip {{.NonVirtualIP}}
    unicast_peer {
        {{- range .LBConfig.Backends}}
        {{- if ne $.NonVirtualIP .Address}}
        {{.Address}}
        {{- end}}
        {{- end}}
    }
    {{- end}}
    authentication {
        auth_type PASS
        auth_pass {{.Cluster.Name}}_api_vip
    }
    virtual_ipaddress {
        {{.Cluster.APIVIP}}/{{.Cluster.VIPNetmask}}
    }
}
`

// BootstrapCorefileTemplate is the bootstrap's Corefile.tmpl (runtimecfg's language): api-int
// and api answer the API VIP, *.apps the ingress VIP, everything else is forwarded upstream.
const BootstrapCorefileTemplate = `. {
    errors
    health :18080
    forward .{{range .DNSUpstreams}} {{.}}{{end}} {
        policy sequential
    }
    cache 30
    reload
    template IN A {{.Cluster.Domain}} {
        match ^api-int.{{.Cluster.Domain}}
        answer "{{"{{ .Name }}"}} 60 in a {{.Cluster.APIVIP}}"
        fallthrough
    }
    template IN A {{.Cluster.Domain}} {
        match ^api.{{.Cluster.Domain}}
        answer "{{"{{ .Name }}"}} 60 in a {{.Cluster.APIVIP}}"
        fallthrough
    }
    template IN A {{.Cluster.Domain}} {
        match .*.apps.{{.Cluster.Domain}}
        answer "{{"{{ .Name }}"}} 60 in a {{.Cluster.IngressVIP}}"
        fallthrough
    }
}
`

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
