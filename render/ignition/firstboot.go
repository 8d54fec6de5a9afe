package ignition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/coreos/ignition/v2/config/v3_4/types"
)

// The machine-config daemon's first boot, as a pure check over two configs.
//
// On its first run on a node the daemon (MCO release-4.18 pkg/daemon/daemon.go
// checkStateOnFirstRun) reads the node's currentConfig from
// /etc/machine-config-daemon/node-annotations.json, gets that MachineConfig
// (getStateAndConfigs → mcLister.Get) and validates the node's disk against it
// (validateOnDiskStateOrImage → pkg/daemon/on_disk_validation.go validateOnDiskState: checkV3Files,
// then checkV3Units). A difference makes the node Degraded with "unexpected on-disk state
// validating against <name>: <first difference>", its pool Degraded, and the install never
// completes. FirstBoot lays a node's Ignition config on an in-memory root as Ignition's files
// stage does (github.com/coreos/ignition/v2 internal/exec/stages/files: files, directories and
// links, then units: createUnits, writeSystemdUnit, util.MaskUnit, the preset) and runs the same
// checks over it, in the same order, with the same messages.

// Daemon paths and defaults (MCO release-4.18 pkg/daemon).
const (
	// fbSystemdPath is pathSystemd (daemon.go), where units and drop-ins are checked.
	fbSystemdPath = "/etc/systemd/system"
	// fbDevNull is pathDevNull (daemon.go), what a masked unit resolves to.
	fbDevNull = "/dev/null"
	// fbDefaultMode is defaultFilePermissions (update.go): the expected mode of a file without
	// one, of every unit and drop-in; also Ignition's DefaultFilePermissions
	// (internal/exec/util/file.go), the mode it writes such a file with.
	fbDefaultMode os.FileMode = 0o644
	// fbDefaultDirMode is Ignition's DefaultDirectoryPermissions.
	fbDefaultDirMode os.FileMode = 0o755
)

// FirstBootIgnored are the paths checkV3Files skips (on_disk_validation.go getFilesToIgnore):
// caBundleFilePath and cloudCABundleFilePath (daemon.go), which the certificate writer owns,
// and internalRegistryAuthFile (image_manager_helper.go).
var FirstBootIgnored = map[string]bool{
	"/etc/kubernetes/kubelet-ca.crt":                                             true,
	"/etc/kubernetes/static-pod-resources/configmaps/cloud-config/ca-bundle.pem": true,
	"/etc/mco/internal-registry-pull-secret.json":                                true,
}

// FirstBootError is the daemon's verdict on a node whose disk differs from its rendered
// config: Config is the MachineConfig's name, Err the first difference, worded as the daemon
// words it.
type FirstBootError struct {
	Config string
	Err    error
}

func (e *FirstBootError) Error() string {
	return fmt.Sprintf("unexpected on-disk state validating against %s: %v", e.Config, e.Err)
}

func (e *FirstBootError) Unwrap() error { return e.Err }

// FirstBoot reports whether the machine-config daemon accepts, on its first run, a node that
// booted with the Ignition config node (its files, directories, links and units, laid as
// Ignition lays them on an empty root) against the rendered MachineConfig mc: nil, or a
// *FirstBootError naming the first difference (for /var/lib/kubelet/config.json:
// `content mismatch for file "/var/lib/kubelet/config.json"`). The node's
// node-annotations.json must name mc as its currentConfig, as the daemon needs on first boot.
//
// What the daemon does not look at is not looked at: owners, files the MachineConfig lacks,
// directories, Ignition's overwrite, and a unit's enabled: true (checkUnitEnabled reads
// `systemctl is-enabled` through runGetOut, which returns no output when systemctl exits
// non-zero, as it does for a disabled unit).
func FirstBoot(node types.Config, mc *RenderedMachineConfig) error {
	root, err := layRoot(node)
	if err != nil {
		return fmt.Errorf("laying the node's Ignition: %w", err)
	}
	if err := root.currentConfig(mc.Name); err != nil {
		return err
	}
	if err := root.checkFiles(mc.Config.Storage.Files); err != nil {
		return &FirstBootError{Config: mc.Name, Err: err}
	}
	if err := root.checkUnits(mc.Config.Systemd.Units); err != nil {
		return &FirstBootError{Config: mc.Name, Err: err}
	}
	return nil
}

// fbEntry is one path of a laid root: a regular file (data), a directory or a symlink
// (target), with the mode Lstat would report.
type fbEntry struct {
	mode   os.FileMode
	data   []byte
	target string
}

// fbRoot is a node's root after Ignition's files stage: its paths, and the units Ignition's
// preset enables or disables.
type fbRoot struct {
	paths   map[string]*fbEntry
	enabled map[string]bool
}

// layRoot lays cfg as Ignition's files stage does on an empty root: files (append concatenates,
// mode as util.ToFileMode converts it, default 0644), directories, links, then each unit's
// drop-ins with contents, its contents if not empty (0644), its mask (util.MaskUnit: remove,
// then a symlink to /dev/null) and its enabled state (the 20-ignition.preset line).
func layRoot(cfg types.Config) (*fbRoot, error) {
	r := &fbRoot{paths: map[string]*fbEntry{}, enabled: map[string]bool{}}
	for _, f := range cfg.Storage.Files {
		var data []byte
		if f.Contents.Source != nil {
			b, err := DecodeSource(*f.Contents.Source, f.Contents.Compression)
			if err != nil {
				return nil, fmt.Errorf("file %s: %w", f.Path, err)
			}
			data = b
		}
		for _, a := range f.Append {
			if a.Source == nil {
				continue
			}
			b, err := DecodeSource(*a.Source, a.Compression)
			if err != nil {
				return nil, fmt.Errorf("file %s: append: %w", f.Path, err)
			}
			data = append(data, b...)
		}
		mode := fbDefaultMode
		if f.Mode != nil {
			mode = ignitionFileMode(*f.Mode)
		}
		r.paths[f.Path] = &fbEntry{mode: mode, data: data}
	}
	for _, d := range cfg.Storage.Directories {
		mode := fbDefaultDirMode
		if d.Mode != nil {
			mode = ignitionFileMode(*d.Mode)
		}
		r.paths[d.Path] = &fbEntry{mode: fs.ModeDir | mode}
	}
	for _, l := range cfg.Storage.Links {
		if l.Target == nil {
			continue
		}
		if l.Hard != nil && *l.Hard {
			if t := r.paths[*l.Target]; t != nil {
				r.paths[l.Path] = t
			}
			continue
		}
		r.paths[l.Path] = &fbEntry{mode: fs.ModeSymlink | 0o777, target: *l.Target}
	}
	for _, u := range cfg.Systemd.Units {
		for _, d := range u.Dropins {
			if d.Contents == nil {
				continue // writeSystemdUnit skips a drop-in without contents
			}
			r.paths[path.Join(fbSystemdPath, u.Name+".d", d.Name)] = &fbEntry{mode: fbDefaultMode, data: []byte(*d.Contents)}
		}
		unitPath := path.Join(fbSystemdPath, u.Name)
		if u.Contents != nil && *u.Contents != "" {
			r.paths[unitPath] = &fbEntry{mode: fbDefaultMode, data: []byte(*u.Contents)}
		}
		if u.Enabled != nil {
			r.enabled[u.Name] = *u.Enabled
		}
		if u.Mask != nil && *u.Mask {
			r.paths[unitPath] = &fbEntry{mode: fs.ModeSymlink | 0o777, target: fbDevNull}
		}
	}
	return r, nil
}

// ignitionFileMode is Ignition's util.ToFileMode: permission bits, and the setuid, setgid and
// sticky bits as Go's mode flags.
func ignitionFileMode(m int) os.FileMode {
	res := os.FileMode(uint32(m) & 0o777)
	if m&syscall.S_ISGID != 0 {
		res |= os.ModeSetgid
	}
	if m&syscall.S_ISUID != 0 {
		res |= os.ModeSetuid
	}
	if m&syscall.S_ISVTX != 0 {
		res |= os.ModeSticky
	}
	return res
}

// currentConfig checks what getStateAndConfigs reads on a first boot: the currentConfig of
// node-annotations.json (constants.InitialNodeAnnotationsFilePath), which must be the
// MachineConfig the node is checked against (the daemon gets it from the cluster by that name).
func (r *fbRoot) currentConfig(name string) error {
	e := r.paths[PathNodeAnnotations]
	if e == nil || !e.mode.IsRegular() {
		return fmt.Errorf("%s is missing: the daemon finds no currentConfig on first boot", PathNodeAnnotations)
	}
	var anno map[string]string
	if err := json.Unmarshal(e.data, &anno); err != nil {
		return fmt.Errorf("%s: %w", PathNodeAnnotations, err)
	}
	if got := anno["machineconfiguration.openshift.io/currentConfig"]; got != name {
		return fmt.Errorf("%s names currentConfig %q, not the rendered config %q the node was built from", PathNodeAnnotations, got, name)
	}
	return nil
}

// lstat is os.Lstat on the root: the entry at p, or lstat's *fs.PathError.
func (r *fbRoot) lstat(p string) (*fbEntry, error) {
	if e := r.paths[p]; e != nil {
		return e, nil
	}
	if p == fbDevNull {
		return &fbEntry{mode: fs.ModeDevice | fs.ModeCharDevice | 0o666}, nil
	}
	return nil, &fs.PathError{Op: "lstat", Path: p, Err: syscall.ENOENT}
}

// evalSymlinks is filepath.EvalSymlinks of p on the root (links of the last component; at most
// 255 hops, as the kernel's).
func (r *fbRoot) evalSymlinks(p string) (string, error) {
	for range 255 {
		e, err := r.lstat(p)
		if err != nil {
			return "", err
		}
		if e.mode&fs.ModeSymlink == 0 {
			return p, nil
		}
		if path.IsAbs(e.target) {
			p = path.Clean(e.target)
		} else {
			p = path.Join(path.Dir(p), e.target)
		}
	}
	return "", errors.New("EvalSymlinks: too many links")
}

// checkFiles is checkV3Files: every file of the MachineConfig but the ignored ones, in order,
// must have its bytes and mode on disk; an append section is refused; the first difference
// ends the check.
func (r *fbRoot) checkFiles(files []types.File) error {
	for _, f := range files {
		if FirstBootIgnored[f.Path] {
			continue
		}
		if len(f.Append) > 0 {
			return fmt.Errorf("found an append section when checking files. Append is not supported")
		}
		mode := fbDefaultMode
		if f.Mode != nil {
			mode = os.FileMode(*f.Mode)
		}
		var contents []byte
		if f.Contents.Source != nil {
			if f.Contents.Compression != nil && *f.Contents.Compression != "" && *f.Contents.Compression != "gzip" {
				return fmt.Errorf("couldn't decode file %q: unsupported compression type %q", f.Path, *f.Contents.Compression)
			}
			b, err := DecodeSource(*f.Contents.Source, f.Contents.Compression)
			if err != nil {
				return fmt.Errorf("couldn't decode file %q: %w", f.Path, err)
			}
			contents = b
		}
		if err := r.checkFileContentsAndMode(f.Path, contents, mode); err != nil {
			return err
		}
	}
	return nil
}

// checkUnits is checkV3Units: per unit its drop-ins (an empty one may be absent), then, if it
// has contents, its mask (resolving to /dev/null) or its bytes (0644) and its enabled state.
func (r *fbRoot) checkUnits(units []types.Unit) error {
	for _, u := range units {
		for _, d := range u.Dropins {
			p := path.Join(fbSystemdPath, u.Name+".d", d.Name)
			content := ""
			if d.Contents != nil {
				content = *d.Contents
			}
			if _, err := r.lstat(p); content == "" && err != nil {
				continue // "As of 4.7 we now remove any empty defined dropins"
			}
			if err := r.checkFileContentsAndMode(p, []byte(content), fbDefaultMode); err != nil {
				return err
			}
		}
		if u.Contents == nil || *u.Contents == "" {
			continue
		}
		p := path.Join(fbSystemdPath, u.Name)
		if u.Mask != nil && *u.Mask {
			link, err := r.evalSymlinks(p)
			if err != nil {
				return fmt.Errorf("state validation: error while evaluation symlink for path %q: %w", p, err)
			}
			if link != fbDevNull {
				return fmt.Errorf("state validation: invalid unit masked setting. path: %q; expected: %v; received: %v", p, fbDevNull, link)
			}
			continue
		}
		if err := r.checkFileContentsAndMode(p, []byte(*u.Contents), fbDefaultMode); err != nil {
			return err
		}
		// checkUnitEnabled: only enabled: false can fail (see FirstBoot). What Ignition does not
		// enable stays disabled: RHCOS presets every other unit off (99-default-disable.preset).
		if u.Enabled != nil && !*u.Enabled && r.enabled[u.Name] {
			return fmt.Errorf("unit %q expected enabled=false, but systemd reports %q", u.Name, "enabled")
		}
	}
	return nil
}

// checkFileContentsAndMode is the daemon's: Lstat's whole mode (type bits included) must equal
// mode, then the bytes must be equal.
func (r *fbRoot) checkFileContentsAndMode(p string, expected []byte, mode os.FileMode) error {
	e, err := r.lstat(p)
	if err != nil {
		return fmt.Errorf("could not stat file %q: %w", p, err)
	}
	if e.mode != mode {
		return fmt.Errorf("mode mismatch for file: %q; expected: %[2]v/%[2]d/%#[2]o; received: %[3]v/%[3]d/%#[3]o", p, mode, e.mode)
	}
	if !bytes.Equal(e.data, expected) {
		return fmt.Errorf("content mismatch for file %q", p)
	}
	return nil
}
