package targets

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/render/vip"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/wait"
)

// TestInClusterPlan is `labbuild -n cluster` on a fresh out dir in both modes (nothing built,
// so no Probe runs and nothing is contacted): in-cluster plans no haproxy target at all (no
// haproxy.cfg, no haproxy/service, no VIP on the bridge) and plans the bootstrap's VIP assets;
// the host mode plans its haproxy.
func TestInClusterPlan(t *testing.T) {
	dir := t.TempDir()
	ps := filepath.Join(dir, "ps.json")
	os.WriteFile(ps, []byte(mcoTestPullSecret), 0o600)
	key := filepath.Join(dir, "id.pub")
	os.WriteFile(key, []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHd5s1S7jcY2O6jWvBb7oZ7A4DMpWD5Z2eG0m9lE1kZ7 user@host\n"), 0o644)
	for _, mode := range []string{lab.LoadBalancerInCluster, lab.LoadBalancerHost} {
		t.Run(mode, func(t *testing.T) {
			c := testLabConfig()
			c.Network.LoadBalancer = mode
			c.Access.PullSecretFile, c.Access.SSHKeyFile = ps, key
			res, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: filepath.Join(t.TempDir(), "out"), Goals: []string{"cluster"}, DryRun: true,
				Now: func() time.Time { return time.Unix(1e9, 0) }})
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for _, p := range res.Plan {
				plan = append(plan, p.Target)
			}
			var hp []string
			for _, p := range plan {
				if strings.HasPrefix(p, "haproxy/") {
					hp = append(hp, p)
				}
			}
			in := mode == lab.LoadBalancerInCluster
			if in && len(hp) > 0 {
				t.Errorf("in-cluster plan has host load-balancer targets %v", hp)
			}
			if !in && (!slices.Contains(hp, "haproxy/config") || !slices.Contains(hp, "haproxy/service")) {
				t.Errorf("host plan lacks haproxy/config or haproxy/service: %v", hp)
			}
			// The bootstrap's on-prem pods come from the MCO bootstrap render in-cluster only;
			// labbuild declares no target of its own for them.
			for _, f := range families {
				for _, x := range f.Targets(Lab{Config: c}) {
					if x.Name == "manifests/bootstrap" && (slices.Contains(x.Deps, "mco/operator-bootstrap") != in ||
						slices.Contains(x.Deps, "manifests/cluster/baremetal-provisioning") != in) {
						t.Errorf("manifests/bootstrap deps %v: mco/operator-bootstrap and manifests/cluster/baremetal-provisioning among them should be %v", x.Deps, in)
					}
					if strings.HasPrefix(x.Name, "manifests/vip/") {
						t.Errorf("%s declared: labbuild renders no on-prem pods of its own", x.Name)
					}
				}
			}
			if !slices.Contains(plan, "cluster/pivot") || !slices.Contains(plan, "libvirt/network") {
				t.Errorf("plan lacks cluster/pivot or libvirt/network: %v", plan)
			}
			t.Logf("%s: %d targets planned; haproxy: %v", mode, len(plan), hp)
			// The lab network's DNS is the same in both modes: *.apps (libvirt/network's
			// wildcard) and api/api-int (libvirt/dns) answer the VIPs for clients outside the
			// cluster, whoever holds them.
			for _, f := range families {
				for _, x := range f.Targets(Lab{Config: c}) {
					want := map[string]string{"libvirt/network": "network.ingressVIP", "libvirt/dns": "network.apiVIP"}[x.Name]
					if want != "" && (!slices.Contains(x.Reads, want) || slices.Contains(x.Reads, "network.loadBalancer")) {
						t.Errorf("%s reads %v: want %s and not network.loadBalancer", x.Name, x.Reads, want)
					}
				}
			}
		})
	}
}

// TestInClusterIgnition builds ignition/bootstrap and ignition/master-0 in the in-cluster
// mode. The bootstrap config (validated by Ignition's parser, no duplicates) carries the
// on-prem static pods and templates of the MCO bootstrap render's baremetal/ output byte for
// byte, at the places bootkube.sh's copy_static_resources_for gives them, and nothing else
// under /etc/kubernetes/static-pod-resources; the files those pods read (the kubeconfig, the
// install-config) are on the node; the keepalived template renders at boot to the upstream
// bootstrap instance (priority 70, no nopreempt, label vip). master-0's config carries the
// MCO's on-prem keepalived, haproxy and coredns pods.
func TestInClusterIgnition(t *testing.T) {
	l := newMCOLab(t)
	l.cfg.Network.LoadBalancer = lab.LoadBalancerInCluster
	l.build("ignition/bootstrap", "ignition/master-0")
	boot := l.ignLoad("bootstrap")

	// Byte identity with the MCO render, path by path.
	mcoFiles, err := os.ReadDir(filepath.Join(l.out, "mco", "operator-bootstrap", "baremetal", "manifests"))
	if err != nil || len(mcoFiles) != 2 {
		t.Fatalf("mco/operator-bootstrap baremetal/manifests: %v %v", mcoFiles, err)
	}
	want := map[string]string{}
	for _, f := range mcoFiles {
		want["/etc/kubernetes/manifests/"+f.Name()] = "baremetal/manifests/" + f.Name()
	}
	for _, r := range []string{"keepalived/keepalived.conf.tmpl", "coredns/Corefile.tmpl"} {
		want["/etc/kubernetes/static-pod-resources/"+r] = "baremetal/static-pod-resources/" + r
	}
	for node, rel := range want {
		if got, mco := ignContents(t, boot, "bootstrap", node), l.file("mco/operator-bootstrap", rel); !bytes.Equal(got, mco) {
			t.Errorf("bootstrap %s is not the MCO render's %s:\n--- ignition\n%s\n--- mco\n%s", node, rel, got, mco)
		}
	}
	for _, f := range boot.Storage.Files {
		if strings.HasPrefix(f.Path, "/etc/kubernetes/static-pod-resources/") && want[f.Path] == "" {
			t.Errorf("bootstrap %s: not from the MCO render", f.Path)
		}
	}

	var ka, dns corev1.Pod
	for p, into := range map[string]*corev1.Pod{"/etc/kubernetes/manifests/keepalived.yaml": &ka, "/etc/kubernetes/manifests/coredns.yaml": &dns} {
		// Not strict: the upstream pods carry `empty-dir: {}`, which the kubelet ignores.
		if err := yaml.Unmarshal(ignContents(t, boot, "bootstrap", p), into); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	images := map[string]bool{}
	var args []string
	for _, c := range append(append(ka.Spec.Containers, dns.Spec.InitContainers...), dns.Spec.Containers...) {
		images[c.Image] = true
		args = append(args, c.Command...)
	}
	var is struct {
		Spec struct {
			Tags []struct {
				Name string
				From struct{ Name string }
			}
		}
	}
	if err := yaml.Unmarshal(l.file("release/image-references", "image-references"), &is); err != nil {
		t.Fatal(err)
	}
	pullspec := map[string]string{}
	for _, tg := range is.Spec.Tags {
		pullspec[tg.Name] = tg.From.Name
	}
	for _, tag := range []string{"keepalived-ipfailover", "baremetal-runtimecfg", "coredns"} {
		if !images[pullspec[tag]] || pullspec[tag] == "" {
			t.Errorf("no bootstrap VIP pod runs the %s image: %v", tag, images)
		}
	}
	for _, want := range []string{"192.168.126.10", "192.168.126.11", "dynkeepalived"} {
		if !slices.Contains(args, want) {
			t.Errorf("bootstrap VIP pods' commands lack %q: %v", want, args)
		}
	}
	// The files the pods read exist on the bootstrap: the kubeconfig (an admin kubeconfig
	// for the local API) and the install-config.
	kc := ignContents(t, boot, "bootstrap", "/etc/kubernetes/kubeconfig")
	if !bytes.Equal(kc, ignContents(t, boot, "bootstrap", manifests.KubeconfigsDir+"/localhost.kubeconfig")) {
		t.Error("/etc/kubernetes/kubeconfig is not the localhost admin kubeconfig")
	}
	for i, a := range args {
		if a == "--cluster-config" {
			cc := ignContents(t, boot, "bootstrap", args[i+1])
			if !strings.Contains(string(cc), "baremetal:") {
				t.Errorf("%s is not the baremetal install-config:\n%s", args[i+1], cc)
			}
		}
	}
	tmpl := ignContents(t, boot, "bootstrap", "/etc/kubernetes/static-pod-resources/keepalived/keepalived.conf.tmpl")
	n, err := vip.NewNode(vip.NodeData{ClusterName: "ocp4", Domain: "ocp4.example.com", APIVIP: "192.168.126.10", IngressVIP: "192.168.126.11",
		MachineNetwork: "192.168.126.0/24", NodeIP: "192.168.126.100", Interface: "ens3", Unicast: true,
		Backends: []string{"192.168.126.101", "192.168.126.102", "192.168.126.103"}})
	if err != nil {
		t.Fatal(err)
	}
	conf, err := vip.Render(tmpl, n)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vrrp_instance ocp4_API_0 {", "priority 70", "192.168.126.10/24 label vip", "unicast_src_ip 192.168.126.100", "        192.168.126.103\n"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("bootstrap keepalived.conf rendered at boot lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(string(conf), "nopreempt") {
		t.Errorf("bootstrap keepalived.conf has nopreempt (upstream's has none):\n%s", conf)
	}
	corefile := ignContents(t, boot, "bootstrap", "/etc/kubernetes/static-pod-resources/coredns/Corefile.tmpl")
	if cf, err := vip.Render(corefile, n); err != nil || !strings.Contains(string(cf), "match ^api-int.ocp4.example.com") ||
		!strings.Contains(string(cf), "template IN A ocp4.example.com") || !strings.Contains(string(cf), "60 in {{ .Type }} 192.168.126.10") {
		t.Errorf("bootstrap Corefile rendered at boot (%v):\n%s", err, cf)
	}
	// The Provisioning CR goes to the cluster with the other bootstrap manifests.
	prov := ignContents(t, boot, "bootstrap", manifests.ManifestsDir+"/"+manifests.BaremetalProvisioningName)
	if want, _ := manifests.BaremetalProvisioning(); !bytes.Equal(prov, want.Data) {
		t.Errorf("bootstrap %s:\n%s", manifests.BaremetalProvisioningName, prov)
	}
	infra := ignContents(t, boot, "bootstrap", manifests.ManifestsDir+"/02-config-infrastructure.yaml")
	if !strings.Contains(string(infra), "type: OpenShiftManagedDefault") || !strings.Contains(string(infra), "platform: BareMetal") {
		t.Errorf("bootstrap Infrastructure is not BareMetal:\n%s", infra)
	}

	m0 := l.ignLoad("master-0")
	for p, sub := range map[string]string{
		"/etc/kubernetes/manifests/keepalived.yaml": "192.168.126.10",
		"/etc/kubernetes/manifests/haproxy.yaml":    "openshift-kni-infra",
		"/etc/kubernetes/manifests/coredns.yaml":    "192.168.126.11",
	} {
		if b := ignContents(t, m0, "master-0", p); !strings.Contains(string(b), sub) {
			t.Errorf("master-0 %s lacks %q", p, sub)
		}
	}
}

// pivotMachines records how many pod listings the API had served when the bootstrap stopped.
type pivotMachines struct {
	*fakeMachines
	polls  *atomic.Int32
	stopAt atomic.Int32
}

func (p *pivotMachines) Stop(ctx context.Context, node string) error {
	p.stopAt.Store(p.polls.Load())
	return p.fakeMachines.Stop(ctx, node)
}

// apiStandinWorld is the cluster family's world for a test against an API server stand-in at
// url (httptest): the real clock, polls 100 times faster, every kubeconfig answered by url.
// clusterEnv is restored when t ends; the caller assigns the world (after adding machines or a
// balancer when its targets need them).
func apiStandinWorld(t *testing.T, url string) clusterWorld {
	old := clusterEnv
	t.Cleanup(func() { clusterEnv = old })
	return clusterWorld{
		clock:      wait.RealClock{},
		interval:   func(d time.Duration) time.Duration { return d / 100 },
		restConfig: func(kc, vip string) (*kube.RESTConfig, error) { return &kube.RESTConfig{Host: url}, nil },
	}
}
