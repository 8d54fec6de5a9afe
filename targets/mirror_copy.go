package targets

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

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/oci"
)

// mirrorCopier copies images by digest from their source repositories (or the release.mirrors
// that serve them) into the mirror registry, with go-containerregistry: a manifest already in
// the mirror skips its image; a blob already in the destination repository is skipped, one in
// the mirror's other repository is mounted (cross-repository blob mount), and the rest are
// streamed from the source, concurrently. A copy killed half way leaves the blobs it finished
// in the registry; the next copy skips them and sends again only those that were in flight.
type mirrorCopier struct {
	// Mirror is the registry as labbuild reaches it: "127.0.0.1:5000".
	Mirror string
	// MirrorAuth is the mirror's user and password; TLS trusts MirrorTransport's roots.
	MirrorAuth      authn.Authenticator
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

// mirrorJob is one image to copy: its source by digest and its repository in the mirror (the
// source repository's path: quay.io/openshift-release-dev/ocp-v4.0-art-dev →
// <mirror>/openshift-release-dev/ocp-v4.0-art-dev).
type mirrorJob struct {
	Src name.Digest
}

// MirrorRepo returns the mirror repository path for source repository repo (its path without
// the registry host): the one mapping the copy, the ImageDigestMirrorSets and
// imageDigestSources all use.
func MirrorRepo(mirrorHost string, repo name.Repository) string {
	return mirrorHost + "/" + repo.RepositoryStr()
}

func (c *mirrorCopier) jobs() int {
	if c.Jobs > 0 {
		return c.Jobs
	}
	return 8
}

func (c *mirrorCopier) dstOpts(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuth(c.MirrorAuth), remote.WithTransport(c.MirrorTransport),
		remote.WithJobs(c.jobs()), remote.WithUserAgent("labbuild-mirror")}
}

// readOpts are dstOpts for reads, sharing one Puller.
func (c *mirrorCopier) readOpts(ctx context.Context) []remote.Option {
	c.pullOnce.Do(func() { c.puller, c.pullErr = remote.NewPuller(c.dstOpts(context.Background())...) })
	if c.pullErr != nil {
		return c.dstOpts(ctx)
	}
	return append(c.dstOpts(ctx), remote.Reuse(c.puller))
}

func (c *mirrorCopier) srcOpts(ctx context.Context) []remote.Option {
	o := []remote.Option{remote.WithContext(ctx), remote.WithUserAgent("labbuild-mirror")}
	if c.Keychain != nil {
		o = append(o, remote.WithAuthFromKeychain(c.Keychain))
	}
	if c.SourceTransport != nil {
		o = append(o, remote.WithTransport(c.SourceTransport))
	}
	return o
}

func (c *mirrorCopier) dst(j mirrorJob) (name.Digest, error) {
	return name.NewDigest(MirrorRepo(c.Mirror, j.Src.Context()) + "@" + j.Src.DigestStr())
}

// source opens the image (or index) of j from the first place that serves it: a
// release.mirrors entry (longest prefix first), then the source repository.
func (c *mirrorCopier) source(ctx context.Context, j mirrorJob) (remote.Taggable, error) {
	c.srcMu.Lock()
	t, ok := c.opened[j.Src.String()]
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
		c.opened[j.Src.String()] = t
		c.srcMu.Unlock()
	}
	return t, err
}

func (c *mirrorCopier) open(ctx context.Context, j mirrorJob) (remote.Taggable, error) {
	full := j.Src.Context().Name()
	var keys []string
	for k := range c.Mirrors {
		k2 := strings.TrimSuffix(k, "/")
		if full == k2 || strings.HasPrefix(full, k2+"/") {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(a, b int) bool { return len(keys[a]) > len(keys[b]) })
	h, err := v1.NewHash(j.Src.DigestStr())
	if err != nil {
		return nil, err
	}
	var errs []string
	for _, k := range keys {
		m := c.Mirrors[k]
		if dir, ok := strings.CutPrefix(m, "oci:"); ok {
			t, err := layoutTaggable(dir, h)
			if err == nil {
				return t, nil
			}
			errs = append(errs, m+": "+err.Error())
			continue
		}
		rest := strings.TrimPrefix(full, strings.TrimSuffix(k, "/"))
		ref, err := name.NewDigest(strings.TrimSuffix(m, "/") + rest + "@" + h.String())
		if err != nil {
			return nil, fmt.Errorf("release.mirrors[%q]: %w", k, err)
		}
		t, err := c.remoteTaggable(ctx, ref)
		if err == nil {
			return t, nil
		}
		errs = append(errs, err.Error())
	}
	t, err := c.remoteTaggable(ctx, j.Src)
	if err != nil {
		return nil, fmt.Errorf("%s%s", err, strings.Join(append([]string{""}, errs...), "; "))
	}
	return t, nil
}

func (c *mirrorCopier) remoteTaggable(ctx context.Context, ref name.Digest) (remote.Taggable, error) {
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

// mirrorBlob is one blob an image needs.
type mirrorBlob struct {
	digest v1.Hash
	size   int64
}

// blobsOf lists the config and layer blobs of an image, or of every image of an index.
func blobsOf(t remote.Taggable) ([]mirrorBlob, error) {
	switch x := t.(type) {
	case v1.Image:
		m, err := x.Manifest()
		if err != nil {
			return nil, err
		}
		out := []mirrorBlob{{m.Config.Digest, m.Config.Size}}
		for _, l := range m.Layers {
			if l.MediaType.IsDistributable() {
				out = append(out, mirrorBlob{l.Digest, l.Size})
			}
		}
		return out, nil
	case v1.ImageIndex:
		im, err := x.IndexManifest()
		if err != nil {
			return nil, err
		}
		var out []mirrorBlob
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

// mirrorPlan is what a copy has left to do.
type mirrorPlan struct {
	Images, Missing int   // images in all; images whose manifest the mirror lacks
	Bytes           int64 // blob bytes to send: missing from the mirror, each digest once
	todo            []mirrorJob
}

// String says the plan in a plan's words: "3 of 26 images, 12.0 MiB left to copy".
func (p mirrorPlan) String() string {
	return fmt.Sprintf("%d of %d images, %s left to copy", p.Missing, p.Images, ibytes(p.Bytes))
}

// ibytes formats n bytes in binary units.
func ibytes(n int64) string {
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

// plan asks the mirror which images it lacks (a manifest HEAD each) and, for those, which of
// their blobs (a blob HEAD in either mirror repository); it reads only manifests from the
// sources. An unreachable mirror counts every blob as missing.
func (c *mirrorCopier) plan(ctx context.Context, jobs []mirrorJob) (mirrorPlan, error) {
	p := mirrorPlan{Images: len(jobs)}
	var mu sync.Mutex
	seen := map[v1.Hash]bool{}
	repos := map[string]bool{}
	for _, j := range jobs {
		repos[MirrorRepo(c.Mirror, j.Src.Context())] = true
	}
	sem := make(chan struct{}, c.jobs())
	var wg sync.WaitGroup
	var firstErr error
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func(j mirrorJob) {
			defer func() { <-sem; wg.Done() }()
			d, err := c.dst(j)
			if err == nil {
				if _, herr := remote.Head(d, c.readOpts(ctx)...); herr == nil {
					return
				}
			}
			t, err := c.source(ctx, j)
			if err == nil {
				var bs []mirrorBlob
				if bs, err = blobsOf(t); err == nil {
					mu.Lock()
					p.Missing++
					p.todo = append(p.todo, j)
					var check []mirrorBlob
					for _, b := range bs {
						if !seen[b.digest] {
							seen[b.digest] = true
							check = append(check, b)
						}
					}
					mu.Unlock()
					for _, b := range check {
						if !c.blobInMirror(ctx, repos, b.digest) {
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
					firstErr = fmt.Errorf("%s: %w", j.Src, err)
				}
				mu.Unlock()
			}
		}(j)
	}
	wg.Wait()
	sort.Slice(p.todo, func(a, b int) bool { return p.todo[a].Src.String() < p.todo[b].Src.String() })
	return p, firstErr
}

// blobInMirror reports whether any of the mirror repositories holds blob h.
func (c *mirrorCopier) blobInMirror(ctx context.Context, repos map[string]bool, h v1.Hash) bool {
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

// mirrorImage is a source image whose layers are counted as they are read and offered for a
// cross-repository mount from the mirror's other repository.
type mirrorImage struct {
	v1.Image
	from name.Repository // the mirror repository a blob may already be in
	n    *atomic.Int64
}

func (i *mirrorImage) wrap(l v1.Layer) (v1.Layer, error) {
	h, err := l.Digest()
	if err != nil {
		return nil, err
	}
	return &remote.MountableLayer{Layer: countingLayer{l, i.n}, Reference: i.from.Digest(h.String())}, nil
}

func (i *mirrorImage) Layers() ([]v1.Layer, error) {
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

func (i *mirrorImage) LayerByDigest(h v1.Hash) (v1.Layer, error) {
	l, err := i.Image.LayerByDigest(h)
	if err != nil {
		return nil, err
	}
	return i.wrap(l)
}

func (i *mirrorImage) ConfigLayer() (v1.Layer, error) {
	l, err := partial.ConfigLayer(i.Image)
	if err != nil {
		return nil, err
	}
	return countingLayer{l, i.n}, nil
}

// mirrorResult is what one copy did.
type mirrorResult struct {
	Plan     mirrorPlan
	Sent     int64 // blob bytes read from the sources
	Verified int   // images copied by this run whose manifest and blobs the mirror serves, checked after the copy
}

// copy copies jobs into the mirror and verifies every one it copied: the manifest by its digest
// (ggcr checks a digest reference's manifest against it) and each blob's presence and size.
// Repositories are copied one after another, the first in full before the next, so the next
// mounts the blobs they share.
func (c *mirrorCopier) copy(ctx context.Context, jobs []mirrorJob) (mirrorResult, error) {
	var res mirrorResult
	p, err := c.plan(ctx, jobs)
	if err != nil {
		return res, err
	}
	res.Plan = p
	if len(p.todo) > 0 {
		byRepo := map[string][]mirrorJob{}
		var order []string
		for _, j := range p.todo {
			r := j.Src.Context().Name()
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
			from, err := name.NewRepository(MirrorRepo(c.Mirror, byRepo[other][0].Src.Context()))
			if err != nil {
				stop()
				return res, err
			}
			todo := map[name.Reference]remote.Taggable{}
			for _, j := range byRepo[r] {
				t, err := c.source(ctx, j)
				if err != nil {
					stop()
					return res, fmt.Errorf("%s: %w", j.Src, err)
				}
				if img, ok := t.(v1.Image); ok {
					t = &mirrorImage{Image: img, from: from, n: &c.sent}
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
func (c *mirrorCopier) report(total int64) (stop func()) {
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
func (c *mirrorCopier) verify(ctx context.Context, jobs []mirrorJob) (int, error) {
	var n atomic.Int64
	sem := make(chan struct{}, c.jobs())
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func(j mirrorJob) {
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

func (c *mirrorCopier) verifyOne(ctx context.Context, j mirrorJob) error {
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

// mirrorJobsOf lists the release image and every image of image-references, deduplicated.
func mirrorJobsOf(release string, refs []byte) ([]mirrorJob, error) {
	is, err := releaseParseImageReferences(refs)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var jobs []mirrorJob
	add := func(s string) error {
		d, err := name.NewDigest(s)
		if err != nil {
			return err
		}
		if !seen[d.String()] {
			seen[d.String()] = true
			jobs = append(jobs, mirrorJob{Src: d})
		}
		return nil
	}
	if err := add(release); err != nil {
		return nil, fmt.Errorf("release/resolve: %w", err)
	}
	for _, t := range is.Spec.Tags {
		if err := add(t.From.Name); err != nil {
			return nil, fmt.Errorf("image-references: tag %s: %w", t.Name, err)
		}
	}
	return jobs, nil
}

// mirrorReleaseRecord is mirror/release's record: what the mirror holds for this release.
type mirrorReleaseRecord struct {
	Release string `json:"release"` // the release image's digest pull spec
	Mirror  string `json:"mirror"`  // the mirror as labbuild reaches it
	Storage string `json:"storage"`
	Images  int    `json:"images"`
	Sent    int64  `json:"sentBytes"` // blob bytes this copy sent (0 when the mirror had them all)
}

// mirrorReleaseHook lets tests adjust the copier (the sources' transport); nil in production.
var mirrorReleaseHook func(*mirrorCopier)

// mirrorTransport is the copier's connection pool to the mirror: TLS trusting tc, and up to 32
// idle connections kept (net/http keeps 2 per host by default, so 8 concurrent jobs would
// make new TLS connections over and over).
func mirrorTransport(tc *tls.Config) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.MaxIdleConnsPerHost = 32
	return tr
}

// mirrorCopierOf builds the copier from the declared inputs, and the jobs of the release.
func mirrorCopierOf(s *engine.Step) (*mirrorCopier, []mirrorJob, error) {
	sp, err := mirrorSpecOf(s)
	if err != nil {
		return nil, nil, err
	}
	tc, err := mirrorTLS(sp.ca)
	if err != nil {
		return nil, nil, err
	}
	ps, err := s.File(lab.AccessPullSecretFile)
	if err != nil {
		return nil, nil, err
	}
	kc, err := oci.NewKeychain(ps)
	if err != nil {
		return nil, nil, fmt.Errorf("access.pullSecretFile: %w", err)
	}
	c := &mirrorCopier{Mirror: "127.0.0.1:" + strconv.Itoa(sp.port), MirrorTransport: mirrorTransport(tc), Keychain: kc,
		MirrorAuth: &authn.Basic{Username: MirrorUser, Password: string(sp.password)}}
	if ri := s.Target().Reads; len(ri) > 0 && ri[len(ri)-1] == lab.ReleaseMirrors {
		if err := s.Value(lab.ReleaseMirrors, &c.Mirrors); err != nil {
			return nil, nil, err
		}
	}
	rel, err := depPullspec(s, "release/resolve")
	if err != nil {
		return nil, nil, err
	}
	refs, err := s.DepFile("release/image-references", "image-references")
	if err != nil {
		return nil, nil, err
	}
	jobs, err := mirrorJobsOf(rel, refs)
	if err != nil {
		return nil, nil, err
	}
	if mirrorReleaseHook != nil {
		mirrorReleaseHook(c)
	}
	return c, jobs, nil
}

func mirrorReleaseRun(ctx context.Context, s *engine.Step) error {
	c, jobs, err := mirrorCopierOf(s)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	c.Progress = func(done, total int64) {
		s.Progress(engine.Progress{Phase: fmt.Sprintf("copying the release into the mirror (%d images)", len(jobs)), Done: done, Total: total})
	}
	start := time.Now()
	res, err := c.copy(ctx, jobs)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	if res.Plan.Missing == 0 {
		s.Logf("the mirror already holds all %d images of the release: copied 0 bytes", len(jobs))
	} else {
		s.Logf("copied %d of %d images (%s sent from the sources, %s planned) in %s; verified %d", res.Plan.Missing, len(jobs),
			ibytes(res.Sent), ibytes(res.Plan.Bytes), time.Since(start).Round(time.Millisecond), res.Verified)
	}
	sp, _ := mirrorSpecOf(s)
	rel, _ := depPullspec(s, "release/resolve")
	b, _ := json.MarshalIndent(mirrorReleaseRecord{Release: rel, Mirror: c.Mirror, Storage: sp.storage, Images: len(jobs), Sent: res.Sent}, "", "  ")
	return s.WriteFile("record.json", append(b, '\n'), 0o644)
}

// mirrorReleaseProbe asks the mirror what it lacks: Keep when it serves every image, else
// Update with the images and bytes left (what `labbuild -n` prints).
func mirrorReleaseProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	c, jobs, err := mirrorCopierOf(s)
	if err != nil {
		return engine.ProbeResult{}, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	p, err := c.plan(ctx, jobs)
	if err != nil {
		return engine.ProbeResult{Action: engine.Update, Reason: "cannot ask the mirror what it holds: " + err.Error()}, nil
	}
	if p.Missing == 0 {
		return engine.ProbeResult{Action: engine.Keep}, nil
	}
	return engine.ProbeResult{Action: engine.Update, Reason: p.String()}, nil
}
