package targets

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/payload"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/virt"
)

// rhcosServer serves a gzipped qcow2 made by qemu-img on loopback, as the RHCOS qemu artifact
// is published, counting requests. It returns the URL, the sha256 of the .gz and the qcow2.
func rhcosServer(t *testing.T) (url, sum string, qcow2 []byte, requests *atomic.Int64) {
	t.Helper()
	qemuImg := testenv.Require(t, "qemu-img")
	img := filepath.Join(t.TempDir(), "rhcos.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", img, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	qcow2, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(qcow2)
	zw.Close()
	h := sha256.Sum256(gz.Bytes())
	requests = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.ServeContent(w, r, "rhcos-qemu.x86_64.qcow2.gz", time.Time{}, bytes.NewReader(gz.Bytes()))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/rhcos-qemu.x86_64.qcow2.gz", hex.EncodeToString(h[:]), qcow2, requests
}

// TestRHCOSImage: rhcos/image downloads the image once into the shared cache, verified and
// unpacked; a rerun and a second lab reuse it without a request; a file removed from the cache
// is fetched again; a wrong checksum fails naming rhcos.imageSHA256 and leaves nothing cached.
func TestRHCOSImage(t *testing.T) {
	u, sum, qcow2, requests := rhcosServer(t)
	cache := t.TempDir()
	t.Setenv(RHCOSCacheEnv, cache)
	newLab := func(sum string) *lab.Config {
		c := testLabConfig()
		c.RHCOS = lab.RHCOSConfig{ImageURL: u, ImageSHA256: sum}
		return c
	}
	build := func(c *lab.Config, out string) (*engine.Result, string, error) {
		var log bytes.Buffer
		r, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"rhcos/image"}, Stdout: &log, Stderr: &log})
		return r, log.String(), err
	}
	out := t.TempDir()
	if _, log, err := build(newLab(sum), out); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	cached := filepath.Join(cache, "rhcos-"+sum+".qcow2")
	if b, err := os.ReadFile(cached); err != nil || !bytes.Equal(b, qcow2) {
		t.Fatalf("cached image is not the unpacked qcow2 (%v)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "rhcos/image/image.json")); !bytes.Contains(b, []byte(cached)) {
		t.Errorf("image.json does not name %s:\n%s", cached, b)
	}
	if logb, err := os.ReadFile(engine.LogPath(out, "rhcos/image")); err != nil || !bytes.Contains(logb, []byte("100%")) {
		t.Errorf("no progress in the target's log (%v):\n%s", err, logb)
	}

	if r, log, err := build(newLab(sum), out); err != nil || len(r.Built) != 0 {
		t.Errorf("second build: executed %v, %v\n%s", r.Built, err, log)
	}
	if r, log, err := build(newLab(sum), t.TempDir()); err != nil || len(r.Built) != 1 {
		t.Errorf("second lab: executed %v, %v\n%s", r.Built, err, log)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d downloads, want 1 (a rerun and a second lab use the cache)", n)
	}

	os.Remove(cached)
	if r, log, err := build(newLab(sum), out); err != nil || len(r.Built) != 1 {
		t.Errorf("after removing the cached image: executed %v, %v\n%s", r.Built, err, log)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d downloads, want 2 after the cached file was removed", n)
	}

	bad := strings.Repeat("0", 64)
	_, log, err := build(newLab(bad), t.TempDir())
	if err == nil || !strings.Contains(err.Error()+log, "rhcos.imageSHA256") {
		t.Errorf("wrong checksum: %v\n%s", err, log)
	}
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if strings.Contains(e.Name(), bad) || strings.HasPrefix(e.Name(), ".fetch-") {
			t.Errorf("a failed download left %s in the cache", e.Name())
		}
	}
}

// TestRHCOSBackedVolume: with rhcos.imageURL a node disk, made by a real libvirtd in the
// test's network namespace, overlays the cached RHCOS image.
func TestRHCOSBackedVolume(t *testing.T) {
	d := testenv.StartLibvirtd(t)
	useNetnsHost(t, d)
	sr := testenv.StartSampleRelease(t, true)
	u, sum, _, _ := rhcosServer(t)
	cache := t.TempDir()
	t.Setenv(RHCOSCacheEnv, cache)
	c := lvLab(d, sr)
	c.RHCOS = lab.RHCOSConfig{ImageURL: u, ImageSHA256: sum}
	out := t.TempDir()
	ctx := context.Background()
	var log bytes.Buffer
	if _, err := engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"libvirt/volume/worker-0"}, Stdout: &log, Stderr: &log}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}) })
	conn, err := virt.Connect(c.Libvirt.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, found, err := conn.Volume(c.Libvirt.Pool, "lbt-worker-0.qcow2")
	if err != nil || !found {
		t.Fatalf("volume: found %v, %v", found, err)
	}
	want := filepath.Join(cache, "rhcos-"+sum+".qcow2")
	if got.BackingStore == nil || got.BackingStore.Path != want {
		t.Errorf("volume backing store %+v, want %s", got.BackingStore, want)
	}
}

// TestRHCOSFromPayload: with rhcos.imageURL empty, rhcos/image fetches the QEMU image the
// release payload's CoreOS stream names (release/coreos-stream reading the coreos-bootimages
// ConfigMap), served on loopback; the cached file is the unpacked qcow2 the stream's
// uncompressed-sha256 names. rhcos.imageURL set overrides it and release/coreos-stream is not
// built at all.
func TestRHCOSFromPayload(t *testing.T) {
	sr := testenv.StartSampleRelease(t, false)
	if strings.Contains(sr.RHCOS.URL, ".invalid") {
		t.Skip("no loopback RHCOS image (qemu-img missing)")
	}
	newLab := func() *lab.Config {
		c := testLabConfig()
		c.Release.Image, c.Release.Version, c.Release.Mirrors = sr.Image, sr.Version, sr.Mirrors
		c.Access.PullSecretFile, c.Access.SSHKeyFile = sr.PullSecretFile, sr.SSHKeyFile
		c.RHCOS = lab.RHCOSConfig{}
		return c
	}
	out := t.TempDir()
	var log bytes.Buffer
	r, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: newLab()}, OutDir: out, Goals: []string{"rhcos/image"}, Stdout: &log, Stderr: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !slices.Contains(r.Built, "release/coreos-stream") {
		t.Errorf("executed %v: want release/coreos-stream", r.Built)
	}
	var q coreOSImage
	b, _ := os.ReadFile(filepath.Join(out, "release/coreos-stream/qemu.json"))
	if err := json.Unmarshal(b, &q); err != nil || q.Location != sr.RHCOS.URL || q.SHA256 != sr.RHCOS.SHA256 {
		t.Errorf("qemu.json = %s (%v), want location %s sha256 %s", b, err, sr.RHCOS.URL, sr.RHCOS.SHA256)
	}
	var rec rhcosRecord
	b, _ = os.ReadFile(filepath.Join(out, "rhcos/image/image.json"))
	if err := json.Unmarshal(b, &rec); err != nil || rec.SHA256 != sr.RHCOS.SHA256 {
		t.Fatalf("image.json = %s (%v)", b, err)
	}
	img, err := os.ReadFile(rec.Path)
	if h := sha256.Sum256(img); err != nil || hex.EncodeToString(h[:]) != sr.RHCOS.UncompressedSHA256 {
		t.Errorf("cached image %s is not the stream's uncompressed qcow2 (%v)", rec.Path, err)
	}

	// The override: rhcos.imageURL names another image; the stream is not read.
	u, sum, _, _ := rhcosServer(t)
	c := newLab()
	c.RHCOS = lab.RHCOSConfig{ImageURL: u, ImageSHA256: sum}
	out2 := t.TempDir()
	r, err = engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: out2, Goals: []string{"rhcos/image"}, Stdout: &log, Stderr: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if !slices.Equal(r.Built, []string{"rhcos/image"}) {
		t.Errorf("override executed %v, want only rhcos/image", r.Built)
	}
}

// TestCoreOSParse reads the coreos-bootimages ConfigMap: the sample payload's (shaped like the
// real one) gives its qemu qcow2.gz disk; a stream without it fails naming the path.
func TestCoreOSParse(t *testing.T) {
	want := payload.RHCOSImage{URL: "https://example.test/rhcos-qemu.x86_64.qcow2.gz", SHA256: strings.Repeat("ab", 32)}
	cm, err := payload.CoreOSBootImages("4.18.0", want)
	if err != nil {
		t.Fatal(err)
	}
	stream, img, err := coreOSParse(cm, "")
	if err != nil || img.Location != want.URL || img.SHA256 != want.SHA256 || img.Stream != "rhcos-4.18" || !json.Valid(stream) {
		t.Errorf("parse: %+v, %v", img, err)
	}
	noQemu := strings.Replace(string(cm), `"qemu"`, `"openstack"`, 1)
	if _, _, err := coreOSParse([]byte(noQemu), ""); err == nil || !strings.Contains(err.Error(), `.architectures.x86_64.artifacts.qemu.formats["qcow2.gz"].disk`) {
		t.Errorf("stream without qemu: %v", err)
	}
	if _, _, err := coreOSParse([]byte("kind: ConfigMap\nmetadata: {name: other}\n"), ""); err == nil || !strings.Contains(err.Error(), "coreos-bootimages") {
		t.Errorf("another ConfigMap: %v", err)
	}
}

// TestCoreOSParsePerRelease reads each release's coreos-bootimages as the sample payload
// shapes it after the installer: 4.20 data.stream (rhcos 9.6), 4.22 data.streams picked by the
// release's default osImageStream rhel-9 (9.8) or rhel-10 when asked (10.2), OKD the SCOS
// stream c10s.
func TestCoreOSParsePerRelease(t *testing.T) {
	shared := testenv.RequireShared(t)
	img := payload.RHCOSImage{URL: "https://example.test/os-qemu.x86_64.qcow2.gz", SHA256: strings.Repeat("cd", 32)}
	for _, tc := range []struct {
		release, osImageStream, stream, build string
	}{
		{"4.20", "", "rhcos-4.20", "9.6.20260217-1"},
		{"4.22", "rhel-9", "rhcos-4.21", "9.8.20260428-0"},
		{"4.22", "rhel-10", "rhcos-4.22", "10.2.20260423-0"},
		{"okd-4.22", "", "c10s", "10.0.20251103-0"},
	} {
		r, err := payload.ReleaseNamed(tc.release)
		if err != nil {
			t.Fatal(err)
		}
		cm, err := payload.CoreOSBootImagesOf(shared, r, r.Version, img)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err := coreOSParse(cm, tc.osImageStream)
		if err != nil || got.Stream != tc.stream || got.Release != tc.build || got.Location != img.URL {
			t.Errorf("%s %q: %+v, %v; want stream %s release %s", tc.release, tc.osImageStream, got, err, tc.stream, tc.build)
		}
	}
	r, _ := payload.ReleaseNamed("4.22")
	cm, _ := payload.CoreOSBootImagesOf(shared, r, r.Version, img)
	if _, _, err := coreOSParse(cm, "centos-10"); err == nil || !strings.Contains(err.Error(), `no stream "centos-10"`) {
		t.Errorf("an unknown stream: %v", err)
	}
}

// TestRHCOSOverrideLeavesStream: rhcos.imageURL with rhcos.imageSHA256 is a full override:
// release/coreos-stream is not a target then, so neither the default goal nor cluster's closure
// holds it (`labbuild -n cluster` does not list it) and a payload without a CoreOS stream
// builds; without the override both hold it.
func TestRHCOSOverrideLeavesStream(t *testing.T) {
	for _, override := range []bool{false, true} {
		c := testLabConfig()
		if override {
			c.RHCOS = lab.RHCOSConfig{ImageURL: "https://images.example/rhcos.qcow2.gz", ImageSHA256: strings.Repeat("a", 64)}
		}
		p, err := engine.Load(engine.Options{Config: Lab{Config: c}, OutDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		for _, goals := range [][]string{nil, {"cluster"}} {
			ids, err := p.Select(goals)
			if err != nil {
				t.Fatal(err)
			}
			in := false
			for i, sel := range p.Graph.Closure(ids) {
				if sel && p.Targets[i].Name == "release/coreos-stream" {
					in = true
				}
			}
			if in == override {
				t.Errorf("override %v, goals %v: release/coreos-stream in the closure: %v", override, goals, in)
			}
		}
	}
}

// TestRHCOSOverridePayloadWithoutStream: a payload without CoreOS stream metadata builds the
// release family when rhcos.imageURL and rhcos.imageSHA256 name the boot image (the override
// takes release/coreos-stream out of the graph), and without the override the build fails
// naming the missing stream.
func TestRHCOSOverridePayloadWithoutStream(t *testing.T) {
	for _, override := range []bool{true, false} {
		l := newReleaseLabWith(t, payload.Options{NoCoreOSStream: true})
		if override {
			l.cfg.RHCOS = lab.RHCOSConfig{ImageURL: "https://images.example/rhcos.qcow2.gz", ImageSHA256: strings.Repeat("a", 64)}
		}
		r, err := l.build(t, false, "release")
		if override {
			if err != nil {
				t.Fatalf("override, payload without a stream: %v", err)
			}
			for _, n := range r.Built {
				if n == rhcosStream {
					t.Errorf("override: %s ran", rhcosStream)
				}
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), rhcosStream) || !strings.Contains(err.Error(), "coreos-bootimages") {
			t.Errorf("no override, payload without a stream: err = %v, want a failure of %s naming coreos-bootimages", err, rhcosStream)
		}
	}
}
