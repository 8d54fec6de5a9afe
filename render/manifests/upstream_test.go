package manifests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// upstreamType returns a new value of the k8s.io/api or github.com/openshift/api type that
// apiVersion/kind names: the type each local mirror in types.go stands for.
func upstreamType(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		return &corev1.Namespace{}, true
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "v1 Pod":
		return &corev1.Pod{}, true
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		return &rbacv1.ClusterRole{}, true
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}, true
	case "config.openshift.io/v1 Infrastructure":
		return &configv1.Infrastructure{}, true
	case "config.openshift.io/v1 Network":
		return &configv1.Network{}, true
	case "config.openshift.io/v1 DNS":
		return &configv1.DNS{}, true
	case "config.openshift.io/v1 Ingress":
		return &configv1.Ingress{}, true
	case "config.openshift.io/v1 Proxy":
		return &configv1.Proxy{}, true
	case "config.openshift.io/v1 Scheduler":
		return &configv1.Scheduler{}, true
	case "config.openshift.io/v1 FeatureGate":
		return &configv1.FeatureGate{}, true
	case "config.openshift.io/v1 ClusterVersion":
		return &configv1.ClusterVersion{}, true
	case "operator.openshift.io/v1 Network":
		return &operatorv1.Network{}, true
	case "machineconfiguration.openshift.io/v1 MachineConfig":
		return &mcfgv1.MachineConfig{}, true
	}
	return nil, false
}

// typedEncode is how render/manifests wrote o before it had local mirrors (issue 18): the
// typed value through sigs.k8s.io/yaml, and for OpenShift objects the zero values pruned, the
// status dropped unless StatusKinds has the kind, and an empty spec kept as {}.
func typedEncode(o any, kind string) ([]byte, error) {
	b, err := yaml.Marshal(o)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if api, _ := m["apiVersion"].(string); !strings.Contains(api, "openshift.io/") {
		return b, nil
	}
	if !StatusKinds[kind] {
		delete(m, "status")
	}
	pruneZero(m)
	if _, ok := m["spec"]; !ok {
		m["spec"] = map[string]any{}
	}
	return yaml.Marshal(m)
}

// pruneZero removes, depth first, null values, empty strings and maps left empty from m.
// Lists and booleans are kept (an empty gate list and false are meaningful).
func pruneZero(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case string:
			if x == "" {
				delete(m, k)
			}
		case map[string]any:
			pruneZero(x)
			if len(x) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range x {
				if em, ok := e.(map[string]any); ok {
					pruneZero(em)
				}
			}
		}
	}
}

// renderVariants renders every manifest and static pod of the package over the inputs that
// change their shape: feature sets, topologies, schedulable masters, platform None and
// BareMetal.
func renderVariants(t *testing.T) []File {
	t.Helper()
	crt, key := testSigner(t)
	var out []File
	add := func(f File, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	addAll := func(fs []File, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fs...)
	}
	pod := func(name string) func([]byte, error) {
		return func(b []byte, err error) { add(File{Name: name, Data: b}, err) }
	}
	pod(EtcdPodFile)(EtcdPod(imgEtcd, "198.18.0.10"))
	pod(KubeAPIServerPodFile)(KubeAPIServerPod(imgHyperkube))
	pod(KubeControllerManagerPodFile)(KubeControllerManagerPod(imgHyperkube, imgCPC, "10.128.0.0/14", 23, "172.30.0.0/16"))
	pod(KubeSchedulerPodFile)(KubeSchedulerPod(imgHyperkube))
	pod(CVOPodFile)(CVOPodFromPayload(cvoTemplate(t, "4.18"), imgRelease, "self-managed-high-availability"))
	pod(KubeProxyPodFile)(KubeProxyPod(imgKubeProxy, "10.128.0.0/14"))
	addAll(NamespaceFiles())
	addAll(RBACFiles())
	for _, n := range [][2]int{{3, 2}, {3, 0}, {3, 1}, {1, 0}} {
		add(Infrastructure("lab.example.com", "lab-x7k2p", n[0], n[1]))
		add(InfrastructureOn("lab.example.com", "lab-x7k2p", n[0], n[1], testBareMetal))
	}
	add(InfrastructureOn("lab.example.com", "lab-x7k2p", 3, 2, &BareMetal{APIVIPs: []string{"198.18.0.5", "198.18.0.6"},
		IngressVIPs: []string{"198.18.0.7", "198.18.0.8"}, MachineNetworks: []string{"198.18.0.0/24", "198.18.1.0/24"}}))
	add(NetworkConfig("10.128.0.0/14", 23, "172.30.0.0/16"))
	add(OperatorNetwork("10.132.0.0/14", 24, "172.31.0.0/16", 0))
	add(OperatorNetwork("10.128.0.0/14", 23, "172.30.0.0/16", 1350)) // a lab on several hosts: ovnKubernetesConfig.mtu
	add(DNS("lab.example.com"))
	add(Ingress("lab.example.com"))
	add(Proxy())
	add(Scheduler(0))
	add(Scheduler(2))
	for rel, version := range map[string]string{"4.18": "4.18.0", "4.22": "4.22.0"} {
		m := payloadFeatureGates(t, rel)
		for _, fs := range []string{"Default", "", "TechPreviewNoUpgrade", "DevPreviewNoUpgrade"} {
			for _, p := range []string{"self-managed-high-availability", "ibm-cloud-managed"} {
				add(FeatureGateFromPayload(FeatureGateInput{Manifests: m, Version: version, Profile: p, FeatureSet: fs}))
			}
		}
	}
	add(SupportSecret())
	add(ClusterVersion("https://amd64.origin.releases.ci.openshift.org/graph", "stable-scos-4", "8b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8"))
	for _, bm := range []*BareMetal{nil, testBareMetal} {
		add(ClusterConfigV1(InstallConfig{Name: "lab", BaseDomain: "example.com", ClusterNetwork: "10.128.0.0/14", HostPrefix: 23,
			ServiceNetwork: "172.30.0.0/16", MachineNetwork: "198.18.0.0/24", Masters: 1, BareMetal: bm}))
	}
	add(EtcdEndpoints("198.18.0.10"))
	add(TLSSecret("openshift-etcd", "etcd-signer", crt, key))
	add(CABundle("openshift-etcd", "etcd-ca-bundle", crt))
	add(PullSecret([]byte(`{"auths":{"quay.io":{"auth":"dGVzdDp0ZXN0"}}}`)))
	add(KubeadminSecret([]byte(testHash)))
	add(BootstrapComplete())
	add(Namespace(KubeAPIServerOperatorNamespace))
	add(CAConfigMap("kube-system", "root-ca", "ca.crt", "", crt))
	add(CAConfigMap("openshift-config", "admin-kubeconfig-client-ca", "ca-bundle.crt", "kube-apiserver", crt))
	add(MCSTLSSecret(crt, key))
	addAll(ServiceAccountFiles(key, testPub(t, key)))
	addAll(KubeletSignerFiles(crt, key, crt, key))
	addAll(KubeAPIServerRBACFiles())
	addAll(ClusterPolicyControllerRBACFiles())
	add(InstallManifests("labbuild", "4.18.0"))
	add(SSHMachineConfig("master", testSSHKey))
	add(SSHMachineConfig("worker", testSSHKey))
	return out
}

// TestUpstreamTypes holds the local mirrors (types.go) to the upstream types they stand for:
// every rendered manifest strict-decodes into its k8s.io/api or github.com/openshift/api type
// (a field the upstream type lacks is an error), and encoding that typed value the way the
// package did before the mirrors gives the same bytes, so no field is dropped, renamed or
// written differently. MachineConfig was never typed (a map), so it is only strict-decoded.
func TestUpstreamTypes(t *testing.T) {
	kinds := map[string]bool{}
	for _, f := range renderVariants(t) {
		var tm struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(f.Data, &tm); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		name := fmt.Sprintf("%s (%s %s)", f.Name, tm.APIVersion, tm.Kind)
		o, ok := upstreamType(tm.APIVersion, tm.Kind)
		if !ok {
			t.Errorf("%s: no upstream type known; add it to upstreamType", name)
			continue
		}
		kinds[tm.APIVersion+" "+tm.Kind] = true
		j, err := yaml.YAMLToJSON(f.Data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		if err := dec.Decode(o); err != nil {
			t.Errorf("%s: does not strict-decode into %T: %v", name, o, err)
			continue
		}
		if tm.Kind == "MachineConfig" {
			continue
		}
		want, err := typedEncode(o, tm.Kind)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(f.Data, want) {
			t.Errorf("%s: differs from the typed %T encoding\n--- rendered:\n%s\n--- typed:\n%s", name, o, f.Data, want)
		}
	}
	if len(kinds) != 16 {
		t.Errorf("checked %d kinds, want all 16 of upstreamType: %v", len(kinds), kinds)
	}
}

// TestNoTypedAPIImports keeps the renderers off the typed API packages: render/manifests and
// render/mco (not their tests) link no k8s.io/api, k8s.io/apimachinery or
// github.com/openshift/api package, whose initializers would run at every labbuild start.
func TestNoTypedAPIImports(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	out, err := exec.Command("go", "list", "-deps", ".", "../mco").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if !slices.Contains(pkgs, "sigs.k8s.io/yaml") {
		t.Fatalf("go list -deps gave %d packages without sigs.k8s.io/yaml: not the renderers' list", len(pkgs))
	}
	for _, p := range pkgs {
		for _, bad := range []string{"k8s.io/api/", "k8s.io/apimachinery/", "github.com/openshift/api/"} {
			if strings.HasPrefix(p, bad) {
				t.Errorf("render/manifests or render/mco links %s (use a local mirror in types.go)", p)
			}
		}
	}
}
