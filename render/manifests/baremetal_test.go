package manifests

import (
	"reflect"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/yaml"
)

// testBareMetal is the default lab's addressing in the in-cluster mode.
var testBareMetal = &BareMetal{APIVIPs: []string{"192.168.126.10"}, IngressVIPs: []string{"192.168.126.11"}, MachineNetworks: []string{"192.168.126.0/24"}}

// TestBareMetalGolden renders Infrastructure and cluster-config-v1 for platform baremetal
// (golden files under testdata/golden/baremetal/) and checks, field by field, what
// openshift-install 4.18 writes for it: pkg/asset/manifests/infrastructure.go (case
// baremetal.Name) for the Infrastructure, pkg/types/baremetal (Platform, defaults) for the
// install-config.
func TestBareMetalGolden(t *testing.T) {
	inf, err := InfrastructureOn("ocp4.example.com", "ocp4-x7k2p", 3, 2, testBareMetal)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "baremetal/"+inf.Name, inf.Data)
	var o configv1.Infrastructure
	if err := yaml.Unmarshal(inf.Data, &o); err != nil {
		t.Fatal(err)
	}
	if o.Spec.PlatformSpec.Type != configv1.BareMetalPlatformType || o.Status.Platform != configv1.BareMetalPlatformType ||
		o.Status.PlatformStatus == nil || o.Status.PlatformStatus.Type != configv1.BareMetalPlatformType {
		t.Fatalf("platform types: spec %q, status %q, platformStatus %+v", o.Spec.PlatformSpec.Type, o.Status.Platform, o.Status.PlatformStatus)
	}
	spec, st := o.Spec.PlatformSpec.BareMetal, o.Status.PlatformStatus.BareMetal
	if spec == nil || st == nil {
		t.Fatalf("no baremetal spec/status: %s", inf.Data)
	}
	wantSpec := configv1.BareMetalPlatformSpec{APIServerInternalIPs: []configv1.IP{"192.168.126.10"}, IngressIPs: []configv1.IP{"192.168.126.11"},
		MachineNetworks: []configv1.CIDR{"192.168.126.0/24"}}
	if !reflect.DeepEqual(*spec, wantSpec) {
		t.Errorf("spec.platformSpec.baremetal = %+v, want %+v", *spec, wantSpec)
	}
	wantStatus := configv1.BareMetalPlatformStatus{APIServerInternalIP: "192.168.126.10", APIServerInternalIPs: []string{"192.168.126.10"},
		IngressIP: "192.168.126.11", IngressIPs: []string{"192.168.126.11"}, MachineNetworks: []configv1.CIDR{"192.168.126.0/24"},
		LoadBalancer: &configv1.BareMetalPlatformLoadBalancer{Type: configv1.LoadBalancerTypeOpenShiftManagedDefault}}
	if !reflect.DeepEqual(*st, wantStatus) {
		t.Errorf("status.platformStatus.baremetal = %+v, want %+v", *st, wantStatus)
	}
	// The rest is the platform-None object: same URLs and topologies.
	none, _ := Infrastructure("ocp4.example.com", "ocp4-x7k2p", 3, 2)
	var n configv1.Infrastructure
	yaml.Unmarshal(none.Data, &n)
	if o.Status.APIServerInternalURL != n.Status.APIServerInternalURL || o.Status.ControlPlaneTopology != n.Status.ControlPlaneTopology {
		t.Errorf("baremetal changed the platform-independent status: %+v", o.Status)
	}

	cc, err := ClusterConfigV1(InstallConfig{Name: "ocp4", BaseDomain: "example.com", ClusterNetwork: "10.128.0.0/14", HostPrefix: 23,
		ServiceNetwork: "172.30.0.0/16", MachineNetwork: "192.168.126.0/24", Masters: 3, BareMetal: testBareMetal})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "baremetal/"+cc.Name, cc.Data)
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(cc.Data, &cm); err != nil {
		t.Fatal(err)
	}
	var ic struct {
		Platform map[string]map[string]any `json:"platform"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["install-config"]), &ic); err != nil {
		t.Fatal(err)
	}
	if len(ic.Platform) != 1 || ic.Platform["baremetal"] == nil {
		t.Fatalf("install-config platform = %v, want only baremetal", ic.Platform)
	}
	bm := ic.Platform["baremetal"]
	if !reflect.DeepEqual(bm["apiVIPs"], []any{"192.168.126.10"}) || !reflect.DeepEqual(bm["ingressVIPs"], []any{"192.168.126.11"}) {
		t.Errorf("platform.baremetal VIPs = %v / %v", bm["apiVIPs"], bm["ingressVIPs"])
	}
	if _, ok := bm["hosts"]; ok {
		t.Errorf("platform.baremetal has hosts (labbuild provisions the nodes itself): %v", bm["hosts"])
	}
	if lb, _ := bm["loadBalancer"].(map[string]any); lb["type"] != "OpenShiftManagedDefault" {
		t.Errorf("platform.baremetal.loadBalancer = %v", bm["loadBalancer"])
	}
}

func TestBareMetalRefusesBadInput(t *testing.T) {
	for name, bm := range map[string]*BareMetal{
		"no VIPs":        {MachineNetworks: []string{"192.168.126.0/24"}},
		"bad VIP":        {APIVIPs: []string{"api"}, IngressVIPs: []string{"192.168.126.11"}, MachineNetworks: []string{"192.168.126.0/24"}},
		"bad network":    {APIVIPs: []string{"192.168.126.10"}, IngressVIPs: []string{"192.168.126.11"}, MachineNetworks: []string{"192.168.126.0"}},
		"no machine net": {APIVIPs: []string{"192.168.126.10"}, IngressVIPs: []string{"192.168.126.11"}},
	} {
		if _, err := InfrastructureOn("ocp4.example.com", "ocp4-x7k2p", 3, 2, bm); err == nil {
			t.Errorf("%s: Infrastructure accepted %+v", name, bm)
		}
		if _, err := ClusterConfigV1(InstallConfig{Name: "ocp4", BaseDomain: "example.com", ClusterNetwork: "10.128.0.0/14", HostPrefix: 23,
			ServiceNetwork: "172.30.0.0/16", MachineNetwork: "192.168.126.0/24", Masters: 3, BareMetal: bm}); err == nil {
			t.Errorf("%s: cluster-config-v1 accepted %+v", name, bm)
		}
	}
}

// TestBaremetalProvisioningGolden: the Provisioning CR of the in-cluster mode is the
// installer's baremetal-provisioning-config.yaml.template for an install-config with
// provisioningNetwork Disabled: every template field present, the network Disabled, the
// provisioning addresses empty, one cluster-scoped provisioning-configuration.
func TestBaremetalProvisioningGolden(t *testing.T) {
	f, err := BaremetalProvisioning()
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "99_baremetal-provisioning-config.yaml" || f.Secret {
		t.Errorf("file %q secret=%v", f.Name, f.Secret)
	}
	golden(t, "baremetal/"+f.Name, f.Data)
	var o struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       map[string]any `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(f.Data, &o); err != nil {
		t.Fatal(err)
	}
	if o.APIVersion != "metal3.io/v1alpha1" || o.Kind != "Provisioning" || !reflect.DeepEqual(o.Metadata, map[string]any{"name": "provisioning-configuration"}) {
		t.Errorf("object %s %s %v", o.APIVersion, o.Kind, o.Metadata)
	}
	want := map[string]any{"provisioningInterface": "", "provisioningIP": "", "provisioningNetworkCIDR": "", "provisioningNetwork": "Disabled",
		"provisioningDHCPRange": "", "provisioningOSDownloadURL": "", "watchAllNamespaces": false}
	if !reflect.DeepEqual(o.Spec, want) {
		t.Errorf("spec = %v\nwant %v", o.Spec, want)
	}
}
