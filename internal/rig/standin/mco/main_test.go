package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/render/ignition"
	"sigs.k8s.io/yaml"
)

const (
	testVersion = "4.18.0"
	testPull    = `{"auths":{"quay.io":{"auth":"dGVzdDp0ZXN0"}}}`
)

// lab writes the inputs of mco-bootstrap.md for a platform-None lab into dir and returns the
// operator's argument list. mutate may change any file before the args are built.
func lab(t *testing.T, dir string, mutate func(files map[string]string)) []string {
	t.Helper()
	return labFor(t, dir, "4.18", mutate)
}

// labFor is lab for release rel (4.18, 4.20, 4.22): that release's Default FeatureGate
// (../shared/fixtures/versions/<rel>) with status version <rel>.0, and image-references with
// the tags every release requires (4.22's docker-registry too) and both base OS tag pairs.
func labFor(t *testing.T, dir, rel string, mutate func(files map[string]string)) []string {
	t.Helper()
	shared := testenv.RequireShared(t)
	testVersion := rel + ".0"
	fgFile := map[string]string{
		"4.18": "fixtures/release/cluster-config-api/manifests/featureGate-SelfManagedHA-Default.yaml",
		"4.20": "fixtures/versions/4.20/release/cluster-config-api/manifests/featureGate-SelfManagedHA-Default.yaml",
		"4.22": "fixtures/versions/4.22/release/cluster-config-api/manifests/featureGate-4-10-SelfManagedHA-Default.yaml",
	}[rel]
	fg, err := os.ReadFile(filepath.Join(shared, fgFile))
	if err != nil {
		t.Fatal(err)
	}
	var fgObj map[string]any
	if err := json.Unmarshal(fg, &fgObj); err != nil {
		t.Fatal(err)
	}
	for _, g := range fgObj["status"].(map[string]any)["featureGates"].([]any) {
		g.(map[string]any)["version"] = testVersion
	}
	fgJSON, _ := json.Marshal(fgObj)

	var tags strings.Builder
	for _, tag := range append(append([]string{}, tags418...), "docker-registry", "rhel-coreos", "rhel-coreos-extensions", "stream-coreos", "stream-coreos-extensions") {
		tags.WriteString("  - name: " + tag + "\n    from:\n      kind: DockerImage\n      name: quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:" + strings.Repeat(string('a'+byte(len(tag)%6)), 64) + "\n")
	}
	files := map[string]string{
		"tls/root-ca.crt": "-----BEGIN CERTIFICATE-----\nUk9PVA==\n-----END CERTIFICATE-----\n",
		"tls/kube-apiserver-complete-client-ca-bundle.crt": "-----BEGIN CERTIFICATE-----\nS1VCRQ==\n-----END CERTIFICATE-----\n",
		"manifests/cluster-config.yaml":                    "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-config-v1\n  namespace: kube-system\ndata:\n  install-config: |\n    metadata:\n      name: ocp4\n",
		"manifests/openshift-config-secret-pull-secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: pull-secret\n  namespace: openshift-config\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: " +
			base64.StdEncoding.EncodeToString([]byte(testPull)) + "\n",
		"manifests/cluster-infrastructure-02-config.yml": "apiVersion: config.openshift.io/v1\nkind: Infrastructure\nmetadata:\n  name: cluster\nspec:\n  platformSpec:\n    type: None\nstatus:\n  infrastructureName: ocp4-abcde\n  platform: None\n  platformStatus:\n    type: None\n  apiServerURL: https://api.ocp4.example.com:6443\n  apiServerInternalURI: https://api-int.ocp4.example.com:6443\n  controlPlaneTopology: HighlyAvailable\n  infrastructureTopology: HighlyAvailable\n",
		"manifests/cluster-network-02-config.yml":        "apiVersion: config.openshift.io/v1\nkind: Network\nmetadata:\n  name: cluster\nspec:\n  clusterNetwork:\n  - cidr: 10.128.0.0/14\n    hostPrefix: 23\n  serviceNetwork:\n  - 172.30.0.0/16\n  networkType: OVNKubernetes\n",
		"manifests/cluster-dns-02-config.yml":            "apiVersion: config.openshift.io/v1\nkind: DNS\nmetadata:\n  name: cluster\nspec:\n  baseDomain: ocp4.example.com\n",
		"manifests/cluster-proxy-01-config.yaml":         "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec: {}\n",
		"manifests/featuregate.yaml":                     string(fgJSON),
		"image-references":                               "kind: ImageStream\napiVersion: image.openshift.io/v1\nspec:\n  tags:\n" + tags.String(),
	}
	if mutate != nil {
		mutate(files)
	}
	for rel, c := range files {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := filepath.Join(dir, "manifests")
	return []string{
		"--payload-version=" + testVersion, "bootstrap",
		"--root-ca=" + filepath.Join(dir, "tls/root-ca.crt"),
		"--kube-ca=" + filepath.Join(dir, "tls/kube-apiserver-complete-client-ca-bundle.crt"),
		"--config-file=" + filepath.Join(m, "cluster-config.yaml"),
		"--dest-dir=" + filepath.Join(dir, "mco-bootstrap"),
		"--pull-secret=" + filepath.Join(m, "openshift-config-secret-pull-secret.yaml"),
		"--infra-config-file=" + filepath.Join(m, "cluster-infrastructure-02-config.yml"),
		"--network-config-file=" + filepath.Join(m, "cluster-network-02-config.yml"),
		"--proxy-config-file=" + filepath.Join(m, "cluster-proxy-01-config.yaml"),
		"--dns-config-file=" + filepath.Join(m, "cluster-dns-02-config.yml"),
		"--release-image=quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("0", 64),
		"--image-references=" + filepath.Join(dir, "image-references"),
	}
}

// controllerArgs stages the controller's manifest dir as mco-bootstrap.md says (stage 1's
// bootstrap/manifests plus the FeatureGate) and returns its arguments.
func controllerArgs(t *testing.T, dir, templates string) []string {
	t.Helper()
	return controllerArgsFor(t, dir, templates, testVersion)
}

// controllerArgsFor is controllerArgs for payload version version.
func controllerArgsFor(t *testing.T, dir, templates, testVersion string) []string {
	t.Helper()
	in := filepath.Join(dir, "mcc-input")
	os.MkdirAll(in, 0o755)
	src := filepath.Join(dir, "mco-bootstrap/bootstrap/manifests")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		os.WriteFile(filepath.Join(in, e.Name()), b, 0o644)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "manifests/featuregate.yaml"))
	os.WriteFile(filepath.Join(in, "featuregate.yaml"), b, 0o644)
	return []string{"bootstrap", "--templates=" + templates, "--payload-version=" + testVersion,
		"--manifest-dir=" + in, "--dest-dir=" + filepath.Join(dir, "mcc-output"),
		"--pull-secret=" + filepath.Join(src, "machineconfigcontroller-pull-secret")}
}

func run(t *testing.T, argv0 string, args []string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := dispatch(argv0, args, &out, &errb)
	return code, out.String() + errb.String()
}

func TestRenderRealTemplates(t *testing.T) {
	dir := t.TempDir()
	templates := filepath.Join(testenv.RequireShared(t), "fixtures/mco/templates")
	if code, log := run(t, "/usr/bin/machine-config-operator", lab(t, dir, nil)); code != 0 {
		t.Fatalf("operator bootstrap exit %d:\n%s", code, log)
	}
	for _, rel := range []string{
		"bootstrap/manifests/machineconfigcontroller-controllerconfig.yaml",
		"bootstrap/manifests/master.machineconfigpool.yaml", "bootstrap/manifests/worker.machineconfigpool.yaml",
		"bootstrap/manifests/machineconfigcontroller-pull-secret", "bootstrap/machineconfigoperator-bootstrap-pod.yaml",
		"manifests/csr-bootstrap-role-binding.yaml", "manifests/kube-apiserver-serving-ca-configmap.yaml",
	} {
		if _, err := os.Stat(filepath.Join(dir, "mco-bootstrap", rel)); err != nil {
			t.Errorf("operator output missing: %v", err)
		}
	}
	// The controller through the first-argument form of dispatch.
	code, log := run(t, "mco-standin", append([]string{"machine-config-controller"}, controllerArgs(t, dir, templates)...))
	if code != 0 {
		t.Fatalf("controller bootstrap exit %d:\n%s", code, log)
	}
	if strings.Contains(log, "skipping template") {
		t.Errorf("a platform-None template was skipped:\n%s", log)
	}
	out := filepath.Join(dir, "mcc-output")
	for _, pool := range []string{"master", "worker"} {
		matches, _ := filepath.Glob(filepath.Join(out, "machine-configs", "rendered-"+pool+"-*.yaml"))
		if len(matches) != 1 || !regexp.MustCompile(`/rendered-`+pool+`-[0-9a-f]{32}\.yaml$`).MatchString(matches[0]) {
			t.Fatalf("rendered %s configs = %v, want one rendered-%s-<md5>", pool, matches, pool)
		}
		doc, _ := os.ReadFile(matches[0])
		mc, err := ignition.ParseMachineConfig(doc) // validates spec.config: any report entry fails
		if err != nil {
			t.Fatalf("%s: %v", matches[0], err)
		}
		if d := ignition.Duplicates(mc.Config); len(d) > 0 {
			t.Errorf("%s: duplicates %v", mc.Name, d)
		}
		want := map[string]string{
			"/var/lib/kubelet/config.json":      testPull,
			"/etc/kubernetes/apiserver-url.env": "KUBERNETES_SERVICE_HOST='api-int.ocp4.example.com'\nKUBERNETES_SERVICE_PORT='6443'",
			"/etc/kubernetes/kubelet.conf":      "- 172.30.0.10",
			"/etc/crio/crio.conf.d/00-default":  "pause_image",
		}
		for path, sub := range want {
			c, err := ignition.FileContents(mc.Config, path)
			if err != nil || !strings.Contains(string(c), sub) {
				t.Errorf("%s: %s lacks %q (err %v)", mc.Name, path, sub, err)
			}
		}
		var kubelet string
		for _, u := range mc.Config.Systemd.Units {
			if u.Name == "kubelet.service" && u.Contents != nil {
				kubelet = *u.Contents
			}
		}
		if !strings.Contains(kubelet, "node-role.kubernetes.io/"+pool) || !strings.Contains(kubelet, "--pod-infra-container-image=quay.io/") {
			t.Errorf("%s: kubelet.service is not the %s unit with the pod image:\n%s", mc.Name, pool, kubelet)
		}
		if n := len(mc.Config.Storage.Files); n < 40 {
			t.Errorf("%s: only %d files (the real 4.18 render has ~45)", mc.Name, n)
		}
		// The rendered pool config plus the MCS and per-node additions still parses cleanly,
		// has every path once and passes the machine-config daemon's first-boot validation
		// (ignition.Node runs FirstBoot; the node keeps the rendered config.json, issue 38 #1).
		node, err := ignition.Node(ignition.NodeInput{
			Hostname:              pool + "-0.ocp4.example.com",
			Network:               ignition.StaticNetwork{Address: "192.168.126.101", Prefix: 24, Gateway: "192.168.126.1", DNS: []string{"192.168.126.1"}},
			SSHKey:                "ssh-ed25519 AAAATEST core@lab",
			RenderedMachineConfig: doc,
			KubeletCA:             []byte("-----BEGIN CERTIFICATE-----\nS1VCRQ==\n-----END CERTIFICATE-----\n"),
			BootstrapKubeconfig:   []byte("apiVersion: v1\nkind: Config\n"),
		})
		if err != nil {
			t.Fatalf("node config on %s: %v", mc.Name, err)
		}
		nodeCfg, err := ignition.Parse(node.JSON)
		if err != nil {
			t.Fatal(err)
		}
		if d := ignition.Duplicates(nodeCfg); len(d) > 0 {
			t.Errorf("node config on %s has duplicates %v", mc.Name, d)
		}
		t.Logf("%s: %d files, %d units, rendered %d bytes, node config %d bytes", mc.Name, len(mc.Config.Storage.Files), len(mc.Config.Systemd.Units), len(doc), len(node.JSON))
		var p struct {
			Status struct {
				Configuration struct{ Name string } `json:"configuration"`
			} `json:"status"`
		}
		pb, err := os.ReadFile(filepath.Join(out, "machine-pools", pool+".yaml"))
		if err != nil || yaml.Unmarshal(pb, &p) != nil || p.Status.Configuration.Name != mc.Name {
			t.Errorf("pool %s status.configuration.name = %q, want %s (%v)", pool, p.Status.Configuration.Name, mc.Name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "controller-config/machine-config-controller.yaml")); err != nil {
		t.Error(err)
	}

	// Byte-identical on a second run (no timestamps), like the real render.
	dir2 := t.TempDir()
	run(t, "machine-config-operator", lab(t, dir2, nil))
	if code, log := run(t, "machine-config-controller", controllerArgs(t, dir2, templates)); code != 0 {
		t.Fatal(log)
	}
	a, _ := filepath.Glob(filepath.Join(out, "machine-configs", "*"))
	b, _ := filepath.Glob(filepath.Join(dir2, "mcc-output", "machine-configs", "*"))
	if len(a) != len(b) || filepath.Base(a[0]) != filepath.Base(b[0]) {
		t.Errorf("second run named its configs differently: %v vs %v", a, b)
	}
}

// TestRootFlagsAndInputMachineConfigs passes root flags in "--flag value" form before the
// subcommand (klog -v too) and feeds a 99-master-ssh MachineConfig, as the installer does, which
// must end up in rendered-master only.
func TestRootFlagsAndInputMachineConfigs(t *testing.T) {
	dir := t.TempDir()
	templates := filepath.Join(testenv.RequireShared(t), "fixtures/mco/templates")
	args := lab(t, dir, nil)
	args = append([]string{"-v", "2", "--payload-version", testVersion}, args[1:]...)
	if code, log := run(t, "machine-config-operator", args); code != 0 {
		t.Fatalf("exit %d: %s", code, log)
	}
	cargs := controllerArgs(t, dir, templates)
	ssh := "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-master-ssh\n  labels:\n    machineconfiguration.openshift.io/role: master\nspec:\n  config:\n    ignition:\n      version: 3.2.0\n    passwd:\n      users:\n      - name: core\n        sshAuthorizedKeys:\n        - ssh-ed25519 AAAATEST core@lab\n"
	if err := os.WriteFile(filepath.Join(dir, "mcc-input", "99_openshift-machineconfig_99-master-ssh.yaml"), []byte(ssh), 0o644); err != nil {
		t.Fatal(err)
	}
	cargs = append([]string{"--templates", templates}, cargs...)
	if code, log := run(t, "machine-config-controller", cargs); code != 0 {
		t.Fatalf("exit %d: %s", code, log)
	}
	for pool, want := range map[string]bool{"master": true, "worker": false} {
		m, _ := filepath.Glob(filepath.Join(dir, "mcc-output/machine-configs/rendered-"+pool+"-*"))
		b, _ := os.ReadFile(m[0])
		mc, err := ignition.ParseMachineConfig(b)
		if err != nil {
			t.Fatal(err)
		}
		has := len(mc.Config.Passwd.Users) == 1 && string(mc.Config.Passwd.Users[0].SSHAuthorizedKeys[0]) == "ssh-ed25519 AAAATEST core@lab"
		if has != want {
			t.Errorf("%s carries the 99-master-ssh key: %v, want %v", pool, has, want)
		}
	}
}

func TestRenderChangesWithServiceNetwork(t *testing.T) {
	templates := filepath.Join(testenv.RequireShared(t), "fixtures/mco/templates")
	names := map[string]bool{}
	for _, svc := range []string{"172.30.0.0/16", "172.31.0.0/16"} {
		dir := t.TempDir()
		args := lab(t, dir, func(f map[string]string) {
			f["manifests/cluster-network-02-config.yml"] = strings.Replace(f["manifests/cluster-network-02-config.yml"], "172.30.0.0/16", svc, 1)
		})
		if code, log := run(t, "machine-config-operator", args); code != 0 {
			t.Fatal(log)
		}
		if code, log := run(t, "machine-config-controller", controllerArgs(t, dir, templates)); code != 0 {
			t.Fatal(log)
		}
		m, _ := filepath.Glob(filepath.Join(dir, "mcc-output/machine-configs/rendered-master-*"))
		names[filepath.Base(m[0])] = true
	}
	if len(names) != 2 {
		t.Errorf("service network change did not change the rendered name: %v", names)
	}
}

func TestOperatorFailsLikeTheRealOne(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(f map[string]string)
		args   func(a []string) []string
		want   string
	}{
		{"missing root CA", nil, func(a []string) []string { return replaceFlag(a, "--root-ca", "/nonexistent/ca.crt") }, "--root-ca"},
		{"missing pull secret", nil, func(a []string) []string { return replaceFlag(a, "--pull-secret", "/nonexistent/ps.yaml") }, "--pull-secret"},
		{"missing config file", nil, func(a []string) []string { return replaceFlag(a, "--config-file", "/nonexistent/cc.yaml") }, "--config-file"},
		{"no dest dir", nil, func(a []string) []string { return dropFlag(a, "--dest-dir") }, "dest-dir"},
		{"infra default path missing", nil, func(a []string) []string { return dropFlag(a, "--infra-config-file") }, "/assets/manifests/cluster-infrastructure-02-config.yml"},
		{"image reference missing a tag", func(f map[string]string) {
			f["image-references"] = strings.Replace(f["image-references"], "name: coredns", "name: not-coredns", 1)
		}, nil, "Failed to find coredns in image references"},
		{"network is not a Network", func(f map[string]string) {
			f["manifests/cluster-network-02-config.yml"] = "apiVersion: v1\nkind: ConfigMap\n"
		}, nil, "Network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := lab(t, t.TempDir(), tt.mutate)
			if tt.args != nil {
				args = tt.args(args)
			}
			code, log := run(t, "machine-config-operator", args)
			if code == 0 || !strings.Contains(log, tt.want) {
				t.Fatalf("exit %d, log %q; want failure naming %q", code, log, tt.want)
			}
		})
	}
}

func TestControllerFailsLikeTheRealOne(t *testing.T) {
	templates := filepath.Join(testenv.RequireShared(t), "fixtures/mco/templates")
	tests := []struct {
		name   string
		mutate func(f map[string]string)
		args   func(a []string) []string
		want   string
	}{
		{"no pull secret", nil, func(a []string) []string { return dropFlag(a, "--pull-secret") }, "--pull-secret"},
		{"no manifest dir", nil, func(a []string) []string { return dropFlag(a, "--manifest-dir") }, "--manifest-dir"},
		{"feature gate for another version", func(f map[string]string) {
			f["manifests/featuregate.yaml"] = strings.ReplaceAll(f["manifests/featuregate.yaml"], `"version":"`+testVersion+`"`, `"version":"4.17.0"`)
		}, nil, "missing desired version"},
		{"infrastructure without apiServerInternalURI", func(f map[string]string) {
			f["manifests/cluster-infrastructure-02-config.yml"] = strings.Replace(f["manifests/cluster-infrastructure-02-config.yml"], "  apiServerInternalURI: https://api-int.ocp4.example.com:6443\n", "", 1)
		}, nil, "unknown scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if code, log := run(t, "machine-config-operator", lab(t, dir, tt.mutate)); code != 0 {
				t.Fatal(log)
			}
			args := controllerArgs(t, dir, templates)
			if tt.args != nil {
				args = tt.args(args)
			}
			code, log := run(t, "machine-config-controller", args)
			if code == 0 || !strings.Contains(log, tt.want) {
				t.Fatalf("exit %d, log %q; want failure naming %q", code, log, tt.want)
			}
		})
	}
}

func TestDispatch(t *testing.T) {
	tests := []struct {
		argv0 string
		args  []string
		code  int
		want  string
	}{
		{"mco-standin", nil, 2, "usage"},
		{"mco-standin", []string{"machine-config-server", "bootstrap"}, 2, "unknown program"},
		{"machine-config-operator", []string{"start"}, 255, "only implements bootstrap"},
		{"/x/machine-config-controller", []string{"bootstrap"}, 255, "--manifest-dir"},
	}
	for _, tt := range tests {
		code, log := run(t, tt.argv0, tt.args)
		if code != tt.code || !strings.Contains(log, tt.want) {
			t.Errorf("%s %v: exit %d %q, want %d and %q", tt.argv0, tt.args, code, log, tt.code, tt.want)
		}
	}
}

func replaceFlag(args []string, flag, value string) []string {
	out := dropFlag(args, flag)
	return append(out, flag+"="+value)
}

func dropFlag(args []string, flag string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, flag+"=") {
			out = append(out, a)
		}
	}
	return out
}

// TestProxyOnlyWhenStatusSet: like the real operator (MCO 4.18 pkg/operator/render.go), the
// stand-in leaves ControllerConfig spec.proxy unset when the Proxy's status is empty, so the
// templates' {{if .Proxy}} branches (machine-config-daemon-pull.service's EnvironmentFile) are
// not taken; a Proxy with a status sets it, and they are.
func TestProxyOnlyWhenStatusSet(t *testing.T) {
	templates := filepath.Join(testenv.RequireShared(t), "fixtures/mco/templates")
	tests := []struct {
		name      string
		proxy     string
		wantProxy map[string]any // spec.proxy, nil: null or absent (the real one writes null)
		wantEnv   bool           // EnvironmentFile=/etc/mco/proxy.env in the pull unit
	}{
		{"empty status", "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec: {}\n", nil, false},
		{"status set", "apiVersion: config.openshift.io/v1\nkind: Proxy\nmetadata:\n  name: cluster\nspec:\n  httpProxy: http://198.18.0.1:3128\nstatus:\n  httpProxy: http://198.18.0.1:3128\n  noProxy: .cluster.local\n",
			map[string]any{"httpProxy": "http://198.18.0.1:3128", "noProxy": ".cluster.local"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := lab(t, dir, func(f map[string]string) { f["manifests/cluster-proxy-01-config.yaml"] = tc.proxy })
			if code, log := run(t, "machine-config-operator", args); code != 0 {
				t.Fatal(log)
			}
			b, err := os.ReadFile(filepath.Join(dir, "mco-bootstrap/bootstrap/manifests/machineconfigcontroller-controllerconfig.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			var cc struct {
				Spec map[string]any `json:"spec"`
			}
			if err := yaml.Unmarshal(b, &cc); err != nil {
				t.Fatal(err)
			}
			got := cc.Spec["proxy"]
			if tc.wantProxy == nil && got != nil {
				t.Errorf("spec.proxy = %v, want it unset", got)
			}
			if tc.wantProxy != nil && !reflect.DeepEqual(got, tc.wantProxy) {
				t.Errorf("spec.proxy = %v, want %v", got, tc.wantProxy)
			}
			if code, log := run(t, "machine-config-controller", controllerArgs(t, dir, templates)); code != 0 {
				t.Fatal(log)
			}
			m, _ := filepath.Glob(filepath.Join(dir, "mcc-output/machine-configs/rendered-worker-*.yaml"))
			if len(m) != 1 {
				t.Fatalf("rendered worker configs: %v", m)
			}
			doc, _ := os.ReadFile(m[0])
			mc, err := ignition.ParseMachineConfig(doc)
			if err != nil {
				t.Fatal(err)
			}
			unit := ""
			for _, u := range mc.Config.Systemd.Units {
				if u.Name == "machine-config-daemon-pull.service" && u.Contents != nil {
					unit = *u.Contents
				}
			}
			if unit == "" {
				t.Fatal("no machine-config-daemon-pull.service in the rendered worker config")
			}
			if env := strings.Contains(unit, "EnvironmentFile=/etc/mco/proxy.env"); env != tc.wantEnv {
				t.Errorf("pull unit has the proxy EnvironmentFile: %v, want %v:\n%s", env, tc.wantEnv, unit)
			}
		})
	}
}
