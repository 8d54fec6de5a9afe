package main

// The haproxy pod's monitor and the keepalived pod's render init container, on the masters
// (MCO templates/master/00-master/on-prem/files/haproxy.yaml `monitor`,
// templates/common/on-prem/files/keepalived.yaml `runtimecfg render`).

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/labbuild/labbuild/render/vip"
)

// Constants of pkg/monitor/monitor.go (release-4.18).
const (
	haproxyMasterSock     = "/var/run/haproxy/haproxy-master.sock"
	cfgChangeThreshold    = 3
	k8sHealthThresholdOn  = 3
	k8sHealthThresholdOff = 11
	// localhostKubeAPIServer is pkg/config localhostKubeApiServerUrl: getSortedBackends' second
	// try when the kubeconfig's server (api-int, the VIP) does not answer.
	localhostKubeAPIServer = "https://localhost:6443"
	// iptablesMarker is pkg/monitor/dynkeepalived.go iptablesFilePath: the keepalived check
	// scripts (chk_ocp_script.sh) test it.
	iptablesMarker = "/var/run/keepalived/iptables-rule-exists"
)

// lbConfig is pkg/config ApiLBConfig, the haproxy.cfg.tmpl data under .LBConfig.
type lbConfig struct {
	ApiPort, LbPort, StatPort uint16
	Backends                  []backend
	FrontendAddr              string
}

// backend is pkg/config Backend: the master Node's name, its address, the API port.
type backend struct {
	Host, Address string
	Port          uint16
}

// runtimeConfig is pkg/monitor RuntimeConfig, what monitor renders haproxy.cfg.tmpl with.
type runtimeConfig struct{ LBConfig *lbConfig }

// runMonitor follows cmd/monitor/monitor.go and pkg/monitor/monitor.go Monitor: `monitor
// <kubeconfig> <haproxy.cfg.tmpl> <haproxy.cfg> --api-vips ...`. It dials the haproxy
// container's master socket first and fails when nothing listens (the container restarts it);
// every --check-interval it reads the LB config (GetLBConfig: the master Nodes through the
// kubeconfig, else through the local kube-apiserver) and, once a changed config has been seen
// cfgChangeThreshold times in a row, renders haproxy.cfg and, when its md5 changed, writes
// "reload" to the socket; it checks the API through haproxy (https://localhost:<lb-port>/readyz,
// IsKubernetesHealthy) with AlarmStabilization (3 on, 11 off) and, healthy, ensures the nat
// rules that send the API VIP's port to haproxy (ensureHAProxyFirewallRules, by running
// iptables as go-iptables does), else removes them.
func runMonitor(args []string) error {
	fs := pflag.NewFlagSet("monitor", pflag.ContinueOnError)
	apiPort := fs.Uint16("api-port", 6443, "Port where the OpenShift API listens")
	lbPort := fs.Uint16("lb-port", 9445, "Port where the API HAProxy LB will listen")
	statPort := fs.Uint16("stat-port", 29445, "Port where the HAProxy stats API will listen")
	interval := fs.Duration("check-interval", 6*time.Second, "Time between monitor checks")
	apiVIP := fs.IP("api-vip", nil, "DEPRECATED: Virtual IP Address to reach the OpenShift API")
	apiVIPs := fs.IPSlice("api-vips", nil, "Virtual IP Addresses to reach the OpenShift API")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 3 {
		return fmt.Errorf("usage: monitor path_to_kubeconfig path_to_haproxy_cfg_template path_to_config, got %q", fs.Args())
	}
	kubeconfig, tmpl, cfgPath := fs.Arg(0), fs.Arg(1), fs.Arg(2)
	if _, _, err := kubeconfigNameAndDomain(kubeconfig); err != nil {
		return err
	}
	vips := []string{}
	for _, v := range *apiVIPs {
		vips = append(vips, v.String())
	}
	if len(vips) == 0 && *apiVIP != nil {
		vips = []string{apiVIP.String()}
	}
	if len(vips) == 0 {
		return errors.New("no --api-vips")
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	conn, err := net.Dial("unix", haproxyMasterSock)
	if err != nil {
		return err
	}
	defer conn.Close()
	var applied, prev *lbConfig
	var healthy bool
	var healthCtr, cfgCtr uint8
	log.Print("API is not reachable through HAProxy")
	for {
		select {
		case <-signals:
			for _, v := range vips {
				cleanHAProxyFirewallRules(v, *apiPort, *lbPort)
			}
			return nil
		default:
		}
		cur, err := getLBConfig(kubeconfig, *apiPort, *lbPort, *statPort, vips[0])
		if err != nil {
			log.Printf("GetLBConfig failed (%v), sleep half of interval and retry", err)
			time.Sleep(*interval / 2)
			continue
		}
		if applied == nil || !reflect.DeepEqual(*applied, cur) {
			if prev == nil || reflect.DeepEqual(*prev, cur) {
				cfgCtr++
			} else {
				cfgCtr = 1
			}
			log.Printf("Config change detected (configChangeCtr %d): backends %v", cfgCtr, cur.Backends)
			if cfgCtr >= cfgChangeThreshold {
				prevMD5, errPrev := fileMD5(cfgPath)
				if err := renderFile(cfgPath, tmpl, runtimeConfig{LBConfig: &cur}); err != nil {
					return fmt.Errorf("failed to render HAProxy configuration: %w", err)
				}
				newMD5, errNew := fileMD5(cfgPath)
				if newMD5 == prevMD5 && errPrev == nil && errNew == nil {
					log.Print("Rendered cfg file equal to previous one, no need to reload")
				} else if _, err := conn.Write([]byte("reload\n")); err != nil {
					return fmt.Errorf("failed to write reload to HAProxy master socket %s: %w", haproxyMasterSock, err)
				} else {
					log.Printf("Apply config change: rendered %s, sent reload", cfgPath)
				}
				cfgCtr = 0
				c := cur
				applied = &c
			}
		} else {
			cfgCtr = 0
		}
		c := cur
		prev = &c
		up, _ := kubernetesHealthy(*lbPort)
		was := healthy
		healthy, healthCtr = alarmStabilization(healthy, up, healthCtr, k8sHealthThresholdOn, k8sHealthThresholdOff)
		if healthy {
			if !was {
				log.Print("API is reachable through HAProxy")
			}
			for _, v := range vips {
				if err := ensureHAProxyFirewallRules(v, *apiPort, *lbPort); err != nil {
					log.Printf("Failed to ensure HAProxy firewall rules to direct traffic to the LB: %v", err)
				}
			}
		} else {
			if was {
				log.Print("API is not reachable through HAProxy")
			}
			for _, v := range vips {
				cleanHAProxyFirewallRules(v, *apiPort, *lbPort)
			}
		}
		time.Sleep(*interval)
	}
}

// getLBConfig follows pkg/config GetLBConfig: the master Nodes through the kubeconfig's
// server, else through the local kube-apiserver, each Node's address in the subnet of the
// local interface that holds the VIP's network (getSortedBackends), sorted by address, with
// the API port.
func getLBConfig(kubeconfig string, apiPort, lbPort, statPort uint16, apiVIP string) (lbConfig, error) {
	c := lbConfig{ApiPort: apiPort, LbPort: lbPort, StatPort: statPort}
	if ip, err := netip.ParseAddr(apiVIP); err == nil && ip.Is6() {
		c.FrontendAddr = "::"
	}
	bs, err := sortedBackends(kubeconfig, "", apiVIP)
	if err != nil {
		log.Printf("An error occurred while trying to read master nodes details from api-vip:kube-apiserver: %v", err)
		if bs, err = sortedBackends(kubeconfig, localhostKubeAPIServer, apiVIP); err != nil {
			return c, err
		}
	}
	for i := range bs {
		bs[i].Port = apiPort
	}
	c.Backends = bs
	return c, nil
}

// sortedBackends follows getSortedBackends: the Nodes labelled node-role.kubernetes.io/master=,
// each with its InternalIP in the machine network (the local subnet holding the VIP).
func sortedBackends(kubeconfig, server, apiVIP string) ([]backend, error) {
	cfg, err := clientcmd.BuildConfigFromFlags(server, kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 10 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: masterSelector})
	if err != nil {
		return nil, err
	}
	_, pfx, err := vrrpConfig(apiVIP)
	if err != nil {
		return nil, err
	}
	var out []backend
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && pfx.Masked().Contains(ip) {
				out = append(out, backend{Host: n.Name, Address: a.Address})
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out, nil
}

// renderFile follows pkg/render RenderFile: the template parsed from its file, the output
// created with the template's mode.
func renderFile(out, tmplPath string, data any) error {
	t, err := template.ParseFiles(tmplPath)
	if err != nil {
		return err
	}
	st, err := os.Stat(tmplPath)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, data); err != nil {
		return err
	}
	if err := os.WriteFile(out, b.Bytes(), st.Mode().Perm()); err != nil {
		return err
	}
	return os.Chmod(out, st.Mode().Perm())
}

func fileMD5(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", md5.Sum(b)), nil
}

// kubernetesHealthy is pkg/utils IsKubernetesHealthy: /readyz through haproxy answers "ok".
func kubernetesHealthy(port uint16) (bool, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	resp, err := c.Get(fmt.Sprintf("https://localhost:%d/readyz", port))
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b) == "ok", err
}

// alarmStabilization is pkg/utils AlarmStabilization: the state flips after threshold
// consecutive readings of the other state (on: off→on, off: on→off).
func alarmStabilization(cur, reading bool, ctr, on, off uint8) (bool, uint8) {
	if cur == reading {
		return cur, 0
	}
	ctr++
	threshold := on
	if cur {
		threshold = off
	}
	if ctr >= threshold {
		return !cur, 0
	}
	return cur, ctr
}

// haproxyRuleSpec is pkg/monitor/iptables.go getHAProxyRuleSpec: traffic to the API VIP's API
// port, DNATed to the VIP's LB port (PREROUTING) or, from this node, redirected to it (OUTPUT).
func haproxyRuleSpec(apiVIP string, apiPort, lbPort uint16, loopback bool) []string {
	spec := []string{"--dst", apiVIP, "-p", "tcp", "--dport", strconv.Itoa(int(apiPort))}
	if loopback {
		return append(spec, "-o", "lo", "-j", "REDIRECT", "--to-ports", strconv.Itoa(int(lbPort)), "-m", "comment", "--comment", "OCP_API_LB_REDIRECT")
	}
	return append(spec, "-j", "DNAT", "--to-destination", net.JoinHostPort(apiVIP, strconv.Itoa(int(lbPort))), "-m", "comment", "--comment", "OCP_API_LB_REDIRECT")
}

// iptables runs iptables (ip6tables for an IPv6 VIP) on the nat table as
// github.com/coreos/go-iptables does (`iptables --wait -t nat <op> <chain> <spec>`), which the
// real monitor links: the image's iptables program does the work.
func iptables(vipAddr, op, chain string, spec ...string) error {
	prog := "iptables"
	if ip, err := netip.ParseAddr(vipAddr); err == nil && ip.Is6() {
		prog = "ip6tables"
	}
	args := append([]string{"--wait", "-t", "nat", op, chain}, spec...)
	if op == "-I" {
		args = append([]string{"--wait", "-t", "nat", op, chain, "1"}, spec...)
	}
	out, err := exec.Command(prog, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", prog, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// ruleExists is go-iptables Exists (-C): exit status 1 is "no such rule".
func ruleExists(vipAddr, chain string, spec []string) (bool, error) {
	err := iptables(vipAddr, "-C", chain, spec...)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}

// haproxyRules are the two nat rules, in the order upstream handles them: traffic arriving for
// the VIP (PREROUTING, DNAT) and this node's own (OUTPUT on lo, REDIRECT).
var haproxyRules = []struct {
	chain    string
	loopback bool
}{{"PREROUTING", false}, {"OUTPUT", true}}

// ensureHAProxyFirewallRules follows the function of that name (pkg/monitor/iptables.go).
func ensureHAProxyFirewallRules(apiVIP string, apiPort, lbPort uint16) error {
	for _, r := range haproxyRules {
		spec := haproxyRuleSpec(apiVIP, apiPort, lbPort, r.loopback)
		if ok, _ := ruleExists(apiVIP, r.chain, spec); ok {
			return nil // upstream returns once a rule exists
		}
		log.Printf("Inserting nat %s rule %s", r.chain, strings.Join(spec, " "))
		if err := iptables(apiVIP, "-I", r.chain, spec...); err != nil {
			return err
		}
	}
	return nil
}

// cleanHAProxyFirewallRules follows the function of that name.
func cleanHAProxyFirewallRules(apiVIP string, apiPort, lbPort uint16) {
	for _, r := range haproxyRules {
		spec := haproxyRuleSpec(apiVIP, apiPort, lbPort, r.loopback)
		if ok, _ := ruleExists(apiVIP, r.chain, spec); ok {
			log.Printf("Removing existing nat %s rule", r.chain)
			if err := iptables(apiVIP, "-D", r.chain, spec...); err != nil {
				log.Print(err)
			}
		}
	}
}

// checkHAProxyFirewallRules follows the function of that name: both rules are in place.
func checkHAProxyFirewallRules(apiVIP string, apiPort, lbPort uint16) (bool, error) {
	pre, err := ruleExists(apiVIP, "PREROUTING", haproxyRuleSpec(apiVIP, apiPort, lbPort, false))
	if err != nil {
		return false, err
	}
	out, err := ruleExists(apiVIP, "OUTPUT", haproxyRuleSpec(apiVIP, apiPort, lbPort, true))
	return pre && out, err
}

// markFirewallRules is KeepalivedWatch's first step of each check (pkg/monitor/dynkeepalived.go):
// iptablesMarker exists exactly while the haproxy nat rules do, for keepalived's
// chk_ocp_script.sh.
func markFirewallRules(apiVIP string, apiPort, lbPort uint16) {
	ok, err := checkHAProxyFirewallRules(apiVIP, apiPort, lbPort)
	switch {
	case err != nil:
		log.Printf("Failed to check for haproxy firewall rule: %v", err)
	case ok:
		if f, err := os.OpenFile(iptablesMarker, os.O_CREATE, 0o666); err != nil {
			log.Printf("Failed to open or create file %s: %v", iptablesMarker, err)
		} else {
			f.Close()
		}
	default:
		if err := os.RemoveAll(iptablesMarker); err != nil {
			log.Printf("Failed to remove file %s: %v", iptablesMarker, err)
		}
	}
}

// runRender follows cmd/runtimecfg/render.go: `runtimecfg render <kubeconfig> <paths>...
// --api-vips --ingress-vips --out-dir`: the node's configuration (pkg/config GetConfig: the
// cluster name from the --cluster-config install-config or the kubeconfig's server, the VRRP
// interface and address, the DNS upstreams from --resolvconf-path, which must name one, the
// ports) rendered into every *.tmpl of a single directory argument (or each path given) as
// <out-dir>/<name without .tmpl>. A template that fails is logged and skipped, as upstream's
// Render does; a configuration that cannot be read fails the command (the init container then
// restarts).
func runRender(args []string) error {
	fs := pflag.NewFlagSet("render", pflag.ContinueOnError)
	outDir := fs.StringP("out-dir", "o", "", "Directory where the templates will be rendered")
	clusterConfig := fs.StringP("cluster-config", "c", "", "Path to cluster-config ConfigMap")
	fs.Bool("verbose", false, "unused by the stand-in")
	apiVIPs := fs.StringSlice("api-vips", nil, "API VIPs")
	ingressVIPs := fs.StringSlice("ingress-vips", nil, "ingress VIPs")
	apiPort := fs.Uint16("api-port", 6443, "API port")
	lbPort := fs.Uint16("lb-port", 9445, "LB port")
	statPort := fs.Uint16("stat-port", 29445, "stats port")
	resolvConf := fs.StringP("resolvconf-path", "r", "/etc/resolv.conf", "resolv.conf for the DNS upstreams")
	if err := fs.Parse(args); err != nil {
		return err
	}
	kubeconfig, paths := "./kubeconfig", fs.Args()
	if len(paths) > 0 {
		kubeconfig, paths = paths[0], paths[1:]
	}
	if len(*apiVIPs) == 0 || len(*ingressVIPs) == 0 {
		return errors.New("--api-vips and --ingress-vips are required")
	}
	w := watch{kubeconfig: kubeconfig, clusterConfig: *clusterConfig, apiVIPs: *apiVIPs, ingressVIPs: *ingressVIPs, unicast: os.Getenv("ENABLE_UNICAST") == "yes"}
	name, domain, err := w.nameAndDomain()
	if err != nil {
		return err
	}
	iface, addr, err := vrrpConfig(w.apiVIPs[0])
	if err != nil {
		return err
	}
	ups, err := dnsUpstreams(*resolvConf, addr.Addr().String())
	if err != nil {
		return err
	}
	n, err := vip.NewNode(vip.NodeData{ClusterName: name, Domain: domain, APIVIP: w.apiVIPs[0], IngressVIP: w.ingressVIPs[0],
		MachineNetwork: addr.Masked().String(), NodeIP: addr.Addr().String(), Interface: iface, Unicast: w.unicast, DNSUpstreams: ups})
	if err != nil {
		return err
	}
	n.LBConfig.ApiPort, n.LBConfig.LbPort, n.LBConfig.StatPort = int(*apiPort), int(*lbPort), int(*statPort)
	n.Configs = []vip.Node{n}
	if *outDir == "" {
		if *outDir, err = os.MkdirTemp("", "runtimecfg"); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(*outDir, 0o777); err != nil {
		return err
	}
	if len(paths) == 1 {
		if st, err := os.Stat(paths[0]); err == nil && st.IsDir() {
			ents, err := os.ReadDir(paths[0])
			if err != nil {
				return err
			}
			dir := paths[0]
			paths = nil
			for _, e := range ents {
				if e.Type().IsRegular() && filepath.Ext(e.Name()) == ".tmpl" {
					paths = append(paths, filepath.Join(dir, e.Name()))
				}
			}
		}
	}
	for _, p := range paths {
		if filepath.Ext(p) != ".tmpl" {
			return fmt.Errorf("Template %s does not have the right extension. Must be '.tmpl'", p)
		}
		out := filepath.Join(*outDir, strings.TrimSuffix(filepath.Base(p), ".tmpl"))
		if err := renderFile(out, p, n); err != nil {
			log.Printf("Failed to render template %s: %v", p, err)
			continue
		}
		log.Printf("Runtimecfg rendering template %s", out)
	}
	return nil
}

// dnsUpstreams is getDNSUpstreams with getNodeConfig's filter: resolv.conf's nameservers but
// the node's own address and loopback; none is an error ("No upstream DNS servers found").
func dnsUpstreams(resolvConf, self string) ([]string, error) {
	b, err := os.ReadFile(resolvConf)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "nameserver" && f[1] != self && f[1] != "127.0.0.1" && f[1] != "::1" {
			out = append(out, f[1])
		}
	}
	if len(out) == 0 {
		return nil, errors.New("No upstream DNS servers found")
	}
	return out, nil
}
