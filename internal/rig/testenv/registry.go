package testenv

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/crypto/ssh"

	"github.com/labbuild/labbuild/internal/rig/payload"
	"github.com/labbuild/labbuild/internal/rig/repo"
)

// Registry is go-containerregistry's in-process registry (pkg/registry) on 127.0.0.1 behind
// HTTP basic auth, with a request counter and fault injection for retry and integrity tests.
type Registry struct {
	// Host is "127.0.0.1:<port>", usable in image references (ggcr speaks plain HTTP to it).
	Host string
	// User and Password are the only credentials it accepts (test values, not secrets).
	User, Password string

	requests  atomic.Int64
	blobBytes atomic.Int64 // bytes of blob bodies sent (GET /v2/<repo>/blobs/<digest>)
	mu        sync.Mutex
	faults    []*fault
	// blobGets counts, per blob digest, the GETs begun and the GETs whose body was sent in full.
	begun, whole map[string]int
	// Delay, when set, sleeps before each chunk of a blob body (a slow upstream, for a copy
	// that is killed while blobs are in flight).
	Delay atomic.Int64 // nanoseconds per 32 KiB
}

// countingWriter counts the bytes of a blob body and paces them (Registry.Delay).
type countingWriter struct {
	http.ResponseWriter
	r *Registry
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	total := 0
	for len(p) > 0 {
		chunk := p
		if len(chunk) > 32<<10 {
			chunk = chunk[:32<<10]
		}
		if d := w.r.Delay.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		n, err := w.ResponseWriter.Write(chunk)
		total += n
		w.n += int64(n)
		w.r.blobBytes.Add(int64(n))
		if f, ok := w.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		if err != nil {
			return total, err
		}
		p = p[n:]
	}
	return total, nil
}

type fault struct {
	match   string // substring of the request path
	status  int    // answer status; 0 means corrupt the body instead
	left    int    // how many more requests to affect; <0 forever
	corrupt bool
}

// StartRegistry starts a registry for the test; it stops when the test ends.
func StartRegistry(t testing.TB) *Registry {
	t.Helper()
	r := &Registry{User: "labbuild-test", Password: "test-password-not-a-secret", begun: map[string]int{}, whole: map[string]int{}}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		user, pass, ok := req.BasicAuth()
		if !ok || user != r.User || pass != r.Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="labbuild-test"`)
			http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
			return
		}
		if f := r.take(req.URL.Path); f != nil {
			if !f.corrupt {
				http.Error(w, "injected failure", f.status)
				return
			}
			rec := httptest.NewRecorder()
			inner.ServeHTTP(rec, req)
			body := rec.Body.Bytes()
			if len(body) > 0 {
				body[len(body)/2] ^= 0xff // same length, wrong digest
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(body)
			return
		}
		if i := strings.Index(req.URL.Path, "/blobs/sha256:"); i >= 0 && req.Method == http.MethodGet {
			dg := req.URL.Path[i+len("/blobs/"):]
			r.mu.Lock()
			r.begun[dg]++
			r.mu.Unlock()
			cw := &countingWriter{ResponseWriter: w, r: r}
			inner.ServeHTTP(cw, req)
			if cl := cw.Header().Get("Content-Length"); cl == strconv.FormatInt(cw.n, 10) {
				r.mu.Lock()
				r.whole[dg]++
				r.mu.Unlock()
			}
			return
		}
		inner.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.Host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func (r *Registry) take(p string) *fault {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.faults {
		if f.left != 0 && strings.Contains(p, f.match) {
			if f.left > 0 {
				f.left--
			}
			return f
		}
	}
	return nil
}

// Requests returns how many HTTP requests the registry has served (all of them, refused ones
// included).
func (r *Registry) Requests() int64 { return r.requests.Load() }

// BlobBytes returns the bytes of blob bodies the registry has sent: what a client pulled.
func (r *Registry) BlobBytes() int64 { return r.blobBytes.Load() }

// BlobGets returns, per blob digest ("sha256:..."), how many GETs began and how many sent the
// whole body.
func (r *Registry) BlobGets() (begun, whole map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.begun), maps.Clone(r.whole)
}

// FailNext answers the next n requests whose path contains match with status (500, 502, ...).
func (r *Registry) FailNext(match string, n, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, &fault{match: match, status: status, left: n})
}

// Corrupt flips a byte in the body of every later response whose path contains match
// (a blob digest), keeping its length: the content no longer matches its digest.
func (r *Registry) Corrupt(match string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = append(r.faults, &fault{match: match, corrupt: true, left: -1})
}

// ClearFaults removes every injected fault.
func (r *Registry) ClearFaults() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults = nil
}

// PullSecret returns a docker config JSON holding the registry's credentials.
func (r *Registry) PullSecret() []byte {
	auth := base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password))
	return []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q,"email":"test@example.com"}}}`, r.Host, auth))
}

// WritePullSecret writes PullSecret to dir/pull-secret.json (0600) and returns its path.
func (r *Registry) WritePullSecret(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "pull-secret.json")
	if err := os.WriteFile(p, r.PullSecret(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Auth returns the remote option that pushes with the registry's credentials.
func (r *Registry) Auth() remote.Option {
	return remote.WithAuth(&authn.Basic{Username: r.User, Password: r.Password})
}

// Repo returns "<Host>/<path>".
func (r *Registry) Repo(path string) string { return r.Host + "/" + strings.TrimPrefix(path, "/") }

// SampleRelease is labbuild's sample payload (internal/rig/payload) in an OCI layout, with the lab
// config values that pull it offline. Tests of families downstream of release/* set these on
// their Config instead of reaching quay.io.
type SampleRelease struct {
	Release        string            // the payload.Releases name it was built for
	Image          string            // release.image, by digest
	Version        string            // release.version
	Mirrors        map[string]string // release.mirrors: both payload repositories → oci:<layout>
	PullSecretFile string            // access.pullSecretFile: a well-formed sample pull secret ("" for OKD)
	SSHKeyFile     string            // access.sshKeyFile: a sample public key (no private half kept)
	// RHCOS is the boot image the payload's CoreOS stream names: a small real qcow2 served on
	// loopback (ServeRHCOSImage) when qemu-img is installed, else the release's stand-in at an
	// .invalid host (payload.DefaultRHCOS for 4.18).
	RHCOS payload.RHCOSImage
}

var testImage struct {
	once sync.Once
	gz   []byte
	sum  string
	raw  string
	err  error
}

// ServeRHCOSImage serves a stand-in RHCOS QEMU image on 127.0.0.1 for the test: a real,
// empty 64 MiB qcow2 made by qemu-img (made once per test process), gzipped as the stream's
// qcow2.gz artifacts are. It returns its URL and sha256s; the server stops with the test.
// Without qemu-img the test is skipped (or fails in CI).
func ServeRHCOSImage(t testing.TB) payload.RHCOSImage {
	t.Helper()
	qemuImg := Require(t, "qemu-img")
	testImage.once.Do(func() { testImage.gz, testImage.sum, testImage.raw, testImage.err = makeTestImage(qemuImg) })
	if testImage.err != nil {
		t.Fatal(testImage.err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "rhcos-qemu.x86_64.qcow2.gz", time.Time{}, bytes.NewReader(testImage.gz))
	}))
	t.Cleanup(srv.Close)
	return payload.RHCOSImage{URL: srv.URL + "/art/rhcos-418.94.202501221327-0-qemu.x86_64.qcow2.gz", SHA256: testImage.sum, UncompressedSHA256: testImage.raw}
}

func makeTestImage(qemuImg string) (gz []byte, sum, raw string, err error) {
	dir, err := os.MkdirTemp("", "labbuild-rhcos-")
	if err != nil {
		return nil, "", "", err
	}
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "rhcos.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", img, "64M").CombinedOutput(); err != nil {
		return nil, "", "", fmt.Errorf("qemu-img create: %v: %s", err, out)
	}
	b, err := os.ReadFile(img)
	if err != nil {
		return nil, "", "", err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		return nil, "", "", err
	}
	h, hr := sha256.Sum256(buf.Bytes()), sha256.Sum256(b)
	return buf.Bytes(), hex.EncodeToString(h[:]), hex.EncodeToString(hr[:]), nil
}

var standins struct {
	mu   sync.Mutex
	bins map[string][]byte // by release name
}

// Standin returns the MCO stand-in built for release (a payload.Releases name; "" is 4.18),
// compiled once per release per test process (~30 s cold).
func Standin(t testing.TB, release string) []byte {
	t.Helper()
	standins.mu.Lock()
	defer standins.mu.Unlock()
	if b, ok := standins.bins[release]; ok {
		return b
	}
	bin, err := payload.BuildStandin(context.Background(), repo.Root(), release)
	if err != nil {
		t.Fatal(err)
	}
	if standins.bins == nil {
		standins.bins = map[string][]byte{}
	}
	standins.bins[release] = bin
	return bin
}

// StartSampleRelease is StartSampleReleaseOf the 4.18 sample.
func StartSampleRelease(t testing.TB, mco bool) SampleRelease {
	t.Helper()
	return StartSampleReleaseOf(t, "", mco)
}

// StartSampleReleaseOf writes the sample payload of release (a payload.Releases name; "" is
// 4.18) into t.TempDir() and points the blob cache ($LABBUILD_BLOB_CACHE) at another
// temporary directory. With mco true the MCO image carries the stand-in built for the
// release (Standin), so mco/* targets run; otherwise a placeholder script that fails when
// run. An OKD sample has no pull secret (PullSecretFile ""): OKD pulls with none.
func StartSampleReleaseOf(t testing.TB, release string, mco bool) SampleRelease {
	t.Helper()
	return StartSampleReleases(t, mco, payload.Options{Release: release})[0]
}

// StartSampleReleases writes the sample payloads of opts (each one's Release and Version; the
// rest is the test environment's) into one OCI layout, as a mirror holding several releases,
// so that the labs differ by release.image alone: their Mirrors are the same. See
// StartSampleReleaseOf.
func StartSampleReleases(t testing.TB, mco bool, opts ...payload.Options) []SampleRelease {
	t.Helper()
	var rhcos payload.RHCOSImage
	if _, err := exec.LookPath("qemu-img"); err == nil {
		rhcos = ServeRHCOSImage(t)
	}
	dir := t.TempDir()
	lay := filepath.Join(dir, "payload")
	var ps []*payload.Payload
	for _, o := range opts {
		o.Shared, o.BaseLayerBytes, o.RHCOS = repo.Shared(), 4<<10, rhcos
		if mco {
			o.MCOBinary = Standin(t, o.Release)
		}
		p, err := payload.Build(o)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := payload.WriteLayouts(lay, ps...); err != nil {
		t.Fatal(err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("sample:not-a-secret"))
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "id_ed25519.pub")
	if err := os.WriteFile(key, ssh.MarshalAuthorizedKey(pub), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LABBUILD_BLOB_CACHE", t.TempDir())
	t.Setenv("LABBUILD_IMAGE_CACHE", t.TempDir()) // targets.RHCOSCacheEnv
	secret := filepath.Join(dir, "pull-secret.json")
	if err := os.WriteFile(secret, []byte(fmt.Sprintf(`{"auths":{"registry.labbuild.invalid":{"auth":%q}}}`, auth)), 0o600); err != nil {
		t.Fatal(err)
	}
	mirrors := map[string]string{}
	for _, p := range ps {
		mirrors[p.ReleaseRepo], mirrors[p.ComponentRepo] = "oci:"+lay, "oci:"+lay
	}
	var out []SampleRelease
	for _, p := range ps {
		sr := SampleRelease{Release: p.Release.Name, Image: p.ReleaseRef(), Version: p.Version, SSHKeyFile: key, RHCOS: p.RHCOS, Mirrors: mirrors}
		if !p.Release.OKD {
			sr.PullSecretFile = secret
		}
		out = append(out, sr)
	}
	return out
}
