package targets

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/payload"
	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/oci"
)

// releaseLab is one test lab: an in-process registry holding a payload built from real data, a
// config pointing at it, and recorded backoff sleeps.
type releaseLab struct {
	reg    *testenv.Registry
	p      *payload.Payload
	cfg    *lab.Config
	out    string
	cache  string
	mu     sync.Mutex
	sleeps []time.Duration
}

var releaseTestBinary = []byte("#!/bin/sh\n# test stand-in for the MCO programs\nexit 0\n")

func newReleaseLab(t *testing.T) *releaseLab {
	t.Helper()
	return newReleaseLabWith(t, payload.Options{})
}

// newReleaseLabWith is newReleaseLab with a payload built from o (its registry, binaries and
// layer size are the lab's).
func newReleaseLabWith(t *testing.T, o payload.Options) *releaseLab {
	t.Helper()
	l := &releaseLab{reg: testenv.StartRegistry(t), out: t.TempDir(), cache: t.TempDir()}
	o.Shared, o.MCOBinary, o.BaseLayerBytes = repo.Shared(), releaseTestBinary, 64<<10
	o.ReleaseRepo, o.ComponentRepo = l.reg.Repo("ocp/release"), l.reg.Repo("ocp/art-dev")
	p, err := payload.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Push(context.Background(), l.reg.Auth()); err != nil {
		t.Fatal(err)
	}
	l.p = p
	t.Setenv(oci.CacheEnv, l.cache)
	releaseClientHook = func(c *oci.Client) {
		c.Sleep = func(_ context.Context, d time.Duration) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.sleeps = append(l.sleeps, d)
			return nil
		}
	}
	t.Cleanup(func() { releaseClientHook = nil })
	l.cfg = testLabConfig()
	l.cfg.Release.Image = l.reg.Repo("ocp/release") + ":" + p.ReleaseTag()
	l.cfg.Release.Version = p.Version
	l.cfg.Access.PullSecretFile = l.reg.WritePullSecret(t, t.TempDir())
	return l
}

func (l *releaseLab) build(t *testing.T, force bool, goals ...string) (*engine.Result, error) {
	t.Helper()
	if len(goals) == 0 {
		goals = []string{"release"}
	}
	var stderr bytes.Buffer
	r, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: l.cfg}, OutDir: l.out, Goals: goals, Jobs: 2, Force: force,
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }, Stderr: &stderr})
	if err != nil && stderr.Len() > 0 {
		err = errors.Join(err, errors.New(stderr.String()))
	}
	return r, err
}

func (l *releaseLab) read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.out, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReleaseFromRegistry builds the whole family from a tag and checks each output against
// the payload that was pushed, then that an unchanged rebuild and a forced rebuild by digest
// make zero registry requests.
func TestReleaseFromRegistry(t *testing.T) {
	l := newReleaseLab(t)
	if _, err := l.build(t, false); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(l.read(t, "release/resolve/pullspec"))); got != l.p.ReleaseRef() {
		t.Errorf("release/resolve = %s, want %s", got, l.p.ReleaseRef())
	}
	if !bytes.Equal(l.read(t, "release/image-references/image-references"), l.p.ImageReferences) {
		t.Error("image-references differs from the payload's")
	}
	if !bytes.Equal(l.read(t, "release/metadata/release-metadata"), l.p.ReleaseMetadata) {
		t.Error("release-metadata differs from the payload's")
	}
	for _, tag := range ReleaseImageTags {
		if got := strings.TrimSpace(string(l.read(t, "release/image/"+tag+"/pullspec"))); got != l.p.Pullspec(tag) {
			t.Errorf("release/image/%s = %s, want %s", tag, got, l.p.Pullspec(tag))
		}
	}
	for _, b := range []string{"machine-config-operator", "machine-config-controller"} {
		p := filepath.Join(l.out, "release/mco/bin", b)
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o755 || !bytes.Equal(l.read(t, "release/mco/bin/"+b), releaseTestBinary) {
			t.Errorf("release/mco bin/%s: %v, mode %v, want the image's program, 0755", b, err, st.Mode())
		}
	}
	tmpl, _ := filepath.Glob(filepath.Join(l.out, "release/mco/templates/*/*"))
	if len(tmpl) == 0 {
		t.Error("release/mco wrote no templates/<role>/<name>")
	}
	crds := releaseDirNames(t, filepath.Join(l.out, "release/crds/crds"))
	if len(crds) != 44 {
		t.Errorf("release/crds: %d files for Default/SMHA, want 44 (42 + ClusterVersion + ClusterOperator)", len(crds))
	}
	if sh := repo.Shared(); sh != "" {
		want := append(releaseDirNames(t, filepath.Join(sh, "fixtures/release/crds")),
			"0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
			"0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml")
		sort.Strings(want)
		if !slices.Equal(crds, want) {
			t.Errorf("release/crds names:\n got %v\nwant %v", crds, want)
		}
	}

	// Nothing changed: no target runs, no request is made.
	before := l.reg.Requests()
	r, err := l.build(t, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Built) != 0 || l.reg.Requests() != before {
		t.Errorf("second build ran %v and made %d registry requests, want none", r.Built, l.reg.Requests()-before)
	}
	// Pinned by digest and forced (-B): every target runs, manifests and blobs come from the
	// blob cache, so still no request.
	l.cfg.Release.Image = l.p.ReleaseRef()
	r, err = l.build(t, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Built) < 5 || l.reg.Requests() != before {
		t.Errorf("forced build by digest ran %d targets and made %d requests, want all and 0", len(r.Built), l.reg.Requests()-before)
	}

	// A feature-set change reruns the FeatureGate and release/crds only, and selects another set.
	l.cfg.Cluster.FeatureSet = "TechPreviewNoUpgrade"
	r, err = l.build(t, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Built, []string{"manifests/cluster/featuregate", "release/crds"}) {
		t.Errorf("after featureSet change ran %v, want only manifests/cluster/featuregate and release/crds", r.Built)
	}
	tp := releaseDirNames(t, filepath.Join(l.out, "release/crds/crds"))
	if slices.Equal(tp, crds) || !slices.Contains(tp, "0000_00_cluster-version-operator_01_clusterversions-TechPreviewNoUpgrade.crd.yaml") ||
		slices.Contains(tp, "0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml") {
		t.Errorf("TechPreviewNoUpgrade CRDs %v: want the TechPreview variants instead of the Default ones", tp)
	}
}

func releaseDirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

// TestReleaseSelectCRD checks the selection rule on the real 94 files for each feature set.
func TestReleaseSelectCRD(t *testing.T) {
	dir := filepath.Join(testenv.RequireShared(t), "fixtures/release/cluster-config-api/manifests")
	files, _ := filepath.Glob(filepath.Join(dir, "*.crd.yaml"))
	if len(files) != 94 {
		t.Fatalf("%d CRD files in %s, want 94", len(files), dir)
	}
	for _, tc := range []struct {
		featureSet, profile string
		want                int
		mustHave, mustNot   string
	}{
		{"Default", releaseDefaultProfile, 42, "0000_10_config-operator_01_infrastructures-Default.crd.yaml", "0000_10_config-operator_01_infrastructures-TechPreviewNoUpgrade.crd.yaml"},
		{"TechPreviewNoUpgrade", releaseDefaultProfile, -1, "0000_10_config-operator_01_infrastructures-TechPreviewNoUpgrade.crd.yaml", "0000_10_config-operator_01_infrastructures-Default.crd.yaml"},
		{"Default", "single-node-developer", 0, "", "0000_10_config-operator_01_infrastructures-Default.crd.yaml"},
	} {
		t.Run(tc.featureSet+"/"+tc.profile, func(t *testing.T) {
			var got []string
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				ok, err := releaseSelectCRD(b, tc.featureSet, tc.profile)
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				if ok {
					got = append(got, filepath.Base(f))
				}
			}
			if tc.want >= 0 && len(got) != tc.want {
				t.Errorf("selected %d, want %d", len(got), tc.want)
			}
			if tc.mustHave != "" && !slices.Contains(got, tc.mustHave) {
				t.Errorf("missing %s", tc.mustHave)
			}
			if slices.Contains(got, tc.mustNot) {
				t.Errorf("selected %s", tc.mustNot)
			}
		})
	}
}

// TestReleaseMetadataBlock: deciding on the metadata block alone gives the same annotations as
// decoding the whole document, for every YAML fixture (CRDs, manifests, templates) and for the
// shapes the block reader must refuse.
func TestReleaseMetadataBlock(t *testing.T) {
	type meta struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	annotations := func(b []byte) (map[string]string, error) {
		var m meta
		err := yaml.Unmarshal(b, &m)
		return m.Metadata.Annotations, err
	}
	var files []string
	filepath.WalkDir(filepath.Join(testenv.RequireShared(t), "fixtures"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) < 200 {
		t.Fatalf("%d YAML fixtures, want the ~%d of ../shared/fixtures", len(files), 200)
	}
	fast := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		block, ok := releaseMetadataBlock(b)
		if !ok {
			if strings.HasSuffix(f, ".crd.yaml") {
				t.Errorf("%s: a CRD of openshift/api should be read by its metadata block", f)
			}
			continue
		}
		fast++
		want, werr := annotations(b)
		if werr != nil {
			continue // not YAML as a whole (a template): nothing to compare
		}
		got, err := annotations(block)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: block gives %v (%v), the whole document %v", f, got, err, want)
		}
	}
	t.Logf("%d of %d YAML fixtures read by their metadata block", fast, len(files))
	for _, tc := range []struct {
		name, doc string
		ok        bool
		block     string
	}{
		{"plain", "apiVersion: v1\nmetadata:\n  annotations:\n    a: b\n\n  # c\nspec:\n  x: 1\n", true, "metadata:\n  annotations:\n    a: b\n\n  # c\n"},
		{"last key", "kind: X\nmetadata:\n  name: n", true, "metadata:\n  name: n"},
		{"flow value", "metadata: {annotations: {a: b}}\nspec: {}\n", true, "metadata: {annotations: {a: b}}\n"},
		{"CRLF", "kind: X\r\nmetadata:\r\n  name: n\r\nspec: 1\r\n", true, "metadata:\r\n  name: n\r\n"},
		{"no metadata", "kind: X\nspec: 1\n", false, ""},
		{"prefix only", "metadatax:\n  a: 1\n", false, ""},
		{"JSON", `{"metadata":{"annotations":{"a":"b"}}}`, false, ""},
		{"document marker", "---\nmetadata:\n  name: n\n", false, ""},
		{"two documents", "metadata:\n  name: n\n---\nmetadata:\n  name: m\n", false, ""},
		{"duplicate key", "metadata:\n  name: n\nmetadata:\n  name: m\n", false, ""},
		{"quoted key", "\"metadata\": {}\nmetadata:\n  name: n\n", false, ""},
		{"merge key", "<<: *m\nmetadata:\n  name: n\n", false, ""},
		{"sequence value at column 0", "metadata:\n  name: n\nitems:\n- a\n", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := releaseMetadataBlock([]byte(tc.doc))
			if ok != tc.ok || string(b) != tc.block {
				t.Errorf("releaseMetadataBlock = %q, %v; want %q, %v", b, ok, tc.block, tc.ok)
			}
		})
	}
}

// TestReleaseAuthRefused: a pull secret without the registry gets a 401 that names the
// registry and the pull secret, and the secret's content never appears.
func TestReleaseAuthRefused(t *testing.T) {
	l := newReleaseLab(t)
	p := filepath.Join(t.TempDir(), "other.json")
	other := `{"auths":{"quay.io":{"auth":"dXNlcjpzM2NyZXQtdmFsdWU="}}}` // user:s3cret-value
	if err := os.WriteFile(p, []byte(other), 0o600); err != nil {
		t.Fatal(err)
	}
	l.cfg.Access.PullSecretFile = p
	r, err := l.build(t, false, "release/resolve")
	if err == nil || r == nil || !slices.Contains(r.Failed, "release/resolve") {
		t.Fatalf("build with a pull secret lacking the registry: err %v, failed %v; want release/resolve to fail", err, r.Failed)
	}
	msg := err.Error()
	for _, want := range []string{l.reg.Host, "401", "pull secret", "access.pullSecretFile"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cret") || strings.Contains(msg, "dXNlcjpz") {
		t.Error("error quotes the pull secret")
	}
}

// TestReleaseCorruptBlob: a registry serving a corrupted layer fails the target and caches
// nothing; once the registry is healthy the same build succeeds.
func TestReleaseCorruptBlob(t *testing.T) {
	l := newReleaseLab(t)
	l.cfg.Release.Image = l.p.ReleaseRef()
	layers, err := l.p.ReleaseImage.Layers()
	if err != nil {
		t.Fatal(err)
	}
	top, _ := layers[len(layers)-1].Digest()
	l.reg.Corrupt(top.Hex)
	r, err := l.build(t, false, "release/image-references")
	if err == nil || r == nil || !slices.Contains(r.Failed, "release/image-references") {
		t.Fatalf("corrupt layer: err %v, failed %v; want release/image-references to fail", err, r.Failed)
	}
	if !strings.Contains(err.Error(), top.String()) || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("error %q should name the blob %s and say corrupt", err, top)
	}
	if _, err := os.Stat(filepath.Join(l.cache, "sha256", top.Hex)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("corrupt blob was cached (stat: %v)", err)
	}
	l.reg.ClearFaults()
	if _, err := l.build(t, false, "release/image-references"); err != nil {
		t.Fatalf("after the registry healed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l.cache, "sha256", top.Hex)); err != nil {
		t.Errorf("verified blob not cached: %v", err)
	}
}

// TestReleaseRetries: 500 twice then 200 on blob requests succeeds after two backoff sleeps
// (250 ms, 500 ms on the injected clock, never really slept); a persistent 500 fails.
func TestReleaseRetries(t *testing.T) {
	l := newReleaseLab(t)
	l.cfg.Release.Image = l.p.ReleaseRef()
	l.reg.FailNext("/blobs/", 2, 500)
	if _, err := l.build(t, false, "release/image-references"); err != nil {
		t.Fatalf("500, 500, 200: %v", err)
	}
	if want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}; !slices.Equal(l.sleeps, want) {
		t.Errorf("backoff sleeps %v, want %v", l.sleeps, want)
	}
	l.reg.FailNext("/blobs/", -1, 503)
	r, err := l.build(t, false, "release/mco")
	if err == nil || r == nil || !slices.Contains(r.Failed, "release/mco") || !strings.Contains(err.Error(), "503") {
		t.Fatalf("persistent 503: err %v, failed %v; want release/mco to fail naming 503", err, r.Failed)
	}
}

// TestReleaseVersionChecks: the version labbuild read before the build (release.version) must
// still be the payload's when release/metadata reads it (a tag that moved in between).
func TestReleaseVersionChecks(t *testing.T) {
	l := newReleaseLab(t)
	l.cfg.Release.Version = "4.18.99"
	_, err := l.build(t, false, "release/metadata")
	if err == nil || !strings.Contains(err.Error(), "is version "+l.p.Version+", but labbuild read version 4.18.99") {
		t.Fatalf("err %v, want it to name both versions", err)
	}
}

// TestReleaseMirrorLayout: with the source unreachable, a digest-pinned payload is pulled
// entirely from an OCI layout mirror (what labbuild-sample writes).
func TestReleaseMirrorLayout(t *testing.T) {
	t.Setenv(oci.CacheEnv, t.TempDir())
	p, err := payload.Build(payload.Options{Shared: repo.Shared(), MCOBinary: releaseTestBinary, BaseLayerBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "payload")
	if err := p.WriteLayout(dir); err != nil {
		t.Fatal(err)
	}
	cfg := testLabConfig()
	cfg.Release.Image = p.ReleaseRef()
	cfg.Release.Version = p.Version
	cfg.Release.Mirrors = map[string]string{p.ReleaseRepo: "oci:" + dir, p.ComponentRepo: "oci:" + dir}
	ps := filepath.Join(t.TempDir(), "ps.json")
	os.WriteFile(ps, []byte(`{"auths":{"registry.labbuild.invalid":{"auth":"YTpi"}}}`), 0o600)
	cfg.Access.PullSecretFile = ps
	out := t.TempDir()
	if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: out, Goals: []string{"release"}, Stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "release/mco/bin/machine-config-controller"))
	if err != nil || !bytes.Equal(b, releaseTestBinary) {
		t.Errorf("release/mco from the layout: %v", err)
	}
}

// releaseNoCRDs is the release family without release/crds, which reads the cluster's
// FeatureGate (another family's).
func releaseNoCRDs(c *lab.Config) []*engine.Target {
	var out []*engine.Target
	for _, t := range releaseTargets(c) {
		if t.Name != "release/crds" {
			out = append(out, t)
		}
	}
	return out
}

// TestReleaseTagMoves: a tag's resolution holds until the TTL (no request even though the tag
// moved); after it the tag is resolved again, and when only coredns moved, release/image/etcd
// reproduces its output, so a target reading it does not rebuild (early cutoff) while one
// reading coredns does.
func TestReleaseTagMoves(t *testing.T) {
	l := newReleaseLab(t)
	users := map[string]*int{"etcd": new(int), "coredns": new(int)}
	var ts []*engine.Target
	for tag, runs := range users {
		ts = append(ts, &engine.Target{Name: "standin/uses-" + tag, Deps: []string{"release/image/" + tag}, Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error {
				*runs++
				b, err := s.DepFile("release/image/"+tag, "pullspec")
				if err != nil {
					return err
				}
				return s.WriteFile("image", b, 0o644)
			}})
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	build := func() *engine.Result {
		t.Helper()
		r, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: l.cfg}, OutDir: l.out, Jobs: 2, Stderr: io.Discard,
			Targets: append(releaseNoCRDs(l.cfg), ts...), Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	build()
	oldCoreDNS := l.p.Pullspec("coredns")

	// The tag moves: only coredns differs.
	p2, err := payload.Build(payload.Options{Shared: repo.Shared(), MCOBinary: releaseTestBinary,
		ReleaseRepo: l.reg.Repo("ocp/release"), ComponentRepo: l.reg.Repo("ocp/art-dev"), BaseLayerBytes: 64 << 10,
		Revision: map[string]string{"coredns": "revision 2\n"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Push(context.Background(), l.reg.Auth()); err != nil {
		t.Fatal(err)
	}
	if p2.Pullspec("coredns") == oldCoreDNS || p2.Pullspec("etcd") != l.p.Pullspec("etcd") {
		t.Fatal("test payload: want only coredns to move")
	}
	before := l.reg.Requests()
	now = now.Add(releaseResolveTTL - time.Minute)
	if r := build(); len(r.Built) != 0 || l.reg.Requests() != before {
		t.Errorf("within the TTL: ran %v, %d requests; want nothing", r.Built, l.reg.Requests()-before)
	}
	now = now.Add(2 * time.Minute)
	r := build()
	if !slices.Contains(r.Built, "release/resolve") {
		t.Fatalf("after the TTL release/resolve did not run: %v", r.Built)
	}
	if got := strings.TrimSpace(string(l.read(t, "release/resolve/pullspec"))); got != p2.ReleaseRef() {
		t.Errorf("re-resolved to %s, want %s", got, p2.ReleaseRef())
	}
	if got := strings.TrimSpace(string(l.read(t, "release/image/coredns/pullspec"))); got != p2.Pullspec("coredns") {
		t.Errorf("release/image/coredns = %s, want %s", got, p2.Pullspec("coredns"))
	}
	if *users["etcd"] != 1 || *users["coredns"] != 2 {
		t.Errorf("runs: etcd user %d (want 1: early cutoff), coredns user %d (want 2)", *users["etcd"], *users["coredns"])
	}
}

// TestReleaseSampleFeedsIgnition: the sample payload (what `make run` uses) carries everything
// the downstream families read, through Ignition, offline.
func TestReleaseSampleFeedsIgnition(t *testing.T) {
	sr := testenv.StartSampleRelease(t, true)
	cfg := testLabConfig()
	cfg.Release.Image, cfg.Release.Version, cfg.Release.Mirrors = sr.Image, sr.Version, sr.Mirrors
	cfg.Access.PullSecretFile, cfg.Access.SSHKeyFile = sr.PullSecretFile, sr.SSHKeyFile
	out := t.TempDir()
	var log bytes.Buffer
	if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: out, Goals: []string{"ignition"}, Jobs: 2, Stderr: &log,
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, n := range []string{"bootstrap", "master-0", "worker-0"} {
		if st, err := os.Stat(filepath.Join(out, "ignition", n+".ign")); err != nil || st.Size() == 0 {
			t.Errorf("ignition/%s: %v", n, err)
		}
	}
}
