// Package haproxy renders the lab's host load balancer configuration (haproxy.cfg): TCP
// frontends for the API (6443), the machine-config server (22623), ingress HTTP (80) and HTTPS
// (443), and an HTTP stats page.
//
// It follows openshift-the-hard-way stage 02 setup-haproxy.sh (../shared/spec/stages.md §2.6)
// with these corrections: backends are IP addresses (haproxy resolves names once at start, so a
// name that does not resolve yet fails the start); the API backends are health-checked with
// `GET /readyz` over TLS (check-ssl) — the plain HTTP check that stage 02 removed failed because
// it spoke HTTP to a TLS port; the stray `http-check expect` on the ingress backend is gone;
// frontends bind the VIPs, not every host address; and there is no chroot/user/daemon, because
// labbuild runs haproxy itself in the foreground of its own supervisor, per cluster. The
// bootstrap node is listed in the API and MCS backends until the pivot (PostPivot drops it).
//
// Pure: values in, bytes out.
package haproxy

import (
	"fmt"
	"strconv"
	"strings"
)

// Server is one backend machine: its haproxy server name (the node name) and IPv4 address.
type Server struct {
	Name string
	IP   string
}

// Ports are the frontend and backend TCP ports. The lab uses DefaultPorts; tests move them to
// free loopback ports.
type Ports struct {
	API, MCS, HTTP, HTTPS int
}

// DefaultPorts are OpenShift's: kube-apiserver 6443, machine-config-server 22623, router 80/443.
var DefaultPorts = Ports{API: 6443, MCS: 22623, HTTP: 80, HTTPS: 443}

// Spec is one cluster's load balancer.
type Spec struct {
	// APIVIP is the address the API and MCS frontends bind; IngressVIP the one the ingress
	// frontends bind. The stats page binds APIVIP too.
	APIVIP, IngressVIP string
	// StatsPort is the HTTP stats page's port (haproxy.statsPort, 9000); the page is /stats.
	StatsPort int
	// Bootstrap is the bootstrap node; nil after the pivot.
	Bootstrap *Server
	// Masters serve the API and MCS; Workers the ingress routers. With no workers (a compact
	// cluster) the routers run on the masters, so ingress goes to the masters.
	Masters, Workers []Server
	// FrontendPorts are the ports bound on the VIPs, BackendPorts the ports of the servers.
	// Zero values mean DefaultPorts.
	FrontendPorts, BackendPorts Ports
	// CheckInterval is the health-check interval in milliseconds; 0 means haproxy's 2000.
	CheckIntervalMs int
}

// Config returns the haproxy.cfg of s, or an error naming a bad port.
func Config(s Spec) ([]byte, error) {
	if s.FrontendPorts == (Ports{}) {
		s.FrontendPorts = DefaultPorts
	}
	if s.BackendPorts == (Ports{}) {
		s.BackendPorts = DefaultPorts
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# haproxy.cfg written by labbuild (target haproxy/config); do not edit: labbuild rewrites it.")
	w("global")
	w("  maxconn 4000")
	w("")
	w("defaults")
	w("  mode tcp")
	w("  log global")
	w("  option tcplog")
	w("  option dontlognull")
	w("  option redispatch")
	w("  retries 3")
	w("  timeout queue 1m")
	w("  timeout connect 10s")
	w("  timeout client 1m")
	w("  timeout server 1m")
	w("  timeout check 10s")
	w("  maxconn 3000")
	w("")
	w("listen stats")
	w("  bind %s:%d", s.APIVIP, s.StatsPort)
	w("  mode http")
	w("  stats enable")
	w("  stats uri /stats")
	w("  stats refresh 10s")
	w("")
	inter := ""
	if s.CheckIntervalMs > 0 {
		inter = " inter " + strconv.Itoa(s.CheckIntervalMs) + "ms"
	}
	cp := s.Masters
	if s.Bootstrap != nil {
		cp = append([]Server{*s.Bootstrap}, s.Masters...)
	}
	ingress := s.Workers
	if len(ingress) == 0 {
		ingress = s.Masters
	}
	// The API check: kube-apiserver answers /readyz only when it serves (etcd reachable,
	// post-start hooks done); anonymous access to /readyz is allowed by the system:public-info-viewer
	// role. TLS is checked without verification: haproxy checks liveness, not identity.
	section(w, "kubernetes-api", s.APIVIP, s.FrontendPorts.API, cp, s.BackendPorts.API,
		[]string{"option httpchk GET /readyz", "http-check expect status 200"}, " check check-ssl verify none"+inter)
	// The machine-config server speaks TLS on 22623; a TCP connect is its check.
	section(w, "machine-config-server", s.APIVIP, s.FrontendPorts.MCS, cp, s.BackendPorts.MCS, nil, " check"+inter)
	section(w, "ingress-http", s.IngressVIP, s.FrontendPorts.HTTP, ingress, s.BackendPorts.HTTP, nil, " check"+inter)
	section(w, "ingress-https", s.IngressVIP, s.FrontendPorts.HTTPS, ingress, s.BackendPorts.HTTPS, nil, " check"+inter)
	return []byte(b.String()), nil
}

func section(w func(string, ...any), name, bind string, port int, servers []Server, bport int, opts []string, check string) {
	w("frontend %s", name)
	w("  bind %s:%d", bind, port)
	w("  default_backend %s-backend", name)
	w("")
	w("backend %s-backend", name)
	w("  balance roundrobin")
	for _, o := range opts {
		w("  %s", o)
	}
	for _, sv := range servers {
		w("  server %s %s:%d%s", sv.Name, sv.IP, bport, check)
	}
	w("")
}

// PostPivot returns s without the bootstrap node: the configuration after the pivot.
func PostPivot(s Spec) Spec {
	s.Bootstrap = nil
	return s
}

// validate checks the ports, which tests move to free loopback ports. Every other value
// comes from the validated lab config (package lab checks the VIPs, the stats port, the
// nodes' names and addresses, that there is a master) and is trusted.
func (s Spec) validate() error {
	for _, p := range []Ports{s.FrontendPorts, s.BackendPorts} {
		for _, v := range []int{p.API, p.MCS, p.HTTP, p.HTTPS} {
			if v <= 0 || v > 65535 {
				return fmt.Errorf("port %d: want 1-65535", v)
			}
		}
	}
	return nil
}
