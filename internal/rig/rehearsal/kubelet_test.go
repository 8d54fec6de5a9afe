package rehearsal

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestNodeLabelsPatch: the dropped --node-labels become a merge patch of metadata.labels, a
// label without "=" with the empty value (as the kubelet's flag parses it).
func TestNodeLabelsPatch(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		want   string
	}{
		{[]string{"node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master"},
			`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":"","node-role.kubernetes.io/master":""}}}`},
		{[]string{"node-role.kubernetes.io/worker=", "a=b"}, `{"metadata":{"labels":{"a":"b","node-role.kubernetes.io/worker":""}}}`},
	} {
		got, err := nodeLabelsPatch(tc.labels)
		if err != nil || string(got) != tc.want {
			t.Errorf("nodeLabelsPatch(%q) = %s, %v; want %s", tc.labels, got, err, tc.want)
		}
	}
}

// kubeletHelpExcerpt is the shape of a kubelet's --help around --feature-gates (v1.35.4's
// first lines, and the flag after the list).
const kubeletHelpExcerpt = `      --event-qps int32                                          QPS to limit event creations. (default 50)
      --feature-gates mapStringBool                              A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:
                APIResponseCompression=true|false (BETA - default=true)
                NodeLogQuery=true|false (BETA - default=false)
                UserNamespacesSupport=true|false (BETA - default=true)
                kube:AllAlpha=true|false (ALPHA - default=false)
      --file-check-frequency duration                            Duration between checking config files for new data (default 20s)
                NotAGate=true|false (BETA - default=true)
`

func TestParseKubeletGates(t *testing.T) {
	g, err := parseKubeletGates([]byte(kubeletHelpExcerpt))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"APIResponseCompression": true, "NodeLogQuery": true, "UserNamespacesSupport": true}
	if !reflect.DeepEqual(g, want) {
		t.Errorf("gates %v, want %v", g, want)
	}
	if _, err := parseKubeletGates([]byte("Usage: kubelet [flags]\n")); err == nil {
		t.Error("a help without --feature-gates gave no error")
	}
}

// TestOverrideKubeletConf: the host overrides are applied, and of the MCO's feature gates only
// the ones the kubelet offers stay (OpenShift's own and GA ones go); NodeLogQuery is added only
// where the kubelet offers it.
func TestOverrideKubeletConf(t *testing.T) {
	conf := "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\nenableSystemLogQuery: true\n" +
		"featureGates:\n  AdminNetworkPolicy: true\n  NewOLM: true\n  UserNamespacesSupport: false\n  ValidatingAdmissionPolicy: true\n"
	for _, tc := range []struct {
		name        string
		known       map[string]bool
		wantGates   map[string]any
		wantDropped []string
	}{
		{"1.35-like", map[string]bool{"UserNamespacesSupport": true, "NodeLogQuery": true},
			map[string]any{"UserNamespacesSupport": false, "NodeLogQuery": true}, []string{"AdminNetworkPolicy", "NewOLM", "ValidatingAdmissionPolicy"}},
		{"NodeLogQuery GA", map[string]bool{"UserNamespacesSupport": true},
			map[string]any{"UserNamespacesSupport": false}, []string{"AdminNetworkPolicy", "NewOLM", "NodeLogQuery", "ValidatingAdmissionPolicy"}},
		{"no gate known", map[string]bool{},
			nil, []string{"AdminNetworkPolicy", "NewOLM", "NodeLogQuery", "UserNamespacesSupport", "ValidatingAdmissionPolicy"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			p := filepath.Join(root, "etc/kubernetes/kubelet.conf")
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(conf), 0o644); err != nil {
				t.Fatal(err)
			}
			dropped, err := OverrideKubeletConf(root, "/etc/kubernetes/kubelet.conf", tc.known)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dropped, tc.wantDropped) {
				t.Errorf("dropped %v, want %v", dropped, tc.wantDropped)
			}
			var m map[string]any
			b, _ := os.ReadFile(p)
			if err := yaml.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if g, _ := m["featureGates"].(map[string]any); !reflect.DeepEqual(g, tc.wantGates) && !(g == nil && tc.wantGates == nil) {
				t.Errorf("featureGates %v, want %v", g, tc.wantGates)
			}
			if m["cgroupDriver"] != "cgroupfs" || m["protectKernelDefaults"] != false || m["enableSystemLogQuery"] != true {
				t.Errorf("host overrides not applied, or other fields changed: %v", m)
			}
		})
	}
}
