package ignition

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testBootstrapInPlace is a single node's input: testBootstrap's config at master-0's name and
// address, with master-0's own Ignition.
func testBootstrapInPlace(t *testing.T) BootstrapInPlaceInput {
	t.Helper()
	b := testBootstrap()
	b.Hostname = "master-0.ocp4.example.com"
	b.Network.Address = "192.168.126.101"
	b.StaticPods = append(b.StaticPods, file("/etc/kubernetes/manifests/kube-apiserver-bootstrap.yaml", 0o644, "kind: Pod\n"))
	master, err := Node(testNode(t, "master-0", "192.168.126.101"))
	if err != nil {
		t.Fatal(err)
	}
	return BootstrapInPlaceInput{Bootstrap: b, MasterIgnition: master.JSON, InstallationDisk: "/dev/vda", EtcdPod: "etcd-bootstrap.yaml",
		Carried: []CarriedPod{{File: "etcd-bootstrap.yaml", As: "etcd-pod.yaml"}, {File: "kube-apiserver-bootstrap.yaml", As: "kube-apiserver-pod.yaml"}}}
}

// TestBootstrapInPlace: the live-ISO config is the bootstrap's plus the installer's
// bootstrap-in-place parts; its scripts are valid bash (bash -n), name the disk and the carried
// pods, and the master Ignition is embedded byte for byte.
func TestBootstrapInPlace(t *testing.T) {
	in := testBootstrapInPlace(t)
	res, err := BootstrapInPlace(in)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(res.JSON)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := Bootstrap(in.Bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	bcfg, _ := Parse(boot.JSON)
	for _, f := range bcfg.Storage.Files {
		p := f.Path
		b1, _ := FileContents(bcfg, p)
		b2, err := FileContents(cfg, p)
		if err != nil || string(b1) != string(b2) {
			t.Errorf("%s: the bootstrap's file is not in the bootstrap-in-place config as it is (%v)", p, err)
		}
	}
	if got := mustContents(t, cfg, PathOriginalMaster); got != string(in.MasterIgnition) {
		t.Errorf("%s is not master-0's Ignition", PathOriginalMaster)
	}
	units := map[string]bool{}
	for _, u := range cfg.Systemd.Units {
		units[u.Name] = u.Enabled != nil && *u.Enabled
	}
	for _, u := range []string{"kubelet.service", "bootkube.service", "install-to-disk.service"} {
		if !units[u] {
			t.Errorf("unit %s is missing or not enabled (units: %v)", u, units)
		}
	}
	dir := t.TempDir()
	for _, c := range []struct {
		path string
		want []string
	}{
		{PathInstallToDisk, []string{"coreos-installer install -n -i /opt/openshift/master.ign /dev/vda", "shutdown -r +1", "kube-system " + BootstrapInPlaceConfigMap, "/opt/openshift/.bootkube.done"}},
		{PathBootstrapInPlace, []string{"mv /etc/kubernetes/manifests/etcd-bootstrap.yaml /etc/kubernetes", "entry /etc/kubernetes/manifests/etcd-pod.yaml 420 /etc/kubernetes/etcd-bootstrap.yaml",
			"entry /etc/kubernetes/manifests/kube-apiserver-pod.yaml 420 /etc/kubernetes/manifests/kube-apiserver-bootstrap.yaml", "tree /var/lib/etcd /var/lib/etcd",
			"entry /etc/kubernetes/bootstrap-secrets/kubeconfig 384 /etc/kubernetes/kubeconfigs/localhost.kubeconfig", `"name":"bootkube.service"`}},
		{PathPostRebootSource, []string{"etcd-pod.yaml kube-apiserver-pod.yaml", "oc delete configmap -n kube-system " + BootstrapInPlaceConfigMap, "systemctl disable bootkube.service"}},
	} {
		s := mustContents(t, cfg, c.path)
		for _, w := range c.want {
			if !strings.Contains(s, w) {
				t.Errorf("%s lacks %q:\n%s", c.path, w, s)
			}
		}
		f := filepath.Join(dir, filepath.Base(c.path))
		os.WriteFile(f, []byte(s), 0o644)
		if out, err := exec.Command("bash", "-n", f).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", c.path, err, out)
		}
	}
	golden(t, "bootstrap-in-place.ign", res.JSON)
}

func TestBootstrapInPlaceErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		mod  func(in *BootstrapInPlaceInput)
		want string
	}{
		{"no master Ignition", func(in *BootstrapInPlaceInput) { in.MasterIgnition = nil }, "master Ignition"},
		{"disk", func(in *BootstrapInPlaceInput) { in.InstallationDisk = "vda" }, "not a /dev path"},
		{"etcd not carried", func(in *BootstrapInPlaceInput) { in.Carried = in.Carried[1:] }, "not among the carried pods"},
		{"unknown pod", func(in *BootstrapInPlaceInput) {
			in.Carried = append(in.Carried, CarriedPod{File: "x.yaml", As: "y.yaml"})
		}, "not a static pod"},
		{"bootstrap's own checks", func(in *BootstrapInPlaceInput) { in.Bootstrap.CRIOPause = nil }, "pause"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := testBootstrapInPlace(t)
			tt.mod(&in)
			if _, err := BootstrapInPlace(in); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
