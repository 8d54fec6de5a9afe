// Package oci reads OpenShift release payload images from registries and OCI image layouts with
// go-containerregistry: no oc, no podman. It resolves tags to digests, applies mirrors (another
// repository or an OCI layout on disk, "oci:/path"), authenticates from the pull secret, and
// extracts chosen files from image layers through a blob cache shared by every lab. Its Copier
// (mirror.go) copies a release by digest into the lab's mirror registry.
//
// Integrity: every manifest and blob is checked against its digest before it is cached or its
// files are handed out; a mismatch or a truncated body fails the pull and caches nothing.
// Transient registry errors (5xx, 429, connection resets) are retried with exponential backoff
// through an injectable sleep.
package oci

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// CacheEnv names the environment variable that overrides the blob cache directory (tests point
// it at t.TempDir()).
const CacheEnv = "LABBUILD_BLOB_CACHE"

// DefaultCacheDir returns the shared blob cache: $LABBUILD_BLOB_CACHE, else
// <user cache dir>/labbuild/blobs (~/.cache/labbuild/blobs on Linux). It lives outside any
// lab's output directory, so `labbuild clean` keeps it and every cluster shares it.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("blob cache: %w (set %s to a directory)", err, CacheEnv)
	}
	return filepath.Join(d, "labbuild", "blobs"), nil
}

// Client pulls from registries and OCI layouts. The zero value works: anonymous, no mirrors,
// the default cache, 4 attempts per request. A Client is safe for concurrent use.
type Client struct {
	// Keychain gives credentials per registry (NewKeychain over the pull secret); nil pulls
	// anonymously.
	Keychain *Keychain
	// Mirrors maps a source repository, or a prefix of one at a '/' boundary
	// ("quay.io/openshift-release-dev"), to a mirror repository ("registry.lab:5000/ocp") or an
	// OCI image layout directory ("oci:/srv/mirror"). As an ImageContentSourcePolicy, mirrors
	// serve pulls by digest only; the mirror is tried first and the source after it.
	Mirrors map[string]string
	// CacheDir is the blob cache (blobs/sha256/<hex>); "" means DefaultCacheDir().
	CacheDir string
	// Transport is the HTTP transport under the retry layer; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Attempts bounds tries per request on transient errors; 0 means 4.
	Attempts int
	// Sleep waits between attempts (tests inject a recorder); nil means a timer honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error

	fetched atomic.Int64 // bytes of manifests and blobs read from the network

	initOnce sync.Once
	cacheDir string
	cacheErr error
	flight   sync.Map // digest -> *sync.Mutex: one download per blob at a time
}

// BytesFetched returns the bytes of manifests and blobs this client read from registries (not
// from the cache or a layout), for benchmarks and tests.
func (c *Client) BytesFetched() int64 { return c.fetched.Load() }

func (c *Client) cache() (string, error) {
	c.initOnce.Do(func() {
		c.cacheDir = c.CacheDir
		if c.cacheDir == "" {
			c.cacheDir, c.cacheErr = DefaultCacheDir()
		}
		if c.cacheErr == nil {
			c.cacheErr = os.MkdirAll(filepath.Join(c.cacheDir, "sha256"), 0o755)
		}
	})
	return c.cacheDir, c.cacheErr
}

func (c *Client) attempts() int {
	if c.Attempts > 0 {
		return c.Attempts
	}
	return 4
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// backoff is the wait before attempt n+1: 250 ms, 500 ms, 1 s, ... capped at 8 s.
func backoff(n int) time.Duration {
	return min(250*time.Millisecond<<n, 8*time.Second)
}

// remoteOptions are the go-containerregistry options for one call. ggcr's own retry is turned
// off (one step, no status codes) so that retries happen once, in retryTransport, with the
// injectable sleep.
func (c *Client) remoteOptions(ctx context.Context) []remote.Option {
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(&retryTransport{base: base, c: c}),
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
		remote.WithRetryStatusCodes(),
		remote.WithUserAgent("labbuild"),
	}
	if c.Keychain != nil {
		opts = append(opts, remote.WithAuthFromKeychain(c.Keychain))
	}
	return opts
}

// retryTransport retries idempotent requests on 5xx, 429 and connection errors.
type retryTransport struct {
	base http.RoundTripper
	c    *Client
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	for n := 0; ; n++ {
		resp, err := t.base.RoundTrip(req)
		retry := (req.Method == http.MethodGet || req.Method == http.MethodHead) && n+1 < t.c.attempts() &&
			(transientErr(err) || (err == nil && transientStatus(resp.StatusCode)))
		if !retry {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
		if err := t.c.sleep(req.Context(), backoff(n)); err != nil {
			return nil, err
		}
	}
}

func transientStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusInternalServerError ||
		code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout
}

// transientErr reports connection-level failures worth another attempt: resets, a connection
// closed before the response, timeouts. A cancelled context is not.
func transientErr(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &ne) && ne.Timeout())
}

// IsDigest reports whether ref pins a digest ("repo@sha256:<64 hex>").
func IsDigest(ref string) bool {
	_, err := name.NewDigest(ref)
	return err == nil
}

// Resolve returns the digest pull spec ("quay.io/ns/repo@sha256:...") of ref. A ref that pins a
// digest is returned in canonical form without any network access; a tag is resolved by one
// HEAD (or GET) of its manifest at the source registry. (Mirrors serve digests only.)
func (c *Client) Resolve(ctx context.Context, ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("image %q: %w (want repo:tag or repo@sha256:<digest>)", ref, err)
	}
	if d, ok := r.(name.Digest); ok {
		return d.Context().Name() + "@" + d.DigestStr(), nil
	}
	desc, err := remote.Head(r, c.remoteOptions(ctx)...)
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusMethodNotAllowed {
			var d *remote.Descriptor
			if d, err = remote.Get(r, c.remoteOptions(ctx)...); err == nil {
				desc = &d.Descriptor
			}
		}
		if err != nil {
			return "", c.explain(ref, r.Context(), err)
		}
	}
	return r.Context().Name() + "@" + desc.Digest.String(), nil
}

// explain wraps a registry error with the image and, for 401/403, the pull-secret fix.
func (c *Client) explain(ref string, repo name.Repository, err error) error {
	var terr *transport.Error
	if errors.As(err, &terr) && (terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden) {
		reg := repo.RegistryStr()
		has := "has no entry for " + reg
		if c.Keychain != nil && c.Keychain.Has(repo.Name()) {
			has = "has an entry for " + reg + " that the registry refused (expired or for another account)"
		}
		return fmt.Errorf("%s: registry %s answered %d %s: the pull secret (access.pullSecretFile) %s; "+
			"download a current one from console.redhat.com, or add the mirror registry's auth to it",
			ref, reg, terr.StatusCode, http.StatusText(terr.StatusCode), has)
	}
	return fmt.Errorf("%s: %w", ref, err)
}

// source is one place a repository's content can come from: a registry or an OCI layout.
type source struct {
	desc   string          // for errors: "registry.lab:5000/ocp/release" or "oci:/srv/mirror"
	repo   name.Repository // registry sources
	layout string          // layout sources: the directory
}

// sources returns where pulls by digest of repo go: mirrors first (longest matching prefix),
// then the source itself.
func (c *Client) sources(repo name.Repository) ([]source, error) { return sourcesOf(c.Mirrors, repo) }

// sourcesOf returns where pulls by digest of repo go under release.mirrors: mirrors first
// (longest matching prefix), then repo itself, always last. The Client and the mirror Copier
// both read sources through it.
func sourcesOf(mirrors map[string]string, repo name.Repository) ([]source, error) {
	full := repo.Name()
	keys := make([]string, 0, len(mirrors))
	for k := range mirrors {
		k2 := strings.TrimSuffix(k, "/")
		if full == k2 || strings.HasPrefix(full, k2+"/") {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	var out []source
	for _, k := range keys {
		m := mirrors[k]
		if dir, ok := strings.CutPrefix(m, "oci:"); ok {
			if !filepath.IsAbs(dir) {
				return nil, fmt.Errorf("release.mirrors[%q] = %q: an OCI layout mirror needs an absolute path (oci:/path)", k, m)
			}
			out = append(out, source{desc: m, layout: dir})
			continue
		}
		rest := strings.TrimPrefix(full, strings.TrimSuffix(k, "/"))
		mr, err := name.NewRepository(strings.TrimSuffix(m, "/") + rest)
		if err != nil {
			return nil, fmt.Errorf("release.mirrors[%q] = %q: %w", k, m, err)
		}
		out = append(out, source{desc: mr.Name(), repo: mr})
	}
	return append(out, source{desc: full, repo: repo}), nil
}

// cachePath returns the cache file of digest d (sha256:<hex>).
func (c *Client) cachePath(d v1.Hash) (string, error) {
	dir, err := c.cache()
	if err != nil {
		return "", err
	}
	if d.Algorithm != "sha256" || len(d.Hex) != 64 {
		return "", fmt.Errorf("digest %s: only sha256 digests are supported", d)
	}
	return filepath.Join(dir, "sha256", d.Hex), nil
}

// lock serializes downloads of one digest inside this process; across processes the
// write-to-temp-then-rename keeps the cache consistent (at worst a blob is fetched twice).
func (c *Client) lock(d v1.Hash) func() {
	m, _ := c.flight.LoadOrStore(d.String(), &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// fetchBlob returns the path of a verified local copy of blob d of repo: a layout's own file
// (verified as it is read by the caller: see openVerified) or the cache file, downloading it
// into the cache when absent.
func (c *Client) fetchBlob(ctx context.Context, repo name.Repository, d v1.Hash, size int64) (path string, verified bool, err error) {
	cp, err := c.cachePath(d)
	if err != nil {
		return "", false, err
	}
	if _, err := os.Stat(cp); err == nil {
		return cp, true, nil
	}
	srcs, err := c.sources(repo)
	if err != nil {
		return "", false, err
	}
	var errs []string
	for _, s := range srcs {
		if s.layout != "" {
			p := filepath.Join(s.layout, "blobs", d.Algorithm, d.Hex)
			if _, err := os.Stat(p); err == nil {
				return p, false, nil
			}
			errs = append(errs, s.desc+": blob not in layout")
			continue
		}
		err := c.download(ctx, s.repo, d, size, cp)
		if err == nil {
			return cp, true, nil
		}
		var ve *VerifyError
		if errors.As(err, &ve) || ctx.Err() != nil {
			return "", false, err
		}
		errs = append(errs, c.explain(s.desc+"@"+d.String(), s.repo, err).Error())
	}
	return "", false, fmt.Errorf("blob %s: no source has it: %s", d, strings.Join(errs, "; "))
}

// VerifyError is a blob or manifest whose bytes do not match its digest or size: a corrupt
// mirror or registry, or a truncated transfer. Nothing is cached.
type VerifyError struct {
	Digest   v1.Hash
	Source   string
	Got      string // digest of what arrived
	GotSize  int64
	WantSize int64
}

func (e *VerifyError) Error() string {
	if e.WantSize >= 0 && e.GotSize != e.WantSize {
		return fmt.Sprintf("blob %s from %s: got %d bytes, want %d (truncated or corrupt; nothing was cached)", e.Digest, e.Source, e.GotSize, e.WantSize)
	}
	return fmt.Sprintf("blob %s from %s: content digest is %s (corrupt; nothing was cached)", e.Digest, e.Source, e.Got)
}

// download fetches blob d of repo into cache file cp, verifying size and digest; transient
// failures in the body (resets) are retried like transient statuses.
func (c *Client) download(ctx context.Context, repo name.Repository, d v1.Hash, size int64, cp string) error {
	unlock := c.lock(d)
	defer unlock()
	if _, err := os.Stat(cp); err == nil {
		return nil // another goroutine fetched it
	}
	var last error
	for n := 0; n < c.attempts(); n++ {
		if n > 0 {
			if err := c.sleep(ctx, backoff(n-1)); err != nil {
				return err
			}
		}
		last = c.downloadOnce(ctx, repo, d, size, cp)
		var ve *VerifyError
		if last == nil || errors.As(last, &ve) || !transientErr(last) {
			return last
		}
	}
	return last
}

func (c *Client) downloadOnce(ctx context.Context, repo name.Repository, d v1.Hash, size int64, cp string) error {
	l, err := remote.Layer(repo.Digest(d.String()), c.remoteOptions(ctx)...)
	if err != nil {
		return err
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(filepath.Dir(cp), ".tmp-"+d.Hex[:12]+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), &countingReader{r: rc, n: &c.fetched})
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	got := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if err != nil {
		// ggcr verifies too and reports a mismatch as an error at EOF: classify it as ours.
		if n == size && got != d.String() || strings.Contains(err.Error(), "verifying") {
			return &VerifyError{Digest: d, Source: repo.Name(), Got: got, GotSize: n, WantSize: size}
		}
		return err
	}
	if (size >= 0 && n != size) || got != d.String() {
		return &VerifyError{Digest: d, Source: repo.Name(), Got: got, GotSize: n, WantSize: size}
	}
	return os.Rename(tmp.Name(), cp)
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// verifyingReader hashes what passes through and, at EOF, fails with a VerifyError when the
// content does not match.
type verifyingReader struct {
	r      io.Reader
	h      interface{ Sum([]byte) []byte }
	w      io.Writer
	n      int64
	want   v1.Hash
	size   int64
	source string
}

func newVerifyingReader(r io.Reader, want v1.Hash, size int64, source string) *verifyingReader {
	h := sha256.New()
	return &verifyingReader{r: r, h: h, w: h, want: want, size: size, source: source}
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.w.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF {
		got := "sha256:" + hex.EncodeToString(v.h.Sum(nil))
		if got != v.want.String() || (v.size >= 0 && v.n != v.size) {
			return n, &VerifyError{Digest: v.want, Source: v.source, Got: got, GotSize: v.n, WantSize: v.size}
		}
	}
	return n, err
}
