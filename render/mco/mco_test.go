package mco

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/render/releases"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

const (
	testCA   = "-----BEGIN CERTIFICATE-----\nUk9PVA==\n-----END CERTIFICATE-----\n"
	testPull = `{"auths":{"quay.io":{"auth":"dGVzdDp0ZXN0"}}}`
)

func testRefs(skip string) []byte {
	var b strings.Builder
	b.WriteString("kind: ImageStream\napiVersion: image.openshift.io/v1\nspec:\n  tags:\n")
	for _, tag := range append(slices.Clone(testRequired), "rhel-coreos") {
		if tag == skip {
			continue
		}
		b.WriteString("  - name: " + tag + "\n    from:\n      kind: DockerImage\n      name: quay.io/x/y@sha256:" + strings.Repeat("a", 64) + "\n")
	}
	return []byte(b.String())
}

// testRequired are the tags MCO release-4.18's bootstrap requires (render/releases' 4.18 row).
var testRequired = func() []string { r, _ := releases.Named("4.18"); return r.MCORequiredTags }()

// testInputs are a 4.18 lab's; the FeatureGate is the one manifests/cluster/featuregate
// renders for it (testdata/featuregate.yaml).
func testInputs() Inputs {
	fg, err := os.ReadFile(filepath.Join("testdata", "featuregate.yaml"))
	if err != nil {
		panic(err)
	}
	return Inputs{ClusterName: "ocp4", BaseDomain: "example.com", InfraID: "ocp4-abcde", Masters: 3, Workers: 2,
		ClusterNetwork: "10.128.0.0/14", HostPrefix: 23, ServiceNetwork: "172.30.0.0/16", MachineNetwork: "192.168.126.0/24",
		FeatureGate: fg, RequiredTags: testRequired,
		PullSecret: []byte(testPull + "\n"), RootCA: []byte(testCA), KubeCA: []byte(testCA), ImageReferences: testRefs("")}
}

// TestWorkDirGolden pins the whole work dir (go test -update rewrites testdata/workdir.golden).
// It also checks the layout invariants the operator's flags rely on: every path OperatorArgs
// names exists, only the pull-secret Secret is secret, and it carries the trimmed secret.
func TestWorkDirGolden(t *testing.T) {
	files, err := WorkDir(testInputs())
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	have := map[string]File{}
	for _, f := range files {
		have[f.Path] = f
		got.WriteString("=== " + f.Path + "\n")
		got.Write(f.Data)
		if !bytes.HasSuffix(f.Data, []byte("\n")) {
			got.WriteString("\n")
		}
		if f.Secret != (f.Path == PullSecretFile) {
			t.Errorf("%s: Secret = %v", f.Path, f.Secret)
		}
	}
	for _, a := range OperatorArgs("/w", "/d", "rel", "4.18.0") {
		if v, ok := strings.CutPrefix(a, "--"); ok {
			if _, p, ok := strings.Cut(v, "=/w/"); ok && !strings.Contains(p, "user-ca-bundle") {
				if _, found := have[p]; !found {
					t.Errorf("flag %s names %s, which WorkDir does not write", a, p)
				}
			}
		}
	}
	golden := filepath.Join("testdata", "workdir.golden")
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("work dir differs from %s (go test -update to accept):\n%s", golden, got.String())
	}
}

// TestWorkDirErrors checks that each bad input is refused with a message naming it.
func TestWorkDirErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Inputs)
		want   string
	}{
		{"root CA not PEM", func(in *Inputs) { in.RootCA = []byte("junk") }, "root CA"},
		{"kube CA empty", func(in *Inputs) { in.KubeCA = nil }, "kubelet client CA bundle"},
		{"missing pod tag", func(in *Inputs) { in.ImageReferences = testRefs("pod") }, `no tag "pod"`},
		{"not an ImageStream", func(in *Inputs) { in.ImageReferences = []byte("kind: ConfigMap\n") }, "not an ImageStream"},
		{"bad service network", func(in *Inputs) { in.ServiceNetwork = "172.30.0.0" }, "service network"},
		{"empty pull secret", func(in *Inputs) { in.PullSecret = nil }, "pull secret"},
		{"no FeatureGate", func(in *Inputs) { in.FeatureGate = nil }, "FeatureGate"},
		{"4.22 without docker-registry", func(in *Inputs) { r, _ := releases.Named("4.22"); in.RequiredTags = r.MCORequiredTags }, `no tag "docker-registry"`},
		{"no infra id", func(in *Inputs) { in.InfraID = "" }, "infrastructure name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := testInputs()
			tc.mutate(&in)
			_, err := WorkDir(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "dGVzdDp0ZXN0") {
				t.Error("error contains the pull secret")
			}
		})
	}
}

// TestArgs pins both command lines: the flags MCO 4.18 registers, with the installer's
// values.
func TestArgs(t *testing.T) {
	op := OperatorArgs("/w", "/d", "quay.io/r@sha256:1", "4.18.0")
	want := []string{"bootstrap", "--payload-version=4.18.0", "--root-ca=/w/tls/root-ca.crt",
		"--kube-ca=/w/tls/kube-apiserver-complete-client-ca-bundle.crt", "--config-file=/w/manifests/cluster-config.yaml",
		"--dest-dir=/d", "--pull-secret=/w/manifests/openshift-config-secret-pull-secret.yaml",
		"--infra-config-file=/w/manifests/cluster-infrastructure-02-config.yml",
		"--network-config-file=/w/manifests/cluster-network-02-config.yml",
		"--proxy-config-file=/w/manifests/cluster-proxy-01-config.yaml",
		"--dns-config-file=/w/manifests/cluster-dns-02-config.yml",
		"--additional-trust-bundle-config-file=/w/manifests/user-ca-bundle-config.yaml",
		"--release-image=quay.io/r@sha256:1", "--image-references=/w/image-references"}
	if !slices.Equal(op, want) {
		t.Errorf("OperatorArgs:\n got %q\nwant %q", op, want)
	}
	cc := ControllerArgs("/t", "/m", "/d", "/p", "4.18.0")
	wantC := []string{"bootstrap", "--templates=/t", "--payload-version=4.18.0", "--manifest-dir=/m", "--dest-dir=/d", "--pull-secret=/p"}
	if !slices.Equal(cc, wantC) {
		t.Errorf("ControllerArgs:\n got %q\nwant %q", cc, wantC)
	}
}

func TestRenderedName(t *testing.T) {
	for _, tc := range []struct {
		doc, want, err string
	}{
		{"kind: MachineConfigPool\nmetadata: {name: master}\nstatus: {configuration: {name: rendered-master-0123abcd}}\n", "rendered-master-0123abcd", ""},
		{"kind: MachineConfigPool\nmetadata: {name: master}\n", "", "not rendered-master-<hash>"},
		{"kind: MachineConfigPool\nmetadata: {name: worker}\nstatus: {configuration: {name: rendered-master-0123}}\n", "", "not rendered-worker"},
		{"kind: MachineConfig\nmetadata: {name: master}\n", "", "want MachineConfigPool"},
		{"{", "", "machine pool"},
	} {
		got, err := RenderedName([]byte(tc.doc))
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("RenderedName(%q) = %q, %v; want %q, error containing %q", tc.doc, got, err, tc.want, tc.err)
		}
	}
}

func TestTail(t *testing.T) {
	if got := Tail([]byte("a\nb\nc\n"), 2); got != "b\nc" {
		t.Errorf("Tail = %q", got)
	}
	if got := Tail([]byte("a"), 5); got != "a" {
		t.Errorf("Tail = %q", got)
	}
}
