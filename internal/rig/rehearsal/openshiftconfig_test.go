package rehearsal

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/render/manifests"
)

// TestOpenShiftConfigArgs plays --openshift-config over the bootstrap's rendered
// KubeAPIServerConfig (render/manifests) as ConfigToFlags does, and refuses what OpenShift's
// kube-apiserver would do silently or what upstream's cannot read.
func TestOpenShiftConfigArgs(t *testing.T) {
	cfg, err := manifests.KubeAPIServerConfig("172.30.0.0/16", "10.128.0.0/14",
		manifests.FeatureGateStatus{Version: "4.18.0", Enabled: []string{"KMSv1"}, Disabled: []string{"OpenShiftPodSecurityAdmission"}})
	if err != nil {
		t.Fatal(err)
	}
	const p = "/etc/kubernetes/config/kube-apiserver-config.yaml"
	files := func(b []byte) func(string) ([]byte, error) {
		return func(got string) ([]byte, error) {
			if got != p {
				return nil, errors.New("no file " + got)
			}
			return b, nil
		}
	}
	flag := "--openshift-config=" + p
	tests := []struct {
		name    string
		args    []string
		file    []byte
		want    []string // flags the result must have
		notWant []string // flag prefixes it must not have
		err     string
	}{
		{name: "translated", args: []string{flag, "--etcd-servers=https://localhost:2379"}, file: cfg,
			want: []string{"--etcd-servers=https://localhost:2379", "--service-cluster-ip-range=172.30.0.0/16",
				"--bind-address=0.0.0.0", "--secure-port=6443", "--authorization-mode=RBAC,Node",
				"--enable-admission-plugins=" + strings.Join(slices.DeleteFunc(slices.Clone(manifests.KubeAPIServerAdmissionPlugins), manifests.OpenShiftAdmissionPlugin), ",")},
			notWant: []string{"--openshift-config", "--admission-control-config-file", "--tls-sni-cert-key", "--cors-allowed-origins", "--feature-gates"}},
		{name: "no flag", args: []string{"--v=2"}, want: []string{"--v=2"}},
		{name: "same setting twice", args: []string{flag, "--secure-port=6443"}, file: cfg, want: []string{"--secure-port=6443"}},
		{name: "conflict", args: []string{flag, "--service-cluster-ip-range=10.96.0.0/12"}, file: cfg, err: "--service-cluster-ip-range is on the command line"},
		{name: "wrong kind", args: []string{flag}, file: []byte("apiVersion: v1\nkind: ConfigMap\n"), err: "want kubecontrolplane.config.openshift.io/v1 KubeAPIServerConfig"},
		{name: "no bind address", args: []string{flag}, file: []byte("apiVersion: kubecontrolplane.config.openshift.io/v1\nkind: KubeAPIServerConfig\n"), err: "servingInfo.bindAddress"},
		{name: "missing file", args: []string{"--openshift-config=/nowhere.yaml"}, file: cfg, err: "no file /nowhere.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := OpenShiftConfigArgs(tc.args, files(tc.file))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if n := slices.Index(got, w); n < 0 {
					t.Errorf("no %s in %v", w, got)
				}
			}
			for _, nw := range tc.notWant {
				for _, g := range got {
					if strings.HasPrefix(g, nw) {
						t.Errorf("%s in %v", g, got)
					}
				}
			}
			seen := map[string]bool{}
			for _, g := range got {
				k, _, _ := strings.Cut(g, "=")
				if seen[k] && k != "--tls-sni-cert-key" {
					t.Errorf("%s twice in %v", k, got)
				}
				seen[k] = true
			}
		})
	}
}
