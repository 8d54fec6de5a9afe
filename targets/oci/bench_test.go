package oci_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/labbuild/labbuild/internal/rig/payload"
	"github.com/labbuild/labbuild/internal/rig/repo"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/targets/oci"
)

// BenchmarkExtract measures extracting the payload's /release-manifests (last layer) and the
// cluster-config-api image's /manifests from an in-process registry with a cold blob cache.
// Each image carries a 4 MiB incompressible base layer (standing in for the RHEL base layers)
// that holds none of the wanted files.
//
//	labbuild: reports fetched/wanted, the bytes read from the registry over the compressed
//	          bytes of the layers that hold the wanted files (goal ≤ 1.05).
//	crane:    `crane export IMAGE - | tar -x` of the same two images in the same run, for the
//	          wall-time comparison (goal: labbuild ≤ 0.5× crane). Skipped without crane
//	          (bash .ci/install-release.sh builds it into $LABBUILD_TOOLS).
func BenchmarkExtract(b *testing.B) {
	reg := testenv.StartRegistry(b)
	p, err := payload.Build(payload.Options{Shared: repo.Shared(), ReleaseRepo: reg.Repo("ocp/release"),
		ComponentRepo: reg.Repo("ocp/art-dev"), BaseLayerBytes: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Push(context.Background(), reg.Auth()); err != nil {
		b.Fatal(err)
	}
	kc, err := oci.NewKeychain(reg.PullSecret())
	if err != nil {
		b.Fatal(err)
	}
	var wanted int64
	// The wanted files are in the top layer of each image.
	for _, i := range []v1.Image{p.ReleaseImage, p.Images["cluster-config-api"]} {
		ls, err := i.Layers()
		if err != nil {
			b.Fatal(err)
		}
		n, err := ls[len(ls)-1].Size()
		if err != nil {
			b.Fatal(err)
		}
		wanted += n
	}
	refs := []struct {
		ref  string
		want oci.Want
	}{
		{p.ReleaseRef(), oci.Want{Paths: []string{"/release-manifests/image-references", "/release-manifests/release-metadata"}, LastLayerOnly: true}},
		{p.Pullspec("cluster-config-api"), oci.Want{Paths: []string{"/manifests/"}}},
	}

	b.Run("labbuild", func(b *testing.B) {
		var fetched int64
		for b.Loop() {
			b.StopTimer()
			c := &oci.Client{Keychain: kc, CacheDir: b.TempDir()}
			out := b.TempDir()
			b.StartTimer()
			for _, r := range refs {
				img, err := c.Image(context.Background(), r.ref)
				if err != nil {
					b.Fatal(err)
				}
				_, err = c.Extract(context.Background(), img, r.want, func(f oci.File, rd io.Reader) error {
					p := filepath.Join(out, f.Name)
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						return err
					}
					w, err := os.Create(p)
					if err != nil {
						return err
					}
					_, err = io.Copy(w, rd)
					if cerr := w.Close(); err == nil {
						err = cerr
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			fetched = c.BytesFetched()
		}
		b.ReportMetric(float64(fetched)/float64(wanted), "fetched/wanted")
		b.ReportMetric(float64(fetched), "fetched-B")
	})

	b.Run("crane", func(b *testing.B) {
		crane, err := exec.LookPath("crane")
		if err != nil {
			crane = filepath.Join(os.Getenv("LABBUILD_TOOLS"), "crane")
			if _, err := os.Stat(crane); os.Getenv("LABBUILD_TOOLS") == "" || err != nil {
				b.Skip("crane not found in PATH or $LABBUILD_TOOLS (bash .ci/install-release.sh)")
			}
		}
		cfg := b.TempDir()
		if err := os.WriteFile(filepath.Join(cfg, "config.json"), reg.PullSecret(), 0o600); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			b.StopTimer()
			out := b.TempDir()
			b.StartTimer()
			for _, r := range refs {
				cmd := exec.Command("sh", "-c", `"$0" export "$1" - | tar -x -C "$2"`, crane, r.ref, out)
				cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+cfg)
				if o, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("crane export %s: %v\n%s", r.ref, err, o)
				}
			}
		}
	})
}
