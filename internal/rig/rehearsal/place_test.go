package rehearsal

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/labbuild/labbuild/render/ignition"
)

func ptr[T any](v T) *T { return &v }

// TestPlaceAndParse places a config holding a static pod, a kubelet-like unit with a drop-in
// and an environment file, and checks the files, the static pod's program, argv and binds,
// and the unit's expanded command line.
func TestPlaceAndParse(t *testing.T) {
	pod := `apiVersion: v1
kind: Pod
metadata: {name: kube-apiserver, namespace: openshift-kube-apiserver}
spec:
  hostNetwork: true
  containers:
  - name: kube-apiserver
    command: [hyperkube, kube-apiserver]
    args: [--tls-cert-file=/etc/kubernetes/secrets/a.crt, --v=2]
    env: [{name: A, value: b}]
    volumeMounts:
    - {name: secrets, mountPath: /etc/kubernetes/secrets}
    - {name: same, mountPath: /var/lib/x}
  volumes:
  - {name: secrets, hostPath: {path: /etc/kubernetes/bootstrap-secrets}}
  - {name: same, hostPath: {path: /var/lib/x}}
`
	unit := "[Unit]\nDescription=k\n[Service]\nEnvironment=\"LEVEL=2\" B=x\nEnvironmentFile=/etc/sizing.env\nEnvironmentFile=-/etc/absent.env\nExecStartPre=/bin/mkdir --parents /etc/openshift/kubelet.conf.d\nExecStartPre=-/usr/sbin/restorecon -ri /var/lib/kubelet/v${LEVEL}\nExecStart=/usr/local/bin/wrap \\\n  /usr/bin/kubelet \\\n  --config=/etc/kubernetes/kubelet.conf \\\n  --container-runtime-endpoint=/var/run/crio/crio.sock \\\n  --system-reserved=cpu=${CPU} \\\n  --v=${LEVEL}\n"
	cfg := ignition.New()
	for _, f := range []ignition.File{
		{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Mode: 0o644, Contents: []byte(pod)},
		{Path: "/etc/sizing.env", Mode: 0o644, Contents: []byte("CPU=500m\n")},
		{Path: "/etc/kubernetes/bootstrap-secrets/a.key", Mode: 0o600, Contents: make([]byte, 5000)}, // gzip-compressed
	} {
		cfg.Storage.Files = append(cfg.Storage.Files, ignition.IgnFile(f))
	}
	cfg.Systemd.Units = append(cfg.Systemd.Units, types.Unit{Name: "kubelet.service", Contents: ptr(unit),
		Dropins: []types.Dropin{{Name: "10-level.conf", Contents: ptr("[Service]\nEnvironment=LEVEL=4\n")}}})
	raw, err := ignition.Encode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	p, err := Place(raw, root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/etc/kubernetes/bootstrap-secrets/a.key", "/etc/kubernetes/manifests/kube-apiserver.yaml", "/etc/sizing.env"}
	if !reflect.DeepEqual(p.Files, want) {
		t.Errorf("files %v, want %v", p.Files, want)
	}
	st, err := os.Stat(filepath.Join(root, "etc/kubernetes/bootstrap-secrets/a.key"))
	if err != nil || st.Size() != 5000 || st.Mode().Perm() != 0o600 {
		t.Errorf("a.key: %v %v (want 5000 bytes, 0600)", st, err)
	}
	cs, err := StaticPods(root)
	if err != nil {
		t.Fatal(err)
	}
	wantC := []Container{{File: "kube-apiserver.yaml", Pod: "kube-apiserver", Name: "kube-apiserver", Program: "kube-apiserver",
		Args: []string{"--tls-cert-file=/etc/kubernetes/secrets/a.crt", "--v=2"}, Env: []string{"A=b"},
		Binds:     [][2]string{{"/etc/kubernetes/secrets", "/etc/kubernetes/bootstrap-secrets"}},
		HostPaths: []string{"/etc/kubernetes/bootstrap-secrets", "/var/lib/x"}}}
	if !reflect.DeepEqual(cs, wantC) {
		t.Errorf("static pods\n got %+v\nwant %+v", cs, wantC)
	}
	k, err := KubeletFromUnit(root, "/opt/tools/kubelet")
	if err != nil {
		t.Fatal(err)
	}
	wantArgv := []string{"/usr/local/bin/wrap", "/opt/tools/kubelet", "--config=/etc/kubernetes/kubelet.conf",
		"--container-runtime-endpoint=/var/run/crio/crio.sock", "--system-reserved=cpu=500m", "--v=4"}
	if !reflect.DeepEqual(k.Argv, wantArgv) || k.Endpoint != "/var/run/crio/crio.sock" || k.Config != "/etc/kubernetes/kubelet.conf" {
		t.Errorf("kubelet %+v\nwant argv %v", k, wantArgv)
	}
	wantPre := []Command{{Argv: []string{"/bin/mkdir", "--parents", "/etc/openshift/kubelet.conf.d"}},
		{Argv: []string{"/usr/sbin/restorecon", "-ri", "/var/lib/kubelet/v4"}, IgnoreFailure: true}}
	if !reflect.DeepEqual(k.Pre, wantPre) {
		t.Errorf("kubelet ExecStartPre %+v\nwant %+v", k.Pre, wantPre)
	}
}

// TestPlaceRefusesOutside: a file the node could not see through its overlay is an error.
func TestPlaceRefusesOutside(t *testing.T) {
	cfg := ignition.New()
	cfg.Storage.Files = append(cfg.Storage.Files, ignition.IgnFile(ignition.File{Path: "/root/x", Mode: 0o644, Contents: []byte("x")}))
	raw, err := ignition.Encode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Place(raw, t.TempDir()); err == nil {
		t.Fatal("Place of /root/x: no error")
	}
}

// TestNodeNS: every node of a three-master lab gets a namespace of its own, short enough for
// its veth peer's name (cutting "lbr5290-master-1" to 15 bytes made the masters one).
func TestNodeNS(t *testing.T) {
	seen := map[string]string{}
	for _, n := range []string{"bootstrap", "master-0", "master-1", "master-2", "worker-0", "worker-1", "worker-10"} {
		ns, err := nodeNS(9999, n)
		if err != nil {
			t.Fatal(err)
		}
		if len("v"+ns) > 15 {
			t.Errorf("%s: namespace %s: veth peer name v%s is over 15 bytes", n, ns, ns)
		}
		if o, dup := seen[ns]; dup {
			t.Errorf("%s and %s share namespace %s", o, n, ns)
		}
		seen[ns] = n
	}
}

// TestStaticPodsOnPrem parses a pod shaped like the MCO's on-prem keepalived pod
// (manifests/on-prem/keepalived.yaml): its `empty-dir: {}` volume (a field the kubelet drops,
// leaving a volume without a source, defaulted to an emptyDir) is one node directory that both
// containers bind, and POD_NAMESPACE comes from the downward API.
func TestStaticPodsOnPrem(t *testing.T) {
	pod := `kind: Pod
apiVersion: v1
metadata: {name: keepalived, namespace: openshift-kni-infra}
spec:
  volumes:
  - name: conf-dir
    hostPath: {path: "/etc/keepalived"}
  - name: run-dir
    empty-dir: {}
  containers:
  - name: keepalived
    command: [/bin/bash, -c, "exec socat"]
    volumeMounts:
    - {name: conf-dir, mountPath: "/etc/keepalived"}
    - {name: run-dir, mountPath: "/var/run/keepalived"}
  - name: keepalived-monitor
    env:
    - name: POD_NAMESPACE
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    command: [dynkeepalived, /etc/kubernetes/kubeconfig]
    volumeMounts:
    - {name: run-dir, mountPath: "/var/run/keepalived"}
`
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, PodManifestDir), 0o755)
	os.WriteFile(filepath.Join(root, PodManifestDir, "keepalived.yaml"), []byte(pod), 0o644)
	cs, err := StaticPods(root)
	if err != nil {
		t.Fatal(err)
	}
	run := EmptyDirPath("keepalived", "run-dir")
	want := []Container{
		{File: "keepalived.yaml", Pod: "keepalived", Name: "keepalived", Program: "bash", Args: []string{"-c", "exec socat"},
			Binds: [][2]string{{"/var/run/keepalived", run}}, HostPaths: []string{"/etc/keepalived", run}},
		{File: "keepalived.yaml", Pod: "keepalived", Name: "keepalived-monitor", Program: "dynkeepalived", Args: []string{"/etc/kubernetes/kubeconfig"},
			Env: []string{"POD_NAMESPACE=openshift-kni-infra"}, Binds: [][2]string{{"/var/run/keepalived", run}}, HostPaths: []string{run}},
	}
	if !reflect.DeepEqual(cs, want) {
		t.Errorf("containers:\n got %+v\nwant %+v", cs, want)
	}
}

// TestResolveMerge: a config whose ignition.config.merge names a gzip data URL (what a single
// node's bootstrap-in-place.sh writes) is the child merged over the parent, as Ignition renders
// it: the parent's files and units, the child's, the child's entry where both have a path.
func TestResolveMerge(t *testing.T) {
	child := `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/child","contents":{"source":"data:,c"}},` +
		`{"path":"/etc/both","contents":{"source":"data:,from-child"}}]},"systemd":{"units":[{"name":"kubelet.service","enabled":true,"contents":"[Unit]\n[Install]\nWantedBy=multi-user.target\n"}]}}`
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(child))
	zw.Close()
	parent := `{"ignition":{"version":"3.4.0","config":{"merge":[{"compression":"gzip","source":"data:;base64,` + base64.StdEncoding.EncodeToString(gz.Bytes()) + `"}]}},` +
		`"storage":{"files":[{"path":"/var/lib/etcd/member/snap/db","mode":384,"contents":{"source":"data:,db"}},{"path":"/etc/both","contents":{"source":"data:,from-parent"}}]},` +
		`"systemd":{"units":[{"name":"bootkube.service","enabled":true,"contents":"[Unit]\n[Install]\nWantedBy=multi-user.target\n"}]}}`
	cfg, err := Resolve([]byte(parent))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Ignition.Config.Merge) != 0 {
		t.Errorf("merge references left: %+v", cfg.Ignition.Config.Merge)
	}
	got := map[string]string{}
	for _, f := range cfg.Storage.Files {
		b, _ := ignition.DecodeSource(*f.Contents.Source, f.Contents.Compression)
		got[f.Path] = string(b)
	}
	if want := map[string]string{"/etc/child": "c", "/etc/both": "from-child", "/var/lib/etcd/member/snap/db": "db"}; !maps.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
	var units []string
	for _, u := range cfg.Systemd.Units {
		units = append(units, u.Name)
	}
	slices.Sort(units)
	if !slices.Equal(units, []string{"bootkube.service", "kubelet.service"}) {
		t.Errorf("units %v", units)
	}
	if _, err := Resolve([]byte(strings.Replace(parent, `"data:;base64,`, `"http://example.invalid/x?`, 1))); err == nil {
		t.Error("a remote merge source was fetched")
	}
}
