package oci

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// maxManifest bounds a manifest or index read (registries cap them at 4 MiB as well).
const maxManifest = 4 << 20

// manifestBytes returns the raw manifest d of repo: from the cache, else from the first source
// (mirrors, then the source) that has it, verified against d and then cached.
func (c *Client) manifestBytes(ctx context.Context, repo name.Repository, d v1.Hash) ([]byte, error) {
	cp, err := c.cachePath(d)
	if err != nil {
		return nil, err
	}
	if b, err := os.ReadFile(cp); err == nil {
		return b, nil
	}
	srcs, err := c.sources(repo)
	if err != nil {
		return nil, err
	}
	var errs []string
	for _, s := range srcs {
		var b []byte
		if s.layout != "" {
			b, err = os.ReadFile(filepath.Join(s.layout, "blobs", d.Algorithm, d.Hex))
			if errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, s.desc+": manifest not in layout")
				continue
			}
		} else {
			var desc *remote.Descriptor
			desc, err = remote.Get(s.repo.Digest(d.String()), c.remoteOptions(ctx)...)
			if err == nil {
				b = desc.Manifest
				c.fetched.Add(int64(len(b)))
			} else {
				err = c.explain(s.desc+"@"+d.String(), s.repo, err)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			errs = append(errs, err.Error())
			continue
		}
		sum := sha256.Sum256(b)
		if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.String() {
			return nil, &VerifyError{Digest: d, Source: s.desc, Got: got, GotSize: int64(len(b)), WantSize: -1}
		}
		if err := writeAtomic(cp, b); err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("manifest %s: no source has it: %s", d, strings.Join(errs, "; "))
}

// writeAtomic writes the manifest cache file p (0600, CreateTemp's mode) by a rename, so a
// reader never sees half a manifest. Its own and not cache.WriteFileAtomic: adapters import no
// engine or cache (docs/how-it-works.md, TestRoomImports).
func writeAtomic(p string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-manifest-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), p)
}

// Image is a pulled image manifest: its layers bottom to top, and where they come from.
type Image struct {
	Ref    string // digest pull spec of the image manifest (platform-specific)
	Layers []v1.Descriptor
	repo   name.Repository
}

// Image returns the linux/amd64 image manifest of ref, which must pin a digest (resolve tags
// first). A manifest list (index) is followed to its linux/amd64 entry, the platform of
// OpenShift's x86_64 payloads.
func (c *Client) Image(ctx context.Context, ref string) (*Image, error) {
	d, err := name.NewDigest(ref)
	if err != nil {
		return nil, fmt.Errorf("image %q: %w (pull by digest: resolve the tag first)", ref, err)
	}
	repo := d.Context()
	h, err := v1.NewHash(d.DigestStr())
	if err != nil {
		return nil, fmt.Errorf("image %q: %w", ref, err)
	}
	for range 2 { // an index, then its image
		b, err := c.manifestBytes(ctx, repo, h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ref, err)
		}
		var m struct {
			MediaType types.MediaType `json:"mediaType"`
			v1.Manifest
			Manifests []v1.Descriptor `json:"manifests"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: manifest %s: %w", ref, h, err)
		}
		if len(m.Manifests) == 0 {
			return &Image{Ref: repo.Name() + "@" + h.String(), Layers: m.Layers, repo: repo}, nil
		}
		found := false
		for _, e := range m.Manifests {
			if e.Platform != nil && e.Platform.OS == "linux" && e.Platform.Architecture == "amd64" {
				h, found = e.Digest, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%s: the manifest list has no linux/amd64 image", ref)
		}
	}
	return nil, fmt.Errorf("%s: nested manifest lists are not supported", ref)
}

// Want selects files to extract. Paths are absolute paths in the image ("/usr/bin/oc"); a path
// ending in "/" selects the whole directory tree ("/etc/mcc/templates/").
type Want struct {
	Paths []string
	// LastLayerOnly reads only the top layer, as `oc adm release` reads /release-manifests.
	LastLayerOnly bool
}

// File is one extracted regular file. Name is the image path without the leading slash.
type File struct {
	Name string
	Mode fs.FileMode
	Size int64
}

// Extract calls fn for every wanted regular file of the image's merged filesystem, reading
// layers from the top down and fetching a layer only while some wanted path is still open.
// An exact path closes when a layer holds it (or a whiteout hides it); a directory closes in
// the topmost layer that holds anything under it (or an opaque whiteout of it). That is how
// Dockerfile COPY layers are built (one layer per copied tree) and what lets base layers go
// unfetched; a directory spread across several layers is read only from its top one.
//
// Whiteouts (.wh.<name>, .wh..wh..opq) of upper layers hide lower files; symlinks and hard links
// are skipped. fn's reader is valid only during the call. Layer blobs are verified: cache
// files when they were written, before fn sees anything from them; layout blobs in the same
// pass as the extraction, so fn may see a corrupt layout blob's entries before Extract fails
// with a *VerifyError — what fn made is provisional until Extract returns nil (a target's
// staged outputs are). It returns the files given to fn.
func (c *Client) Extract(ctx context.Context, img *Image, w Want, fn func(f File, r io.Reader) error) ([]File, error) {
	open := map[string]bool{}
	for _, p := range w.Paths {
		if !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("want %q: image paths are absolute", p)
		}
		open[strings.TrimPrefix(p, "/")] = true
	}
	hidden := map[string]bool{} // paths (files or directories) hidden or already taken by upper layers
	isHidden := func(p string) bool {
		for q := p; ; q = path.Dir(q) {
			if hidden[q] {
				return true
			}
			if !strings.Contains(q, "/") {
				return false
			}
		}
	}
	var out []File
	for i := len(img.Layers) - 1; i >= 0 && len(open) > 0; i-- {
		if w.LastLayerOnly && i != len(img.Layers)-1 {
			break
		}
		l := img.Layers[i]
		p, verified, err := c.fetchBlob(ctx, img.repo, l.Digest, l.Size)
		if err != nil {
			return nil, fmt.Errorf("%s: layer %d (%s): %w", img.Ref, i, l.Digest, err)
		}
		var verify v1.Hash // a layout blob: verified as it is read (walkLayer)
		if !verified {
			verify = l.Digest
		}
		var newHidden []string
		seen := map[string]bool{}
		closed := map[string]bool{}
		err = walkLayer(p, verify, l.Size, func(h *tar.Header, r io.Reader) error {
			clean := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
			dir, base := path.Split(clean)
			dir = strings.TrimSuffix(dir, "/")
			if base == ".wh..wh..opq" {
				newHidden = append(newHidden, dir)
				for o := range open {
					if strings.HasPrefix(o, dir+"/") { // an opaque upper dir hides the rest of o below
						closed[o] = true
					}
				}
				return nil
			}
			if wh, ok := strings.CutPrefix(base, ".wh."); ok {
				hp := path.Join(dir, wh)
				newHidden = append(newHidden, hp)
				if open[hp] {
					closed[hp] = true
				}
				return nil
			}
			if isHidden(clean) || seen[clean] {
				return nil
			}
			wanted := false
			for o := range open {
				if o == clean || (strings.HasSuffix(o, "/") && strings.HasPrefix(clean, o)) {
					wanted = true
					closed[o] = true
				}
			}
			if h.Typeflag != tar.TypeDir {
				newHidden = append(newHidden, clean)
			}
			if !wanted || h.Typeflag != tar.TypeReg {
				return nil
			}
			seen[clean] = true
			f := File{Name: clean, Mode: fs.FileMode(h.Mode).Perm(), Size: h.Size}
			out = append(out, f)
			return fn(f, r)
		})
		if err != nil {
			return nil, fmt.Errorf("%s: layer %d (%s): %w", img.Ref, i, l.Digest, err)
		}
		for _, h := range newHidden {
			hidden[h] = true
		}
		for o := range closed {
			delete(open, o)
		}
	}
	return out, nil
}

// walkLayer streams the layer blob at p (gzip, zstd or plain tar) and calls fn per entry.
// Gzip is inflated by klauspost/compress (the same bytes as compress/gzip, about 1.5x faster).
//
// When verify is set (a blob of an OCI layout, not verified when it was cached), the blob is
// hashed as it is read, in the same pass, and after the last entry the rest of the blob is
// read and checked against verify and size: a mismatch is the error (a *VerifyError), returned
// after fn has seen the entries. Callers write what fn gets into a target's staging
// directory, which a failed target discards, so nothing unverified is kept; the blob is read
// once instead of twice (a 27 MB MCO layer was read whole to verify it, then again to inflate).
func walkLayer(p string, verify v1.Hash, size int64, fn func(h *tar.Header, r io.Reader) error) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if verify == (v1.Hash{}) {
		return walkTar(bufio.NewReaderSize(f, 256<<10), fn)
	}
	br := bufio.NewReaderSize(newVerifyingReader(f, verify, size, p), 256<<10)
	err = walkTar(br, fn)
	// The tar's end is not the blob's (end blocks, the gzip trailer, anything after), and a
	// corrupt blob usually fails to inflate first: read the rest through the verifier, whose
	// verdict is the root cause when the digest does not match.
	if _, verr := io.Copy(io.Discard, br); verr != nil {
		return verr
	}
	return err
}

// walkTar reads the layer blob from br (gzip, zstd or plain tar) and calls fn per entry.
func walkTar(br *bufio.Reader, fn func(h *tar.Header, r io.Reader) error) error {
	magic, _ := br.Peek(4)
	var r io.Reader = br
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(br)
		if err != nil {
			return err
		}
		defer gz.Close()
		r = gz
	case bytes.HasPrefix(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading layer tar: %w", err)
		}
		if err := fn(h, tr); err != nil {
			return err
		}
	}
}
