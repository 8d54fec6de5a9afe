package libvirt

import (
	"bytes"
	"encoding/xml"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"libvirt.org/go/libvirtxml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// labSpec is the default lab's network (targets/default-lab.yaml), with derived MACs.
func labSpec() NetworkSpec {
	s := NetworkSpec{
		Name: "ocp4", Domain: "ocp4.example.com", MachineNetwork: "192.168.126.0/24",
		Gateway: "192.168.126.1", APIVIP: "192.168.126.10", IngressVIP: "192.168.126.11",
		DHCPStart: "192.168.126.200", DHCPEnd: "192.168.126.254",
	}
	for _, n := range []struct{ name, role, ip string }{
		{"bootstrap", RoleBootstrap, "192.168.126.100"},
		{"master-0", RoleMaster, "192.168.126.101"}, {"master-1", RoleMaster, "192.168.126.102"}, {"master-2", RoleMaster, "192.168.126.103"},
		{"worker-0", RoleWorker, "192.168.126.110"}, {"worker-1", RoleWorker, "192.168.126.111"},
	} {
		s.Nodes = append(s.Nodes, Node{Name: n.name, Role: n.role, IP: n.ip, MAC: MAC("ocp4", n.name)})
	}
	return s
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

// renderAll returns every rendered golden document with its virt-xml-validate schema.
func renderAll(t *testing.T) map[string]struct {
	data   []byte
	schema string
} {
	t.Helper()
	out := map[string]struct {
		data   []byte
		schema string
	}{}
	add := func(name, schema string, b []byte, err error) {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = struct {
			data   []byte
			schema string
		}{b, schema}
	}
	b, err := NetworkXML(labSpec())
	add("network.xml", "network", b, err)
	mh := labSpec()
	mh.MTU = 1450 // a lab on several hosts: the VXLAN tunnel's capacity
	b, err = NetworkXML(mh)
	add("network-mtu.xml", "network", b, err)
	b, err = IsolatedNetworkXML("ocp4", 1450)
	add("network-isolated.xml", "network", b, err)
	b, err = PoolXML(PoolSpec{Name: "ocp4", Path: "/var/lib/libvirt/images/ocp4"})
	add("pool.xml", "storagepool", b, err)
	b, err = VolumeXML(VolumeSpec{Name: VolumeName("ocp4", "master-0"), CapacityGiB: 100})
	add("volume.xml", "storagevol", b, err)
	b, err = VolumeXML(VolumeSpec{Name: VolumeName("ocp4", "worker-0"), CapacityGiB: 120, BackingFile: "/var/lib/labbuild/rhcos-418.94-qemu.x86_64.qcow2"})
	add("volume-backing.xml", "storagevol", b, err)
	b, err = DomainXML(DomainSpec{Name: "ocp4-master-0", Type: "kvm", VCPUs: 4, MemoryMiB: 16384,
		Disk: "/var/lib/libvirt/images/ocp4/ocp4-master-0.qcow2", Network: "ocp4", MAC: MAC("ocp4", "master-0"),
		Ignition: "/home/lab/out/ignition/master-0.ign"})
	add("domain-fwcfg.xml", "domain", b, err)
	b, err = DomainXML(DomainSpec{Name: "ocp4-worker-0", Type: "qemu", VCPUs: 2, MemoryMiB: 8192,
		Disk: "/var/lib/libvirt/images/ocp4/ocp4-worker-0.qcow2", Network: "ocp4", MAC: MAC("ocp4", "worker-0"),
		ISO: "/var/lib/libvirt/images/ocp4/worker-0-live.iso"})
	add("domain-iso.xml", "domain", b, err)
	return out
}

func TestGolden(t *testing.T) {
	for name, d := range renderAll(t) {
		t.Run(name, func(t *testing.T) { golden(t, name, d.data) })
	}
}

// TestVirtXMLValidate checks every rendered document against libvirt's RNG schemas.
func TestVirtXMLValidate(t *testing.T) {
	bin := testenv.Require(t, "virt-xml-validate")
	dir := t.TempDir()
	for name, d := range renderAll(t) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, d.data, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, p, d.schema).CombinedOutput(); err != nil {
			t.Errorf("virt-xml-validate %s %s: %v\n%s", name, d.schema, err, out)
		}
	}
	// The validator must be able to fail: a domain without a name is invalid.
	bad := filepath.Join(dir, "bad.xml")
	os.WriteFile(bad, []byte("<domain type='kvm'><memory>1</memory></domain>"), 0o644)
	if err := exec.Command(bin, bad, "domain").Run(); err == nil {
		t.Error("virt-xml-validate accepted a domain without name or os")
	}
}

func TestNetworkContent(t *testing.T) {
	n, err := Network(labSpec())
	if err != nil {
		t.Fatal(err)
	}
	hosts := dnsHosts(n)
	for _, want := range []string{
		"192.168.126.10 api.ocp4.example.com", "192.168.126.10 api-int.ocp4.example.com",
		"192.168.126.100 bootstrap.ocp4.example.com", "192.168.126.101 etcd-0.ocp4.example.com",
		"192.168.126.103 etcd-2.ocp4.example.com", "192.168.126.111 worker-1.ocp4.example.com",
	} {
		if !contains(hosts, want) {
			t.Errorf("dns hosts lack %q: %v", want, hosts)
		}
	}
	if contains(hosts, "192.168.126.110 etcd-3.ocp4.example.com") || len(n.DNS.SRVs) != 3 {
		t.Errorf("want etcd aliases and SRV records for the 3 masters only; srv %v", dnsSRVs(n))
	}
	if got := dnsmasqOpts(n); len(got) != 1 || got[0] != "address=/apps.ocp4.example.com/192.168.126.11" {
		t.Errorf("dnsmasq options = %v, want the *.apps wildcard", got)
	}
	if len(n.IPs[0].DHCP.Hosts) != 6 || n.Bridge.Name != "virbr-ocp4" || n.IPs[0].Prefix != 24 {
		t.Errorf("dhcp hosts %d, bridge %q, prefix %d", len(n.IPs[0].DHCP.Hosts), n.Bridge.Name, n.IPs[0].Prefix)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestMAC(t *testing.T) {
	a, b, c := MAC("ocp4", "master-0"), MAC("ocp4", "master-1"), MAC("lab2", "master-0")
	if a != MAC("ocp4", "master-0") {
		t.Error("MAC is not deterministic")
	}
	if a == b || a == c {
		t.Errorf("MACs collide: %s %s %s", a, b, c)
	}
	if !strings.HasPrefix(a, "52:54:00:") {
		t.Errorf("MAC %s lacks QEMU's 52:54:00 prefix", a)
	}
	if _, err := parseMAC(a); err != nil {
		t.Error(err)
	}
}

// TestNetworkUnparsable: a machine network that does not parse is an error (Network needs
// its netmask). The other cases this test held (a long bridge name, a VIP outside the
// network, a reversed DHCP range, duplicate addresses, bad MACs, no domain) are lab's
// (lab.TestValidateNamesFieldAndFix): Network trusts the validated lab config.
func TestNetworkUnparsable(t *testing.T) {
	s := labSpec()
	s.MachineNetwork = "192.168.126.0"
	if _, err := Network(s); err == nil || !strings.Contains(err.Error(), "machine network") {
		t.Errorf("err = %v, want it to mention the machine network", err)
	}
}

func TestDomainErrors(t *testing.T) {
	ok := DomainSpec{Name: "c-n", Type: "qemu", VCPUs: 1, MemoryMiB: 64, Disk: "/d.qcow2", Network: "n", MAC: MAC("c", "n")}
	for _, tc := range []struct {
		name, want string
		edit       func(*DomainSpec)
	}{
		{"no type", "domainType", func(d *DomainSpec) { d.Type = "" }},
		{"zero memory", "memoryMiB 0", func(d *DomainSpec) { d.MemoryMiB = 0 }},
		{"relative disk", "absolute", func(d *DomainSpec) { d.Disk = "d.qcow2" }},
		{"relative ignition", "ignition", func(d *DomainSpec) { d.Ignition = "x.ign" }},
		{"bad mac", "mac", func(d *DomainSpec) { d.MAC = "x" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ok
			tc.edit(&d)
			_, err := Domain(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if _, err := Domain(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := Volume(VolumeSpec{Name: "v", CapacityGiB: 0}); err == nil {
		t.Error("a zero-size volume was accepted")
	}
	if _, err := Pool(PoolSpec{Name: "p", Path: "rel/dir"}); err == nil {
		t.Error("a relative pool path was accepted")
	}
}

// TestNetworkDiff shows the comparison is semantic: libvirt's reordering, netmask form and
// added attributes are not drift; a changed or removed record is.
func TestNetworkDiff(t *testing.T) {
	want, _ := Network(labSpec())
	roundTrip := func(edit func(n *libvirtxml.Network)) *libvirtxml.Network {
		b, _ := xml.Marshal(want)
		var n libvirtxml.Network
		if err := xml.Unmarshal(b, &n); err != nil {
			t.Fatal(err)
		}
		edit(&n)
		return &n
	}
	for _, tc := range []struct {
		name  string
		edit  func(n *libvirtxml.Network)
		opts  DiffOptions
		drift string
	}{
		{"identical", func(n *libvirtxml.Network) {}, DiffOptions{}, ""},
		{"libvirt rewrites", func(n *libvirtxml.Network) {
			n.UUID = "0b5d7d2c-0000-4000-8000-000000000000"
			n.IPs[0].Prefix, n.IPs[0].Netmask = 0, "255.255.255.0"
			h := n.DNS.Host
			h[0], h[len(h)-1] = h[len(h)-1], h[0]
			s := n.DNS.SRVs
			s[0], s[2] = s[2], s[0]
			n.IPs[0].DHCP.Hosts[0].MAC = strings.ToUpper(n.IPs[0].DHCP.Hosts[0].MAC)
		}, DiffOptions{}, ""},
		{"host edited by hand", func(n *libvirtxml.Network) { n.DNS.Host[1].IP = "192.168.126.99" }, DiffOptions{}, "dns host: missing 192.168.126.100 bootstrap"},
		{"srv removed", func(n *libvirtxml.Network) { n.DNS.SRVs = n.DNS.SRVs[:2] }, DiffOptions{}, "dns srv: missing _etcd-server-ssl._tcp.ocp4.example.com etcd-2"},
		{"wildcard dropped", func(n *libvirtxml.Network) { n.DnsmasqOptions = nil }, DiffOptions{}, "dnsmasq option: missing address=/apps"},
		{"test driver drops options", func(n *libvirtxml.Network) { n.DnsmasqOptions = nil }, DiffOptions{IgnoreDnsmasqOptions: true}, ""},
		{"mtu set by hand", func(n *libvirtxml.Network) { n.MTU = &libvirtxml.NetworkMTU{Size: 9000} }, DiffOptions{}, `mtu: want "", got "9000"`},
		{"netmask changed", func(n *libvirtxml.Network) { n.IPs[0].Prefix, n.IPs[0].Netmask = 0, "255.255.0.0" }, DiffOptions{}, `ip: want "192.168.126.1/24", got "192.168.126.1/16"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NetworkDiff(want, roundTrip(tc.edit), tc.opts)
			if tc.drift == "" {
				if len(d) != 0 {
					t.Errorf("unexpected drift: %v", d)
				}
				return
			}
			if !strings.Contains(strings.Join(d, "\n"), tc.drift) {
				t.Errorf("drift %v does not mention %q", d, tc.drift)
			}
		})
	}
}

func TestDomainDiff(t *testing.T) {
	spec := DomainSpec{Name: "ocp4-worker-0", Type: "qemu", VCPUs: 2, MemoryMiB: 8192, Disk: "/p/ocp4-worker-0.qcow2", Network: "ocp4", MAC: MAC("ocp4", "worker-0")}
	want, _ := Domain(spec)
	got, _ := Domain(spec)
	got.Memory = &libvirtxml.DomainMemory{Value: 8192 * 1024, Unit: "KiB"}
	got.UUID = "x"
	if d := DomainDiff(want, got); len(d) != 0 {
		t.Errorf("same domain in KiB differs: %v", d)
	}
	bigger := spec
	bigger.MemoryMiB = 12288
	w2, _ := Domain(bigger)
	d := DomainDiff(w2, got)
	if len(d) != 1 || !strings.HasPrefix(d[0], "memory:") || DomainNeedsReplace(d) {
		t.Errorf("memory change: diff %v, replace %v; want one memory line and an update", d, DomainNeedsReplace(d))
	}
	moved := spec
	moved.Disk = "/q/ocp4-worker-0.qcow2"
	w3, _ := Domain(moved)
	if d := DomainDiff(w3, got); !DomainNeedsReplace(d) {
		t.Errorf("disk change %v should need a replace", d)
	}
}

func TestVolumeDiff(t *testing.T) {
	want, _ := Volume(VolumeSpec{Name: "a.qcow2", CapacityGiB: 100})
	got := &libvirtxml.StorageVolume{Name: "a.qcow2", Capacity: &libvirtxml.StorageVolumeSize{Unit: "G", Value: 100},
		Target: &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}}}
	if d := VolumeDiff(want, got); len(d) != 0 {
		t.Errorf("100 G vs 100 GiB in bytes: %v", d)
	}
	got.Capacity.Value = 50
	if d := VolumeDiff(want, got); len(d) != 1 {
		t.Errorf("capacity drift not reported: %v", d)
	}
}
