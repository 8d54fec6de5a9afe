package targets

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labbuild/labbuild/internal/testenv"
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
	lab := func(sum string) *Config {
		c := DefaultConfig()
		c.RHCOS = RHCOSConfig{ImageURL: u, ImageSHA256: sum}
		return c
	}
	build := func(c *Config, out string) (*Result, string, error) {
		var log bytes.Buffer
		r, err := Build(context.Background(), Options{Config: c, OutDir: out, Goals: []string{"rhcos/image"}, Stdout: &log, Stderr: &log})
		return r, log.String(), err
	}
	out := t.TempDir()
	if _, log, err := build(lab(sum), out); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	cached := filepath.Join(cache, "rhcos-"+sum+".qcow2")
	if b, err := os.ReadFile(cached); err != nil || !bytes.Equal(b, qcow2) {
		t.Fatalf("cached image is not the unpacked qcow2 (%v)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "rhcos/image/image.json")); !bytes.Contains(b, []byte(cached)) {
		t.Errorf("image.json does not name %s:\n%s", cached, b)
	}
	if logb, err := os.ReadFile(filepath.Join(out, metaDir, logDir, "rhcos/image.log")); err != nil || !bytes.Contains(logb, []byte("100%")) {
		t.Errorf("no progress in the target's log (%v):\n%s", err, logb)
	}

	if r, log, err := build(lab(sum), out); err != nil || len(r.Executed) != 0 {
		t.Errorf("second build: executed %v, %v\n%s", r.Executed, err, log)
	}
	if r, log, err := build(lab(sum), t.TempDir()); err != nil || len(r.Executed) != 1 {
		t.Errorf("second lab: executed %v, %v\n%s", r.Executed, err, log)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("%d downloads, want 1 (a rerun and a second lab use the cache)", n)
	}

	os.Remove(cached)
	if r, log, err := build(lab(sum), out); err != nil || len(r.Executed) != 1 {
		t.Errorf("after removing the cached image: executed %v, %v\n%s", r.Executed, err, log)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d downloads, want 2 after the cached file was removed", n)
	}

	bad := strings.Repeat("0", 64)
	_, log, err := build(lab(bad), t.TempDir())
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
	sr := testenv.StartSampleRelease(t, true)
	u, sum, _, _ := rhcosServer(t)
	cache := t.TempDir()
	t.Setenv(RHCOSCacheEnv, cache)
	c := lvLab(d, sr)
	c.RHCOS = RHCOSConfig{ImageURL: u, ImageSHA256: sum}
	out := t.TempDir()
	ctx := context.Background()
	var log bytes.Buffer
	if _, err := Build(ctx, Options{Config: c, OutDir: out, Goals: []string{"libvirt/volume/worker-0"}, Stdout: &log, Stderr: &log}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Cleanup(func() { Destroy(ctx, Options{Config: c, OutDir: out}) })
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
