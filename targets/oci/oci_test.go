package oci

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestKeychain(t *testing.T) {
	ps := []byte(`{"auths":{
		"quay.io":{"auth":"cXVheTpwdw=="},
		"quay.io/openshift-release-dev":{"auth":"cmVsZWFzZTpwdw=="},
		"https://registry.lab:5000/":{"username":"lab","password":"pw"}}}`)
	k, err := NewKeychain(ps)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		repo, wantUser string
	}{
		{"quay.io/openshift-release-dev/ocp-release", "release"}, // longest prefix wins
		{"quay.io/other/repo", "quay"},
		{"registry.lab:5000/ocp/release", "lab"}, // scheme and slash stripped
		{"docker.io/library/busybox", ""},        // anonymous
	} {
		r, err := name.NewRepository(tc.repo)
		if err != nil {
			t.Fatal(err)
		}
		a, err := k.Resolve(r)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Username != tc.wantUser || (tc.wantUser == "" && a != authn.Anonymous) {
			t.Errorf("%s: user %q, want %q", tc.repo, cfg.Username, tc.wantUser)
		}
	}
	for _, bad := range []string{`not json`, `{"auths":{"x.io":{"auth":"%%%"}}}`, `{"auths":{"x.io":{"auth":"bm9jb2xvbg=="}}}`} {
		_, err := NewKeychain([]byte(bad))
		if err == nil {
			t.Errorf("NewKeychain(%s) accepted", bad)
		} else if strings.Contains(err.Error(), "%%%") || strings.Contains(err.Error(), "bm9jb2xvbg") {
			t.Errorf("error quotes the secret: %v", err)
		}
	}
}

func TestResolveDigestOffline(t *testing.T) {
	// A digest resolves with no transport at all: any network use would fail.
	c := &Client{Transport: failingTransport{t}}
	d := "quay.io/openshift-release-dev/ocp-release@sha256:" + strings.Repeat("ab", 32)
	got, err := c.Resolve(context.Background(), d)
	if err != nil || got != d {
		t.Fatalf("Resolve(%s) = %s, %v", d, got, err)
	}
	if !IsDigest(d) || IsDigest("quay.io/x/y:4.18.0") {
		t.Error("IsDigest")
	}
}

type failingTransport struct{ t *testing.T }

func (f failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.t.Errorf("network used: %s", r.URL)
	return nil, io.EOF
}

func tarLayer(t *testing.T, files map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestExtractWhiteoutsFromLayout reads a three-layer image from an OCI layout mirror: upper
// whiteouts hide lower files, an opaque directory hides the whole lower directory, an upper
// file wins over a lower one, and the base layer is never read once every want is closed.
func TestExtractWhiteoutsFromLayout(t *testing.T) {
	base := tarLayer(t, map[string]string{"base/only": "never needed"})
	lower := tarLayer(t, map[string]string{"a/x": "lower x", "a/y": "lower y", "d/z": "lower z", "f": "lower f"})
	upper := tarLayer(t, map[string]string{"a/.wh.x": "", "d/.wh..wh..opq": "", "d/w": "upper w", "f": "upper f"})
	img, err := mutate.AppendLayers(empty.Image, base, lower, upper)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	// The base layer is removed from the layout: reading it would fail the test.
	bd, _ := base.Digest()
	if err := os.Remove(filepath.Join(dir, "blobs/sha256", bd.Hex)); err != nil {
		t.Fatal(err)
	}
	c := &Client{CacheDir: t.TempDir(), Transport: failingTransport{t},
		Mirrors: map[string]string{"example.invalid/src": "oci:" + dir}}
	im, err := c.Image(context.Background(), "example.invalid/src/img@"+d.String())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	_, err = c.Extract(context.Background(), im, Want{Paths: []string{"/a/", "/d/", "/f"}}, func(f File, r io.Reader) error {
		b, err := io.ReadAll(r)
		got[f.Name] = string(b)
		return err
	})
	// /a/ is still open after the upper layer (it holds only a whiteout there), so the lower
	// layer is read; the base layer is not, as nothing remains open.
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a/y": "lower y", "d/w": "upper w", "f": "upper f"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	// LastLayerOnly sees the upper layer only.
	files, err := c.Extract(context.Background(), im, Want{Paths: []string{"/a/", "/f"}, LastLayerOnly: true}, func(File, io.Reader) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, []string{"f"}) {
		t.Errorf("LastLayerOnly: %v, want [f]", names)
	}
}

func TestMirrorSources(t *testing.T) {
	c := &Client{Mirrors: map[string]string{
		"quay.io/openshift-release-dev":             "registry.lab:5000/ocp",
		"quay.io/openshift-release-dev/ocp-release": "oci:/srv/release",
	}}
	for _, tc := range []struct{ repo, want string }{
		{"quay.io/openshift-release-dev/ocp-release", "oci:/srv/release registry.lab:5000/ocp/ocp-release quay.io/openshift-release-dev/ocp-release"},
		{"quay.io/openshift-release-dev/ocp-v4.0-art-dev", "registry.lab:5000/ocp/ocp-v4.0-art-dev quay.io/openshift-release-dev/ocp-v4.0-art-dev"},
		{"quay.io/other/x", "quay.io/other/x"},
	} {
		r, _ := name.NewRepository(tc.repo)
		srcs, err := c.sources(r)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, s := range srcs {
			got = append(got, s.desc)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s: sources %v, want %s", tc.repo, got, tc.want)
		}
	}
	bad := &Client{Mirrors: map[string]string{"quay.io/x": "oci:relative/dir"}}
	r, _ := name.NewRepository("quay.io/x/y")
	if _, err := bad.sources(r); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("relative oci: mirror: %v", err)
	}
}

// TestExtractVerifiesLayoutBlobs: a layout blob is verified in the same pass as its
// extraction, and a corrupt one fails Extract with a *VerifyError whatever the corruption
// does to inflating it (a flipped byte inside the gzip stream breaks it; bytes appended after
// it do not), so the verdict is the digest's, not the decompressor's.
func TestExtractVerifiesLayoutBlobs(t *testing.T) {
	layer := tarLayer(t, map[string]string{"usr/bin/x": strings.Repeat("program ", 4096)})
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	ld, _ := layer.Digest()
	d, _ := img.Digest()
	for _, tt := range []struct {
		name    string
		corrupt func(b []byte) []byte
	}{
		{"intact", nil},
		{"byte flipped mid-stream", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }},
		{"bytes appended", func(b []byte) []byte { return append(b, "trailing"...) }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-9] }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			lp, err := layout.Write(dir, empty.Index)
			if err != nil {
				t.Fatal(err)
			}
			if err := lp.AppendImage(img); err != nil {
				t.Fatal(err)
			}
			if tt.corrupt != nil {
				p := filepath.Join(dir, "blobs/sha256", ld.Hex)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, tt.corrupt(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c := &Client{CacheDir: t.TempDir(), Transport: failingTransport{t},
				Mirrors: map[string]string{"example.invalid/src": "oci:" + dir}}
			im, err := c.Image(context.Background(), "example.invalid/src/img@"+d.String())
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Extract(context.Background(), im, Want{Paths: []string{"/usr/bin/x"}}, func(f File, r io.Reader) error {
				_, err := io.Copy(io.Discard, r)
				return err
			})
			var ve *VerifyError
			if tt.corrupt == nil && err != nil || tt.corrupt != nil && !errors.As(err, &ve) {
				t.Fatalf("Extract: %v (want a *VerifyError exactly when the blob is corrupt)", err)
			}
		})
	}
}
