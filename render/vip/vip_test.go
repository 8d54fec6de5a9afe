package vip

import (
	"fmt"
	"strings"
	"testing"
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

// TestRender renders a runtimecfg template over NewNode's data as runtimecfg would: the
// Configs range (one per address family), unicast peers, the VIP with the machine network's
// prefix, the router id; an unknown field is an error.
func TestRender(t *testing.T) {
	n, err := NewNode(NodeData{ClusterName: "ocp4", Domain: "ocp4.example.com", APIVIP: "192.168.126.10", IngressVIP: "192.168.126.11",
		MachineNetwork: "192.168.126.0/24", NodeIP: "192.168.126.100", Interface: "ens3", Unicast: true,
		Backends: []string{"192.168.126.100", "192.168.126.101"}})
	if err != nil {
		t.Fatal(err)
	}
	const tmpl = `{{range $i, $c := .Configs}}{{.Cluster.Name}}_API_{{$i}} {{.VRRPInterface}} {{.Cluster.APIVirtualRouterID}} {{.Cluster.APIVIP}}/{{.Cluster.VIPNetmask}}` +
		`{{if .EnableUnicast}} src {{.NonVirtualIP}}{{range .LBConfig.Backends}} {{.Address}}{{end}}{{end}}{{end}}`
	b, err := Render([]byte(tmpl), n)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("ocp4_API_0 ens3 %d 192.168.126.10/24 src 192.168.126.100 192.168.126.100 192.168.126.101", FletcherChecksum8("ocp4-api"))
	if string(b) != want {
		t.Errorf("got  %q\nwant %q", b, want)
	}
	n.Configs[0].EnableUnicast = false
	if b, _ := Render([]byte(tmpl), n); strings.Contains(string(b), "src") {
		t.Errorf("multicast config names unicast peers: %s", b)
	}
	if _, err := Render([]byte("{{.Nope}}"), n); err == nil {
		t.Error("unknown field rendered")
	}
}
