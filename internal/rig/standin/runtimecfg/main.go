// Command runtimecfg-standin is a STAND-IN for baremetal-runtimecfg (openshift/baremetal-runtimecfg
// release-4.18), the programs of the MCO's on-prem pods' runtimecfg image: `dynkeepalived`
// (cmd/dynkeepalived, pkg/monitor/dynkeepalived.go KeepalivedWatch), the keepalived-monitor
// container; `monitor` (cmd/monitor, pkg/monitor/monitor.go Monitor), the masters'
// haproxy-monitor container (monitor.go here); and `runtimecfg render` (cmd/runtimecfg/render.go),
// the masters' render-config-keepalived init container. The real program is not served by the
// Go module proxy here, so it cannot run in tests; this one follows its control flow and reads
// only what it reads:
//
//   - the command line of the pod (manifests/on-prem/keepalived.yaml): kubeconfig, template and
//     output paths, --api-vips, --ingress-vips, --cluster-config, --check-interval; the
//     environment IS_BOOTSTRAP and ENABLE_UNICAST;
//   - the install-config in the --cluster-config ConfigMap (cluster name and base domain:
//     pkg/config getClusterConfigClusterNameAndDomain), or without one (the masters' monitor)
//     the kubeconfig's server name api-int.<name>.<baseDomain> (GetKubeconfigClusterNameAndDomain);
//   - the node's own interface and address in the VIP's subnet (pkg/config GetVRRPConfig), its
//     /etc/resolv.conf (render: the DNS upstreams);
//   - the API, through the kubeconfig: the master Nodes' InternalIPs are the unicast peers and
//     haproxy's backends (pkg/config getSortedBackends, label node-role.kubernetes.io/master=);
//   - the nat table, through the iptables program, as go-iptables runs it.
//
// Like KeepalivedWatch it dials the keepalived container's control socket
// /var/run/keepalived/keepalived.sock BEFORE it renders anything, and exits with an error when
// nothing listens there (the container then restarts: a crash loop, no keepalived.conf, no
// VIP). Each check it first marks /var/run/keepalived/iptables-rule-exists while the haproxy
// monitor's nat rules exist (checkHAProxyFirewallRules). It renders keepalived.conf when a
// changed configuration has been seen cfgKeepalivedChangeThreshold (3) checks in a row and then
// writes "reload" to the socket. On the bootstrap (IS_BOOTSTRAP=yes) it runs
// handleBootstrapStopKeepalived: once the local API has answered, more than
// bootstrapApiFailuresThreshold (4) failed checks one second apart of the API (a Node list) and
// of Ironic (http://localhost:6385/v1) send "stop"; the API answering again sends "reload".
//
// Not followed, by design: the unicast/multicast mode migration (handleConfigModeUpdate), VIP
// leasing (handleLeasing), dual-stack Configs (one IPv4 entry), the ingress peers (no ingress VIP
// on the bootstrap template) and cloud load-balancer platforms (GetConfig's non-on-prem branch).
// The keepalived template step is render/vip.Render over runtimecfg's data shape.
//
// Invocation: as dynkeepalived, monitor or runtimecfg (argv[0] basename, as the runtimecfg
// image installs them) or `runtimecfg-standin <program> ...`.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/render/vip"
)

// Constants of pkg/monitor/dynkeepalived.go.
const (
	keepalivedControlSock         = "/var/run/keepalived/keepalived.sock"
	cfgKeepalivedChangeThreshold  = 3
	bootstrapAPIFailuresThreshold = 4
	ironicURL                     = "http://localhost:6385/v1"
	bootstrapWaitForAPI           = 30 * time.Minute
	bootstrapAPIWaitRetry         = 3 * time.Second
	bootstrapCheckEvery           = time.Second
	bootstrapAfterCommand         = 5 * time.Second
	masterSelector                = "node-role.kubernetes.io/master="
)

func main() {
	prog, args := filepath.Base(os.Args[0]), os.Args[1:]
	if !slices.Contains([]string{"dynkeepalived", "monitor", "runtimecfg"}, prog) {
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, "runtimecfg-standin: usage: runtimecfg-standin dynkeepalived|monitor|runtimecfg ... (stand-in for baremetal-runtimecfg)")
			os.Exit(2)
		}
		prog, args = args[0], args[1:]
	}
	var err error
	switch prog {
	case "dynkeepalived":
		err = run(args)
	case "monitor":
		err = runMonitor(args)
	case "runtimecfg":
		if len(args) == 0 || args[0] != "render" {
			fmt.Fprintln(os.Stderr, "runtimecfg (stand-in): only the render command is here")
			os.Exit(2)
		}
		err = runRender(args[1:])
	default:
		fmt.Fprintf(os.Stderr, "runtimecfg-standin: unknown program %q\n", prog)
		os.Exit(2)
	}
	if err != nil {
		log.Printf("%s (stand-in): %v", prog, err)
		os.Exit(1)
	}
}

type watch struct {
	kubeconfig, template, cfgPath, clusterConfig string
	apiVIPs, ingressVIPs                         []string
	interval                                     time.Duration
	apiPort, lbPort                              uint16
	bootstrap, unicast                           bool
}

func run(args []string) error {
	w := watch{bootstrap: os.Getenv("IS_BOOTSTRAP") == "yes", unicast: os.Getenv("ENABLE_UNICAST") == "yes"}
	fs := pflag.NewFlagSet("dynkeepalived", pflag.ContinueOnError)
	fs.StringSliceVar(&w.apiVIPs, "api-vips", nil, "API VIPs")
	fs.StringSliceVar(&w.ingressVIPs, "ingress-vips", nil, "ingress VIPs")
	fs.StringVar(&w.clusterConfig, "cluster-config", "", "cluster-config-v1 ConfigMap")
	fs.DurationVar(&w.interval, "check-interval", 10*time.Second, "check interval")
	fs.Uint16Var(&w.apiPort, "api-port", 6443, "Port where the OpenShift API listens (the haproxy nat rules' match)")
	fs.Uint16Var(&w.lbPort, "lb-port", 9445, "Port where the API HAProxy LB listens (the haproxy nat rules' target)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 3 {
		return fmt.Errorf("want <kubeconfig> <template> <config>, got %q", fs.Args())
	}
	w.kubeconfig, w.template, w.cfgPath = fs.Arg(0), fs.Arg(1), fs.Arg(2)
	if len(w.apiVIPs) == 0 || len(w.ingressVIPs) == 0 {
		return errors.New("--api-vips and --ingress-vips are required")
	}
	return w.keepalivedWatch()
}

// keepalivedWatch follows KeepalivedWatch.
func (w watch) keepalivedWatch() error {
	done := make(chan os.Signal, 1)
	signal.Notify(done, syscall.SIGTERM, syscall.SIGINT)
	apiState := make(chan bool, 1) // false: stopped, true: started
	if w.bootstrap {
		go w.handleBootstrapStopKeepalived(apiState)
	}
	conn, err := net.Dial("unix", keepalivedControlSock)
	if err != nil {
		return err
	}
	defer conn.Close()
	var applied, prev *vip.Node
	ctr := 0
	for {
		select {
		case <-done:
			return nil
		case up := <-apiState:
			msg := "stop\n"
			if up {
				msg = "reload\n"
			}
			for {
				if _, err := conn.Write([]byte(msg)); err == nil {
					log.Printf("Command message successfully sent to Keepalived container control socket: %s", msg)
					break
				}
				log.Printf("Failed to write command to Keepalived container control socket %s", keepalivedControlSock)
				time.Sleep(time.Second)
			}
			time.Sleep(bootstrapAfterCommand)
		default:
			markFirewallRules(w.apiVIPs[0], w.apiPort, w.lbPort)
			cur, err := w.config()
			if err != nil {
				// No config with an incomplete unicast peer list.
				log.Printf("config: %v", err)
				time.Sleep(w.interval)
				continue
			}
			if applied == nil || !equalNode(*applied, cur) {
				if prev == nil || equalNode(*prev, cur) {
					ctr++
				} else {
					ctr = 1
				}
				log.Printf("Config change detected (configChangeCtr %d): peers %v", ctr, addresses(cur))
				if ctr >= cfgKeepalivedChangeThreshold {
					b, err := os.ReadFile(w.template)
					if err != nil {
						return err
					}
					out, err := vip.Render(b, cur)
					if err != nil {
						return fmt.Errorf("failed to render Keepalived configuration: %w", err)
					}
					if err := os.WriteFile(w.cfgPath, out, 0o644); err != nil {
						return err
					}
					if _, err := conn.Write([]byte("reload\n")); err != nil {
						return fmt.Errorf("failed to write reload to Keepalived container control socket: %w", err)
					}
					log.Printf("Apply config change: rendered %s, sent reload", w.cfgPath)
					ctr = 0
					c := cur
					applied = &c
				}
			} else {
				ctr = 0
			}
			c := cur
			prev = &c
			time.Sleep(w.interval)
		}
	}
}

// handleBootstrapStopKeepalived follows the function of that name.
func (w watch) handleBootstrapStopKeepalived(state chan<- bool) {
	for start := time.Now(); time.Since(start) < bootstrapWaitForAPI; {
		if _, err := w.nodes(""); err == nil {
			log.Print("handleBootstrapStopKeepalived: local kube-apiserver is operational")
			break
		}
		log.Print("handleBootstrapStopKeepalived: local kube-apiserver still not operational")
		time.Sleep(bootstrapAPIWaitRetry)
	}
	failures := 0
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if _, err := w.nodes(""); err != nil {
			// Ironic behind the VIP keeps it too (upstream: "We have started to talk to
			// Ironic through the API VIP as well").
			if resp, err := client.Get(ironicURL); err != nil {
				failures++
				log.Printf("handleBootstrapStopKeepalived: detect failure on API and Ironic (consecutiveErr %d)", failures)
			} else {
				resp.Body.Close()
			}
		} else {
			if failures > bootstrapAPIFailuresThreshold {
				state <- true
			}
			failures = 0
		}
		if failures > bootstrapAPIFailuresThreshold {
			log.Printf("handleBootstrapStopKeepalived: Num of failures exceeds threshold (%d > %d)", failures, bootstrapAPIFailuresThreshold)
			state <- false
		}
		time.Sleep(bootstrapCheckEvery)
	}
}

// nodes lists the Nodes through the kubeconfig (selector "" for all).
func (w watch) nodes(selector string) (*corev1.NodeList, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", w.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: selector})
}

// config is GetConfig plus updateUnicastConfig: the cluster from the install-config, the VRRP
// interface and own address from the local interface in the API VIP's subnet, and (unicast)
// the master Nodes' addresses in that subnet, sorted.
func (w watch) config() (vip.Node, error) {
	name, domain, err := w.nameAndDomain()
	if err != nil {
		return vip.Node{}, err
	}
	iface, addr, err := vrrpConfig(w.apiVIPs[0])
	if err != nil {
		return vip.Node{}, err
	}
	d := vip.NodeData{ClusterName: name, Domain: domain, APIVIP: w.apiVIPs[0], IngressVIP: w.ingressVIPs[0],
		MachineNetwork: addr.Masked().String(), NodeIP: addr.Addr().String(), Interface: iface, Unicast: w.unicast}
	if w.unicast {
		nl, err := w.nodes(masterSelector)
		if err != nil {
			return vip.Node{}, fmt.Errorf("could not retrieve LB config: %w", err)
		}
		for _, n := range nl.Items {
			for _, a := range n.Status.Addresses {
				if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP && addr.Masked().Contains(ip) {
					d.Backends = append(d.Backends, a.Address)
					break
				}
			}
		}
		sort.Strings(d.Backends)
	}
	return vip.NewNode(d)
}

// nameAndDomain follows GetClusterNameAndDomain: the cluster-config file first (the
// bootstrap's --cluster-config), else the kubeconfig's server name (the masters' monitor has no
// --cluster-config: GetKubeconfigClusterNameAndDomain).
func (w watch) nameAndDomain() (string, string, error) {
	name, domain, err := clusterNameAndDomain(w.clusterConfig)
	if err != nil {
		return kubeconfigNameAndDomain(w.kubeconfig)
	}
	return name, domain, nil
}

// clusterNameAndDomain reads metadata.name and baseDomain of the install-config in the
// cluster-config-v1 ConfigMap at path: the domain is <name>.<baseDomain>.
func clusterNameAndDomain(path string) (string, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil {
		return "", "", fmt.Errorf("%s: %w", path, err)
	}
	var ic struct {
		BaseDomain string `json:"baseDomain"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["install-config"]), &ic); err != nil || ic.Metadata.Name == "" || ic.BaseDomain == "" {
		return "", "", fmt.Errorf("%s: no install-config with metadata.name and baseDomain (%v)", path, err)
	}
	return ic.Metadata.Name, ic.Metadata.Name + "." + ic.BaseDomain, nil
}

// kubeconfigNameAndDomain follows pkg/config GetKubeconfigClusterNameAndDomain: the current
// context's server host, api-int.<name>.<baseDomain>, split in three at its first two dots.
// The domain is returned as clusterNameAndDomain returns it, <name>.<baseDomain>.
func kubeconfigNameAndDomain(path string) (string, string, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return "", "", err
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.Clusters[ctx.Cluster] == nil {
		return "", "", fmt.Errorf("%s: no cluster for the current context %q", path, cfg.CurrentContext)
	}
	u, err := url.Parse(cfg.Clusters[ctx.Cluster].Server)
	if err != nil {
		return "", "", fmt.Errorf("%s: server: %w", path, err)
	}
	parts := strings.SplitN(u.Hostname(), ".", 3)
	if len(parts) < 3 {
		return "", "", fmt.Errorf("%s: server host %q is not api-int.<name>.<baseDomain>", path, u.Hostname())
	}
	return parts[1], parts[1] + "." + parts[2], nil
}

// vrrpConfig finds the local interface whose address's subnet holds vipAddr.
func vrrpConfig(vipAddr string) (string, netip.Prefix, error) {
	v, err := netip.ParseAddr(vipAddr)
	if err != nil {
		return "", netip.Prefix{}, fmt.Errorf("VIP %q: %w", vipAddr, err)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return "", netip.Prefix{}, err
	}
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, _ := netip.AddrFromSlice(n.IP)
			ones, _ := n.Mask.Size()
			p := netip.PrefixFrom(ip.Unmap(), ones)
			if p.Addr() != v && p.Masked().Contains(v) {
				return i.Name, p, nil
			}
		}
	}
	return "", netip.Prefix{}, fmt.Errorf("no local interface in the subnet of VIP %s", vipAddr)
}

func equalNode(a, b vip.Node) bool {
	return a.Cluster == b.Cluster && a.NonVirtualIP == b.NonVirtualIP && a.VRRPInterface == b.VRRPInterface &&
		a.EnableUnicast == b.EnableUnicast && slices.Equal(addresses(a), addresses(b))
}

func addresses(n vip.Node) []string {
	var out []string
	for _, b := range n.LBConfig.Backends {
		out = append(out, b.Address)
	}
	return out
}
