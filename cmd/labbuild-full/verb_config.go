package main

import (
	"context"
	"fmt"
	"os"

	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets"
)

// runInit writes the embedded default lab config to lab.yaml (or -f), never over a file.
func runInit(ctx context.Context, c *cli, args []string) error {
	path := c.file
	if path == "" {
		path = "lab.yaml"
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if os.IsExist(err) {
		return usagef("init: %s exists; remove it or pass -f other.yaml", path)
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(lab.DefaultLabYAML()); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "labbuild: wrote %s for OpenShift %s, the newest release labbuild builds; edit it, then run labbuild\n", path, targets.NewestRelease)
	fmt.Fprintf(c.stdout, "labbuild: another release is another release.image (labbuild builds %s): e.g.\n"+
		"  image: quay.io/openshift-release-dev/ocp-release:4.20.8-x86_64   # OpenShift 4.20\n"+
		"  image: quay.io/okd/scos-release:4.22.0-okd-scos.1                # OKD 4.22: no pull secret needed\n"+
		"docs/releases.md says what differs between them\n", targets.SupportedReleases())
	return nil
}

// runConfig prints the effective, validated lab config, secrets redacted: YAML, or --json.
func runConfig(ctx context.Context, c *cli, args []string) error {
	if _, err := c.options(nil); err != nil {
		return err
	}
	cfg := c.cfg // nil with --synthetic
	if cfg == nil {
		return usagef("config: no lab config with --synthetic")
	}
	if c.json {
		b, err := cfg.RedactedJSON()
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(append(b, '\n'))
		return err
	}
	b, err := cfg.Redacted()
	if err != nil {
		return err
	}
	_, err = c.stdout.Write(b)
	return err
}
