package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/labbuild/labbuild/cache"
	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets"
)

// The release gate (issue 37): before a plan or a build, labbuild reads the payload's version
// and flavour (targets.ReadPayload), refuses a release it does not build (exit 2, nothing
// written), and records them on the config, with the release's defaults: featureSet OKD and
// the fake pull secret for an OKD payload. A build keeps what it read in
// OUT/.labbuild/release-payload.json, so a null build does not read the payload again: for a
// release.image by digest for good (a digest names the same bytes forever), by tag for
// payloadTagTTL, the TTL of release/resolve's own resolution (-B reads it again).

// payloadCacheName is the gate's file under OUT/.labbuild.
const payloadCacheName = "release-payload.json"

// payloadTagTTL is how long what a tag's payload said holds (targets' releaseResolveTTL).
const payloadTagTTL = 24 * time.Hour

// fakePullSecretName is the file under OUT/.labbuild holding the release's fake pull secret
// (OKD's), which the targets read as access.pullSecretFile when the lab names none.
const fakePullSecretName = "fake-pull-secret.json"

// payloadCache is the gate's file: the payload read for Key (release.image and its mirrors).
type payloadCache struct {
	Key     string          `json:"key"`
	Read    time.Time       `json:"read"`
	Payload targets.Payload `json:"payload"`
}

// payloadKey is the hash of what decides which payload the lab names.
func payloadKey(c *lab.Config) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", c.Release.Image)
	keys := make([]string, 0, len(c.Release.Mirrors))
	for k := range c.Release.Mirrors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, c.Release.Mirrors[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// needsRelease reports whether a target of the selection follows the release (reads
// release.version or derived.release), and so needs the payload read first.
func needsRelease(p *engine.Project, goals []string) (bool, error) {
	ids, err := p.Select(goals)
	if err != nil {
		return false, err
	}
	for i, in := range p.Graph.Closure(ids) {
		if in && (slices.Contains(p.Targets[i].Reads, lab.ReleaseVersion) || slices.Contains(p.Targets[i].Reads, lab.DerivedRelease)) {
			return true, nil
		}
	}
	return false, nil
}

// releaseGate runs the gate for o (its Goals), declaring the targets once (o.Targets). A dry
// run (-n, graph, explain, status) writes nothing: without a usable record it reads the payload
// and keeps what it read in memory; when the payload cannot be read it warns and plans with the
// release unknown.
func (c *cli) releaseGate(ctx context.Context, o *engine.Options, dry bool) error {
	if c.cfg == nil {
		return nil
	}
	p, err := engine.Load(*o)
	if err != nil {
		return err
	}
	o.Targets = p.Targets
	need, err := needsRelease(p, o.Goals)
	if err != nil || !need {
		return err
	}
	now := time.Now()
	if o.Now != nil {
		now = o.Now()
	}
	path := filepath.Join(o.OutDir, ".labbuild", payloadCacheName)
	key := payloadKey(c.cfg)
	var rec payloadCache
	if r := c.stamp.collector(); r != nil {
		r.Stat(path)
	}
	if b, err := os.ReadFile(path); err == nil && json.Unmarshal(b, &rec) == nil && rec.Key == key {
		if !c.force && (targets.ReleaseByDigest(c.cfg) || now.Sub(rec.Read) < payloadTagTTL) {
			return c.applyPayload(o, rec.Payload, dry, false)
		}
	} else {
		rec = payloadCache{}
	}
	pl, err := targets.ReadPayload(ctx, c.cfg, c.cfgBase)
	if err != nil {
		var ce *lab.ConfigError
		if isConfigError(err, &ce) || !dry {
			return err
		}
		if rec.Key == key { // an expired record is better than none for a plan
			fmt.Fprintf(c.stderr, "labbuild: warning: cannot read the release payload (%v); planning with what it said on %s\n", err, rec.Read.Format(time.RFC3339))
			return c.applyPayload(o, rec.Payload, dry, false)
		}
		fmt.Fprintf(c.stderr, "labbuild: warning: cannot read the release payload (%v): the plan does not know its version\n", err)
		return nil
	}
	if !dry {
		b, _ := json.MarshalIndent(payloadCache{Key: key, Read: now.UTC(), Payload: pl}, "", "  ")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := cache.WriteFileAtomic(path, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return c.applyPayload(o, pl, dry, true)
}

func isConfigError(err error, ce **lab.ConfigError) bool {
	e, ok := err.(*lab.ConfigError)
	if ok {
		*ce = e
	}
	return ok
}

// applyPayload records pl on the config with its release's defaults (targets.ApplyPayload):
// the feature set, and the fake pull secret, in OUT/.labbuild for a build and in a temporary
// file for a dry run (which writes nothing in the lab), removed when labbuild exits. The
// defaults are said when the payload was read afresh (a build that kept it says nothing
// more, as a null build must).
func (c *cli) applyPayload(o *engine.Options, pl targets.Payload, dry, fresh bool) error {
	d, err := targets.ApplyPayload(c.cfg, pl, c.cfgBase)
	if err != nil {
		return err
	}
	if d.FeatureSet != "" && fresh {
		fmt.Fprintf(c.stderr, "labbuild: %s payload: cluster.featureSet is %s (the release's default; it cannot go back to Default on a running cluster: docs/releases.md)\n",
			d.Release, d.FeatureSet)
	}
	if d.FakePullSecret == nil {
		return nil
	}
	var path string
	if dry {
		f, err := os.CreateTemp("", "labbuild-fake-pull-secret-*.json")
		if err != nil {
			return err
		}
		path = f.Name()
		f.Close()
		c.cleanup = append(c.cleanup, func() { os.Remove(path) })
	} else {
		path = filepath.Join(o.OutDir, ".labbuild", fakePullSecretName)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
	}
	// Written only when it differs: a rewrite would change its stat fingerprint, and the
	// front's stamp of a null build with it.
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, d.FakePullSecret) {
		if err := cache.WriteFileAtomic(path, d.FakePullSecret, 0o600); err != nil {
			return err
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	c.cfg.Access.PullSecretFile = abs
	if fresh {
		fmt.Fprintf(c.stderr, "labbuild: %s payload and no pull secret file: using the fake pull secret OKD documents (okd-project/okd README); its images pull without credentials\n", d.Release)
	}
	return nil
}
