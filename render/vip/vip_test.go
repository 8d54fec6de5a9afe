package vip

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestFletcherChecksum8 checks the router ids against the installer's fletcher8 algorithm
// computed by hand: for "ab", A = (97+98)&15 = 3, B = (1+3)&15 = 4 → 0x43.
func TestFletcherChecksum8(t *testing.T) {
	for s, want := range map[string]uint8{"": 0, "a": 0x11, "ab": 0x43} {
		if got := FletcherChecksum8(s); got != want {
			t.Errorf("FletcherChecksum8(%q) = %#x, want %#x", s, got, want)
		}
	}
	if FletcherChecksum8("ocp4-api") == FletcherChecksum8("ocp4-ingress") {
		t.Error("API and ingress router ids collide for ocp4")
	}
}

func testBootstrap() Bootstrap {
	return Bootstrap{APIVIP: "192.168.126.10", IngressVIP: "192.168.126.11", MachineNetwork: "192.168.126.0/24",
		KeepalivedImage: "quay.io/x/keepalived@sha256:1", RuntimeCfgImage: "quay.io/x/runtimecfg@sha256:2", CorednsImage: "quay.io/x/coredns@sha256:3",
		Kubeconfig: "/etc/kubernetes/kubeconfigs/localhost.kubeconfig", ClusterConfig: "/opt/openshift/manifests/cc.yaml"}
}

func TestBootstrapFiles(t *testing.T) {
	fs, err := BootstrapFiles(testBootstrap())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fs {
		names = append(names, f.Path)
		if f.StaticPod {
			var p corev1.Pod
			if err := yaml.UnmarshalStrict(f.Data, &p); err != nil || !p.Spec.HostNetwork || p.Namespace != "openshift-kni-infra" {
				t.Errorf("%s: not a host-network pod in openshift-kni-infra (%v):\n%s", f.Path, err, f.Data)
			}
		}
	}
	if got := strings.Join(names, " "); got != "keepalived.yaml coredns.yaml keepalived/keepalived.conf.tmpl coredns/Corefile.tmpl" {
		t.Errorf("files = %s", got)
	}
	for name, mutate := range map[string]func(*Bootstrap){
		"VIP outside": func(b *Bootstrap) { b.APIVIP = "10.0.0.1" },
		"bad net":     func(b *Bootstrap) { b.MachineNetwork = "192.168.126.0" },
		"no image":    func(b *Bootstrap) { b.CorednsImage = "" },
	} {
		b := testBootstrap()
		mutate(&b)
		if _, err := BootstrapFiles(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestRenderBootstrapKeepalived renders the bootstrap template as runtimecfg would: unicast
// to every backend but itself, priority 70, the VIP with the machine network's prefix.
func TestRenderBootstrapKeepalived(t *testing.T) {
	n, err := NewNode(NodeData{ClusterName: "ocp4", Domain: "ocp4.example.com", APIVIP: "192.168.126.10", IngressVIP: "192.168.126.11",
		MachineNetwork: "192.168.126.0/24", NodeIP: "192.168.126.100", Interface: "ens3", Unicast: true,
		Backends: []string{"192.168.126.100", "192.168.126.101"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Render([]byte(BootstrapKeepalivedTemplate), n)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, want := range []string{"vrrp_instance ocp4_API {", "interface ens3", "priority 70", "nopreempt", "unicast_src_ip 192.168.126.100",
		"unicast_peer {\n        192.168.126.101\n    }", "192.168.126.10/24", "auth_pass ocp4_api_vip"} {
		if !strings.Contains(conf, want) {
			t.Errorf("lacks %q:\n%s", want, conf)
		}
	}
	n.EnableUnicast = false
	b, _ = Render([]byte(BootstrapKeepalivedTemplate), n)
	if strings.Contains(string(b), "unicast") {
		t.Errorf("multicast config names unicast peers:\n%s", b)
	}
	if _, err := Render([]byte("{{.Nope}}"), n); err == nil {
		t.Error("unknown field rendered")
	}
}
