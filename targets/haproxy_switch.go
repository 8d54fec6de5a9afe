package targets

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/targets/hostexec"
)

// How cluster/pivot switches the host load balancer to the post-pivot configuration (the
// cluster family's ClusterBalancer): labbuild's own haproxy soft-reloaded, or a system
// haproxy's file replaced and reloaded.

// hpReloadBalancer is cluster/pivot's default ClusterBalancer: it soft-reloads labbuild's own
// haproxy (the one haproxy/service started, found by its configuration under the haproxy
// family's output directory) with the post-pivot configuration. A host that runs haproxy
// under systemd instead (no labbuild haproxy running) gets OTHW's manual step: the file
// installed at /etc/haproxy/haproxy.cfg and systemctl reload.
type hpReloadBalancer struct{}

func (hpReloadBalancer) Switch(ctx context.Context, cfgFile string) error {
	old := hostexec.HAProxyRunningFrom(hpFamilyDir(cfgFile))
	if len(old) == 0 {
		return haproxyFileBalancer{path: "/etc/haproxy/haproxy.cfg"}.Switch(ctx, cfgFile)
	}
	dir, err := os.MkdirTemp("", "labbuild-haproxy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err = hpCommand.HAProxyReload(cfgFile, filepath.Join(dir, "haproxy.pid"), old); err != nil {
		return err
	}
	if err := hpNoteServing(cfgFile); err != nil {
		return err
	}
	// Remembered for haproxy/service: past the pivot it never goes back to the bootstrap's
	// config (written after the reload succeeded, so a failed switch leaves no marker).
	return os.WriteFile(filepath.Join(hpFamilyDir(cfgFile), hpPivotMarker), []byte(hpPhasePostPivot+"\n"), 0o644)
}

// haproxyFileBalancer installs a configuration file at path and reloads haproxy, the manual
// step of OTHW's execute-pivot.sh (edit /etc/haproxy/haproxy.cfg; systemctl reload haproxy).
// It checks the file with `haproxy -c` first, so a bad config never replaces a good one.
// hpReloadBalancer uses it when no labbuild haproxy runs.
type haproxyFileBalancer struct{ path string }

func (h haproxyFileBalancer) Switch(ctx context.Context, cfgFile string) error {
	if out, err := exec.CommandContext(ctx, "haproxy", "-c", "-f", cfgFile).CombinedOutput(); err != nil {
		return fmt.Errorf("haproxy -c -f %s: %w: %.300s", cfgFile, err, out)
	}
	b, err := os.ReadFile(cfgFile)
	if err != nil {
		return err
	}
	if err := engine.WriteFileAtomic(h.path, b, 0o644); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "systemctl", "reload", "haproxy").CombinedOutput(); err != nil {
		return fmt.Errorf("systemctl reload haproxy: %w: %.300s (reload it by hand: %s is in place)", err, out, filepath.Clean(h.path))
	}
	return nil
}
