package targets

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// The rhcos family: the RHCOS QEMU image every node disk overlays (stage 02's boot media,
// without a console step: the disk boots RHCOS, which reads the node's Ignition from fw_cfg).
// The image is large and shared by every lab on the host, so it lives in a cache outside
// out/ keyed by its sha256 (RHCOSCacheEnv), is downloaded once, verified before use and
// never re-hashed: rhcos/image is External, and its Probe only stats the cached file.

// RHCOSCacheEnv overrides the image cache directory (default: the user cache dir's
// labbuild/images). Tests point it at t.TempDir().
const RHCOSCacheEnv = "LABBUILD_IMAGE_CACHE"

func init() {
	Register(Family{Name: "rhcos", Doc: "the RHCOS QEMU image the node disks overlay (a single node: the live ISO it boots first), downloaded once into a shared cache and verified",
		Targets: fromConfig(rhcosTargets)})
}

// rhcosTargets declares rhcos/image. By default the image is the one the release payload's
// CoreOS stream names (release/coreos-stream's qemu.json), as openshift-install picks it; a
// set rhcos.imageURL overrides that with a user's own image (rhcos.imageSHA256 verifies it).
func rhcosTargets(c *lab.Config) []*engine.Target {
	if c.SNO() {
		// A single node boots the live ISO and installs RHCOS from it: its disk overlays no
		// image (rhcos_live.go).
		return []*engine.Target{rhcosLiveTarget(c)}
	}
	t := &engine.Target{
		Name: "rhcos/image", Doc: "the release's RHCOS QEMU image (or rhcos.imageURL), sha256-verified, unpacked into the shared image cache",
		Version: 2, External: true,
		Run:   rhcosRun,
		Probe: rhcosProbe,
		// The cache is shared by every lab on the host: destroy leaves it.
		Destroy: func(context.Context, *engine.Step) (engine.DestroyOutcome, error) { return engine.RecordOnly, nil },
	}
	if c.RHCOS.ImageURL != "" {
		t.Reads = []string{lab.RHCOSImageURL, lab.RHCOSImageSHA256}
	} else {
		t.Deps = []string{rhcosStream}
	}
	return []*engine.Target{t}
}

// rhcosStream is the release target naming the payload's RHCOS image.
const rhcosStream = "release/coreos-stream"

// rhcosCacheDir is the shared image cache.
func rhcosCacheDir() (string, error) {
	if d := os.Getenv(RHCOSCacheEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("image cache: %w (set %s)", err, RHCOSCacheEnv)
	}
	return filepath.Join(d, "labbuild", "images"), nil
}

// rhcosWant returns the URL, sha256 and the cached image path they name: from
// rhcos.imageURL when the target reads it, else from the payload's stream.
func rhcosWant(s *engine.Step) (u, sum, path string, err error) {
	if slices.Contains(s.Target().Deps, rhcosStream) {
		var b []byte
		if b, err = s.DepFile(rhcosStream, "qemu.json"); err != nil {
			return
		}
		var img coreOSImage
		if err = json.Unmarshal(b, &img); err != nil {
			err = fmt.Errorf("%s: %s qemu.json: %w", s.Target().Name, rhcosStream, err)
			return
		}
		u, sum = img.Location, img.SHA256
	} else {
		if u, err = s.String(lab.RHCOSImageURL); err != nil {
			return
		}
		if sum, err = s.String(lab.RHCOSImageSHA256); err != nil {
			return
		}
	}
	dir, err := rhcosCacheDir()
	if err != nil {
		return
	}
	return u, sum, filepath.Join(dir, "rhcos-"+sum+".qcow2"), nil
}

func rhcosProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	_, _, path, err := rhcosWant(s)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	r, ok, err := readRecord[rhcosRecord](s, rhcosRecordFile)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if !ok {
		return engine.ProbeResult{Action: engine.Create, Reason: "not fetched yet"}, nil
	}
	if st, err := os.Stat(path); err != nil || st.Size() != r.Size || r.Path != path {
		return engine.ProbeResult{Action: engine.Create, Reason: path + " is missing or changed in the image cache"}, nil
	}
	return engine.ProbeResult{Action: engine.Keep}, nil
}

func rhcosRun(ctx context.Context, s *engine.Step) error {
	u, sum, path, err := rhcosWant(s)
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		// Another lab may have fetched it already; otherwise fetch, verify, unpack.
		s.Logf("fetch %s", u)
		if err := rhcosFetch(ctx, s, u, sum, path); err != nil {
			return fmt.Errorf("%s: %w", s.Target().Name, err)
		}
		if st, err = os.Stat(path); err != nil {
			return err
		}
	}
	return writeRecord(s, rhcosRecordFile, rhcosRecord{Path: path, SHA256: sum, Size: st.Size()})
}

// rhcosFetch downloads u, hashing the bytes as they arrive, gunzips a .gz on the fly, and
// renames the result to path only when the sha256 matches: a failed or tampered download
// leaves nothing in the cache.
func rhcosFetch(ctx context.Context, s *engine.Step, u, sum, path string) error {
	return rhcosFetchFrom(ctx, s, u, sum, path, rhcosSource(s), rhcosSumSource(s))
}

// rhcosFetchFrom is rhcosFetch with the names of where the URL (src) and the sha256 (sumSrc)
// came from, for errors.
func rhcosFetchFrom(ctx context.Context, s *engine.Step, u, sum, path, src, sumSrc string) error {
	body, size, err := rhcosOpen(ctx, u)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	defer body.Close()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".fetch-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	defer tmp.Close()
	h := sha256.New()
	in := io.TeeReader(&rhcosProgress{r: body, total: size, log: s.Logf, url: u, step: s}, h)
	var data io.Reader = in
	if strings.HasSuffix(strings.TrimSuffix(u, "/"), ".gz") {
		zr, err := gzip.NewReader(in)
		if err != nil {
			return fmt.Errorf("%s %s: %w", src, u, err)
		}
		data = zr
	}
	if _, err := io.Copy(tmp, data); err != nil {
		return fmt.Errorf("%s %s: %w", src, u, err)
	}
	io.Copy(h, body) // a gzip stream may end before its container does
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("%s %s has sha256 %s, want %s (%s): not used", src, u, got, sum, sumSrc)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// rhcosOpen opens an http(s):// or file:// URL and returns its length (-1 when unknown).
func rhcosOpen(ctx context.Context, u string) (io.ReadCloser, int64, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return nil, 0, fmt.Errorf("%q: %w", u, err)
	}
	if pu.Scheme == "file" {
		// Opened without blocking and refused unless a regular file: a FIFO named by the lab
		// must not hang the build, nor a device feed it without end (issue 39).
		f, err := os.OpenFile(pu.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil, 0, fmt.Errorf("%w", err)
		}
		st, err := f.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = fmt.Errorf("%s: not a regular file (%v)", pu.Path, st.Mode().Type())
		}
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		return f, st.Size(), nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, 0, fmt.Errorf("%s: %s", u, resp.Status)
	}
	return resp.Body, resp.ContentLength, nil
}

// rhcosSource names where the image URL came from, for errors.
func rhcosSource(s *engine.Step) string {
	if slices.Contains(s.Target().Deps, rhcosStream) {
		return "the release's CoreOS stream (" + rhcosStream + " qemu.json)"
	}
	return lab.RHCOSImageURL
}

// rhcosSumSource names where the expected sha256 came from, for errors.
func rhcosSumSource(s *engine.Step) string {
	if slices.Contains(s.Target().Deps, rhcosStream) {
		return "the stream's sha256; set rhcos.imageURL and rhcos.imageSHA256 to use another image"
	}
	return lab.RHCOSImageSHA256
}

// rhcosProgress logs a line each time another tenth of a download has arrived (the target's
// log is a file, not a terminal, so a bar would be redrawn into it).
type rhcosProgress struct {
	r     io.Reader
	total int64
	done  int64
	tenth int64
	log   func(string, ...any)
	url   string
	step  *engine.Step // the status display: bytes, rate and ETA
}

func (p *rhcosProgress) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.done += int64(n)
	if p.step != nil {
		p.step.Progress(engine.Progress{Phase: "downloading " + filepath.Base(p.url), Done: p.done, Total: p.total})
	}
	if p.total > 0 {
		if t := p.done * 10 / p.total; t > p.tenth {
			p.tenth = t
			p.log("%3d%% %d/%d MiB of %s", t*10, p.done>>20, p.total>>20, filepath.Base(p.url))
		}
	}
	return n, err
}
