package targets

// mirror/release: the release copied into the mirror by the OCI adapter's Copier
// (targets/oci/mirror.go); the family gives it the declared inputs and keeps the record.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/oci"
)

// mirrorJobsOf lists the release image and every image of image-references, deduplicated.
func mirrorJobsOf(release string, refs []byte) ([]name.Digest, error) {
	is, err := releaseParseImageReferences(refs)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var jobs []name.Digest
	add := func(s string) error {
		d, err := name.NewDigest(s)
		if err != nil {
			return err
		}
		if !seen[d.String()] {
			seen[d.String()] = true
			jobs = append(jobs, d)
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
var mirrorReleaseHook func(*oci.Copier)

// mirrorCopierOf builds the copier from the declared inputs, and the jobs of the release.
func mirrorCopierOf(s *engine.Step) (*oci.Copier, []name.Digest, error) {
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
	c := &oci.Copier{Mirror: "127.0.0.1:" + strconv.Itoa(sp.port), MirrorTransport: oci.MirrorTransport(tc), Keychain: kc,
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
	res, err := c.Copy(ctx, jobs)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	if res.Plan.Missing == 0 {
		s.Logf("the mirror already holds all %d images of the release: copied 0 bytes", len(jobs))
	} else {
		s.Logf("copied %d of %d images (%s sent from the sources, %s planned) in %s; verified %d", res.Plan.Missing, len(jobs),
			oci.IBytes(res.Sent), oci.IBytes(res.Plan.Bytes), time.Since(start).Round(time.Millisecond), res.Verified)
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
	p, err := c.Plan(ctx, jobs)
	if err != nil {
		return engine.ProbeResult{Action: engine.Update, Reason: "cannot ask the mirror what it holds: " + err.Error()}, nil
	}
	if p.Missing == 0 {
		return engine.ProbeResult{Action: engine.Keep}, nil
	}
	return engine.ProbeResult{Action: engine.Update, Reason: p.String()}, nil
}
