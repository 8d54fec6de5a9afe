package targets

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/kube"
	"github.com/labbuild/labbuild/targets/kube/kubedyn"
)

// mfTestPullSecret is a syntactically valid pull secret; the tests check it never reaches logs.
const mfTestPullSecret = `{"auths":{"quay.io":{"auth":"bWZ0ZXN0OnNlY3JldC1wdWxsLXNlY3JldA=="}}}`

// mfTestSSHKey is a public key (its private half was never kept) for the ssh MachineConfigs.
const mfTestSSHKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGq3z0lHq0m8VqgV1t3pU8c7JmQ8cF0xWJ3w3x3pD0lB lab@example"

// mfLab builds the manifests family with the real pki and kubeconfig families and stand-ins
// for the release targets (which write what release/* writes: pullspec files and crds/).
type mfLab struct {
	t    *testing.T
	cfg  *lab.Config
	out  string
	now  time.Time
	crds map[string][]byte // crds/<file> of the stand-in release/crds
	log  bytes.Buffer
}

func newMFLab(t *testing.T) *mfLab {
	ps := filepath.Join(t.TempDir(), "pull-secret.json")
	if err := os.WriteFile(ps, []byte(mfTestPullSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(filepath.Dir(ps), "id_ed25519.pub")
	if err := os.WriteFile(key, []byte(mfTestSSHKey+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testLabConfig()
	cfg.Access.PullSecretFile = ps
	cfg.Access.SSHKeyFile = key
	cfg.PKI.KeyAlgorithm = "ECDSA-P256" // fast keys; the algorithm is not under test here
	return &mfLab{t: t, cfg: cfg, out: t.TempDir(), now: pkiT0,
		crds: map[string][]byte{"0000_10_config-operator_01_dnses.crd.yaml": []byte("kind: CustomResourceDefinition\n")}}
}

// testLabConfig is the embedded default lab with the version the sample payload and the
// stand-in release targets have (4.18.0): the CLI reads it from the payload before a build
// (lab.Config.SetPayload), these tests build without the CLI.
func testLabConfig() *lab.Config {
	c := lab.DefaultConfig()
	c.Release.Version = "4.18.0"
	return c
}

// mfFixture reads a file of ../shared/fixtures/release (4.18) for the stand-in release targets.
func mfFixture(s *engine.Step, rel string) ([]byte, error) {
	shared := repo.Shared()
	if shared == "" {
		return nil, fmt.Errorf("%s: stand-in: no ../shared/fixtures (LABBUILD_SHARED)", s.Target().Name)
	}
	return os.ReadFile(filepath.Join(shared, "fixtures/release", rel))
}

// mfStandinRelease returns stand-in release targets: release/image/<tag> and release/resolve
// write fake digest pull specs, release/crds writes crds, release/featuregates and
// release/cvo-bootstrap the 4.18 fixture's FeatureGate manifests and CVO bootstrap pod.
func mfStandinRelease(crds map[string][]byte) []*engine.Target {
	var ts []*engine.Target
	pull := func(name, spec string) *engine.Target {
		return &engine.Target{Name: name, Doc: "stand-in", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
			return s.WriteFile("pullspec", []byte(spec+"\n"), 0o644)
		}}
	}
	for i, tag := range []string{"etcd", "hyperkube", "kube-proxy", "pod", "keepalived-ipfailover", "baremetal-runtimecfg", "coredns"} {
		ts = append(ts, pull("release/image/"+tag, "quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:"+strings.Repeat(string(rune('a'+i)), 64)))
	}
	ts = append(ts, pull("release/resolve", "quay.io/openshift-release-dev/ocp-release@sha256:"+strings.Repeat("f", 64)))
	ts = append(ts, &engine.Target{Name: "release/crds", Doc: "stand-in", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
		for name, b := range crds {
			if err := s.WriteFile("crds/"+name, b, 0o644); err != nil {
				return err
			}
		}
		return nil
	}})
	ts = append(ts, &engine.Target{Name: "release/featuregates", Doc: "stand-in: the 4.18 fixture's", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
		for _, n := range []string{"featureGate-SelfManagedHA-Default.yaml", "featureGate-SelfManagedHA-TechPreviewNoUpgrade.yaml",
			"featureGate-SelfManagedHA-DevPreviewNoUpgrade.yaml", "featureGate-Hypershift-Default.yaml"} {
			b, err := mfFixture(s, "cluster-config-api/manifests/"+n)
			if err != nil {
				return err
			}
			if err := s.WriteFile("featuregates/"+n, b, 0o644); err != nil {
				return err
			}
		}
		return nil
	}})
	ts = append(ts, &engine.Target{Name: "release/cvo-bootstrap", Doc: "stand-in: the 4.18 fixture's", Version: 1, Run: func(ctx context.Context, s *engine.Step) error {
		b, err := mfFixture(s, "cvo/bootstrap/bootstrap-pod.yaml")
		if err != nil {
			return err
		}
		return s.WriteFile("bootstrap-pod.yaml", b, 0o644)
	}})
	return ts
}

func (l *mfLab) build(goals ...string) *engine.Result {
	l.t.Helper()
	cfg := reparsed(l.t, l.cfg, "lab.json")
	ts := append(append(append(pkiTargets(cfg), kubeconfigTargets(cfg)...), manifestsTargets(cfg)...), mfStandinRelease(l.crds)...)
	r, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: l.out, Goals: goals, Jobs: 2, Targets: ts,
		Now: func() time.Time { return l.now }, Stdout: &l.log, Stderr: &l.log})
	if err != nil {
		l.t.Fatalf("build: %v\n%s", err, l.log.String())
	}
	return r
}

func (l *mfLab) path(target, rel string) string {
	return filepath.Join(l.out, filepath.FromSlash(target), filepath.FromSlash(rel))
}

func (l *mfLab) file(target, rel string) []byte {
	l.t.Helper()
	b, err := os.ReadFile(l.path(target, rel))
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

// TestManifestsBootstrapTree checks the collector's layout: the five static pods, the pause
// drop-in, CRDs sorting before the cluster manifests, secret files 0600, the kubeadmin
// password and the pivot ConfigMap kept out; and that the pull secret reaches no log.
func TestManifestsBootstrapTree(t *testing.T) {
	l := newMFLab(t)
	l.build("manifests")
	dir := l.path("manifests/bootstrap", "")
	var files []string
	modes := map[string]os.FileMode{}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, filepath.ToSlash(rel))
			st, _ := d.Info()
			modes[filepath.ToSlash(rel)] = st.Mode().Perm()
		}
		return nil
	})
	sort.Strings(files)
	for _, want := range []string{
		"static-pods/" + manifests.EtcdPodFile, "static-pods/" + manifests.KubeAPIServerPodFile,
		"static-pods/" + manifests.KubeControllerManagerPodFile, "static-pods/" + manifests.KubeSchedulerPodFile,
		"static-pods/" + manifests.CVOPodFile, "crio/00-pause.conf",
		"manifests/0000_10_config-operator_01_dnses.crd.yaml",
		"manifests/02-config-featuregate.yaml", "manifests/04-openshift-etcd-secret-etcd-signer.yaml",
		"manifests/04-openshift-config-secret-pull-secret.yaml", "manifests/04-kube-system-secret-kubeadmin.yaml",
	} {
		if !slices.Contains(files, want) {
			t.Errorf("manifests/bootstrap lacks %s", want)
		}
	}
	var ms []string
	for _, f := range files {
		if strings.Contains(f, "kube-proxy") || strings.Contains(f, "kubeadmin-password") || strings.Contains(f, "configmap-bootstrap") {
			t.Errorf("manifests/bootstrap must not hold %s", f)
		}
		if strings.HasPrefix(f, "manifests/") {
			ms = append(ms, f)
		}
	}
	if len(ms) == 0 || !strings.HasPrefix(ms[0], "manifests/0000_") {
		t.Errorf("CRDs do not sort first: %v", ms)
	}
	for f, m := range modes {
		secret := strings.Contains(f, "-secret-")
		if secret && m != 0o600 || !secret && m != 0o644 {
			t.Errorf("%s: mode %o", f, m)
		}
	}
	if m := modes["static-pods/"+manifests.CVOPodFile]; m != 0o644 {
		t.Errorf("cvo pod mode %o", m)
	}
	if st, err := os.Stat(l.path("manifests/kubeadmin", "kubeadmin-password")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("kubeadmin-password: %v %v, want mode 0600", st, err)
	}
	ps := l.file("manifests/bootstrap", "manifests/04-openshift-config-secret-pull-secret.yaml")
	var sec corev1.Secret
	if err := yaml.Unmarshal(ps, &sec); err != nil || string(sec.Data[".dockerconfigjson"]) != mfTestPullSecret {
		t.Errorf("pull-secret Secret does not hold the pull secret file (%v)", err)
	}
	if strings.Contains(l.log.String(), "bWZ0ZXN0") {
		t.Error("the pull secret appears in the build output")
	}
	cc := l.file("manifests/bootstrap", "manifests/04-kube-system-configmap-cluster-config-v1.yaml")
	if bytes.Contains(cc, []byte("bWZ0ZXN0")) || !bytes.Contains(cc, []byte(`pullSecret: ""`)) {
		t.Error("cluster-config-v1 must carry an empty pullSecret")
	}
	r := l.build("manifests")
	if len(r.Built) != 0 {
		t.Errorf("second build ran %v, want nothing", r.Built)
	}
}

// TestManifestsClusterNetworkRebuild: changing network.clusterNetwork rebuilds the pods and
// manifests that carry it (and the collector) and nothing else: no pki/, no other pod.
func TestManifestsClusterNetworkRebuild(t *testing.T) {
	l := newMFLab(t)
	l.build("manifests")
	idsBefore := l.file("manifests/ids", "infrastructure-name")
	l.cfg.Network.ClusterNetwork = "10.132.0.0/14"
	r := l.build("manifests")
	got := append([]string(nil), r.Built...)
	sort.Strings(got)
	want := []string{"manifests/bootstrap", "manifests/cluster/cluster-config-v1", "manifests/cluster/network-config",
		"manifests/cluster/network-operator", "manifests/kube-proxy", "manifests/static-pods/kube-controller-manager"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rebuilt %v\nwant    %v", got, want)
	}
	for _, n := range got {
		if strings.HasPrefix(n, "pki/") {
			t.Errorf("%s rebuilt", n)
		}
	}
	if !bytes.Contains(l.file("manifests/kube-proxy", manifests.KubeProxyPodFile), []byte("--cluster-cidr=10.132.0.0/14")) {
		t.Error("kube-proxy pod does not carry the new cluster network")
	}
	if !bytes.Equal(idsBefore, l.file("manifests/ids", "infrastructure-name")) {
		t.Error("the infrastructure name changed with the cluster network")
	}
}

// TestManifestsBadPullSecret: a malformed pull secret fails the pull-secret target with the
// field named and without its content.
func TestManifestsBadPullSecret(t *testing.T) {
	l := newMFLab(t)
	if err := os.WriteFile(l.cfg.Access.PullSecretFile, []byte(`{"auths": "hunter2-secret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := reparsed(t, l.cfg, "lab.json")
	ts := append(append(pkiTargets(cfg), manifestsTargets(cfg)...), mfStandinRelease(l.crds)...)
	var out bytes.Buffer
	_, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: l.out, Goals: []string{"manifests/cluster/pull-secret"}, Targets: ts, Stdout: &out, Stderr: &out})
	if err == nil {
		t.Fatal("build with a malformed pull secret succeeded")
	}
	if !strings.Contains(out.String(), "access.pullSecretFile") || strings.Contains(out.String(), "hunter2") {
		t.Errorf("output should name access.pullSecretFile and not the content:\n%s", out.String())
	}
}

// mfFixtureCRDs returns the 44 CRDs of a Default / self-managed-high-availability payload: the
// 42 of cluster-config-api's render and the CVO's ClusterVersion (Default) and ClusterOperator.
func mfFixtureCRDs(t *testing.T) map[string][]byte {
	shared := testenv.RequireShared(t)
	out := map[string][]byte{}
	add := func(p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = b
	}
	ms, _ := filepath.Glob(filepath.Join(shared, "fixtures/release/crds/*.crd.yaml"))
	for _, p := range ms {
		add(p)
	}
	add(filepath.Join(shared, "fixtures/release/cvo/manifests/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml"))
	add(filepath.Join(shared, "fixtures/release/cvo/manifests/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml"))
	if len(out) != 44 {
		t.Fatalf("%d CRDs from the fixtures, want 44", len(out))
	}
	return out
}

// mfOperatorNetworkCRD returns openshift/api's networks.operator.openshift.io CRD from the
// module cache (the network operator's payload manifest; not in the 44 bootstrap CRDs), or nil.
func mfOperatorNetworkCRD(t *testing.T) []byte {
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "operator/v1/zz_generated.crd-manifests/0000_70_network_01_networks-Default.crd.yaml"))
	if err != nil {
		return nil
	}
	return b
}

// TestManifestsAPIServer runs a real etcd and kube-apiserver with the flags read from the
// generated kube-apiserver static pod (node paths mapped to the lab's files through
// manifests.BootstrapTLSPaths), applies the 44 CRDs and every cluster manifest of the
// collector with server-side apply, and reads back what the cluster's operators depend on.
func TestManifestsAPIServer(t *testing.T) {
	l := mfRealAPILab(t)
	l.build("manifests", "pki", "kubeconfig/kubelet-bootstrap", "kubeconfig/admin")

	base, adminCfg := mfStartBootstrapAPI(t, l)
	bootCfg := mfRestConfig(t, l.path("kubeconfig/kubelet-bootstrap", "kubeconfig"))
	bootCfg.Host = base
	ctx := context.Background()

	// Before the RBAC manifests, the bootstrap identity may not create CSRs.
	if err := mfCreateCSR(ctx, bootCfg); !apierrors.IsForbidden(err) {
		t.Fatalf("CSR as system:bootstrapper before RBAC: %v, want Forbidden", err)
	}

	files := map[string][]byte{}
	names, _ := filepath.Glob(l.path("manifests/bootstrap", "manifests/*"))
	crdCount := 0
	for _, p := range names {
		files[filepath.Base(p)] = l.file("manifests/bootstrap", "manifests/"+filepath.Base(p))
		if strings.HasSuffix(p, ".crd.yaml") {
			crdCount++
			files[filepath.Base(p)] = mfFor130(t, files[filepath.Base(p)])
		}
	}
	if crdCount != 44 {
		t.Errorf("%d CRDs in manifests/bootstrap, want 44", crdCount)
	}
	if crd := mfOperatorNetworkCRD(t); crd != nil {
		files["0000_70_network_01_networks-Default.crd.yaml"] = mfFor130(t, crd)
	} else {
		t.Log("operator Network CRD not found in the module cache: its object is not checked")
		delete(files, "02-operator-network.yaml")
	}
	var alog bytes.Buffer
	ap, err := clusterApplier(kubedyn.Config(adminCfg), &alog)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ap.ApplyFiles(ctx, files); err != nil {
		t.Fatalf("apply: %v", err)
	}
	if strings.Contains(alog.String(), "bWZ0ZXN0") {
		t.Error("apply log shows the pull secret")
	}

	get := func(group, version, resource, ns, name string) map[string]any {
		t.Helper()
		ri := ap.Dynamic().Resource(kube.GroupVersionResource{Group: group, Version: version, Resource: resource})
		var err error
		var o map[string]any
		if ns != "" {
			u, e := ri.Namespace(ns).Get(ctx, name, kube.GetOptions{})
			err = e
			if u != nil {
				o = u.Object
			}
		} else {
			u, e := ri.Get(ctx, name, kube.GetOptions{})
			err = e
			if u != nil {
				o = u.Object
			}
		}
		if err != nil {
			t.Fatalf("get %s %s/%s: %v", resource, ns, name, err)
		}
		return o
	}
	str := func(o map[string]any, path ...string) string {
		for _, p := range path[:len(path)-1] {
			o, _ = o[p].(map[string]any)
		}
		s, _ := o[path[len(path)-1]].(string)
		return s
	}
	infra := get("config.openshift.io", "v1", "infrastructures", "", "cluster")
	if a, b := str(infra, "status", "controlPlaneTopology"), str(infra, "status", "infrastructureTopology"); a != "HighlyAvailable" || b != "HighlyAvailable" {
		t.Errorf("Infrastructure topologies %q/%q, want HighlyAvailable (status through the subresource)", a, b)
	}
	if u := str(infra, "status", "apiServerInternalURI"); u != "https://api-int.ocp4.example.com:6443" {
		t.Errorf("apiServerInternalURI %q", u)
	}
	fg := get("config.openshift.io", "v1", "featuregates", "", "cluster")
	gates, _ := fg["status"].(map[string]any)["featureGates"].([]any)
	if len(gates) != 1 || str(gates[0].(map[string]any), "version") != "4.18.0" || len(gates[0].(map[string]any)["enabled"].([]any)) == 0 {
		t.Errorf("FeatureGate status.featureGates = %v, want one entry for 4.18.0 with enabled gates", gates)
	}
	ep := get("", "v1", "configmaps", "openshift-etcd", "etcd-endpoints")
	if a := str(ep, "metadata", "annotations", manifests.EtcdBootstrapAnnotation); a != "192.168.126.100" {
		t.Errorf("etcd-endpoints annotation %q, want the bootstrap IP", a)
	}
	sig := get("", "v1", "secrets", "openshift-etcd", "etcd-signer")
	if str(sig, "metadata", "annotations", manifests.AnnotationNotAfter) == "" {
		t.Error("etcd-signer lacks the certrotation not-after annotation")
	}
	if ns := get("", "v1", "namespaces", "", "openshift-etcd"); str(ns, "metadata", "labels", "openshift.io/run-level") != "0" {
		t.Error("openshift-etcd lacks run-level 0")
	}
	if cv := get("config.openshift.io", "v1", "clusterversions", "", "version"); str(cv, "spec", "channel") != "stable-4.18" {
		t.Errorf("ClusterVersion channel %q", str(cv, "spec", "channel"))
	}

	// After RBAC, the kubelet bootstrap identity can ask for a node client certificate.
	if err := mfCreateCSR(ctx, bootCfg); err != nil {
		t.Errorf("CSR as system:bootstrapper: %v", err)
	}

	// Server-side dry run of every static pod. The ServiceAccount admission wants each
	// namespace's default ServiceAccount, which the (absent) controller manager would make.
	adminCS, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range append([]string{"kube-system"}, manifests.Namespaces...) {
		_, err := adminCS.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	ap.DryRun = true
	pods := map[string][]byte{}
	for _, f := range []string{manifests.EtcdPodFile, manifests.KubeAPIServerPodFile, manifests.KubeControllerManagerPodFile,
		manifests.KubeSchedulerPodFile, manifests.CVOPodFile} {
		pods[f] = l.file("manifests/bootstrap", "static-pods/"+f)
	}
	pods[manifests.KubeProxyPodFile] = l.file("manifests/kube-proxy", manifests.KubeProxyPodFile)
	for f, b := range pods {
		if _, err := ap.ApplyFiles(ctx, map[string][]byte{f: b}); err != nil {
			t.Errorf("dry run of %s: %v", f, err)
		}
	}
	// The dry run must be able to fail: a pod with an invalid field is refused.
	bad := bytes.Replace(pods[manifests.KubeProxyPodFile], []byte("hostNetwork: true"), []byte("hostNetwork: true\n  restartPolicy: Sometimes"), 1)
	if _, err := ap.ApplyFiles(ctx, map[string][]byte{"bad.yaml": bad}); err == nil {
		t.Error("dry run accepted restartPolicy: Sometimes")
	}
}

// mfPodArgs returns the arguments of the generated static pod file of target (its first
// container, whose command must be "hyperkube <program>"), with every node path mapped to the
// lab's file through manifests.NodePathOf; a flag naming an unmapped secret fails the test.
func mfPodArgs(t *testing.T, l *mfLab, target, file, program string) []string {
	t.Helper()
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(l.file(target, file), &pod); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "hyperkube "+program {
		t.Fatalf("%s: command %v", file, c.Command)
	}
	var args []string
	for _, a := range c.Args {
		k, v, _ := strings.Cut(a, "=")
		if f, ok := manifests.NodePathOf(v); ok {
			v = l.path(f.Target, f.File)
		} else if strings.HasPrefix(v, manifests.SecretsMountPath) {
			t.Fatalf("%s: flag %s names %s, which BootstrapTLSPaths does not map", file, k, v)
		}
		if k == "--v" {
			v = "1" // keep the test log small
		}
		args = append(args, k+"="+v)
	}
	return args
}

// mfStartBootstrapAPI starts Debian's etcd with the lab's etcd certificates and the
// kube-apiserver with the flags of the generated bootstrap static pod (paths mapped to the
// lab's files, --etcd-servers pointing at that etcd). It returns the apiserver's base URL and
// a rest.Config from the lab's admin kubeconfig (verifying the kubeconfig's host name while
// dialling loopback).
func mfStartBootstrapAPI(t *testing.T, l *mfLab) (string, *rest.Config) {
	t.Helper()
	_, args := mfBootstrapAPIArgs(t, l)
	adminCfg := mfRestConfig(t, l.path("kubeconfig/admin", "kubeconfig"))
	return testenv.StartKubeAPIServer(t, args, adminCfg), adminCfg
}

// mfCEL131 matches CEL calls of the IP and CIDR libraries, which Kubernetes 1.31 added.
var mfCEL131 = regexp.MustCompile(`\b(isIP|isCIDR|ip|cidr)\(`)

// mfFor130 adapts a 4.18 CRD (written for Kubernetes 1.31) to the test's kube-apiserver 1.30
// (the newest that builds through the module proxy): it drops the x-kubernetes-validations
// rules that call 1.31's IP/CIDR CEL functions, which 1.30 refuses to compile. Only
// validation of those IP fields is lost; the schema is otherwise the payload's.
func mfFor130(t *testing.T, crd []byte) []byte {
	if !mfCEL131.Match(crd) {
		return crd
	}
	var m map[string]any
	if err := yaml.Unmarshal(crd, &m); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if rules, ok := x["x-kubernetes-validations"].([]any); ok {
				var keep []any
				for _, r := range rules {
					if rm, _ := r.(map[string]any); !mfCEL131.MatchString(fmt.Sprint(rm["rule"])) {
						keep = append(keep, r)
					}
				}
				if len(keep) == 0 {
					delete(x, "x-kubernetes-validations")
				} else {
					x["x-kubernetes-validations"] = keep
				}
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(m)
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// mfRestConfig loads a lab kubeconfig for the loopback apiserver: it keeps the server name for
// the certificate check and dials whatever Host is set later.
func mfRestConfig(t *testing.T, path string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(cfg.Host, "https://"), ":6443")
	cfg.TLSClientConfig.ServerName = host
	return cfg
}

// mfCreateCSR creates a kubelet client CSR for master-0 as cfg's identity.
func mfCreateCSR(ctx context.Context, cfg *rest.Config) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:master-0", Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.CertificatesV1().CertificateSigningRequests().Create(ctx, &certv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certv1.KeyUsage{certv1.UsageDigitalSignature, certv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	return err
}
