package ignition

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4/types"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		json.Indent(&b, got, "", "  ")
		b.WriteByte('\n')
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	var b bytes.Buffer
	json.Indent(&b, got, "", "  ")
	b.WriteByte('\n')
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("%s differs from the golden file; run go test ./render/ignition -update and review the diff", name)
	}
}

func file(path string, mode int, s string) File {
	return File{Path: path, Mode: mode, Contents: []byte(s)}
}

func mustContents(t *testing.T, cfg types.Config, path string) string {
	t.Helper()
	b, err := FileContents(cfg, path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestApplyReplacesByPath(t *testing.T) {
	base, err := Apply(New(), Additions{
		Files: []File{file("/etc/a", 0o644, "old"), file("/etc/keep", 0o644, "keep")},
		Dirs:  []Dir{{Path: "/etc/d", Mode: 0o755}},
		Units: []Unit{{Name: "x.service", Contents: "[Service]\nExecStart=/bin/old\n"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		add       Additions
		wantPaths []string
		check     func(t *testing.T, cfg types.Config)
	}{
		{
			name:      "file replaces file",
			add:       Additions{Files: []File{file("/etc/a", 0o600, "new")}},
			wantPaths: []string{"/etc/a", "/etc/d", "/etc/keep"},
			check: func(t *testing.T, cfg types.Config) {
				if got := mustContents(t, cfg, "/etc/a"); got != "new" {
					t.Errorf("/etc/a = %q, want new", got)
				}
				for _, f := range cfg.Storage.Files {
					if f.Path == "/etc/a" && *f.Mode != 0o600 {
						t.Errorf("/etc/a mode = %o, want 600", *f.Mode)
					}
				}
			},
		},
		{
			name:      "file replaces directory (one key space)",
			add:       Additions{Files: []File{file("/etc/d", 0o644, "now a file")}},
			wantPaths: []string{"/etc/a", "/etc/d", "/etc/keep"},
			check: func(t *testing.T, cfg types.Config) {
				if len(cfg.Storage.Directories) != 0 {
					t.Errorf("directory /etc/d kept next to the file")
				}
			},
		},
		{
			name:      "unit replaces unit by name",
			add:       Additions{Units: []Unit{{Name: "x.service", Contents: "[Service]\nExecStart=/bin/new\n"}}},
			wantPaths: []string{"/etc/a", "/etc/d", "/etc/keep"},
			check: func(t *testing.T, cfg types.Config) {
				if len(cfg.Systemd.Units) != 1 || !strings.Contains(*cfg.Systemd.Units[0].Contents, "/bin/new") {
					t.Errorf("units = %+v, want one x.service running /bin/new", cfg.Systemd.Units)
				}
			},
		},
		{
			name:      "ssh key replaces core",
			add:       Additions{SSHKeys: []string{"ssh-ed25519 AAAA new\n"}},
			wantPaths: []string{"/etc/a", "/etc/d", "/etc/keep"},
			check: func(t *testing.T, cfg types.Config) {
				if len(cfg.Passwd.Users) != 1 || cfg.Passwd.Users[0].Name != "core" || string(cfg.Passwd.Users[0].SSHAuthorizedKeys[0]) != "ssh-ed25519 AAAA new" {
					t.Errorf("users = %+v", cfg.Passwd.Users)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Apply(base, tt.add)
			if err != nil {
				t.Fatal(err)
			}
			if d := Duplicates(cfg); len(d) > 0 {
				t.Fatalf("duplicates after merge: %v", d)
			}
			if got := strings.Join(Paths(cfg), " "); got != strings.Join(tt.wantPaths, " ") {
				t.Errorf("paths = %s, want %s", got, strings.Join(tt.wantPaths, " "))
			}
			tt.check(t, cfg)
			if _, err := Encode(cfg); err != nil {
				t.Errorf("merged config invalid: %v", err)
			}
		})
	}
	if got := mustContents(t, base, "/etc/a"); got != "old" {
		t.Errorf("Apply modified its base: /etc/a = %q", got)
	}
}

func TestApplyRefusesDuplicateAdditions(t *testing.T) {
	tests := []struct {
		name string
		add  Additions
		key  string
	}{
		{"file twice", Additions{Files: []File{file("/etc/a", 0o644, "1"), file("/etc/a", 0o644, "2")}}, "/etc/a"},
		{"file and directory", Additions{Files: []File{file("/etc/a", 0o644, "1")}, Dirs: []Dir{{Path: "/etc/a", Mode: 0o755}}}, "/etc/a"},
		{"directory and link", Additions{Dirs: []Dir{{Path: "/etc/l", Mode: 0o755}}, Links: []Link{{Path: "/etc/l", Target: "/x"}}}, "/etc/l"},
		{"unit twice", Additions{Units: []Unit{{Name: "a.service"}, {Name: "a.service"}}}, "a.service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Apply(New(), tt.add)
			var de *DuplicateError
			if !errors.As(err, &de) || de.Key != tt.key {
				t.Fatalf("err = %v, want DuplicateError for %s", err, tt.key)
			}
		})
	}
}

func TestSource(t *testing.T) {
	big := bytes.Repeat([]byte("apiVersion: apiextensions.k8s.io/v1\n"), 500)
	random := make([]byte, 8192) // incompressible: stays plain
	for i := range random {
		random[i] = byte(i*7919 ^ i>>3*31)
	}
	tests := []struct {
		name     string
		data     []byte
		wantGzip bool
	}{
		{"small", []byte("hello\n"), false},
		{"empty", nil, false},
		{"large compressible", big, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, comp := Source(tt.data)
			if (comp != nil) != tt.wantGzip {
				t.Fatalf("compression = %v, want gzip %v", comp, tt.wantGzip)
			}
			if tt.wantGzip && len(src) >= len(tt.data) {
				t.Errorf("compressed source %d bytes >= plain %d", len(src), len(tt.data))
			}
			back, err := DecodeSource(src, comp)
			if err != nil || !bytes.Equal(back, tt.data) {
				t.Fatalf("round trip failed: %v", err)
			}
			src2, _ := Source(tt.data)
			if src2 != src {
				t.Error("Source is not deterministic")
			}
		})
	}
}

// TestSourceIsTheOneShotEncoding: the memo and the reused gzip writers give exactly what a
// fresh gzip writer and base64 give (the encoding of the golden files), from any goroutine,
// and ignFiles' parallel conversion keeps the order and the bytes of IgnFile.
func TestSourceIsTheOneShotEncoding(t *testing.T) {
	oneShot := func(data []byte) (string, bool) {
		if len(data) >= CompressThreshold {
			var b bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			zw.Write(data)
			zw.Close()
			if b.Len() < len(data) {
				return "data:;base64," + base64.StdEncoding.EncodeToString(b.Bytes()), true
			}
		}
		return "data:text/plain;charset=utf-8;base64," + base64.StdEncoding.EncodeToString(data), false
	}
	var files []File
	for i := range 40 {
		data := bytes.Repeat([]byte(fmt.Sprintf("line %d of a manifest\n", i)), i*40)
		if i%7 == 3 { // incompressible
			data = make([]byte, 5000+i)
			for j := range data {
				data[j] = byte(j*7919 ^ j>>3*31 ^ i)
			}
		}
		files = append(files, File{Path: fmt.Sprintf("/etc/f%02d", i), Mode: ModeFile, Contents: data})
	}
	files = append(files, files[5], files[6]) // repeated contents: memo hits
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for _, f := range files {
				src, comp := Source(f.Contents)
				want, wantGzip := oneShot(f.Contents)
				if src != want || (comp != nil) != wantGzip {
					t.Errorf("%s: Source differs from a one-shot gzip+base64 encoding", f.Path)
				}
			}
		})
	}
	wg.Wait()
	got := ignFiles(files)
	for i, f := range files {
		if want := IgnFile(f); !reflect.DeepEqual(got[i], want) {
			t.Errorf("ignFiles[%d] = %s, want IgnFile's %s", i, got[i].Path, want.Path)
		}
	}
}

func TestValidateFailsOnAnyReportEntry(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		wantErr string
	}{
		{"valid", `{"ignition":{"version":"3.4.0"}}`, ""},
		{"unknown key is a warning, still fails", `{"ignition":{"version":"3.4.0"},"storag":{}}`, "Unused key"},
		{"enabled unit without [Install] warns", `{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n"}]}}`, "Install"},
		{"duplicate path is fatal", `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/a"},{"path":"/a"}]}}`, "duplicate"},
		{"wrong version", `{"ignition":{"version":"3.2.0"}}`, "version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate([]byte(tt.raw))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tt.wantErr)) {
				t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestKeyfile(t *testing.T) {
	ok := StaticNetwork{Address: "192.168.126.101", Prefix: 24, Gateway: "192.168.126.1", DNS: []string{"192.168.126.1"}, Search: "ocp4.example.com"}
	kf, err := Keyfile(ok)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"address1=192.168.126.101/24\n", "gateway=192.168.126.1\n", "dns=192.168.126.1;\n", "method=manual", "[ipv6]\nmethod=disabled"} {
		if !strings.Contains(string(kf), want) {
			t.Errorf("keyfile lacks %q:\n%s", want, kf)
		}
	}
	bad := []struct {
		name string
		mod  func(n *StaticNetwork)
		want string
	}{
		{"bad address", func(n *StaticNetwork) { n.Address = "192.168.126" }, "address"},
		{"ipv6 address", func(n *StaticNetwork) { n.Address = "fd00::1" }, "address"},
		{"prefix", func(n *StaticNetwork) { n.Prefix = 33 }, "prefix"},
		{"gateway outside", func(n *StaticNetwork) { n.Gateway = "10.0.0.1" }, "outside"},
		{"dns", func(n *StaticNetwork) { n.DNS = []string{"dns.example"} }, "DNS"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			n := ok
			tt.mod(&n)
			if _, err := Keyfile(n); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// testNode returns the NodeInput for node name (master-N or worker-N) of the test lab.
func testNode(t *testing.T, name, ip string) NodeInput {
	t.Helper()
	pool := strings.SplitN(name, "-", 2)[0]
	mc, err := os.ReadFile(filepath.Join("testdata", "rendered-"+pool+".json"))
	if err != nil {
		t.Fatal(err)
	}
	in := NodeInput{
		Hostname:              name + ".ocp4.example.com",
		Network:               StaticNetwork{Address: ip, Prefix: 24, Gateway: "192.168.126.1", DNS: []string{"192.168.126.1"}},
		SSHKey:                "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKtest core@lab",
		RenderedMachineConfig: mc,
		KubeletCA:             []byte("-----BEGIN CERTIFICATE-----\nTESTCA\n-----END CERTIFICATE-----\n"),
		BootstrapKubeconfig:   []byte("apiVersion: v1\nkind: Config\nclusters: []\n"),
	}
	if pool == "master" {
		in.KubeProxyPod = []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-proxy\n  namespace: kube-system\n")
	}
	return in
}

func TestNode(t *testing.T) {
	nodes := []struct{ name, ip string }{
		{"master-0", "192.168.126.101"},
		{"master-1", "192.168.126.102"},
		{"worker-0", "192.168.126.110"},
	}
	for _, n := range nodes {
		t.Run(n.name, func(t *testing.T) {
			in := testNode(t, n.name, n.ip)
			res, err := Node(in)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Parse(res.JSON)
			if err != nil {
				t.Fatalf("output does not parse cleanly: %v", err)
			}
			if d := Duplicates(cfg); len(d) > 0 {
				t.Fatalf("duplicate paths: %v", d)
			}
			if got := mustContents(t, cfg, PathHostname); got != n.name+".ocp4.example.com\n" {
				t.Errorf("hostname = %q", got)
			}
			if kf := mustContents(t, cfg, PathKeyfile); !strings.Contains(kf, "address1="+n.ip+"/24\n") {
				t.Errorf("keyfile does not carry %s:\n%s", n.ip, kf)
			}
			// The rendered config's pull secret, untouched, as the machine-config-server serves it.
			mc, err := ParseMachineConfig(in.RenderedMachineConfig)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustContents(t, cfg, PathPullSecret); got != mustContents(t, mc.Config, PathPullSecret) {
				t.Errorf("config.json is not the rendered config's")
			}
			var anno map[string]string
			if err := json.Unmarshal([]byte(mustContents(t, cfg, PathNodeAnnotations)), &anno); err != nil {
				t.Fatal(err)
			}
			if anno["machineconfiguration.openshift.io/currentConfig"] != res.Rendered ||
				anno["machineconfiguration.openshift.io/desiredConfig"] != res.Rendered ||
				anno["machineconfiguration.openshift.io/state"] != "Done" || !strings.HasPrefix(res.Rendered, "rendered-") {
				t.Errorf("node annotations = %v (rendered %s)", anno, res.Rendered)
			}
			var enc struct {
				Spec struct {
					Config map[string]any `json:"config"`
				} `json:"spec"`
			}
			if err := json.Unmarshal([]byte(mustContents(t, cfg, PathEncapsulatedMC)), &enc); err != nil {
				t.Fatal(err)
			}
			if len(enc.Spec.Config) != 1 || enc.Spec.Config["ignition"] == nil {
				t.Errorf("encapsulated MC spec.config = %v, want only the ignition version", enc.Spec.Config)
			}
			if !strings.Contains(mustContents(t, cfg, PathMCSContent), `"storage"`) {
				t.Error("mcs-machine-config-content.json lacks the full config")
			}
			if mustContents(t, cfg, PathKubeletCA) != string(in.KubeletCA) {
				t.Error("kubelet-ca.crt is not the given CA")
			}
			_, kpErr := FileContents(cfg, PathKubeProxyPod)
			if isMaster := strings.HasPrefix(n.name, "master"); isMaster != (kpErr == nil) {
				t.Errorf("kube-proxy present = %v on %s", kpErr == nil, n.name)
			}
			if len(cfg.Passwd.Users) != 1 || string(cfg.Passwd.Users[0].SSHAuthorizedKeys[0]) != in.SSHKey {
				t.Errorf("users = %+v", cfg.Passwd.Users)
			}
			golden(t, n.name+".ign", res.JSON)
		})
	}
}

func TestNodeRefusesDuplicateExtra(t *testing.T) {
	in := testNode(t, "master-0", "192.168.126.101")
	in.Extra = []File{file(PathHostname, 0o644, "other\n")} // NodeBase already adds it
	_, err := Node(in)
	var de *DuplicateError
	if !errors.As(err, &de) || de.Key != PathHostname {
		t.Fatalf("err = %v, want DuplicateError for %s", err, PathHostname)
	}
}

func testBootstrap() BootstrapInput {
	crd := bytes.Repeat([]byte("# a large CRD line that compresses well\n"), 300)
	return BootstrapInput{
		Hostname:   "bootstrap.ocp4.example.com",
		Network:    StaticNetwork{Address: "192.168.126.100", Prefix: 24, Gateway: "192.168.126.1", DNS: []string{"192.168.126.1"}},
		SSHKey:     "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKtest core@lab",
		PullSecret: []byte(`{"auths":{"example.test":{"auth":"bGFiOnB1bGw="}}}`),
		CRIOPause:  []byte("[crio.image]\npause_image = \"quay.io/example/pod@sha256:00\"\npause_image_auth_file = \"/var/lib/kubelet/config.json\"\n"),
		StaticPods: []File{file("/etc/kubernetes/manifests/etcd-bootstrap.yaml", 0o644, "kind: Pod\n")},
		Files: []File{
			file("/etc/kubernetes/bootstrap-secrets/etcd-ca.crt", 0o644, "CA"),
			file("/etc/kubernetes/bootstrap-secrets/etcd-ca.key", 0o600, "KEY"),
			file("/etc/kubernetes/kubeconfigs/localhost.kubeconfig", 0o600, "kind: Config\n"),
			{Path: "/opt/openshift/crds/0000_00_big.crd.yaml", Mode: 0o644, Contents: crd},
			file("/opt/openshift/manifests/cluster-config.yaml", 0o644, "kind: ConfigMap\n"),
		},
		ApplyKubeconfig: "/etc/kubernetes/kubeconfigs/localhost.kubeconfig",
	}
}

func TestBootstrap(t *testing.T) {
	res, err := Bootstrap(testBootstrap())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(res.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if d := Duplicates(cfg); len(d) > 0 {
		t.Fatalf("duplicates: %v", d)
	}
	var kubelet string
	for _, u := range cfg.Systemd.Units {
		if u.Name == "kubelet.service" {
			kubelet = *u.Contents
		}
	}
	if !strings.Contains(kubelet, "--pod-manifest-path=/etc/kubernetes/manifests") || strings.Contains(kubelet, "kubeconfig") {
		t.Errorf("bootstrap kubelet must run static pods only, without --kubeconfig:\n%s", kubelet)
	}
	if !strings.Contains(mustContents(t, cfg, PathBootkube), "KUBECONFIG=/etc/kubernetes/kubeconfigs/localhost.kubeconfig") {
		t.Error("bootkube.sh does not use the apply kubeconfig")
	}
	for _, f := range cfg.Storage.Files {
		if f.Path == "/opt/openshift/crds/0000_00_big.crd.yaml" && (f.Contents.Compression == nil || *f.Contents.Compression != "gzip") {
			t.Error("large CRD is not gzip-compressed")
		}
	}
	golden(t, "bootstrap.ign", res.JSON)
}

func TestBootstrapErrors(t *testing.T) {
	tests := []struct {
		name string
		mod  func(in *BootstrapInput)
		want string
	}{
		{"static pod also in files", func(in *BootstrapInput) { in.Files = append(in.Files, in.StaticPods[0]) }, "added twice"},
		{"file at pull secret path", func(in *BootstrapInput) { in.Files = append(in.Files, file(PathPullSecret, 0o600, "x")) }, "added twice"},
		{"static pod elsewhere", func(in *BootstrapInput) { in.StaticPods[0].Path = "/etc/x.yaml" }, "must be in"},
		{"no pause", func(in *BootstrapInput) { in.CRIOPause = nil }, "pause"},
		{"no apply kubeconfig", func(in *BootstrapInput) { in.ApplyKubeconfig = "/etc/kubernetes/kubeconfigs/admin.kubeconfig" }, "not among"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := testBootstrap()
			tt.mod(&in)
			if _, err := Bootstrap(in); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestKubeletCAFromControllerConfig(t *testing.T) {
	good := []byte("apiVersion: machineconfiguration.openshift.io/v1\nkind: ControllerConfig\nspec:\n  kubeAPIServerServingCAData: VEVTVENB\n")
	ca, err := KubeletCAFromControllerConfig(good)
	if err != nil || string(ca) != "TESTCA" {
		t.Fatalf("got %q, %v", ca, err)
	}
	if _, err := KubeletCAFromControllerConfig([]byte("kind: ControllerConfig\nspec: {}\n")); err == nil {
		t.Fatal("missing CA accepted")
	}
}

func BenchmarkNode(b *testing.B) {
	t := &testing.T{}
	in := testNode(t, "master-0", "192.168.126.101")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Node(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBootkubeApplyShowsWhy runs bootkube.sh's apply_all (from the built bootstrap config) with
// a fake oc: a file not applied is logged with the first non-empty line of oc's error, so the
// journal says why; oc's standard output and the rest of its error stay out.
func TestBootkubeApplyShowsWhy(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	res, err := Bootstrap(testBootstrap())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(res.JSON)
	if err != nil {
		t.Fatal(err)
	}
	script := mustContents(t, cfg, PathBootkube)
	start := strings.Index(script, "apply_all() {")
	end := strings.Index(script[start:], "\n}\n")
	if start < 0 || end < 0 {
		t.Fatalf("no apply_all function in bootkube.sh:\n%s", script)
	}
	fn := script[start : start+end+3]
	for _, tc := range []struct {
		name, stderr string
		fail         bool
		want         string
	}{
		{name: "ok", want: ""},
		{name: "no CRD", fail: true,
			stderr: "\nerror: resource mapping not found for name: \"cluster\" namespace: \"\" from \"f\": no matches for kind \"Network\" in version \"operator.openshift.io/v1\"\nensure CRDs are installed first\n",
			want:   "not applied yet: error: resource mapping not found for name: \"cluster\" namespace: \"\" from \"f\": no matches for kind \"Network\" in version \"operator.openshift.io/v1\"\n"},
		{name: "long", fail: true, stderr: strings.Repeat("x", 400) + "\n", want: "not applied yet: " + strings.Repeat("x", 300) + "\n"},
		{name: "silent", fail: true, want: "not applied yet: oc failed\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "bin")
			man := filepath.Join(dir, "manifests")
			os.MkdirAll(bin, 0o755)
			os.MkdirAll(man, 0o755)
			os.WriteFile(filepath.Join(man, "a.yaml"), []byte("kind: X\n"), 0o644)
			code := 0
			if tc.fail {
				code = 1
			}
			os.WriteFile(filepath.Join(bin, "stderr"), []byte(tc.stderr), 0o644)
			fake := fmt.Sprintf("#!/bin/sh\necho 'serverside-applied (stdout)'\ncat %q >&2\nexit %d\n", filepath.Join(bin, "stderr"), code)
			if err := os.WriteFile(filepath.Join(bin, "oc"), []byte(fake), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", fn+"\napply_all \"$1\"", "bash", man)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.Output()
			if tc.fail != (err != nil) {
				t.Errorf("apply_all error %v, want failure %v", err, tc.fail)
			}
			want := ""
			if tc.want != "" {
				want = "bootkube: " + filepath.Join(man, "a.yaml") + " " + tc.want
			}
			if string(out) != want {
				t.Errorf("apply_all printed\n%q\nwant\n%q", out, want)
			}
		})
	}
}

// TestNodeRefusesReplacingRendered: an addition that replaces a file of the rendered config
// (here /etc/hostname, which a rendered config would then carry) is refused with the
// machine-config daemon's first-boot verdict, naming the file.
func TestNodeRefusesReplacingRendered(t *testing.T) {
	in := testNode(t, "master-0", "192.168.126.101")
	mc, err := ParseMachineConfig(in.RenderedMachineConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := mc.Config
	cfg.Storage.Files = append(append([]types.File{}, cfg.Storage.Files...), IgnFile(File{Path: PathHostname, Mode: ModeFile, Contents: []byte("localhost\n")}))
	obj := map[string]any{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
		"metadata": map[string]any{"name": mc.Name}, "spec": map[string]any{"config": cfg}}
	if in.RenderedMachineConfig, err = json.Marshal(obj); err != nil {
		t.Fatal(err)
	}
	_, err = Node(in)
	if err == nil || !strings.Contains(err.Error(), `content mismatch for file "/etc/hostname"`) {
		t.Fatalf("err = %v, want the daemon's content mismatch for /etc/hostname", err)
	}
}
