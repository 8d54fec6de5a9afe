package manifests

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// Digest pull specs of the test payload (fake digests: only the shape matters).
const (
	imgEtcd      = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:1111111111111111111111111111111111111111111111111111111111111111"
	imgHyperkube = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	imgKubeProxy = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:3333333333333333333333333333333333333333333333333333333333333333"
	imgPod       = "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:4444444444444444444444444444444444444444444444444444444444444444"
	imgRelease   = "quay.io/openshift-release-dev/ocp-release@sha256:5555555555555555555555555555555555555555555555555555555555555555"
	// A bcrypt hash of "test" (cost 10), a fixed value so the golden file is stable.
	testHash = "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./render/manifests -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; run go test ./render/manifests -update and review the diff\n--- got:\n%s", name, got)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGolden renders every static pod and cluster manifest for the default lab's values and
// compares it with testdata/golden.
func TestGolden(t *testing.T) {
	crt, key := mustRead(t, "testdata/throwaway-signer.crt"), mustRead(t, "testdata/throwaway-signer.key")
	one := func(f File, err error) ([]File, error) { return []File{f}, err }
	pod := func(name string, b []byte, err error) ([]File, error) { return []File{{Name: name, Data: b}}, err }
	tests := []struct {
		name   string
		render func() ([]File, error)
	}{
		{"etcd", func() ([]File, error) { b, err := EtcdPod(imgEtcd, "192.168.126.100"); return pod(EtcdPodFile, b, err) }},
		{"kube-apiserver", func() ([]File, error) {
			b, err := KubeAPIServerPod(imgHyperkube, "172.30.0.0/16")
			return pod(KubeAPIServerPodFile, b, err)
		}},
		{"kube-controller-manager", func() ([]File, error) {
			b, err := KubeControllerManagerPod(imgHyperkube, "10.128.0.0/14", 23, "172.30.0.0/16")
			return pod(KubeControllerManagerPodFile, b, err)
		}},
		{"kube-scheduler", func() ([]File, error) {
			b, err := KubeSchedulerPod(imgHyperkube)
			return pod(KubeSchedulerPodFile, b, err)
		}},
		{"cvo", func() ([]File, error) {
			b, err := CVOPod(imgRelease, "self-managed-high-availability")
			return pod(CVOPodFile, b, err)
		}},
		{"kube-proxy", func() ([]File, error) {
			b, err := KubeProxyPod(imgKubeProxy, "10.128.0.0/14")
			return pod(KubeProxyPodFile, b, err)
		}},
		{"crio-pause", func() ([]File, error) { b, err := CRIOPauseConf(imgPod); return pod("00-pause.conf", b, err) }},
		{"namespaces", NamespaceFiles},
		{"rbac", RBACFiles},
		{"infrastructure", func() ([]File, error) { return one(Infrastructure("ocp4.example.com", "ocp4-x7k2p", 3, 2)) }},
		{"network-config", func() ([]File, error) { return one(NetworkConfig("10.128.0.0/14", 23, "172.30.0.0/16")) }},
		{"network-operator", func() ([]File, error) { return one(OperatorNetwork("10.128.0.0/14", 23, "172.30.0.0/16")) }},
		{"dns", func() ([]File, error) { return one(DNS("ocp4.example.com")) }},
		{"ingress", func() ([]File, error) { return one(Ingress("ocp4.example.com")) }},
		{"proxy", func() ([]File, error) { return one(Proxy()) }},
		{"scheduler", func() ([]File, error) { return one(Scheduler(2)) }},
		{"featuregate", func() ([]File, error) { return one(FeatureGate("Default", "self-managed-high-availability", "4.18.0")) }},
		{"clusterversion", func() ([]File, error) {
			return one(ClusterVersion("4.18.0", "8b1c2d3e-4f50-4a61-8b72-93a4b5c6d7e8"))
		}},
		{"cluster-config-v1", func() ([]File, error) {
			return one(ClusterConfigV1(InstallConfig{Name: "ocp4", BaseDomain: "example.com", ClusterNetwork: "10.128.0.0/14", HostPrefix: 23,
				ServiceNetwork: "172.30.0.0/16", MachineNetwork: "192.168.126.0/24", Masters: 3, Workers: 2}))
		}},
		{"etcd-endpoints", func() ([]File, error) { return one(EtcdEndpoints("192.168.126.100")) }},
		{"etcd-signer", func() ([]File, error) { return one(TLSSecret("openshift-etcd", "etcd-signer", crt, key)) }},
		{"etcd-ca-bundle", func() ([]File, error) { return one(CABundle("openshift-etcd", "etcd-ca-bundle", crt)) }},
		{"pull-secret", func() ([]File, error) {
			return one(PullSecret([]byte(`{"auths":{"quay.io":{"auth":"dGVzdDp0ZXN0"}}}`)))
		}},
		{"kubeadmin", func() ([]File, error) { return one(KubeadminSecret([]byte(testHash))) }},
		{"bootstrap-complete", func() ([]File, error) { return one(BootstrapComplete()) }},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := tt.render()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range fs {
				if seen[f.Name] {
					t.Errorf("file name %s used twice", f.Name)
				}
				seen[f.Name] = true
				// Every YAML file is one object with apiVersion, kind and a name.
				if strings.HasSuffix(f.Name, ".yaml") {
					var m struct {
						APIVersion, Kind string
						Metadata         struct{ Name string }
					}
					if err := yaml.Unmarshal(f.Data, &m); err != nil || m.APIVersion == "" || m.Kind == "" || m.Metadata.Name == "" {
						t.Errorf("%s: not a Kubernetes object (%v): %.200s", f.Name, err, f.Data)
					}
				}
				golden(t, f.Name, f.Data)
			}
		})
	}
}

// TestApplyOrder checks that file names order namespaces before config singletons, RBAC and
// namespaced objects, and that release CRD names (0000_...) sort before all of them.
func TestApplyOrder(t *testing.T) {
	ns, _ := NamespaceFiles()
	rb, _ := RBACFiles()
	inf, _ := Infrastructure("d", "i", 3, 2)
	ep, _ := EtcdEndpoints("10.0.0.1")
	names := []string{ep.Name, rb[0].Name, inf.Name, ns[0].Name, "0000_10_config-operator_01_infrastructures-Default.crd.yaml"}
	sort.Strings(names)
	want := []string{"0000_10_config-operator_01_infrastructures-Default.crd.yaml", ns[0].Name, inf.Name, rb[0].Name, ep.Name}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("sorted order %v, want %v", names, want)
	}
}

// TestFeatureGateMatchesPayload compares the FeatureGate status with the payload's own
// featureGate-SelfManagedHA-Default.yaml (cluster-config-api image, openshift/api release-4.18).
func TestFeatureGateMatchesPayload(t *testing.T) {
	shared := testenv.RequireShared(t)
	var want configv1.FeatureGate
	if err := json.Unmarshal(mustRead(t, filepath.Join(shared, "fixtures/release/cluster-config-api/manifests/featureGate-SelfManagedHA-Default.yaml")), &want); err != nil {
		t.Fatal(err)
	}
	f, err := FeatureGate("Default", "self-managed-high-availability", "4.18.0")
	if err != nil {
		t.Fatal(err)
	}
	var got configv1.FeatureGate
	if err := yaml.Unmarshal(f.Data, &got); err != nil {
		t.Fatal(err)
	}
	names := func(a []configv1.FeatureGateAttributes) string {
		var r []string
		for _, x := range a {
			r = append(r, string(x.Name))
		}
		sort.Strings(r)
		return strings.Join(r, ",")
	}
	g, w := got.Status.FeatureGates[0], want.Status.FeatureGates[0]
	if names(g.Enabled) != names(w.Enabled) || names(g.Disabled) != names(w.Disabled) {
		t.Errorf("feature gates differ from the payload's:\nenabled  %s\nwant     %s\ndisabled %s\nwant     %s", names(g.Enabled), names(w.Enabled), names(g.Disabled), names(w.Disabled))
	}
	if g.Version != "4.18.0" || got.Spec.FeatureSet != "" {
		t.Errorf("version %q featureSet %q, want 4.18.0 and \"\" (Default)", g.Version, got.Spec.FeatureSet)
	}
}

// TestTopologies is openshift-install's replica → topology table.
func TestTopologies(t *testing.T) {
	tests := []struct {
		masters, workers int
		cp, infra        configv1.TopologyMode
	}{
		{3, 2, "HighlyAvailable", "HighlyAvailable"},
		{3, 0, "HighlyAvailable", "HighlyAvailable"},
		{3, 1, "HighlyAvailable", "SingleReplica"},
		{1, 1, "SingleReplica", "SingleReplica"},
		{1, 0, "SingleReplica", "SingleReplica"},
	}
	for _, tt := range tests {
		cp, infra := Topologies(tt.masters, tt.workers)
		if cp != tt.cp || infra != tt.infra {
			t.Errorf("Topologies(%d, %d) = %s, %s; want %s, %s", tt.masters, tt.workers, cp, infra, tt.cp, tt.infra)
		}
	}
}

// TestErrors checks that bad inputs are refused with a message naming the field, and that no
// error carries key or secret bytes.
func TestErrors(t *testing.T) {
	key := mustRead(t, "testdata/throwaway-signer.key")
	crt := mustRead(t, "testdata/throwaway-signer.crt")
	tests := []struct {
		name, want string
		err        func() error
	}{
		{"tag image", "not a digest", func() error { _, err := EtcdPod("quay.io/x/etcd:4.18", "10.0.0.1"); return err }},
		{"empty image", "empty image", func() error { _, err := KubeSchedulerPod(""); return err }},
		{"bad bootstrap ip", "bootstrap IP", func() error { _, err := EtcdPod(imgEtcd, "bootstrap"); return err }},
		{"bad cidr", "service network", func() error { _, err := KubeAPIServerPod(imgHyperkube, "172.30.0.1/16"); return err }},
		{"host prefix", "host prefix 12", func() error {
			_, err := KubeControllerManagerPod(imgHyperkube, "10.128.0.0/14", 12, "172.30.0.0/16")
			return err
		}},
		{"no profile", "cluster.profile", func() error { _, err := CVOPod(imgRelease, ""); return err }},
		{"custom feature set", "CustomNoUpgrade", func() error {
			_, err := FeatureGate("CustomNoUpgrade", "self-managed-high-availability", "4.18.0")
			return err
		}},
		{"unknown profile", "cluster.profile", func() error { _, err := FeatureGate("Default", "nope", "4.18.0"); return err }},
		{"bad version", "release.version", func() error { _, err := ClusterVersion("latest", "x"); return err }},
		{"plain password", "not a bcrypt hash", func() error { _, err := KubeadminSecret([]byte("c2VjcmV0cGFzc3dvcmQ=")); return err }},
		{"key as cert", "not a PEM certificate", func() error { _, err := TLSSecret("ns", "s", key, key); return err }},
		{"cert as key", "not a PEM private key", func() error { _, err := TLSSecret("ns", "s", crt, crt); return err }},
	}
	for _, tt := range tests {
		err := tt.err()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("%s: error leaks secret material: %v", tt.name, err)
		}
	}
}

// TestRandomIDs checks the shapes of the random identities and that they come from the reader.
func TestRandomIDs(t *testing.T) {
	seed := func() *bytes.Reader { return bytes.NewReader(bytes.Repeat([]byte{7, 200, 31, 99, 250, 3}, 40)) }
	id, err := InfraID("a-very-long-cluster-name-indeed", seed())
	if err != nil || !strings.HasPrefix(id, "a-very-long-cluster-n-") || len(id) != 21+1+5 {
		t.Errorf("InfraID = %q, %v", id, err)
	}
	if id2, _ := InfraID("a-very-long-cluster-name-indeed", seed()); id2 != id {
		t.Errorf("InfraID not a function of its reader: %q vs %q", id, id2)
	}
	u, err := ClusterID(seed())
	if err != nil || len(u) != 36 || u[14] != '4' || !strings.ContainsRune("89ab", rune(u[19])) {
		t.Errorf("ClusterID = %q, %v; want a version 4 UUID", u, err)
	}
	pw, err := KubeadminPassword(seed())
	if err != nil || len(pw) != 23 || strings.Count(pw, "-") != 3 {
		t.Errorf("KubeadminPassword = %q, %v", pw, err)
	}
	if _, err := KubeadminPassword(bytes.NewReader(nil)); err == nil {
		t.Error("KubeadminPassword with an empty reader: no error")
	}
}

// TestPodPaths checks that every secret and kubeconfig path a bootstrap pod names is in
// BootstrapTLSPaths or BootstrapKubeconfigPaths, so the Ignition places every file a pod reads.
func TestPodPaths(t *testing.T) {
	pods := map[string]func() ([]byte, error){
		"etcd":           func() ([]byte, error) { return EtcdPod(imgEtcd, "10.0.0.1") },
		"kube-apiserver": func() ([]byte, error) { return KubeAPIServerPod(imgHyperkube, "172.30.0.0/16") },
		"kcm": func() ([]byte, error) {
			return KubeControllerManagerPod(imgHyperkube, "10.128.0.0/14", 23, "172.30.0.0/16")
		},
		"scheduler": func() ([]byte, error) { return KubeSchedulerPod(imgHyperkube) },
		"cvo":       func() ([]byte, error) { return CVOPod(imgRelease, "self-managed-high-availability") },
	}
	used := map[string]bool{}
	for name, render := range pods {
		b, err := render()
		if err != nil {
			t.Fatal(err)
		}
		var p corev1.Pod
		if err := yaml.UnmarshalStrict(b, &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		c := p.Spec.Containers[0]
		words := append([]string{}, c.Args...)
		if c.LivenessProbe != nil && c.LivenessProbe.Exec != nil {
			words = append(words, c.LivenessProbe.Exec.Command...)
		}
		for _, w := range words {
			_, v, ok := strings.Cut(w, "=")
			if !ok || !(strings.HasPrefix(v, SecretsMountPath+"/") || strings.HasPrefix(v, KubeconfigsDir+"/")) {
				continue
			}
			f, ok := NodePathOf(v)
			if !ok {
				t.Errorf("%s: %s names %s, which no NodeFile provides", name, w, v)
			}
			used[f.Path] = true
		}
	}
	for _, f := range append(BootstrapTLSPaths, BootstrapKubeconfigPaths...) {
		if !used[f.Path] {
			t.Errorf("%s (%s) is in the table but no pod reads it", f.Path, f.Target)
		}
		if strings.HasSuffix(f.Path, ".key") != (f.Mode == 0o600) && !strings.HasSuffix(f.Path, ".kubeconfig") {
			t.Errorf("%s: mode %o", f.Path, f.Mode)
		}
	}
}
