package targets

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/targets/oci"
)

// TestMirrorBench is scripts/bench-mirror.sh's measurement (make bench), not a test: it runs
// only with LABBUILD_MIRROR_BENCH=1. A payload of 24 images (2 layers of 2 MiB each,
// incompressible) in the upstream registry is copied into an empty real registry three
// ways, each into fresh storage: labbuild's copy (mirror/release's code), `crane copy` of each
// image in turn (crane as .ci/install-release.sh builds it), and the raw blob bytes read over
// loopback (8 concurrent GETs to /dev/null: the floor). Then labbuild's copy again, onto the
// full mirror. It prints one line for the benchmark table.
func TestMirrorBench(t *testing.T) {
	if os.Getenv("LABBUILD_MIRROR_BENCH") == "" {
		t.Skip("a benchmark: LABBUILD_MIRROR_BENCH=1 (scripts/bench-mirror.sh)")
	}
	requireRegistry(t)
	crane := testenv.Require(t, "crane")
	l := newReleaseLab(t)
	withMirror(t, l, filepath.Join(t.TempDir(), "m0"))
	ctx := context.Background()
	const images, layers, layerBytes = 24, 2, 2 << 20
	var refs []name.Digest
	var total int64
	for i := 0; i < images; i++ {
		img, err := random.Image(layerBytes, layers)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		ref, _ := name.NewDigest(l.reg.Repo("bench/art-dev") + "@" + d.String())
		if err := remote.Write(ref, img, l.reg.Auth()); err != nil {
			t.Fatal(err)
		}
		m, _ := img.Manifest()
		total += m.Config.Size
		for _, ly := range m.Layers {
			total += ly.Size
		}
		refs = append(refs, ref)
	}
	jobs := refs
	fresh := func(n string) {
		l.cfg.Mirror.Storage = filepath.Join(t.TempDir(), n)
		if _, err := l.build(t, false, "mirror/registry"); err != nil {
			t.Fatal(err)
		}
	}
	a := mirrorHelperArgs{CA: filepath.Join(l.out, "pki/ca/mirror-ca/tls.crt"), PullSecret: l.cfg.Access.PullSecretFile}
	copier := func() *oci.Copier {
		a.Mirror = fmt.Sprintf("127.0.0.1:%d", l.cfg.Mirror.Port)
		a.Password = string(l.read(t, "mirror/credentials/password"))
		return helperCopier(t, a)
	}

	fresh("labbuild")
	start := time.Now()
	res, err := copier().Copy(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	tLab := time.Since(start)
	start = time.Now()
	res2, err := copier().Copy(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	tSecond := time.Since(start)

	fresh("crane")
	dcfg := t.TempDir()
	ps, _ := os.ReadFile(l.cfg.Access.PullSecretFile)
	merged, err := mirrorMerge(ps, a.Mirror, string(l.read(t, "mirror/credentials/password")))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dcfg, "config.json"), merged, 0o600)
	start = time.Now()
	for _, r := range refs {
		cmd := exec.Command(crane, "copy", r.String(), oci.MirrorRepo(a.Mirror, r.Context())+"@"+r.DigestStr())
		cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+dcfg, "SSL_CERT_FILE="+a.CA)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("crane copy: %v\n%s", err, out)
		}
	}
	tCrane := time.Since(start)

	start = time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var raw int64
	var mu sync.Mutex
	for _, r := range refs {
		img, err := remote.Image(r, l.reg.Auth())
		if err != nil {
			t.Fatal(err)
		}
		m, _ := img.Manifest()
		ds := []string{m.Config.Digest.String()}
		for _, ly := range m.Layers {
			ds = append(ds, ly.Digest.String())
		}
		for _, d := range ds {
			wg.Add(1)
			sem <- struct{}{}
			go func(d string) {
				defer func() { <-sem; wg.Done() }()
				req, _ := http.NewRequest("GET", "http://"+l.reg.Host+"/v2/bench/art-dev/blobs/"+d, nil)
				req.SetBasicAuth(l.reg.User, l.reg.Password)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				raw += n
				mu.Unlock()
			}(d)
		}
	}
	wg.Wait()
	tRaw := time.Since(start)
	line := fmt.Sprintf("mirror copy, %d images (%.0f MiB, %d MiB sent by labbuild, %d MiB read raw) into an empty distribution registry over loopback: labbuild %.2f s, crane copy (image by image) %.2f s (%.2fx crane), raw blob bytes %.2f s; second run %.3f s (%d bytes sent)",
		images, float64(total)/(1<<20), res.Sent>>20, raw>>20, tLab.Seconds(), tCrane.Seconds(), tLab.Seconds()/tCrane.Seconds(), tRaw.Seconds(), tSecond.Seconds(), res2.Sent)
	fmt.Println("BENCH-MIRROR: " + line)
	if out := os.Getenv("BENCH_OUT"); out != "" {
		f, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err == nil {
			fmt.Fprintln(f, line)
			f.Close()
		}
	}
}
