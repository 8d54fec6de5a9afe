package targets

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
	"sigs.k8s.io/yaml"
)

// bmcManifestsLab builds bmc/manifests for the default lab as platform: baremetal (two
// workers) and returns its output directory and the files it wrote.
func bmcManifestsLab(t *testing.T, goals ...string) (string, map[string][]byte) {
	t.Helper()
	if len(goals) == 0 {
		goals = []string{"bmc/manifests"}
	}
	l := newMFLab(t)
	l.cfg.Platform, l.cfg.Network.LoadBalancer = lab.PlatformBaremetal, lab.LoadBalancerInCluster
	cfg := reparsed(t, l.cfg, "lab.json")
	var ts []*engine.Target
	for _, mt := range manifestsTargets(cfg) {
		// In-cluster, the bootstrap's manifest tree reads the MCO bootstrap render (mco/*),
		// which is not part of this test.
		if mt.Name != "manifests/bootstrap" {
			ts = append(ts, mt)
		}
	}
	ts = append(append(append(append(ts, pkiTargets(cfg)...), kubeconfigTargets(cfg)...), mfStandinRelease(l.crds)...), ipiTargets(cfg)...)
	for _, bt := range bmcTargets(cfg) {
		if bt.Name != "bmc/service" { // its libvirt network is not part of this test
			ts = append(ts, bt)
		}
	}
	var log bytes.Buffer
	if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: l.out, Goals: goals, Jobs: 2, Targets: ts,
		Now: func() time.Time { return l.now }, Stdout: &log, Stderr: &log}); err != nil {
		t.Fatalf("build: %v\n%s", err, log.String())
	}
	creds, _ := os.ReadFile(l.path("bmc/credentials", "credentials.json"))
	var c struct{ Password string }
	json.Unmarshal(creds, &c)
	if c.Password == "" || strings.Contains(log.String(), c.Password) {
		t.Errorf("no generated password, or the build log shows it")
	}
	files := map[string][]byte{}
	names, _ := filepath.Glob(l.path("bmc/manifests", "*.yaml"))
	for _, p := range names {
		files[filepath.Base(p)] = l.file("bmc/manifests", filepath.Base(p))
		st, _ := os.Stat(p)
		if strings.Contains(p, "bmc-secrets") != (st.Mode().Perm() == 0o600) {
			t.Errorf("%s: mode %v (Secrets 0600, the rest 0644)", p, st.Mode().Perm())
		}
	}
	return l.out, files
}

// TestBMCManifestsAPIServer applies bmc/manifests' BareMetalHosts, BMC Secrets and worker
// MachineSet with server-side apply (which refuses any field the schema does not declare) to a
// real kube-apiserver that has the BareMetalHost CRD (testdata/baremetal, written from the
// upstream metal3 schema) and openshift/api's MachineSet CRD, and reads back what Metal3 and
// the machine-api read: each host's BMC address on the lab's BMC with its domain's
// UUID, its boot MAC and credentials Secret, the masters externally provisioned, and the
// MachineSet's replicas; UnpauseBareMetalHosts (cluster/pivot) unpauses the workers once and
// finds nothing to do without the CRD. The Provisioning CR is applied with the
// cluster-baremetal-operator's Provisioning CRD (internal/rig/rehearsal/crds) beside them.
func TestBMCManifestsAPIServer(t *testing.T) {
	testenv.Require(t, "kube-apiserver")
	testenv.Require(t, "etcd")
	_, files := bmcManifestsLab(t)
	if len(files) != 11 {
		t.Fatalf("bmc/manifests wrote %d files, want 5 Secrets, 5 hosts (3 masters, 2 workers), 1 MachineSet", len(files))
	}
	bmh, err := os.ReadFile("testdata/baremetal/metal3.io_baremetalhosts.crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files["0000_00_metal3.io_baremetalhosts.crd.yaml"] = bmh
	// The Provisioning CR of the in-cluster VIP work, against the cluster-baremetal-operator's
	// CRD (written from its release-4.18 schema): the one file the rehearsal's CVO stand-in
	// embeds (internal/rig/rehearsal/cvo.go provisioningCRD), read by path since a package embeds
	// only files below its own folder.
	prov, err := os.ReadFile(filepath.Join("..", "internal", "rig", "rehearsal", "crds", "metal3.io_provisionings.crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files["0000_00_metal3.io_provisionings.crd.yaml"] = prov
	pf, err := manifests.BaremetalProvisioning()
	if err != nil {
		t.Fatal(err)
	}
	files[pf.Name] = pf.Data
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		t.Fatal(err)
	}
	ms, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "machine/v1beta1/zz_generated.crd-manifests/0000_10_machine-api_01_machinesets-Default.crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files["0000_10_machine-api_01_machinesets-Default.crd.yaml"] = mfFor130(t, ms)
	files["01-namespace-openshift-machine-api.yaml"] = []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: openshift-machine-api\n")

	cp := testenv.StartControlPlane(t, testenv.ControlPlaneOptions{})
	var alog bytes.Buffer
	ap, err := clusterApplier(kubedyn.Config(cp.Admin), &alog)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Before the cluster-baremetal-operator's CRD there is nothing to unpause.
	if got, err := UnpauseBareMetalHosts(ctx, ap.Dynamic()); err != nil || len(got) != 0 {
		t.Errorf("unpause without the BareMetalHost CRD: %v, %v", got, err)
	}
	if _, err := ap.ApplyFiles(ctx, files); err != nil {
		t.Fatalf("apply: %v\n%s", err, alog.String())
	}
	get := func(group, version, resource, name string) map[string]any {
		t.Helper()
		u, err := ap.Dynamic().Resource(kube.GroupVersionResource{Group: group, Version: version, Resource: resource}).Namespace("openshift-machine-api").Get(ctx, name, kube.GetOptions{})
		if err != nil {
			t.Fatalf("get %s %s: %v", resource, name, err)
		}
		return u.Object
	}
	for _, w := range []string{"master-0", "master-1", "master-2", "worker-0", "worker-1"} {
		bmh := get("metal3.io", "v1alpha1", "baremetalhosts", w)
		spec := bmh["spec"].(map[string]any)
		if ext, _ := spec["externallyProvisioned"].(bool); ext != strings.HasPrefix(w, "master-") {
			t.Errorf("%s: externallyProvisioned %v (labbuild provisions the masters, Metal3 the workers)", w, ext)
		}
		bmc := spec["bmc"].(map[string]any)
		if want := BMCAddress("192.168.126.1", rl.UUID("ocp4", w)); bmc["address"] != want {
			t.Errorf("%s: bmc.address %v, want %s", w, bmc["address"], want)
		}
		if spec["bootMACAddress"] != rl.MAC("ocp4", w) || bmc["credentialsName"] != w+"-bmc-secret" || spec["online"] != true {
			t.Errorf("%s: spec %v", w, spec)
		}
		sec := get("", "v1", "secrets", w+"-bmc-secret")["data"].(map[string]any)
		if sec["username"] != "bGFiYnVpbGQ=" || sec["password"] == "" {
			t.Errorf("%s-bmc-secret data %v", w, sec)
		}
	}
	pr, err := ap.Dynamic().Resource(kube.GroupVersionResource{Group: "metal3.io", Version: "v1alpha1", Resource: "provisionings"}).Get(ctx, "provisioning-configuration", kube.GetOptions{})
	if err != nil || pr.Object["spec"].(map[string]any)["provisioningNetwork"] != "Disabled" {
		t.Errorf("Provisioning provisioning-configuration: %v %v", err, pr)
	}
	// cluster/pivot's unpause: the workers only (the masters were never paused), once.
	if got, err := UnpauseBareMetalHosts(ctx, ap.Dynamic()); err != nil || !slices.Equal(got, []string{"worker-0", "worker-1"}) {
		t.Errorf("unpaused %v, %v; want [worker-0 worker-1]", got, err)
	}
	if got, err := UnpauseBareMetalHosts(ctx, ap.Dynamic()); err != nil || len(got) != 0 {
		t.Errorf("second unpause: %v, %v; want nothing", got, err)
	}
	for _, w := range []string{"worker-0", "worker-1"} {
		if md := get("metal3.io", "v1alpha1", "baremetalhosts", w)["metadata"].(map[string]any); md["annotations"] != nil {
			if _, paused := md["annotations"].(map[string]any)[manifests.BMHPausedAnnotation]; paused {
				t.Errorf("%s still paused", w)
			}
		}
	}
	l, err := ap.Dynamic().Resource(kube.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machinesets"}).Namespace("openshift-machine-api").List(ctx, kube.ListOptions{})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("MachineSets: %v %v", err, l)
	}
	msObj := l.Items[0].Object
	if name := msObj["metadata"].(map[string]any)["name"].(string); !strings.HasPrefix(name, "ocp4-") || !strings.HasSuffix(name, "-worker-0") ||
		msObj["spec"].(map[string]any)["replicas"] != int64(2) && msObj["spec"].(map[string]any)["replicas"] != float64(2) {
		t.Errorf("MachineSet %s replicas %v", name, msObj["spec"].(map[string]any)["replicas"])
	}
}

// TestIPIInstallConfig builds ipi/install-config for the default lab as platform baremetal:
// 0600, the 3 masters and 2 workers (no bootstrap: the installer makes its own) as hosts with
// their domains' BMC addresses, derived boot MACs and bmc/credentials, the lab bridge as
// externalBridge, the pull secret and SSH key from access.*; the pull secret and the BMC
// password reach no log.
func TestIPIInstallConfig(t *testing.T) {
	out, _ := bmcManifestsLab(t, "ipi/install-config")
	p := filepath.Join(out, "ipi", "install-config", "install-config.yaml")
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want 0600", p, err, st)
	}
	b, _ := os.ReadFile(p)
	var ic manifests.IPIInstallConfigDoc
	if err := yaml.Unmarshal(b, &ic); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range ic.Platform.BareMetal.Hosts {
		got = append(got, h.Name+" "+h.Role)
		if h.BMC.Address != BMCAddress("192.168.126.1", rl.UUID("ocp4", h.Name)) || h.BootMACAddress != rl.MAC("ocp4", h.Name) || h.BMC.Username != BMCUser || h.BMC.Password == "" {
			t.Errorf("host %+v", h)
		}
	}
	if want := []string{"master-0 master", "master-1 master", "master-2 master", "worker-0 worker", "worker-1 worker"}; !slices.Equal(got, want) {
		t.Errorf("hosts %v, want %v", got, want)
	}
	if ic.Platform.BareMetal.ExternalBridge != "virbr-ocp4" || ic.PullSecret != strings.TrimSpace(mfTestPullSecret) || !strings.HasPrefix(ic.SSHKey, "ssh-") {
		t.Errorf("externalBridge %q, pullSecret %q, sshKey %q", ic.Platform.BareMetal.ExternalBridge, ic.PullSecret, ic.SSHKey)
	}
}
