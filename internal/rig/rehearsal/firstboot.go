package rehearsal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/labbuild/labbuild/render/ignition"
)

// The machine-config daemon's first boot on a rehearsal node (issue 38, stall 1). On its first
// run the daemon (MCO release-4.18 pkg/daemon/daemon.go checkStateOnFirstRun) reads the node's
// currentConfig from /etc/machine-config-daemon/node-annotations.json, gets that MachineConfig
// from the cluster (getStateAndConfigs → mcLister.Get) and validates the node's disk against it
// (pkg/daemon/on_disk_validation.go validateOnDiskState). The rehearsal keeps each kubelet
// node's disk as Place left it — what Ignition wrote, before the rehearsal's own host
// overrides (OverrideKubeletConf) touch kubelet.conf — in a copy (SnapshotRoot); the flow reads
// the MachineConfig from the cluster by that name and runs labbuild's one implementation of the
// daemon's checks (render/ignition FirstBoot) over the copy, described to it by DiskIgnition.

// FirstBootSuffix is appended to a node root's path for its first-boot copy.
const FirstBootSuffix = ".firstboot"

// SnapshotRoot copies the node root as it is (cp -a: modes, symlinks, owners) to
// root+FirstBootSuffix, replacing an older copy.
func SnapshotRoot(root string) error {
	dst := root + FirstBootSuffix
	os.RemoveAll(dst)
	if out, err := exec.Command("cp", "-a", root, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("rehearsal: first-boot copy of %s: %w: %s", root, err, bytes.TrimSpace(out))
	}
	return nil
}

// CurrentConfig reads the currentConfig annotation from the node-annotations.json under root
// (ignition.PathNodeAnnotations), as the daemon does on its first run.
func CurrentConfig(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(ignition.PathNodeAnnotations)))
	if err != nil {
		return "", fmt.Errorf("rehearsal: %w", err)
	}
	var anno map[string]string
	if err := json.Unmarshal(b, &anno); err != nil {
		return "", fmt.Errorf("rehearsal: %s: %w", ignition.PathNodeAnnotations, err)
	}
	name := anno["machineconfiguration.openshift.io/currentConfig"]
	if name == "" {
		return "", fmt.Errorf("rehearsal: %s names no currentConfig", ignition.PathNodeAnnotations)
	}
	return name, nil
}

// DiskIgnition describes the disk under root, at every path the daemon's validation of mc reads
// (mc's files, its units and their drop-ins under /etc/systemd/system, and
// node-annotations.json), as an Ignition config that lays exactly that disk: a regular file is a
// storage file with its bytes and mode (setuid, setgid and sticky bits as Ignition's mode
// integer has them), a symlink a link (a masked unit: to /dev/null), a directory a directory;
// an absent path is absent. A unit of mc that systemd would report enabled on this disk —
// a symlink to it in a *.wants directory, or, as the first boot's `systemctl preset-all` makes
// it, the first matching line of the preset files (/etc/systemd/system-preset/*.preset, name
// order) saying enable — is a unit with enabled: true and no contents, which lays nothing but
// the enablement. Any other type of file is an error.
func DiskIgnition(root string, mc types.Config) (types.Config, error) {
	cfg := ignition.New()
	seen := map[string]bool{}
	add := func(p string) error {
		if seen[p] {
			return nil
		}
		seen[p] = true
		hp := filepath.Join(root, filepath.FromSlash(p))
		fi, err := os.Lstat(hp)
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("rehearsal: %w", err)
		}
		mode := int(fi.Mode().Perm())
		if fi.Mode()&fs.ModeSetuid != 0 {
			mode |= syscall.S_ISUID
		}
		if fi.Mode()&fs.ModeSetgid != 0 {
			mode |= syscall.S_ISGID
		}
		if fi.Mode()&fs.ModeSticky != 0 {
			mode |= syscall.S_ISVTX
		}
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(hp)
			if err != nil {
				return fmt.Errorf("rehearsal: %w", err)
			}
			src, comp := ignition.Source(b)
			f := types.File{Node: types.Node{Path: p}}
			f.Mode = &mode
			f.Contents.Source, f.Contents.Compression = &src, comp
			cfg.Storage.Files = append(cfg.Storage.Files, f)
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(hp)
			if err != nil {
				return fmt.Errorf("rehearsal: %w", err)
			}
			cfg.Storage.Links = append(cfg.Storage.Links, types.Link{Node: types.Node{Path: p}, LinkEmbedded1: types.LinkEmbedded1{Target: &t}})
		case fi.IsDir():
			cfg.Storage.Directories = append(cfg.Storage.Directories, types.Directory{Node: types.Node{Path: p}, DirectoryEmbedded1: types.DirectoryEmbedded1{Mode: &mode}})
		default:
			return fmt.Errorf("rehearsal: %s on the node is a %v, which Ignition does not write", p, fi.Mode().Type())
		}
		return nil
	}
	if err := add(ignition.PathNodeAnnotations); err != nil {
		return cfg, err
	}
	for _, f := range mc.Storage.Files {
		if err := add(f.Path); err != nil {
			return cfg, err
		}
	}
	presets, err := readPresets(root)
	if err != nil {
		return cfg, err
	}
	for _, u := range mc.Systemd.Units {
		for _, d := range u.Dropins {
			if err := add(path.Join(systemdUnitDir, u.Name+".d", d.Name)); err != nil {
				return cfg, err
			}
		}
		if err := add(path.Join(systemdUnitDir, u.Name)); err != nil {
			return cfg, err
		}
		if unitEnabled(root, u.Name, presets) {
			on := true
			cfg.Systemd.Units = append(cfg.Systemd.Units, types.Unit{Name: u.Name, Enabled: &on})
		}
	}
	return cfg, nil
}

// systemdUnitDir is where Ignition writes units and the daemon checks them (pathSystemd).
const systemdUnitDir = "/etc/systemd/system"

// presetDir is where Ignition writes its presets (20-ignition.preset) and RHCOS keeps its own.
const presetDir = "/etc/systemd/system-preset"

// readPresets returns the preset lines ("enable x.service", "disable x.service") of the preset
// files under root, files in name order, lines in file order.
func readPresets(root string) ([][2]string, error) {
	files, _ := filepath.Glob(filepath.Join(root, presetDir, "*.preset"))
	sort.Strings(files)
	var out [][2]string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("rehearsal: %w", err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 2 && (fs[0] == "enable" || fs[0] == "disable") {
				out = append(out, [2]string{fs[0], fs[1]})
			}
		}
	}
	return out, nil
}

// unitEnabled is what `systemctl is-enabled` says on the node after its first boot: a *.wants
// link names the unit, or the first preset line matching it says enable.
func unitEnabled(root, unit string, presets [][2]string) bool {
	if links, _ := filepath.Glob(filepath.Join(root, systemdUnitDir, "*.wants", unit)); len(links) > 0 {
		return true
	}
	for _, p := range presets {
		if ok, _ := path.Match(p[1], unit); ok {
			return p[0] == "enable"
		}
	}
	return false
}
