package targets

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/liveiso"
)

// rhcos/live-iso: the live ISO a single-node lab's master boots first (docs/sno.md). By
// default it is the one the release payload's CoreOS stream names for metal
// (.architectures.x86_64.artifacts.metal.formats.iso.disk, as `openshift-install coreos
// print-stream-json | jq ...metal.formats.iso` finds it for a bootstrap-in-place install);
// rhcos.liveISOURL and rhcos.liveISOSHA256 override it. The download is verified and kept in
// the shared image cache; beside it goes a copy whose karg embed areas name Ignition's qemu
// platform and the serial console (targets/liveiso), so the live system reads the node's
// bootstrap-in-place Ignition from fw_cfg. That copy depends only on the ISO, so every
// single-node lab of the host shares it; the domain's CD-ROM opens it read-only.

// Stream coordinates of the live ISO (coreos/stream-metadata-go: artifacts["metal"]
// .formats["iso"]["disk"]).
const (
	coreOSLivePlatform = "metal"
	coreOSLiveFormat   = "iso"
)

// rhcosLiveTarget declares rhcos/live-iso.
func rhcosLiveTarget(c *lab.Config) *engine.Target {
	t := &engine.Target{
		Name: "rhcos/live-iso", Doc: "the release's RHCOS live ISO (or rhcos.liveISOURL), sha256-verified, with the qemu platform in its kernel arguments, in the shared image cache",
		Version: 1, External: true,
		Run:   rhcosLiveRun,
		Probe: rhcosLiveProbe,
		// The cache is shared by every lab on the host: destroy leaves it.
		Destroy: func(context.Context, *engine.Step) (engine.DestroyOutcome, error) { return engine.RecordOnly, nil },
	}
	if c.RHCOS.LiveISOURL != "" {
		t.Reads = []string{lab.RHCOSLiveISOURL, lab.RHCOSLiveISOSHA256}
	} else {
		t.Deps = []string{rhcosStream}
	}
	return t
}

// coreOSLiveISO picks the live ISO from stream metadata (release/coreos-stream's stream.json).
func coreOSLiveISO(stream []byte) (coreOSArtifact, error) {
	var st coreOSStream
	if err := json.Unmarshal(stream, &st); err != nil {
		return coreOSArtifact{}, fmt.Errorf("stream.json: %w", err)
	}
	where := fmt.Sprintf(".architectures.%s.artifacts.%s.formats[%q].disk", coreOSArch, coreOSLivePlatform, coreOSLiveFormat)
	d, ok := st.Architectures[coreOSArch].Artifacts[coreOSLivePlatform].Formats[coreOSLiveFormat]["disk"]
	if !ok || d.Location == "" || d.SHA256 == "" {
		return coreOSArtifact{}, fmt.Errorf("stream %q has no location and sha256 at %s", st.Stream, where)
	}
	return d, nil
}

// rhcosLiveWant returns the ISO's URL and sha256, where they came from (for errors), and the
// cache paths of the download and of its qemu copy.
func rhcosLiveWant(s *engine.Step) (u, sum, src string, path, qemu string, err error) {
	if slices.Contains(s.Target().Deps, rhcosStream) {
		var b []byte
		if b, err = s.DepFile(rhcosStream, "stream.json"); err != nil {
			return
		}
		var a coreOSArtifact
		if a, err = coreOSLiveISO(b); err != nil {
			err = fmt.Errorf("%s: %s %w (or set rhcos.liveISOURL and rhcos.liveISOSHA256 in %s)", s.Target().Name, rhcosStream, err, s.ConfigFile())
			return
		}
		u, sum, src = a.Location, a.SHA256, "the release's CoreOS stream ("+rhcosStream+" stream.json, metal iso)"
	} else {
		if u, err = s.String(lab.RHCOSLiveISOURL); err != nil {
			return
		}
		if sum, err = s.String(lab.RHCOSLiveISOSHA256); err != nil {
			return
		}
		src = lab.RHCOSLiveISOURL
	}
	dir, err := rhcosCacheDir()
	if err != nil {
		return
	}
	return u, sum, src, filepath.Join(dir, "rhcos-live-"+sum+".iso"), filepath.Join(dir, "rhcos-live-"+sum+"-"+liveiso.PlatformQEMU+".iso"), nil
}

func rhcosLiveProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	_, _, _, _, qemu, err := rhcosLiveWant(s)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	r, ok, err := readRecord[rhcosLiveRecord](s, rhcosLiveRecordFile)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if !ok {
		return engine.ProbeResult{Action: engine.Create, Reason: "not fetched yet"}, nil
	}
	if st, err := os.Stat(qemu); err != nil || st.Size() != r.Size || r.Path != qemu {
		return engine.ProbeResult{Action: engine.Create, Reason: qemu + " is missing or changed in the image cache"}, nil
	}
	return engine.ProbeResult{Action: engine.Keep}, nil
}

func rhcosLiveRun(ctx context.Context, s *engine.Step) error {
	u, sum, src, path, qemu, err := rhcosLiveWant(s)
	if err != nil {
		return err
	}
	if _, err := os.Stat(qemu); err != nil {
		if _, err := os.Stat(path); err != nil {
			s.Logf("fetch %s", u)
			sumSrc := lab.RHCOSLiveISOSHA256
			if src != lab.RHCOSLiveISOURL {
				sumSrc = "the stream's sha256; set rhcos.liveISOURL and rhcos.liveISOSHA256 to use another ISO"
			}
			if err := rhcosFetchFrom(ctx, s, u, sum, path, src, sumSrc); err != nil {
				return fmt.Errorf("%s: %w", s.Target().Name, err)
			}
		}
		if err := rhcosQEMUCopy(path, qemu); err != nil {
			return fmt.Errorf("%s: %s: %w", s.Target().Name, path, err)
		}
	}
	f, err := os.Open(qemu)
	if err != nil {
		return err
	}
	defer f.Close()
	k, err := liveiso.ReadKargs(f)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", s.Target().Name, qemu, err)
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	s.Logf("%s boots with: %s", filepath.Base(qemu), k.Current)
	return writeRecord(s, rhcosLiveRecordFile, rhcosLiveRecord{Path: qemu, SHA256: sum, Size: st.Size(), Kargs: k.Current})
}

// rhcosQEMUCopy copies the ISO at path to qemu (through a temporary file and a rename: a
// failed copy leaves nothing) with the qemu platform and the serial console in its karg areas.
func rhcosQEMUCopy(path, qemu string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	k, err := liveiso.ReadKargs(in)
	if err != nil {
		return err
	}
	kargs, err := liveiso.QEMUKargs(k.Current)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(qemu), ".live-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	defer tmp.Close()
	if _, err := io.Copy(tmp, in); err != nil {
		return err
	}
	if err := k.Write(tmp, kargs); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), qemu)
}
