package targets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/oci"
)

// requireRegistry skips (fails in CI) without a distribution registry program.
func requireRegistry(t *testing.T) string {
	t.Helper()
	p, err := mirrorProgram()
	if err != nil {
		testenv.Missing(t, err.Error())
	}
	return p
}

// freePort returns a TCP port free on 127.0.0.1 now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// withMirror turns the mirror on in l's config, on storage and a free port, and stops the
// registry when the test ends.
func withMirror(t *testing.T, l *releaseLab, storage string) {
	t.Helper()
	l.cfg.Mirror = &lab.MirrorConfig{Enabled: true, Storage: storage, Port: freePort(t)}
	out := l.out
	cfg := l.cfg
	t.Cleanup(func() {
		engine.Destroy(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: out, Goals: []string{"mirror"}})
	})
}

// mirrorClient is how a test pulls from l's mirror: over TLS trusting only the mirror CA, with
// the generated credentials read from their 0600 file.
func mirrorClient(t *testing.T, l *releaseLab) (host string, opts []remote.Option) {
	t.Helper()
	tc, err := mirrorTLS(filepath.Join(l.out, "pki/ca/mirror-ca/tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pw := l.read(t, "mirror/credentials/password")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return fmt.Sprintf("127.0.0.1:%d", l.cfg.Mirror.Port), []remote.Option{remote.WithTransport(tr),
		remote.WithAuth(&authn.Basic{Username: MirrorUser, Password: string(pw)})}
}

// payloadRefs lists the release image and every component image of l's payload by digest.
func payloadRefs(t *testing.T, l *releaseLab) []name.Digest {
	t.Helper()
	jobs, err := mirrorJobsOf(l.p.ReleaseRef(), l.p.ImageReferences)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// TestMirrorCopyAndSkip: a payload of 26 images in an upstream registry is mirrored into the
// real distribution registry; every digest is then pullable from the mirror over TLS with the
// generated credentials (and refused without them); a second lab on the same storage copies
// 0 blob bytes, counted at the upstream, and says so; `labbuild destroy` stops the registry
// and keeps the storage, and destroy --mirror deletes it.
func TestMirrorCopyAndSkip(t *testing.T) {
	requireRegistry(t)
	l := newReleaseLab(t)
	storage := filepath.Join(t.TempDir(), "mirror")
	withMirror(t, l, storage)
	refs := payloadRefs(t, l)
	if len(refs) < 20 {
		t.Fatalf("the test payload has %d images, want at least 20", len(refs))
	}
	if _, err := l.build(t, false, "release/image-references"); err != nil {
		t.Fatal(err)
	}
	before := l.reg.BlobBytes()
	r, err := l.build(t, false, "mirror/release")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.Built, "mirror/registry") || !slices.Contains(r.Built, "mirror/release") {
		t.Fatalf("executed %v, want mirror/registry and mirror/release", r.Built)
	}
	sent := l.reg.BlobBytes() - before
	if sent == 0 {
		t.Fatal("the first copy read no blob bytes from the upstream")
	}
	for _, f := range []string{"mirror/credentials/password", "mirror/credentials/htpasswd", "pki/key/mirror/tls.key"} {
		if st, err := os.Stat(filepath.Join(l.out, f)); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", f, err)
		}
	}
	pw := string(l.read(t, "mirror/credentials/password"))
	logs, _ := os.ReadFile(engine.LogPath(l.out, "mirror/registry"))
	logs2, _ := os.ReadFile(engine.LogPath(l.out, "mirror/release"))
	if strings.Contains(string(logs)+string(logs2), pw) {
		t.Error("a mirror log holds the password")
	}

	host, opts := mirrorClient(t, l)
	for _, ref := range refs {
		d, err := name.NewDigest(oci.MirrorRepo(host, ref.Context()) + "@" + ref.DigestStr())
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(d, opts...)
		if err != nil {
			t.Errorf("pull %s: %v", d, err)
			continue
		}
		if got, _ := img.Digest(); got.String() != ref.DigestStr() {
			t.Errorf("%s: digest %s", d, got)
		}
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for _, layer := range ls { // every blob read in full: ggcr checks its digest
			rc, err := layer.Compressed()
			if err == nil {
				_, err = io.Copy(io.Discard, rc)
				rc.Close()
			}
			if err != nil {
				t.Errorf("%s: layer: %v", d, err)
			}
		}
		if _, err := remote.Image(d, opts[0]); err == nil {
			t.Errorf("%s pulled without credentials", d)
		}
	}

	// A second lab: its own output directory and port, the same storage and release.
	l2 := &releaseLab{reg: l.reg, p: l.p, out: t.TempDir(), cache: l.cache}
	cfg2 := *l.cfg
	cfg2.Mirror = &lab.MirrorConfig{Enabled: true, Storage: storage, Port: freePort(t)}
	l2.cfg = &cfg2
	t.Cleanup(func() {
		engine.Destroy(context.Background(), engine.Options{Config: Lab{Config: l2.cfg}, OutDir: l2.out, Goals: []string{"mirror"}})
	})
	if _, err := l2.build(t, false, "release/image-references", "mirror/registry"); err != nil {
		t.Fatal(err)
	}
	before = l.reg.BlobBytes()
	if _, err := l2.build(t, false, "mirror/release"); err != nil {
		t.Fatal(err)
	}
	if got := l.reg.BlobBytes() - before; got != 0 {
		t.Errorf("the second lab's mirror/release read %d blob bytes from the upstream, want 0", got)
	}
	log2, _ := os.ReadFile(engine.LogPath(l2.out, "mirror/release"))
	if !strings.Contains(string(log2), "copied 0 bytes") {
		t.Errorf("the second lab's log does not say it copied 0 bytes:\n%s", log2)
	}
	var rec mirrorReleaseRecord
	if err := json.Unmarshal(l2.read(t, "mirror/release/record.json"), &rec); err != nil || rec.Sent != 0 || rec.Images != len(refs) {
		t.Errorf("second lab record %+v (%v), want %d images, 0 bytes sent", rec, err, len(refs))
	}

	// destroy keeps the storage; destroy --mirror deletes it.
	regRec := func(l *releaseLab) mirrorRecord {
		var r mirrorRecord
		if err := json.Unmarshal(l.read(t, "mirror/registry/record.json"), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	rr := regRec(l)
	if _, err := engine.Destroy(context.Background(), engine.Options{Config: Lab{Config: l.cfg}, OutDir: l.out}); err != nil {
		t.Fatal(err)
	}
	for addr, d := range rr.Serving {
		if d.Alive() {
			t.Errorf("registry on %s (pid %d) still runs after destroy", addr, d.PID)
		}
	}
	if _, err := os.Stat(filepath.Join(storage, "docker/registry/v2/blobs")); err != nil {
		t.Errorf("destroy without --mirror removed the storage: %v", err)
	}
	if _, err := engine.Destroy(context.Background(), engine.Options{Config: Lab{Config: l2.cfg, DestroyMirror: true}, OutDir: l2.out}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(storage); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("destroy --mirror left the storage: %v", err)
	}
}

// mirrorHelperEnv carries a copy's parameters to the helper process TestMirrorResume kills.
const mirrorHelperEnv = "LABBUILD_MIRROR_HELPER"

type mirrorHelperArgs struct {
	Mirror, CA, Password, PullSecret string
	Jobs                             []string
	Concurrency                      int
}

// TestMirrorHelperProcess is the copy run in a child process (only with mirrorHelperEnv set).
func TestMirrorHelperProcess(t *testing.T) {
	raw := os.Getenv(mirrorHelperEnv)
	if raw == "" {
		t.Skip("helper process of TestMirrorResume")
	}
	var a mirrorHelperArgs
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		t.Fatal(err)
	}
	c := helperCopier(t, a)
	var jobs []name.Digest
	for _, j := range a.Jobs {
		d, err := name.NewDigest(j)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, d)
	}
	if _, err := c.Copy(context.Background(), jobs); err != nil {
		t.Fatal(err)
	}
}

func helperCopier(t *testing.T, a mirrorHelperArgs) *oci.Copier {
	tc, err := mirrorTLS(a.CA)
	if err != nil {
		t.Fatal(err)
	}
	ps, err := os.ReadFile(a.PullSecret)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := oci.NewKeychain(ps)
	if err != nil {
		t.Fatal(err)
	}
	// The transport mirror/release uses (mirrorCopierOf), so the benchmark measures it.
	return &oci.Copier{Mirror: a.Mirror, MirrorTransport: oci.MirrorTransport(tc), Keychain: kc, Jobs: a.Concurrency,
		MirrorAuth: &authn.Basic{Username: MirrorUser, Password: a.Password}}
}

// TestMirrorResume kills a copy with SIGKILL while blobs are in flight from a slow upstream,
// then reruns mirror/release: it re-reads from the upstream only blobs the mirror did not hold
// at the kill (those in flight: at most jobs images × jobs blobs each), and finishes verified.
func TestMirrorResume(t *testing.T) {
	requireRegistry(t)
	l := newReleaseLab(t)
	withMirror(t, l, filepath.Join(t.TempDir(), "mirror"))
	if _, err := l.build(t, false, "release/image-references", "mirror/registry"); err != nil {
		t.Fatal(err)
	}
	const jobs = 3
	var js []string
	for _, r := range payloadRefs(t, l) {
		js = append(js, r.String())
	}
	host, _ := mirrorClient(t, l)
	a := mirrorHelperArgs{Mirror: host, CA: filepath.Join(l.out, "pki/ca/mirror-ca/tls.crt"), Password: string(l.read(t, "mirror/credentials/password")),
		PullSecret: l.cfg.Access.PullSecretFile, Jobs: js, Concurrency: jobs}
	arg, _ := json.Marshal(a)
	l.reg.Delay.Store(int64(15 * time.Millisecond)) // per 32 KiB: the 64 KiB base layer takes 30 ms
	cmd := exec.Command(os.Args[0], "-test.run=^TestMirrorHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), mirrorHelperEnv+"="+string(arg))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the helper to finish some blobs", 60*time.Second, func() error {
		_, whole := l.reg.BlobGets()
		if len(whole) < 12 {
			return fmt.Errorf("%d blobs sent whole", len(whole))
		}
		return nil
	})
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	l.reg.Delay.Store(0)
	begun1, whole1 := l.reg.BlobGets()
	t.Logf("killed after %d blob GETs begun, %d sent whole", len(begun1), len(whole1))

	// What the mirror holds now, asked of the registry itself.
	repos := map[string]bool{}
	for _, r := range payloadRefs(t, l) {
		repos[oci.MirrorRepo(host, r.Context())] = true
	}
	c := helperCopier(t, a)
	held := map[string]bool{}
	for dg := range begun1 {
		h, _ := v1.NewHash(dg)
		held[dg] = c.HasBlob(context.Background(), repos, h)
	}
	nHeld := 0
	for _, v := range held {
		if v {
			nHeld++
		}
	}
	if nHeld == 0 {
		t.Fatalf("the mirror held none of the %d blobs begun before the kill: the kill came too early to test resuming\n%s", len(begun1), out.String())
	}

	// `labbuild -n` asks the mirror what is left (the Probe): some images, some bytes.
	dry, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: l.cfg}, OutDir: l.out, Goals: []string{"mirror/release"}, DryRun: true,
		Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }, Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	var reason string
	for _, p := range dry.Plan {
		if p.Target == "mirror/release" {
			reason = p.Why()
		}
	}
	if !regexp.MustCompile(`^[1-9][0-9]* of 26 images, [0-9.]+ [KM]iB left to copy$`).MatchString(reason) {
		t.Errorf("the plan of mirror/release after the kill says %q, want the images and bytes left", reason)
	}
	if _, err := l.build(t, false, "mirror/release"); err != nil {
		t.Fatal(err)
	}
	begun2, _ := l.reg.BlobGets()
	var again []string
	for dg, n := range begun2 {
		if n > begun1[dg] && begun1[dg] > 0 {
			again = append(again, dg)
			if held[dg] {
				t.Errorf("blob %s was in the mirror at the kill, and the rerun read it again from the upstream", dg)
			}
		}
	}
	// ggcr bounds images at once and each image's blobs at once by the same job count.
	if len(again) > jobs*jobs {
		t.Errorf("the rerun read %d blobs again that the killed copy had begun, want at most %d (the blobs in flight): %v", len(again), jobs*jobs, again)
	}
	t.Logf("%d blobs held at the kill; the rerun re-read %d in-flight blobs", nHeld, len(again))
}

// mirrorMerge is manifests.MergePullSecret for tests.
func mirrorMerge(ps []byte, host, pw string) ([]byte, error) {
	return manifests.MergePullSecret(ps, host, MirrorUser, pw)
}
