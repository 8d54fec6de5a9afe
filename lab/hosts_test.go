package lab

import (
	"errors"
	"strings"
	"testing"
)

// twoHosts is a valid lab spread over two hosts: worker-0 on hv2, every other node on hv1.
const twoHosts = `hosts:
  - {name: hv1, underlay: 10.0.0.11}
  - {name: hv2, uri: "qemu+ssh://root@hv2.example.com/system", underlay: 10.0.0.12}
vxlan: {vni: 4242}
nodes:
  - {name: bootstrap, role: bootstrap, ip: 192.168.126.100}
  - {name: master-0, role: master, ip: 192.168.126.101}
  - {name: worker-0, role: worker, ip: 192.168.126.110, host: hv2}
`

// TestHostsValid: a two-host lab validates; its hosts, MTUs and placements read back; vxlan's
// port and underlay MTU default.
func TestHostsValid(t *testing.T) {
	c, err := ParseConfig([]byte(twoHosts), "lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate("lab.yaml"); err != nil {
		t.Fatal(err)
	}
	if !c.MultiHost() || c.VXLAN.Port != DefaultVXLANPort || c.VXLAN.UnderlayMTU != DefaultUnderlayMTU {
		t.Fatalf("multi-host %v, vxlan %+v", c.MultiHost(), c.VXLAN)
	}
	if got := c.FirstHost(); got.Name != "hv1" || got.URI != c.Libvirt.URI {
		t.Errorf("first host %+v, want hv1 at libvirt.uri", got)
	}
	for node, uri := range map[string]string{"master-0": c.Libvirt.URI, "worker-0": "qemu+ssh://root@hv2.example.com/system", "nope": c.Libvirt.URI} {
		if got := c.NodeURI(node); got != uri {
			t.Errorf("NodeURI(%s) = %s, want %s", node, got, uri)
		}
	}
	if c.MachineMTU() != 1450 || c.OVNMTU() != 1350 {
		t.Errorf("MTUs %d/%d, want 1450/1350 on a 1500-byte underlay", c.MachineMTU(), c.OVNMTU())
	}
	for p, want := range map[string]string{DerivedMachineMTU: "1450", DerivedOVNMTU: "1350", VXLANVNI: "4242", VXLANPort: "4789",
		HostPath("hv2", HostUnderlay): `"10.0.0.12"`, NodePath("worker-0", NodeHost): `"hv2"`} {
		if got, ok := c.Lookup(p); !ok || string(got) != want {
			t.Errorf("Lookup(%s) = %s, %v; want %s", p, got, ok, want)
		}
	}
	if _, ok := c.Lookup(HostPath("hv1", HostURI)); ok {
		t.Errorf("the first host's unset uri is present")
	}
	if got := len(c.NodesOn(c.FirstHost())); got != 2 {
		t.Errorf("%d nodes on hv1, want 2", got)
	}
}

// TestOneHostFieldsAbsent: a lab without hosts: has none of the new fields, so no key of a
// one-host lab changes.
func TestOneHostFieldsAbsent(t *testing.T) {
	c := DefaultConfig()
	for _, p := range []string{Hosts, VXLAN, VXLANVNI, VXLANPort, VXLANUnderlayMTU, DerivedMachineMTU, DerivedOVNMTU, NodePath("worker-0", NodeHost), HostPath("hv1", HostURI)} {
		if got, ok := c.Lookup(p); ok {
			t.Errorf("Lookup(%s) = %s on a one-host lab, want absent", p, got)
		}
	}
	if c.MultiHost() || c.MachineMTU() != 0 || c.NodeURI("master-0") != c.Libvirt.URI {
		t.Errorf("one-host lab: multi %v, MTU %d, master-0 at %s", c.MultiHost(), c.MachineMTU(), c.NodeURI("master-0"))
	}
}

// TestHostsInvalid: each mistake in hosts:, nodes[].host and vxlan: is named by its field with
// a fix.
func TestHostsInvalid(t *testing.T) {
	tests := []struct{ name, yaml, field, msg string }{
		{"host without hosts", strings.Replace(twoHosts, twoHosts[:strings.Index(twoHosts, "nodes:")], "", 1), "nodes.worker-0.host", "has no hosts: list"},
		{"unknown host", strings.Replace(twoHosts, "host: hv2}", "host: hv3}", 1), "nodes.worker-0.host", `"hv3", which hosts: does not list`},
		{"no vxlan", strings.Replace(twoHosts, "vxlan: {vni: 4242}\n", "", 1), "vxlan", "is missing"},
		{"bad vni", strings.Replace(twoHosts, "vni: 4242", "vni: 16777216", 1), "vxlan.vni", "not a VNI"},
		{"bad port", strings.Replace(twoHosts, "vni: 4242", "vni: 1, port: 0", 1), "vxlan.port", "not a port"},
		{"small underlay", strings.Replace(twoHosts, "vni: 4242", "vni: 1, underlayMTU: 1400", 1), "vxlan.underlayMTU", "OVN-Kubernetes 1250"},
		{"no ssh", strings.Replace(twoHosts, "qemu+ssh://root@", "qemu+tcp://", 1), "hosts.hv2.uri", "without ssh"},
		{"first uri differs", strings.Replace(twoHosts, "{name: hv1, underlay", "{name: hv1, uri: \"qemu+ssh://root@hv1/system\", underlay", 1), "hosts.hv1.uri", "differs from libvirt.uri"},
		{"same uri", strings.Replace(twoHosts, "qemu+ssh://root@hv2.example.com/system", "qemu:///system", 1), "hosts.hv2.uri", "is also hosts.hv1.uri"},
		{"underlay in machine network", strings.Replace(twoHosts, "10.0.0.12", "192.168.126.5", 1), "hosts.hv2.underlay", "inside network.machineNetwork"},
		{"same underlay", strings.Replace(twoHosts, "10.0.0.12", "10.0.0.11", 1), "hosts.hv2.underlay", "is also hosts.hv1.underlay"},
		{"bad name", strings.Replace(twoHosts, "name: hv2", "name: HV_2", 1), "hosts.HV_2.name", "not a DNS label"},
		{"duplicate name", strings.Replace(strings.Replace(twoHosts, "name: hv2", "name: hv1", 1), "host: hv2", "host: hv1", 1), "hosts.hv1.name", "duplicate host name"},
		{"vxlan on one host", "hosts:\n  - {name: hv1, underlay: 10.0.0.11}\nvxlan: {vni: 1}\n", "vxlan", "lists one host"},
		{"baremetal", twoHosts + "platform: baremetal\nnetwork: {loadBalancer: in-cluster}\n", "platform", "several hosts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.yaml), "lab.yaml")
			if err != nil {
				t.Fatal(err)
			}
			var ces ConfigErrors
			if !errors.As(c.Validate("lab.yaml"), &ces) {
				t.Fatalf("valid; want an error for %s", tt.field)
			}
			for _, e := range ces {
				if e.Field == tt.field && strings.Contains(e.Msg, tt.msg) {
					if e.Fix == "" {
						t.Errorf("%s: no fix given", e.Field)
					}
					return
				}
			}
			t.Errorf("no error for %s containing %q; got:\n%v", tt.field, tt.msg, ces)
		})
	}
}
