package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestMetal3Golden renders a master's and two workers' BMC Secrets and BareMetalHosts and the
// worker MachineSet (golden files under testdata/golden/baremetal/) and checks the fields
// openshift-install 4.18's pkg/asset/machines/baremetal writes and Metal3 reads: the Secret a
// host's credentialsName names holds username and password, the hosts are online, the workers
// paused, the master labelled control-plane, externally provisioned and not paused, the
// MachineSet's selector matches its template's labels.
func TestMetal3Golden(t *testing.T) {
	hosts := []BMCHost{
		{Name: "master-0", BMCAddress: "redfish-virtualmedia+https://192.168.126.1:8000/redfish/v1/Systems/0f6e2d9e-3d2b-8c1e-9a41-5b7d8e2f1a10", BootMAC: "52:54:00:aa:bb:10",
			Username: "labbuild", Password: "not-a-real-password", ControlPlane: true},
		{Name: "worker-0", BMCAddress: "redfish-virtualmedia+https://192.168.126.1:8000/redfish/v1/Systems/0f6e2d9e-3d2b-8c1e-9a41-5b7d8e2f1a00", BootMAC: "52:54:00:aa:bb:01",
			Username: "labbuild", Password: "not-a-real-password"},
		{Name: "worker-1", BMCAddress: "redfish-virtualmedia+https://192.168.126.1:8000/redfish/v1/Systems/0f6e2d9e-3d2b-8c1e-9a41-5b7d8e2f1a01", BootMAC: "52:54:00:aa:bb:02",
			Username: "labbuild", Password: "not-a-real-password"},
	}
	fs, err := BareMetalHosts(hosts)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fs {
		names = append(names, f.Name)
		golden(t, "baremetal/"+f.Name, f.Data)
		if strings.Contains(string(f.Data), "disableCertificateVerification") {
			t.Errorf("%s disables the BMC's certificate verification", f.Name)
		}
		var o map[string]any
		if err := yaml.Unmarshal(f.Data, &o); err != nil {
			t.Fatal(err)
		}
		md := o["metadata"].(map[string]any)
		if md["namespace"] != "openshift-machine-api" {
			t.Errorf("%s: namespace %v", f.Name, md["namespace"])
		}
		switch o["kind"] {
		case "Secret":
			if !f.Secret || !strings.HasSuffix(md["name"].(string), "-bmc-secret") {
				t.Errorf("%s: secret %v %v", f.Name, f.Secret, md["name"])
			}
			d := o["data"].(map[string]any)
			if d["username"] != "bGFiYnVpbGQ=" || d["password"] == nil {
				t.Errorf("%s: data %v", f.Name, d)
			}
		case "BareMetalHost":
			spec := o["spec"].(map[string]any)
			bmc := spec["bmc"].(map[string]any)
			if spec["online"] != true || bmc["credentialsName"] != md["name"].(string)+"-bmc-secret" ||
				!strings.HasPrefix(bmc["address"].(string), "redfish-virtualmedia+https://") || spec["bootMode"] != "UEFI" {
				t.Errorf("%s: spec %v", f.Name, spec)
			}
			annotations, _ := md["annotations"].(map[string]any)
			labels, _ := md["labels"].(map[string]any)
			_, paused := annotations["baremetalhost.metal3.io/paused"]
			master := strings.HasPrefix(md["name"].(string), "master-")
			if paused == master {
				t.Errorf("%s: paused %v (workers are, masters are not)", f.Name, paused)
			}
			if (labels["installer.openshift.io/role"] == "control-plane") != master || (spec["externallyProvisioned"] == true) != master {
				t.Errorf("%s: labels %v, externallyProvisioned %v (a master has the control-plane role and is externally provisioned)", f.Name, labels, spec["externallyProvisioned"])
			}
		default:
			t.Errorf("%s: kind %v", f.Name, o["kind"])
		}
	}
	want := []string{"99_openshift-cluster-api_host-bmc-secrets-0.yaml", "99_openshift-cluster-api_hosts-0.yaml",
		"99_openshift-cluster-api_host-bmc-secrets-1.yaml", "99_openshift-cluster-api_hosts-1.yaml",
		"99_openshift-cluster-api_host-bmc-secrets-2.yaml", "99_openshift-cluster-api_hosts-2.yaml"}
	if !slices.Equal(names, want) {
		t.Errorf("files %v, want %v", names, want)
	}

	ms, err := WorkerMachineSet("ocp4-x7k2p", 2)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "baremetal/"+ms.Name, ms.Data)
	var o machineSet
	if err := yaml.Unmarshal(ms.Data, &o); err != nil {
		t.Fatal(err)
	}
	for k, v := range o.Spec.Selector.MatchLabels {
		if o.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the template's labels %v", k, v, o.Spec.Template.Metadata.Labels)
		}
	}
	if o.Metadata.Name != "ocp4-x7k2p-worker-0" || o.Spec.Replicas != 2 || o.Spec.Template.Spec.ProviderSpec.Value.UserData["name"] != "worker-user-data-managed" {
		t.Errorf("MachineSet %+v", o)
	}

	for _, bad := range []BMCHost{{BMCAddress: "x", BootMAC: "52:54:00:00:00:01", Username: "u", Password: "p"},
		{Name: "w", BMCAddress: "x", BootMAC: "nope", Username: "u", Password: "p"},
		{Name: "w", BMCAddress: "x", BootMAC: "52:54:00:00:00:01", Username: "u"}} {
		if _, err := BareMetalHosts([]BMCHost{bad}); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// TestIPIInstallConfigGolden renders the install-config for openshift-install's bare-metal
// IPI (golden testdata/golden/baremetal/install-config.yaml) and checks the fields the
// installer's types read (pkg/types/baremetal/platform.go Platform and Host).
func TestIPIInstallConfigGolden(t *testing.T) {
	c := IPIConfig{Name: "ocp4", BaseDomain: "example.com", MachineNetwork: "192.168.126.0/24", ClusterNetwork: "10.128.0.0/14", HostPrefix: 23,
		ServiceNetwork: "172.30.0.0/16", APIVIP: "192.168.126.10", IngressVIP: "192.168.126.11", LibvirtURI: "qemu:///system", ExternalBridge: "virbr-ocp4",
		PullSecret: `{"auths":{"example.com":{"auth":"dGVzdDp0ZXN0"}}}`, SSHKey: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITEST test"}
	ca, err := os.ReadFile(filepath.Join("testdata", "mirror-ca.crt")) // a test CA whose key was not kept, as the BMC CA
	if err != nil {
		t.Fatal(err)
	}
	c.AdditionalTrustBundle = string(ca)
	for i, n := range []string{"master-0", "master-1", "master-2", "worker-0"} {
		role := "master"
		if i == 3 {
			role = "worker"
		}
		c.Hosts = append(c.Hosts, IPIHost{Name: n, Role: role, BMCAddress: "redfish-virtualmedia+https://192.168.126.1:8000/redfish/v1/Systems/0f6e2d9e-3d2b-8c1e-9a41-5b7d8e2f1a0" + string(rune('0'+i)),
			BootMAC: "52:54:00:aa:bb:0" + string(rune('0'+i)), Username: "labbuild", Password: "not-a-real-password"})
	}
	b, err := IPIInstallConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "baremetal/install-config.yaml", b)
	var o IPIInstallConfigDoc
	if err := yaml.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	bm := o.Platform.BareMetal
	// The BMC CA in the cluster's trust (user-ca-bundle, named by the Proxy only with policy
	// Always when no proxy is set: installer proxy.go), no host skipping verification.
	if o.AdditionalTrustBundle != string(ca) || o.AdditionalTrustBundlePolicy != "Always" {
		t.Errorf("additionalTrustBundle %q, policy %q; want the CA, Always", o.AdditionalTrustBundle, o.AdditionalTrustBundlePolicy)
	}
	if strings.Contains(string(b), "disableCertificateVerification") {
		t.Error("install-config disables certificate verification")
	}
	if o.ControlPlane.Replicas != 3 || o.Compute[0].Replicas != 1 || bm.ProvisioningNetwork != "Disabled" || bm.ExternalBridge != "virbr-ocp4" || len(bm.Hosts) != 4 {
		t.Errorf("install-config: %+v", o)
	}
	for _, h := range bm.Hosts {
		if !strings.HasPrefix(h.BMC.Address, "redfish-virtualmedia+https://") || h.BMC.Password == "" || h.BootMACAddress == "" {
			t.Errorf("host %+v", h)
		}
	}
	c.Hosts[0].Role = "bootstrap"
	if _, err := IPIInstallConfig(c); err == nil || !strings.Contains(err.Error(), "master-0") {
		t.Errorf("a bootstrap host: %v", err)
	}
	c.Hosts[0].Role = "master"
	c.AdditionalTrustBundle = "not a certificate"
	if _, err := IPIInstallConfig(c); err == nil || !strings.Contains(err.Error(), "additionalTrustBundle") {
		t.Errorf("a bundle without a certificate: %v", err)
	}
}
