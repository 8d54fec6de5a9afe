package lab

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestDefaultConfigIsValid(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate("default"); err != nil {
		t.Fatalf("embedded default invalid:\n%v", err)
	}
	if got := len(c.NodesByRole(RoleMaster)); got != 3 {
		t.Errorf("%d masters, want 3", got)
	}
	if c.Bootstrap().IP != "192.168.126.100" || c.Network.APIVIP != "192.168.126.10" || c.Cluster.Domain() != "ocp4.example.com" {
		t.Errorf("default lab differs from the seed's: %+v", c.Network)
	}
}

func TestValidateNamesFieldAndFix(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		field string
		msg   string
	}{
		{"bad CIDR", "network: {machineNetwork: 192.168.126.0/33}", "network.machineNetwork", "not an IPv4 CIDR"},
		{"host bits", "network: {serviceNetwork: 172.30.0.1/16}", "network.serviceNetwork", "host bits set"},
		{"VIP outside", "network: {apiVIP: 10.1.2.3}", "network.apiVIP", "outside network.machineNetwork"},
		{"ingress VIP equals API VIP", "network: {ingressVIP: 192.168.126.10}", "network.ingressVIP", "is also network.apiVIP"},
		{"overlap cluster/service", "network: {serviceNetwork: 10.128.0.0/16}", "network.serviceNetwork", "overlaps network.clusterNetwork"},
		{"overlap machine/cluster", "network: {clusterNetwork: 192.168.0.0/16}", "network.clusterNetwork", "overlaps network.machineNetwork"},
		{"hostPrefix", "network: {hostPrefix: 12}", "network.hostPrefix", "between"},
		{"node IP outside", nodes("192.168.127.101", "master-1"), "nodes.master-1.ip", "outside"},
		{"duplicate IP", nodes("192.168.126.101", "master-1"), "nodes.master-1.ip", "is also nodes.master-0.ip"},
		{"duplicate name", nodes("192.168.126.102", "master-0"), "nodes.master-0.name", "duplicate node name"},
		{"node in DHCP range", nodes("192.168.126.210", "master-1"), "nodes.master-1.ip", "DHCP range"},
		{"memory below minimum", "sizes: {master: {vcpus: 4, memoryMiB: 8192, diskGiB: 100}}", "sizes.master.memoryMiB", "below the master minimum of 16384"},
		{"per-node memory", strings.Replace(nodes("192.168.126.102", "master-1"), "{name: worker-0, role: worker, ip: 192.168.126.110}", "{name: worker-0, role: worker, ip: 192.168.126.110, memoryMiB: 2048}", 1), "nodes.worker-0.memoryMiB", "below the worker minimum"},
		{"two masters", "nodes:\n  - {name: bootstrap, role: bootstrap, ip: 192.168.126.100}\n  - {name: m0, role: master, ip: 192.168.126.101}\n  - {name: m1, role: master, ip: 192.168.126.102}\n", "nodes", "2 masters"},
		{"key algorithm", "pki: {keyAlgorithm: DSA}", "pki.keyAlgorithm", "unknown algorithm"},
		{"cluster name", "cluster: {name: OCP_4}", "cluster.name", "not a DNS label"},
		{"feature set", "cluster: {featureSet: Everything}", "cluster.featureSet", "unknown feature set"},
		{"domain type", "libvirt: {domainType: xen}", "libvirt.domainType", `"xen"`},
		{"rhcos unverified", "rhcos: {imageURL: \"https://example.com/rhcos-qemu.x86_64.qcow2.gz\"}", "rhcos.imageSHA256", "not 64 hex digits"},
		{"API VIP in DHCP range", "network: {loadBalancer: in-cluster, apiVIP: 192.168.126.220}", "network.apiVIP", "DHCP range"},
		{"ingress VIP in DHCP range", "network: {ingressVIP: 192.168.126.200}", "network.ingressVIP", "DHCP range"},
		{"in-cluster VIPs equal", "network: {loadBalancer: in-cluster, ingressVIP: 192.168.126.10}", "network.ingressVIP", "is also network.apiVIP"},
		{"in-cluster VIP outside", "network: {loadBalancer: in-cluster, apiVIP: 192.168.127.10}", "network.apiVIP", "outside network.machineNetwork"},
		{"load balancer", "network: {loadBalancer: metallb}", "network.loadBalancer", `unknown load balancer "metallb"`},
		{"rhcos scheme", "rhcos: {imageURL: \"ftp://example.com/rhcos.qcow2\", imageSHA256: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "rhcos.imageURL", "not an http(s)"},
		// The renderers' own checks before they trusted validated values (render/libvirt's
		// NetworkSpec.Validate, render/haproxy's Spec.validate): each case is Validate's now.
		{"long bridge", "libvirt: {network: averylongnet}", "libvirt.network", "Linux allows 15"},
		{"DHCP range reversed", "network: {dhcpEnd: 192.168.126.150}", "network.dhcpEnd", "is before network.dhcpStart"},
		{"bad MAC", strings.Replace(nodes("192.168.126.102", "master-1"), "ip: 192.168.126.110}", "ip: 192.168.126.110, mac: \"52:54:00:zz:00:01\"}", 1), "nodes.worker-0.mac", "not a MAC address"},
		{"multicast MAC", strings.Replace(nodes("192.168.126.102", "master-1"), "ip: 192.168.126.110}", "ip: 192.168.126.110, mac: \"01:54:00:00:00:01\"}", 1), "nodes.worker-0.mac", "multicast"},
		{"no cluster domain", "cluster: {baseDomain: \"\"}", "cluster.baseDomain", "not a domain"},
		{"hostname for a node address", nodes("master-1.ocp4.example.com", "master-1"), "nodes.master-1.ip", "not an IPv4 address"},
		{"no masters", "nodes:\n  - {name: bootstrap, role: bootstrap, ip: 192.168.126.100}\n  - {name: worker-0, role: worker, ip: 192.168.126.110}\n", "nodes", "0 masters"},
		{"no API VIP", "network: {apiVIP: \"\"}", "network.apiVIP", "not an IPv4 address"},
		{"stats port", "haproxy: {statsPort: 70000}", "haproxy.statsPort", "not a port"},
		{"no bootstrap with three masters", "nodes:\n  - {name: m0, role: master, ip: 192.168.126.101}\n  - {name: m1, role: master, ip: 192.168.126.102}\n  - {name: m2, role: master, ip: 192.168.126.103}\n", "nodes", "0 bootstrap nodes"},
		{"no bootstrap with a worker", "nodes:\n  - {name: m0, role: master, ip: 192.168.126.101}\n  - {name: w0, role: worker, ip: 192.168.126.110}\n", "nodes", "0 bootstrap nodes"},
		{"single node in-cluster", "network: {loadBalancer: in-cluster}\nnodes:\n  - {name: m0, role: master, ip: 192.168.126.101}\n", "network.loadBalancer", "single-node OpenShift"},
		{"live ISO unverified", "rhcos: {liveISOURL: \"https://example.com/rhcos-live.x86_64.iso\"}", "rhcos.liveISOSHA256", "not 64 hex digits"},
		{"live ISO checksum alone", "rhcos: {liveISOSHA256: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "rhcos.liveISOURL", "is empty"},
		{"space in a node name", strings.Replace(nodes("192.168.126.102", "master-1"), "name: worker-0", "name: \"a b\"", 1), "nodes.a b.name", "not a DNS label"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.yaml), "lab.yaml")
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate("lab.yaml")
			var ces ConfigErrors
			if !errors.As(err, &ces) {
				t.Fatalf("Validate = %v, want ConfigErrors", err)
			}
			for _, e := range ces {
				if e.Field == tt.field && strings.Contains(e.Msg, tt.msg) {
					if e.Fix == "" {
						t.Errorf("%s: no fix given", e.Field)
					}
					return
				}
			}
			t.Errorf("no error for %s containing %q; got:\n%v", tt.field, tt.msg, err)
		})
	}
}

// nodes returns a node list with master-1 (named name) at ip.
func nodes(ip, name string) string {
	return "nodes:\n" +
		"  - {name: bootstrap, role: bootstrap, ip: 192.168.126.100}\n" +
		"  - {name: master-0, role: master, ip: 192.168.126.101}\n" +
		"  - {name: " + name + ", role: master, ip: " + ip + "}\n" +
		"  - {name: master-2, role: master, ip: 192.168.126.103}\n" +
		"  - {name: worker-0, role: worker, ip: 192.168.126.110}\n"
}

func TestTopologies(t *testing.T) {
	for _, tt := range []struct{ name, yaml string }{
		{"1+1", "nodes:\n  - {name: bootstrap, role: bootstrap, ip: 192.168.126.100}\n  - {name: master-0, role: master, ip: 192.168.126.101}\n  - {name: worker-0, role: worker, ip: 192.168.126.110}\n"},
		{"3+0 compact", "nodes:\n  - {name: bootstrap, role: bootstrap, ip: 192.168.126.100}\n  - {name: master-0, role: master, ip: 192.168.126.101}\n  - {name: master-1, role: master, ip: 192.168.126.102}\n  - {name: master-2, role: master, ip: 192.168.126.103}\n"},
	} {
		c, err := ParseConfig([]byte(tt.yaml), "lab.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate("lab.yaml"); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}

func TestLookupPaths(t *testing.T) {
	c := DefaultConfig()
	tests := []struct{ path, want string }{
		{"network.apiVIP", `"192.168.126.10"`},
		{"nodes.master-1.ip", `"192.168.126.102"`},
		{"nodes.worker-1.memoryMiB", ``},
		{"sizes.worker.memoryMiB", `8192`},
		{"cluster", `{"baseDomain":"example.com","featureSet":"Default","name":"ocp4","profile":"self-managed-high-availability"}`},
	}
	for _, tt := range tests {
		got, ok := c.Lookup(tt.path)
		if tt.want == "" {
			if ok {
				t.Errorf("%s = %s, want absent (an unset optional field)", tt.path, got)
			}
			continue
		}
		if !ok || string(got) != tt.want {
			t.Errorf("%s = %s (%v), want %s", tt.path, got, ok, tt.want)
		}
	}
	if _, ok := c.Lookup("nodes.master-9.ip"); ok {
		t.Error("unknown node found")
	}
}

func TestCheckSecrets(t *testing.T) {
	good := `{"auths":{"quay.io":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("u:p4ssw0rd-very-secret")) + `"}}}`
	tests := []struct {
		data string
		ok   bool
	}{
		{good, true},
		{`{"auths":{}}`, false},
		{`not json p4ssw0rd-very-secret`, false},
		{`{"auths":{"quay.io":{"auth":"!!!"}}}`, false},
	}
	for _, tt := range tests {
		err := CheckPullSecret([]byte(tt.data), "access.pullSecretFile")
		if (err == nil) != tt.ok {
			t.Errorf("CheckPullSecret(%.20q) = %v, want ok=%v", tt.data, err, tt.ok)
		}
		if err != nil && strings.Contains(err.Error(), "p4ssw0rd") {
			t.Errorf("error leaks the secret: %v", err)
		}
	}
	if err := CheckSSHKey([]byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHd5s1S7jcY2O6jWvBb7oZ7A4DMpWD5Z2eG0m9lE1kZ7 user@host\n"), "access.sshKeyFile"); err != nil {
		t.Errorf("valid key refused: %v", err)
	}
	if err := CheckSSHKey([]byte("-----BEGIN OPENSSH PRIVATE KEY-----\n"), "access.sshKeyFile"); err == nil {
		t.Error("private key accepted as a public key")
	}
}

// TestInClusterWarnings: the in-cluster mode is valid with 1 or 3 masters; with 1 it warns that
// the VIP cannot fail over, and the host mode never warns.
func TestInClusterWarnings(t *testing.T) {
	one := "nodes:\n  - {name: bootstrap, role: bootstrap, ip: 192.168.126.100}\n  - {name: master-0, role: master, ip: 192.168.126.101}\n  - {name: worker-0, role: worker, ip: 192.168.126.110}\n"
	for _, tt := range []struct {
		name, yaml string
		warn       string
	}{
		{"3 masters in-cluster", "network: {loadBalancer: in-cluster}", ""},
		{"1 master in-cluster", "network: {loadBalancer: in-cluster}\n" + one, "cannot fail over"},
		{"1 master host", one, ""},
	} {
		c, err := ParseConfig([]byte(tt.yaml), "lab.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate("lab.yaml"); err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		w := strings.Join(c.Warnings(), "\n")
		if (tt.warn == "") != (w == "") || !strings.Contains(w, tt.warn) {
			t.Errorf("%s: warnings %q, want one containing %q", tt.name, w, tt.warn)
		}
	}
}

// TestValidateMirrorNoCredentials: a mirror carrying credentials is refused without printing them.
func TestValidateMirrorNoCredentials(t *testing.T) {
	for _, m := range []string{"https://puller:hunter2@mirror.lab/ocp/release", "puller:hunter2@mirror.lab/ocp/release"} {
		c := DefaultConfig()
		c.Release.Mirrors = map[string]string{"quay.io/openshift-release-dev/ocp-release": m}
		err := c.Validate("lab.yaml")
		if err == nil {
			t.Fatalf("mirror %q accepted", m)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("mirror %q: the error prints the password: %v", m, err)
		}
	}
}

// TestPlatformBaremetalConfig: platform: baremetal needs network.loadBalancer: in-cluster
// (an error naming the field otherwise), an unknown platform names "platform", and seed 001's
// sizes are the platform's defaults where yaml sets none, while sizes it sets are kept.
func TestPlatformBaremetalConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		errField   string // "" for valid
		master     Size
		worker     Size
	}{
		{name: "default platform", yaml: "cluster: {name: lab}\n", master: Size{VCPUs: 4, MemoryMiB: 16384, DiskGiB: 100}, worker: Size{VCPUs: 2, MemoryMiB: 8192, DiskGiB: 100}},
		{name: "baremetal in-cluster", yaml: "platform: baremetal\nnetwork: {loadBalancer: in-cluster}\n", master: Size{VCPUs: 4, MemoryMiB: 12288, DiskGiB: 100}, worker: Size{VCPUs: 2, MemoryMiB: 8192, DiskGiB: 100}},
		{name: "baremetal own master memory", yaml: "platform: baremetal\nnetwork: {loadBalancer: in-cluster}\nsizes:\n  master: {memoryMiB: 16384}\n", master: Size{VCPUs: 4, MemoryMiB: 16384, DiskGiB: 100}, worker: Size{VCPUs: 2, MemoryMiB: 8192, DiskGiB: 100}},
		{name: "baremetal host balancer", yaml: "platform: baremetal\nnetwork: {loadBalancer: host}\n", errField: "network.loadBalancer"},
		{name: "baremetal default balancer", yaml: "platform: baremetal\n", errField: "network.loadBalancer"},
		{name: "baremetal master too small", yaml: "platform: baremetal\nnetwork: {loadBalancer: in-cluster}\nsizes:\n  master: {memoryMiB: 8192}\n", errField: "sizes.master.memoryMiB"},
		{name: "unknown platform", yaml: "platform: vsphere\n", errField: "platform"},
		{name: "external bridge", yaml: "network: {externalBridge: baremetal}\n", master: Size{VCPUs: 4, MemoryMiB: 16384, DiskGiB: 100}, worker: Size{VCPUs: 2, MemoryMiB: 8192, DiskGiB: 100}},
		{name: "external bridge name too long", yaml: "network: {externalBridge: baremetal-bridge-0}\n", errField: "network.externalBridge"},
		{name: "external bridge is the lab bridge", yaml: "network: {externalBridge: virbr-ocp4}\n", errField: "network.externalBridge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.yaml), "yaml")
			if err != nil {
				t.Fatal(err)
			}
			verr := c.Validate("yaml")
			if tc.errField != "" {
				if verr == nil || !strings.Contains(verr.Error(), "yaml") || !strings.Contains(verr.Error(), tc.errField+": ") {
					t.Fatalf("Validate: %v, want an error naming %s", verr, tc.errField)
				}
				return
			}
			if verr != nil {
				t.Fatalf("Validate: %v", verr)
			}
			if c.Sizes.Master != tc.master || c.Sizes.Worker != tc.worker {
				t.Errorf("sizes master %+v worker %+v, want %+v %+v", c.Sizes.Master, c.Sizes.Worker, tc.master, tc.worker)
			}
		})
	}
}

// TestSNOShape: one master with no bootstrap and no worker is single-node OpenShift; the
// master then hosts the bootstrap control plane (BootstrapHost). `labbuild init --sno`'s lab
// validates and is sized at the single-node minimums.
func TestSNOShape(t *testing.T) {
	for _, tt := range []struct {
		name string
		yaml string
		sno  bool
		host string
	}{
		{"default", "", false, "bootstrap"},
		{"one master alone", "nodes:\n  - {name: m0, role: master, ip: 192.168.126.101}\n", true, "m0"},
		{"one master with a bootstrap", "nodes:\n  - {name: b, role: bootstrap, ip: 192.168.126.100}\n  - {name: m0, role: master, ip: 192.168.126.101}\n", false, "b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.yaml), "lab.yaml")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Validate("lab.yaml"); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if c.SNO() != tt.sno || c.BootstrapHost().Name != tt.host {
				t.Errorf("SNO() = %v, BootstrapHost() = %q; want %v, %q", c.SNO(), c.BootstrapHost().Name, tt.sno, tt.host)
			}
		})
	}
	c, err := ParseConfig(DefaultSNOLabYAML(), "lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate("lab.yaml"); err != nil {
		t.Fatalf("init --sno's lab: %v", err)
	}
	m := c.NodesByRole(RoleMaster)
	if !c.SNO() || len(m) != 1 || m[0].Name != "master-0" {
		t.Fatalf("init --sno's lab is not one master-0 alone: %+v", c.Nodes)
	}
	if sz := c.SizeOf(m[0]); sz.VCPUs != SNOMinVCPUs || sz.MemoryMiB != SNOMinMemoryMiB || sz.DiskGiB != SNOMinDiskGiB {
		t.Errorf("init --sno's master is %+v, want the single-node minimums", sz)
	}
	if !strings.Contains(string(DefaultSNOLabYAML()), "docs/sno.md") {
		t.Errorf("init --sno's lab does not point at docs/sno.md")
	}
}
