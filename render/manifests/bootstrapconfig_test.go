package manifests

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	kubecontrolplanev1 "github.com/openshift/api/kubecontrolplane/v1"
	openshiftcontrolplanev1 "github.com/openshift/api/openshiftcontrolplane/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// testGates is a cluster's FeatureGate status with OpenShift's pod security admission off (4.18
// Default) and one gate on.
var testGates = FeatureGateStatus{Version: "4.18.0", Enabled: []string{"KMSv1", "AdminNetworkPolicy"}, Disabled: []string{"OpenShiftPodSecurityAdmission"}}

// strictDecode decodes YAML b into o, failing on a field o's type lacks.
func strictDecode(t *testing.T, name string, b []byte, o any) {
	t.Helper()
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(o); err != nil {
		t.Fatalf("%s: does not strict-decode into %T: %v", name, o, err)
	}
}

// TestBootstrapConfigsDecode holds the two config files to the upstream types their readers
// decode: openshift/kubernetes openshift-kube-apiserver/enablement GetOpenshiftConfig
// (kubecontrolplane/v1 KubeAPIServerConfig) and the cluster-policy-controller's --config
// (openshiftcontrolplane/v1 OpenShiftControllerManagerConfig).
func TestBootstrapConfigsDecode(t *testing.T) {
	kas, err := KubeAPIServerConfig("172.30.0.0/16", "10.128.0.0/14", testGates)
	if err != nil {
		t.Fatal(err)
	}
	// Not Kubernetes objects (no metadata), so not in TestGolden's table.
	golden(t, KubeAPIServerConfigFile, kas)
	var kc kubecontrolplanev1.KubeAPIServerConfig
	strictDecode(t, KubeAPIServerConfigFile, kas, &kc)
	if kc.Kind != "KubeAPIServerConfig" || kc.APIVersion != "kubecontrolplane.config.openshift.io/v1" {
		t.Errorf("%s: %s %s", KubeAPIServerConfigFile, kc.APIVersion, kc.Kind)
	}
	if kc.ServicesSubnet != "172.30.0.0/16" || kc.ServingInfo.BindAddress != "0.0.0.0:6443" {
		t.Errorf("%s: servicesSubnet %q, bindAddress %q", KubeAPIServerConfigFile, kc.ServicesSubnet, kc.ServingInfo.BindAddress)
	}
	var rea struct {
		RestrictedCIDRs []string `json:"restrictedCIDRs"`
	}
	if err := json.Unmarshal(kc.AdmissionConfig.PluginConfig["network.openshift.io/RestrictedEndpointsAdmission"].Configuration.Raw, &rea); err != nil ||
		!slices.Equal(rea.RestrictedCIDRs, []string{"172.30.0.0/16", "10.128.0.0/14"}) {
		t.Errorf("RestrictedEndpointsAdmission restrictedCIDRs %v (%v), want the service and cluster networks", rea.RestrictedCIDRs, err)
	}
	wantGates := []string{"AdminNetworkPolicy=true", "KMSv1=true", "OpenShiftPodSecurityAdmission=false"}
	if got := []string(kc.APIServerArguments["feature-gates"]); !slices.Equal(got, wantGates) {
		t.Errorf("feature-gates %v, want %v", got, wantGates)
	}
	// PodSecurity enforces by the OpenShiftPodSecurityAdmission gate (KAO render.go
	// bootstrapDefaultConfig).
	for _, tc := range []struct {
		gates FeatureGateStatus
		want  string
	}{
		{testGates, "privileged"},
		{FeatureGateStatus{Version: "4.18.0", Enabled: []string{"OpenShiftPodSecurityAdmission"}}, "restricted"},
	} {
		b, err := KubeAPIServerConfig("172.30.0.0/16", "10.128.0.0/14", tc.gates)
		if err != nil {
			t.Fatal(err)
		}
		var c kubecontrolplanev1.KubeAPIServerConfig
		strictDecode(t, KubeAPIServerConfigFile, b, &c)
		var psa struct {
			Defaults map[string]string `json:"defaults"`
		}
		if err := json.Unmarshal(c.AdmissionConfig.PluginConfig["PodSecurity"].Configuration.Raw, &psa); err != nil || psa.Defaults["enforce"] != tc.want {
			t.Errorf("gates %v: PodSecurity enforce %q (%v), want %q", tc.gates.Enabled, psa.Defaults["enforce"], err, tc.want)
		}
	}
	cpc, err := ClusterPolicyControllerConfig(testGates)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, ClusterPolicyControllerConfigFile, cpc)
	var cc openshiftcontrolplanev1.OpenShiftControllerManagerConfig
	strictDecode(t, ClusterPolicyControllerConfigFile, cpc, &cc)
	if !slices.Equal(cc.FeatureGates, wantGates) {
		t.Errorf("%s: featureGates %v, want %v", ClusterPolicyControllerConfigFile, cc.FeatureGates, wantGates)
	}
	if cc.ServingInfo.BindAddress != "127.0.0.1:10357" || cc.ServingInfo.CertFile == "" || cc.ServingInfo.ClientCA == "" {
		t.Errorf("%s: servingInfo %+v", ClusterPolicyControllerConfigFile, cc.ServingInfo)
	}
	for _, f := range []string{cc.ServingInfo.CertFile, cc.ServingInfo.KeyFile, cc.ServingInfo.ClientCA} {
		if _, ok := NodePathOf(f); !ok {
			t.Errorf("%s: %s is no bootstrap secret", ClusterPolicyControllerConfigFile, f)
		}
	}
}

// TestOpenShiftBootstrapPodsShape compares the bootstrap kube-apiserver and
// kube-controller-manager pods with the installer's (release-4.18):
// cluster-kube-apiserver-operator bindata/bootkube/bootstrap-manifests/kube-apiserver-pod.yaml
// (--openshift-config=/etc/kubernetes/config/<file>, the "config" hostPath volume at
// /etc/kubernetes/config) and cluster-kube-controller-manager-operator
// bindata/bootkube/bootstrap-manifests/kube-controller-manager-pod.yaml (its
// cluster-policy-controller container: command, --config, --namespace, downward-API env,
// port 10357, HTTPS healthz probes on localhost, the config mount).
func TestOpenShiftBootstrapPodsShape(t *testing.T) {
	kas, err := KubeAPIServerPod(imgHyperkube)
	if err != nil {
		t.Fatal(err)
	}
	kcm, err := KubeControllerManagerPod(imgHyperkube, imgCPC, "10.128.0.0/14", 23, "172.30.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	decode := func(b []byte) corev1.Pod {
		var p corev1.Pod
		if err := yaml.UnmarshalStrict(b, &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kasPod, kcmPod := decode(kas), decode(kcm)
	ctr := func(p corev1.Pod, name string) corev1.Container {
		for _, c := range p.Spec.Containers {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("pod %s has no container %s", p.Name, name)
		return corev1.Container{}
	}
	hasMount := func(p corev1.Pod, c corev1.Container) bool {
		for _, m := range c.VolumeMounts {
			if m.MountPath != ConfigMountPath || !m.ReadOnly {
				continue
			}
			for _, v := range p.Spec.Volumes {
				if v.Name == m.Name && v.HostPath != nil && v.HostPath.Path == BootstrapConfigsDir {
					return true
				}
			}
		}
		return false
	}
	cpc := ctr(kcmPod, "cluster-policy-controller")
	env := map[string]string{}
	for _, e := range cpc.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	probesOK := true
	for _, p := range []*corev1.Probe{cpc.LivenessProbe, cpc.ReadinessProbe} {
		probesOK = probesOK && p != nil && p.HTTPGet != nil && p.HTTPGet.Port.IntValue() == 10357 &&
			p.HTTPGet.Scheme == corev1.URISchemeHTTPS && p.HTTPGet.Host == "localhost" && p.HTTPGet.Path == "healthz"
	}
	tests := []struct {
		what string
		ok   bool
	}{
		{"kube-apiserver: first flag --openshift-config", ctr(kasPod, "kube-apiserver").Args[0] == "--openshift-config=/etc/kubernetes/config/"+KubeAPIServerConfigFile},
		{"kube-apiserver: config volume mounted read-only", hasMount(kasPod, ctr(kasPod, "kube-apiserver"))},
		{"kcm: two containers, kube-controller-manager first", len(kcmPod.Spec.Containers) == 2 && kcmPod.Spec.Containers[0].Name == "kube-controller-manager"},
		{"cpc: image", cpc.Image == imgCPC},
		{"cpc: command", slices.Equal(cpc.Command, []string{"cluster-policy-controller", "start"})},
		{"cpc: --config", slices.Contains(cpc.Args, "--config=/etc/kubernetes/config/"+ClusterPolicyControllerConfigFile)},
		{"cpc: --namespace from the downward API", slices.Contains(cpc.Args, "--namespace=$(POD_NAMESPACE)") &&
			env["POD_NAMESPACE"] == "metadata.namespace" && env["POD_NAME"] == "metadata.name"},
		{"cpc: --kubeconfig", slices.Contains(cpc.Args, "--kubeconfig="+KubeconfigsDir+"/localhost.kubeconfig")},
		{"cpc: port 10357", len(cpc.Ports) == 1 && cpc.Ports[0].ContainerPort == 10357},
		{"cpc: HTTPS healthz probes on localhost:10357", probesOK},
		{"cpc: config volume mounted read-only", hasMount(kcmPod, cpc)},
	}
	for _, tc := range tests {
		if !tc.ok {
			t.Errorf("%s: differs from the installer's bootstrap pod", tc.what)
		}
	}
	// Their namespaces are run-level 0, as the operators' renders write them
	// (00_openshift-kube-apiserver-ns.yaml, 00_openshift-kube-controller-manager-ns.yaml): the
	// SCC admission skips them (openshift/kubernetes SkipRunLevelOnePlugins).
	nss, err := NamespaceFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []corev1.Pod{kasPod, kcmPod} {
		found := false
		for _, f := range nss {
			var ns corev1.Namespace
			if err := yaml.Unmarshal(f.Data, &ns); err != nil {
				t.Fatal(err)
			}
			if ns.Name == p.Namespace {
				found = true
				if ns.Labels["openshift.io/run-level"] != "0" {
					t.Errorf("namespace %s of pod %s: run-level %q, want \"0\"", ns.Name, p.Name, ns.Labels["openshift.io/run-level"])
				}
			}
		}
		if !found {
			t.Errorf("no bootstrap namespace %s for pod %s", p.Namespace, p.Name)
		}
	}
}

// TestKubeAPIServerConfigSaidOnce checks that no setting is said both on the bootstrap
// kube-apiserver's command line and in its --openshift-config file. openshift/kubernetes parses
// the file's flags after the command line (cmd/kube-apiserver/app/server.go: ConfigToFlags,
// then cmd.ParseFlags), so a flag in both is overridden (or, for a list, appended to) silently.
// The file's flags are ConfigToFlags' (openshift-kube-apiserver/openshiftkubeapiserver/flags.go):
// apiServerArguments, and always bind-address, secure-port and service-cluster-ip-range.
func TestKubeAPIServerConfigSaidOnce(t *testing.T) {
	b, err := KubeAPIServerConfig("172.30.0.0/16", "10.128.0.0/14", testGates)
	if err != nil {
		t.Fatal(err)
	}
	var kc kubecontrolplanev1.KubeAPIServerConfig
	strictDecode(t, KubeAPIServerConfigFile, b, &kc)
	fromFile := map[string]bool{"bind-address": true, "secure-port": true, "service-cluster-ip-range": true, "admission-control-config-file": true}
	for k := range kc.APIServerArguments {
		fromFile[k] = true
	}
	pb, err := KubeAPIServerPod(imgHyperkube)
	if err != nil {
		t.Fatal(err)
	}
	var p corev1.Pod
	if err := yaml.UnmarshalStrict(pb, &p); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range p.Spec.Containers[0].Args {
		k, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		n++
		if fromFile[k] {
			t.Errorf("--%s is on the command line and in %s", k, KubeAPIServerConfigFile)
		}
	}
	if n < 20 || !fromFile["enable-admission-plugins"] || !fromFile["authorization-mode"] {
		t.Errorf("%d flags on the command line, file flags %v", n, fromFile)
	}
	if !slices.Contains(kc.APIServerArguments["enable-admission-plugins"], "security.openshift.io/SecurityContextConstraint") ||
		!slices.Contains(kc.APIServerArguments["enable-admission-plugins"], "NodeRestriction") ||
		!slices.Contains(kc.APIServerArguments["authorization-mode"], "SystemMasters") {
		t.Errorf("apiServerArguments %v", kc.APIServerArguments)
	}
}

// TestClusterPolicyControllerRBAC compares the cluster-policy-controller's RBAC with
// cluster-kube-controller-manager-operator release-4.18 bindata/bootkube/manifests/
// 00_*-clusterrole{,binding}.yaml: each ClusterRole is bound to its controller's service
// account in openshift-infra and grants what the controller does.
func TestClusterPolicyControllerRBAC(t *testing.T) {
	fs, err := ClusterPolicyControllerRBACFiles()
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string][]rbacv1.PolicyRule{}
	bound := map[string]string{}
	for _, f := range fs {
		if strings.HasSuffix(f.Name, "-clusterrole.yaml") {
			var r rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict(f.Data, &r); err != nil {
				t.Fatal(err)
			}
			roles[r.Name] = r.Rules
			continue
		}
		var b rbacv1.ClusterRoleBinding
		if err := yaml.UnmarshalStrict(f.Data, &b); err != nil {
			t.Fatal(err)
		}
		if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Namespace != "openshift-infra" || b.RoleRef.Name != b.Name {
			t.Errorf("%s: subjects %+v, roleRef %+v", f.Name, b.Subjects, b.RoleRef)
			continue
		}
		bound[b.Name] = b.Subjects[0].Name
	}
	allows := func(rules []rbacv1.PolicyRule, group, resource, name, verb string) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
				(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
				return true
			}
		}
		return false
	}
	const p = "system:openshift:controller:"
	tests := []struct {
		role, sa                    string
		group, resource, name, verb string
		want                        bool
	}{
		{p + "namespace-security-allocation-controller", "namespace-security-allocation-controller", "security.openshift.io", "rangeallocations", "scc-uid", "create", true},
		{p + "namespace-security-allocation-controller", "namespace-security-allocation-controller", "", "namespaces", "x", "update", true},
		{p + "podsecurity-admission-label-syncer-controller", "podsecurity-admission-label-syncer-controller", "security.openshift.io", "securitycontextconstraints", "", "list", true},
		{p + "podsecurity-admission-label-syncer-controller", "podsecurity-admission-label-syncer-controller", "", "namespaces", "x", "patch", true},
		{p + "privileged-namespaces-psa-label-syncer", "privileged-namespaces-psa-label-syncer", "", "namespaces", "kube-system", "patch", true},
		{p + "privileged-namespaces-psa-label-syncer", "privileged-namespaces-psa-label-syncer", "", "namespaces", "openshift-etcd", "patch", false},
	}
	for _, tc := range tests {
		if bound[tc.role] != tc.sa {
			t.Errorf("%s bound to %q, want openshift-infra/%s", tc.role, bound[tc.role], tc.sa)
		}
		if got := allows(roles[tc.role], tc.group, tc.resource, tc.name, tc.verb); got != tc.want {
			t.Errorf("%s: %s %s/%s %s allowed %v, want %v", tc.role, tc.verb, tc.group, tc.resource, tc.name, got, tc.want)
		}
	}
	if len(roles) != 3 || len(bound) != 3 {
		t.Errorf("%d roles, %d bindings, want 3 each", len(roles), len(bound))
	}
}
