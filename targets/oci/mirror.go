package oci

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Copier is the mirror copier (docs/mirror.md): it copies images by digest from their source repositories (or the release.mirrors
// that serve them) into the mirror registry, with go-containerregistry: a manifest already in
// the mirror skips its image; a blob already in the destination repository is skipped, one in
// the mirror's other repository is mounted (cross-repository blob mount), and the rest are
// streamed from the source, concurrently. A copy killed half way leaves the blobs it finished
// in the registry; the next copy skips them and sends again only those that were in flight.
type Copier struct {
	// Mirror is the registry as labbuild reaches it: "127.0.0.1:5000".
	Mirror string
	// MirrorAuth is the mirror's user and password.
	MirrorAuth authn.Authenticator
	// MirrorTransport reaches the mirror (MirrorTransport: TLS trusting the mirror's CA).
	MirrorTransport http.RoundTripper
	// Keychain gives the sources' credentials (the pull secret); nil is anonymous.
	Keychain authn.Keychain
	// SourceTransport is the transport to the sources; nil is http.DefaultTransport.
	SourceTransport http.RoundTripper
	// Mirrors is release.mirrors: a source repository (or prefix) to another repository or
	// an OCI layout (oci:/dir) that serves its digests.
	Mirrors map[string]string
	// Jobs bounds concurrent blob copies; 0 means 8.
	Jobs int
	// Progress, when set, receives bytes sent and the total to send, several times a second.
	Progress func(done, total int64)

	sent atomic.Int64 // blob bytes read from the sources in this copy

	// One puller for every read of the mirror (HEADs, manifests, verification): it keeps the
	// connection and the auth handshake, which ggcr otherwise redoes per call (a /v2/ ping).
	pullOnce sync.Once
	puller   *remote.Puller
	pullErr  error

	srcMu  sync.Mutex
	opened map[string]remote.Taggable // sources the plan opened, by digest pull spec
}

// MirrorRepo returns the mirror repository path for source repository repo (its path without
// the registry host): the one mapping the copy, the ImageDigestMirrorSets and
// imageDigestSources all use.
func MirrorRepo(mirrorHost string, repo name.Repository) string {
	return mirrorHost + "/" + repo.RepositoryStr()
}

func (c *Copier) jobs() int {
	if c.Jobs > 0 {
		return c.Jobs
	}
	return 8
}

func (c *Copier) dstOpts(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuth(c.MirrorAuth), remote.WithTransport(c.MirrorTransport),
		remote.WithJobs(c.jobs()), remote.WithUserAgent("labbuild-mirror")}
}

// readOpts are dstOpts for reads, sharing one Puller.
func (c *Copier) readOpts(ctx context.Context) []remote.Option {
	c.pullOnce.Do(func() { c.puller, c.pullErr = remote.NewPuller(c.dstOpts(context.Background())...) })
	if c.pullErr != nil {
		return c.dstOpts(ctx)
	}
	return append(c.dstOpts(ctx), remote.Reuse(c.puller))
}

func (c *Copier) srcOpts(ctx context.Context) []remote.Option {
	o := []remote.Option{remote.WithContext(ctx), remote.WithUserAgent("labbuild-mirror")}
	if c.Keychain != nil {
		o = append(o, remote.WithAuthFromKeychain(c.Keychain))
	}
	if c.SourceTransport != nil {
		o = append(o, remote.WithTransport(c.SourceTransport))
	}
	return o
}

func (c *Copier) dst(j name.Digest) (name.Digest, error) {
	return name.NewDigest(MirrorRepo(c.Mirror, j.Context()) + "@" + j.DigestStr())
}

// source opens the image (or index) of j from the first place that serves it: a
// release.mirrors entry (longest prefix first), then the source repository.
func (c *Copier) source(ctx context.Context, j name.Digest) (remote.Taggable, error) {
	c.srcMu.Lock()
	t, ok := c.opened[j.String()]
	c.srcMu.Unlock()
	if ok {
		return t, nil
	}
	t, err := c.open(ctx, j)
	if err == nil {
		c.srcMu.Lock()
		if c.opened == nil {
			c.opened = map[string]remote.Taggable{}
		}
		c.opened[j.String()] = t
		c.srcMu.Unlock()
	}
	return t, err
}

func (c *Copier) open(ctx context.Context, j name.Digest) (remote.Taggable, error) {
	srcs, err := sourcesOf(c.Mirrors, j.Context())
	if err != nil {
		return nil, err
	}
	h, err := v1.NewHash(j.DigestStr())
	if err != nil {
		return nil, err
	}
	var errs []string
	for _, src := range srcs[:len(srcs)-1] { // the mirrors; the last is j's own repository
		if src.layout != "" {
			t, err := layoutTaggable(src.layout, h)
			if err == nil {
				return t, nil
			}
			errs = append(errs, src.desc+": "+err.Error())
			continue
		}
		t, err := c.remoteTaggable(ctx, src.repo.Digest(h.String()))
		if err == nil {
			return t, nil
		}
		errs = append(errs, err.Error())
	}
	t, err := c.remoteTaggable(ctx, j)
	if err != nil {
		return nil, fmt.Errorf("%s%s", err, strings.Join(append([]string{""}, errs...), "; "))
	}
	return t, nil
}

func (c *Copier) remoteTaggable(ctx context.Context, ref name.Digest) (remote.Taggable, error) {
	d, err := remote.Get(ref, c.srcOpts(ctx)...)
	if err != nil {
		return nil, err
	}
	if d.MediaType.IsIndex() {
		return d.ImageIndex()
	}
	return d.Image()
}

// layoutTaggable opens digest h in the OCI image layout at dir.
func layoutTaggable(dir string, h v1.Hash) (remote.Taggable, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	b, err := lp.Bytes(h)
	if err != nil {
		return nil, err
	}
	var m struct {
		MediaType types.MediaType `json:"mediaType"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m.MediaType.IsIndex() {
		root, err := lp.ImageIndex()
		if err != nil {
			return nil, err
		}
		return root.ImageIndex(h)
	}
	return lp.Image(h)
}

// blob is one blob an image needs.
type blob struct {
	digest v1.Hash
	size   int64
}

// blobsOf lists the config and layer blobs of an image, or of every image of an index.
func blobsOf(t remote.Taggable) ([]blob, error) {
	switch x := t.(type) {
	case v1.Image:
		m, err := x.Manifest()
		if err != nil {
			return nil, err
		}
		out := []blob{{m.Config.Digest, m.Config.Size}}
		for _, l := range m.Layers {
			if l.MediaType.IsDistributable() {
				out = append(out, blob{l.Digest, l.Size})
			}
		}
		return out, nil
	case v1.ImageIndex:
		im, err := x.IndexManifest()
		if err != nil {
			return nil, err
		}
		var out []blob
		for _, d := range im.Manifests {
			if !d.MediaType.IsImage() && !d.MediaType.IsIndex() {
				continue
			}
			var child remote.Taggable
			if d.MediaType.IsIndex() {
				child, err = x.ImageIndex(d.Digest)
			} else {
				child, err = x.Image(d.Digest)
			}
			if err != nil {
				return nil, err
			}
			bs, err := blobsOf(child)
			if err != nil {
				return nil, err
			}
			out = append(out, bs...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%T is neither an image nor an index", t)
}

// CopyPlan is what a copy has left to do.
type CopyPlan struct {
	Images, Missing int   // images in all; images whose manifest the mirror lacks
	Bytes           int64 // blob bytes to send: missing from the mirror, each digest once
	todo            []name.Digest
}

// String says the plan in a plan's words: "3 of 26 images, 12.0 MiB left to copy".
func (p CopyPlan) String() string {
	return fmt.Sprintf("%d of %d images, %s left to copy", p.Missing, p.Images, IBytes(p.Bytes))
}

// IBytes formats n bytes in binary units: "512 B", "12.0 MiB".
func IBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Plan asks the mirror which images it lacks (a manifest HEAD each) and, for those, which of
// their blobs (a blob HEAD in either mirror repository); it reads only manifests from the
// sources. An unreachable mirror counts every blob as missing.
func (c *Copier) Plan(ctx context.Context, jobs []name.Digest) (CopyPlan, error) {
	p := CopyPlan{Images: len(jobs)}
	var mu sync.Mutex
	seen := map[v1.Hash]bool{}
	repos := map[string]bool{}
	for _, j := range jobs {
		repos[MirrorRepo(c.Mirror, j.Context())] = true
	}
	sem := make(chan struct{}, c.jobs())
	var wg sync.WaitGroup
	var firstErr error
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func(j name.Digest) {
			defer func() { <-sem; wg.Done() }()
			d, err := c.dst(j)
			if err == nil {
				if _, herr := remote.Head(d, c.readOpts(ctx)...); herr == nil {
					return
				}
			}
			t, err := c.source(ctx, j)
			if err == nil {
				var bs []blob
				if bs, err = blobsOf(t); err == nil {
					mu.Lock()
					p.Missing++
					p.todo = append(p.todo, j)
					var check []blob
					for _, b := range bs {
						if !seen[b.digest] {
							seen[b.digest] = true
							check = append(check, b)
						}
					}
					mu.Unlock()
					for _, b := range check {
						if !c.HasBlob(ctx, repos, b.digest) {
							mu.Lock()
							p.Bytes += b.size
							mu.Unlock()
						}
					}
				}
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: %w", j, err)
				}
				mu.Unlock()
			}
		}(j)
	}
	wg.Wait()
	sort.Slice(p.todo, func(a, b int) bool { return p.todo[a].String() < p.todo[b].String() })
	return p, firstErr
}

// HasBlob reports whether any of the mirror repositories repos (MirrorRepo paths) holds blob h.
func (c *Copier) HasBlob(ctx context.Context, repos map[string]bool, h v1.Hash) bool {
	for r := range repos {
		ref, err := name.NewDigest(r + "@" + h.String())
		if err != nil {
			continue
		}
		l, err := remote.Layer(ref, c.readOpts(ctx)...)
		if err != nil {
			continue
		}
		if _, err := l.Size(); err == nil {
			return true
		}
	}
	return false
}

// countingLayer counts the compressed bytes read from its source.
type countingLayer struct {
	v1.Layer
	n *atomic.Int64
}

func (l countingLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return &countingRC{rc, l.n}, nil
}

type countingRC struct {
	io.ReadCloser
	n *atomic.Int64
}

func (r *countingRC) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// mountableImage is a source image whose layers are counted as they are read and offered for a
// cross-repository mount from the mirror's other repository.
type mountableImage struct {
	v1.Image
	from name.Repository // the mirror repository a blob may already be in
	n    *atomic.Int64
}

func (i *mountableImage) wrap(l v1.Layer) (v1.Layer, error) {
	h, err := l.Digest()
	if err != nil {
		return nil, err
	}
	return &remote.MountableLayer{Layer: countingLayer{l, i.n}, Reference: i.from.Digest(h.String())}, nil
}

func (i *mountableImage) Layers() ([]v1.Layer, error) {
	ls, err := i.Image.Layers()
	if err != nil {
		return nil, err
	}
	out := make([]v1.Layer, len(ls))
	for k, l := range ls {
		if out[k], err = i.wrap(l); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (i *mountableImage) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	l, err := i.Image.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	return i.wrap(l)
}

func (i *mountableImage) ConfigLayer() (v1.Layer, error) {
	l, err := partial.ConfigLayer(i.Image)
	if err != nil {
		return nil, err
	}
	return countingLayer{l, i.n}, nil
}

// CopyResult is what one copy did.
type CopyResult struct {
	Plan     CopyPlan
	Sent     int64 // blob bytes read from the sources
	Verified int   // images copied by this run whose manifest and blobs the mirror serves, checked after the copy
}

// Copy copies jobs into the mirror and verifies every one it copied: the manifest by its digest
// (ggcr checks a digest reference's manifest against it) and each blob's presence and size.
// Repositories are copied one after another, the first in full before the next, so the next
// mounts the blobs they share.
func (c *Copier) Copy(ctx context.Context, jobs []name.Digest) (CopyResult, error) {
	var res CopyResult
	p, err := c.Plan(ctx, jobs)
	if err != nil {
		return res, err
	}
	res.Plan = p
	if len(p.todo) > 0 {
		byRepo := map[string][]name.Digest{}
		var order []string
		for _, j := range p.todo {
			r := j.Context().Name()
			if byRepo[r] == nil {
				order = append(order, r)
			}
			byRepo[r] = append(byRepo[r], j)
		}
		// The repository with the most images first: the others mount from it.
		sort.SliceStable(order, func(a, b int) bool { return len(byRepo[order[a]]) > len(byRepo[order[b]]) })
		stop := c.report(p.Bytes)
		for k, r := range order {
			other := order[(k+1)%len(order)]
			if len(order) == 1 {
				other = r
			}
			from, err := name.NewRepository(MirrorRepo(c.Mirror, byRepo[other][0].Context()))
			if err != nil {
				stop()
				return res, err
			}
			todo := map[name.Reference]remote.Taggable{}
			for _, j := range byRepo[r] {
				t, err := c.source(ctx, j)
				if err != nil {
					stop()
					return res, fmt.Errorf("%s: %w", j, err)
				}
				if img, ok := t.(v1.Image); ok {
					t = &mountableImage{Image: img, from: from, n: &c.sent}
				}
				d, err := c.dst(j)
				if err != nil {
					stop()
					return res, err
				}
				todo[d] = t
			}
			if err := remote.MultiWrite(todo, c.dstOpts(ctx)...); err != nil {
				stop()
				return res, fmt.Errorf("copy %s: %w", r, err)
			}
		}
		stop()
	}
	res.Sent = c.sent.Load()
	// Only what this run copied is verified: an image the plan found (its manifest by digest)
	// is whole already — distribution stores a manifest only once every blob it names is in
	// the repository (its manifest verification), and the mirror deletes nothing (storage
	// delete disabled) — and the run that copied it verified it. Verifying the whole release
	// again made a second run ~120 requests instead of one HEAD per image.
	n, err := c.verify(ctx, p.todo)
	res.Verified = n
	return res, err
}

// report calls Progress every 250 ms until stop is called (and once more then).
func (c *Copier) report(total int64) (stop func()) {
	if c.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				c.Progress(c.sent.Load(), total)
				return
			case <-t.C:
				c.Progress(c.sent.Load(), total)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// verify checks that the mirror serves every job by digest: the manifest (its digest checked
// by ggcr) and every blob it names, with its size.
func (c *Copier) verify(ctx context.Context, jobs []name.Digest) (int, error) {
	var n atomic.Int64
	sem := make(chan struct{}, c.jobs())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func(j name.Digest) {
			defer func() { <-sem; wg.Done() }()
			err := c.verifyOne(ctx, j)
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
				return
			}
			n.Add(1)
		}(j)
	}
	wg.Wait()
	if len(errs) > 0 {
		sort.Strings(errs)
		return int(n.Load()), fmt.Errorf("verify: %d of %d images are not whole in the mirror: %s", len(errs), len(jobs), strings.Join(errs, "; "))
	}
	return int(n.Load()), nil
}

func (c *Copier) verifyOne(ctx context.Context, j name.Digest) error {
	d, err := c.dst(j)
	if err != nil {
		return err
	}
	desc, err := remote.Get(d, c.readOpts(ctx)...)
	if err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	var t remote.Taggable
	if desc.MediaType.IsIndex() {
		t, err = desc.ImageIndex()
	} else {
		t, err = desc.Image()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	bs, err := blobsOf(t)
	if err != nil {
		return fmt.Errorf("%s: %w", d, err)
	}
	for _, b := range bs {
		l, err := remote.Layer(d.Context().Digest(b.digest.String()), c.readOpts(ctx)...)
		if err != nil {
			return fmt.Errorf("%s: blob %s: %w", d, b.digest, err)
		}
		sz, err := l.Size()
		if err != nil {
			return fmt.Errorf("%s: blob %s: %w", d, b.digest, err)
		}
		if sz != b.size {
			return fmt.Errorf("%s: blob %s is %d bytes, the manifest says %d", d, b.digest, sz, b.size)
		}
	}
	return nil
}

// MirrorTransport is the copier's connection pool to the mirror: TLS trusting tc, and up to 32
// idle connections kept (net/http keeps 2 per host by default, so 8 concurrent jobs would
// make new TLS connections over and over).
func MirrorTransport(tc *tls.Config) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.MaxIdleConnsPerHost = 32
	return tr
}
