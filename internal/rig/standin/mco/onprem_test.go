package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/manifests"
)

// bareMetalLab is the lab of lab() on platform BareMetal (network.loadBalancer: in-cluster):
// the Infrastructure and cluster-config-v1 labbuild renders for it.
func bareMetalLab(t *testing.T, dir string) []string {
	t.Helper()
	bm := &manifests.BareMetal{APIVIPs: []string{"192.168.126.10"}, IngressVIPs: []string{"192.168.126.11"}, MachineNetworks: []string{"192.168.126.0/24"}}
	inf, err := manifests.InfrastructureOn("ocp4.example.com", "ocp4-abcde", 3, 2, bm)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := manifests.ClusterConfigV1(manifests.InstallConfig{Name: "ocp4", BaseDomain: "example.com", ClusterNetwork: "10.128.0.0/14", HostPrefix: 23,
		ServiceNetwork: "172.30.0.0/16", MachineNetwork: "192.168.126.0/24", Masters: 3, BareMetal: bm})
	if err != nil {
		t.Fatal(err)
	}
	return lab(t, dir, func(files map[string]string) {
		files["manifests/cluster-infrastructure-02-config.yml"] = string(inf.Data)
		files["manifests/cluster-config.yaml"] = string(cc.Data)
	})
}

// renderBareMetal runs the stand-in operator and controller on bareMetalLab and returns the
// rendered pool configs by pool, and the controller's log.
func renderBareMetal(t *testing.T) (map[string]types.Config, string) {
	t.Helper()
	dir := t.TempDir()
	templates := filepath.Join(testenv.RequireShared(t), "fixtures/mco/templates")
	if code, log := run(t, "machine-config-operator", bareMetalLab(t, dir)); code != 0 {
		t.Fatalf("operator bootstrap exit %d:\n%s", code, log)
	}
	code, log := run(t, "machine-config-controller", controllerArgs(t, dir, templates))
	if code != 0 {
		t.Fatalf("controller bootstrap exit %d:\n%s", code, log)
	}
	out := map[string]types.Config{}
	for _, pool := range []string{"master", "worker"} {
		m, _ := filepath.Glob(filepath.Join(dir, "mcc-output", "machine-configs", "rendered-"+pool+"-*.yaml"))
		if len(m) != 1 {
			t.Fatalf("rendered %s configs: %v", pool, m)
		}
		doc, _ := os.ReadFile(m[0])
		mc, err := ignition.ParseMachineConfig(doc) // any Ignition report entry fails
		if err != nil {
			t.Fatal(err)
		}
		if d := ignition.Duplicates(mc.Config); len(d) > 0 {
			t.Errorf("%s: duplicates %v", mc.Name, d)
		}
		out[pool] = mc.Config
	}
	return out, log
}

// TestRenderOnPremTemplates: with platform BareMetal the stand-in renders the real 4.18
// templates/common/on-prem and templates/master/00-master/on-prem (fixtures) into the pool
// configs — keepalived, haproxy (masters only) and coredns static pods, their templates, the
// resolv.conf prepender — with the lab's VIPs and cluster domain, and skips none of them.
func TestRenderOnPremTemplates(t *testing.T) {
	cfgs, log := renderBareMetal(t)
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "skipping template") && strings.Contains(line, "on-prem") {
			t.Errorf("an on-prem template was skipped: %s", line)
		}
	}
	type want struct{ path, sub string }
	common := []want{
		{"/etc/kubernetes/manifests/keepalived.yaml", "namespace: openshift-kni-infra"},
		{"/etc/kubernetes/manifests/keepalived.yaml", "- \"192.168.126.10\""},
		{"/etc/kubernetes/manifests/keepalived.yaml", "- \"192.168.126.11\""},
		{"/etc/kubernetes/manifests/coredns.yaml", "namespace: openshift-kni-infra"},
		{"/etc/kubernetes/static-pod-resources/coredns/Corefile.tmpl", "match ^api-int.ocp4.example.com"},
		{"/etc/kubernetes/static-pod-resources/coredns/Corefile.tmpl", " 192.168.126.10\""},
		{"/etc/kubernetes/static-pod-resources/coredns/Corefile.tmpl", "match .*[.]apps.ocp4.example.com"},
		{"/etc/kubernetes/static-pod-resources/keepalived/keepalived.conf.tmpl", "{{ .Cluster.IngressVIP }}"},
		{"/etc/NetworkManager/dispatcher.d/30-resolv-prepender", "resolv"},
	}
	for pool, ws := range map[string][]want{
		"master": append(append([]want{}, common...),
			want{"/etc/kubernetes/manifests/haproxy.yaml", "namespace: openshift-kni-infra"},
			want{"/etc/kubernetes/static-pod-resources/haproxy/haproxy.cfg.tmpl", "option  httpchk GET /readyz"},
			want{"/etc/kubernetes/static-pod-resources/keepalived/keepalived.conf.tmpl", "{{ .Cluster.APIVIP }}"},
			want{"/etc/kubernetes/static-pod-resources/keepalived/keepalived.conf.tmpl", "priority 40"},
			want{"/etc/kubernetes/static-pod-resources/keepalived/keepalived.conf.tmpl", "chk_ocp_lb"},
			want{"/etc/kubernetes/static-pod-resources/keepalived/scripts/chk_ocp_script.sh.tmpl", "9444"}),
		"worker": common,
	} {
		for _, w := range ws {
			c, err := ignition.FileContents(cfgs[pool], w.path)
			if err != nil {
				t.Errorf("%s: %s: %v", pool, w.path, err)
				continue
			}
			if !strings.Contains(string(c), w.sub) {
				t.Errorf("%s: %s lacks %q:\n%.1500s", pool, w.path, w.sub, c)
			}
		}
	}
	if _, err := ignition.FileContents(cfgs["worker"], "/etc/kubernetes/manifests/haproxy.yaml"); err == nil {
		t.Error("worker: haproxy static pod rendered (haproxy balances the API on masters only)")
	}
	// The platform-None render has none of it.
	dir := t.TempDir()
	run(t, "machine-config-operator", lab(t, dir, nil))
	run(t, "machine-config-controller", controllerArgs(t, dir, filepath.Join(testenv.RequireShared(t), "fixtures/mco/templates")))
	m, _ := filepath.Glob(filepath.Join(dir, "mcc-output", "machine-configs", "rendered-master-*.yaml"))
	if len(m) == 1 {
		doc, _ := os.ReadFile(m[0])
		if strings.Contains(string(doc), "keepalived") {
			t.Error("platform None: rendered master config mentions keepalived")
		}
	}
}
