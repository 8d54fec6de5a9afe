// Package rehearsal runs labbuild's node Ignition configs without a guest OS: it places a
// config's storage files and systemd units under a per-node root directory, then starts the
// node's programs (the bootstrap's static pods, a master's or worker's kubelet with containerd)
// in a network namespace at the node's lab IP and a private mount namespace in which the node
// root is overlaid on the host's /etc, /var, /opt and /usr/local. The node so sees its files at
// their node paths (/etc/kubernetes/kubeconfig, /etc/kubernetes/manifests/…) and no flag or
// file written by labbuild is rewritten. What stands in for the guest OS is listed in
// docs/rehearsal.md.
package rehearsal

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/coreos/ignition/v2/config/merge"
	"github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/labbuild/labbuild/render/ignition"
)

// Placed is what Place wrote: node paths of files, and units by name (contents after the
// config's drop-ins, which are also written to <unit>.d/).
type Placed struct {
	Files []string
	Units map[string]Unit
}

// Unit is one systemd unit of the config.
type Unit struct {
	Name     string
	Contents string
	Enabled  bool
	// Dropins are the drop-in files' contents, in name order.
	Dropins []string
}

// Resolve parses the Ignition config raw and merges the configs its ignition.config.merge
// names, as Ignition's fetch stage renders a config (coreos/ignition internal/exec/engine.go
// renderConfig: each referenced config fetched and merged over the current one, child over
// parent, with config/merge's rules): what a single node's master.ign needs, whose
// bootstrap-in-place.sh merges the master's own config inline (master-update.fcc's
// `merge: local: original-master.ign`). Only data URLs are fetched: a lab's Ignition is
// self-contained.
func Resolve(raw []byte) (types.Config, error) {
	cfg, err := ignition.Parse(raw)
	if err != nil {
		return types.Config{}, err
	}
	refs := cfg.Ignition.Config.Merge
	cfg.Ignition.Config.Merge = nil
	for i, r := range refs {
		if r.Source == nil || !strings.HasPrefix(*r.Source, "data:") {
			return types.Config{}, fmt.Errorf("rehearsal: ignition.config.merge[%d]: only data URLs are fetched here", i)
		}
		b, err := ignition.DecodeSource(*r.Source, r.Compression)
		if err != nil {
			return types.Config{}, fmt.Errorf("rehearsal: ignition.config.merge[%d]: %w", i, err)
		}
		child, err := Resolve(b)
		if err != nil {
			return types.Config{}, fmt.Errorf("rehearsal: ignition.config.merge[%d]: %w", i, err)
		}
		merged, _ := merge.MergeStructTranscribe(cfg, child)
		cfg = merged.(types.Config)
	}
	return cfg, nil
}

// Overlaid are the host directories a node's root is overlaid on (root/etc over /etc …); a
// storage file outside them is an error from Place, since the node could not see it.
var Overlaid = []string{"/etc", "/var", "/opt", "/usr/local"}

// Place writes the Ignition config raw (JSON, spec 3.x, as labbuild's ignition/<node> writes
// it) under root: every storage file at root+path with its mode, directories and links, and
// each systemd unit at root/etc/systemd/system/<name> (drop-ins in <name>.d/). It decodes data
// URLs and gzip compression as Ignition does (render/ignition.DecodeSource). A remote source
// (http, s3 …) is an error: a lab's Ignition is self-contained.
func Place(raw []byte, root string) (*Placed, error) {
	cfg, err := Resolve(raw)
	if err != nil {
		return nil, err
	}
	under := func(p string) (string, error) {
		p = path.Clean(p)
		for _, o := range Overlaid {
			if p == o || strings.HasPrefix(p, o+"/") {
				return filepath.Join(root, filepath.FromSlash(p)), nil
			}
		}
		return "", fmt.Errorf("rehearsal: %s is outside %v: the node could not see it", p, Overlaid)
	}
	out := &Placed{Units: map[string]Unit{}}
	for _, d := range cfg.Storage.Directories {
		p, err := under(d.Path)
		if err != nil {
			return nil, err
		}
		mode := os.FileMode(0o755)
		if d.Mode != nil {
			mode = os.FileMode(*d.Mode)
		}
		if err := os.MkdirAll(p, mode); err != nil {
			return nil, err
		}
	}
	for _, f := range cfg.Storage.Files {
		p, err := under(f.Path)
		if err != nil {
			return nil, err
		}
		var data []byte
		if f.Contents.Source != nil {
			data, err = ignition.DecodeSource(*f.Contents.Source, f.Contents.Compression)
			if err != nil {
				return nil, fmt.Errorf("rehearsal: %s: %w", f.Path, err)
			}
		}
		for _, a := range f.Append {
			if a.Source == nil {
				continue
			}
			b, err := ignition.DecodeSource(*a.Source, a.Compression)
			if err != nil {
				return nil, fmt.Errorf("rehearsal: %s (append): %w", f.Path, err)
			}
			data = append(data, b...)
		}
		mode := os.FileMode(0o644)
		if f.Mode != nil {
			mode = os.FileMode(*f.Mode)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, data, mode); err != nil {
			return nil, err
		}
		if err := os.Chmod(p, mode); err != nil {
			return nil, err
		}
		out.Files = append(out.Files, f.Path)
	}
	for _, l := range cfg.Storage.Links {
		p, err := under(l.Path)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if l.Target == nil {
			continue
		}
		os.Remove(p)
		if err := os.Symlink(*l.Target, p); err != nil {
			return nil, err
		}
	}
	unitDir := filepath.Join(root, "etc", "systemd", "system")
	var presets []string
	for _, u := range cfg.Systemd.Units {
		unit := Unit{Name: u.Name, Enabled: u.Enabled != nil && *u.Enabled}
		if u.Contents != nil {
			unit.Contents = *u.Contents
			if err := os.MkdirAll(unitDir, 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(unitDir, u.Name), []byte(unit.Contents), 0o644); err != nil {
				return nil, err
			}
		}
		ds := append(u.Dropins[:0:0], u.Dropins...)
		sort.Slice(ds, func(i, j int) bool { return ds[i].Name < ds[j].Name })
		for _, d := range ds {
			if d.Contents == nil {
				continue
			}
			dir := filepath.Join(unitDir, u.Name+".d")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(dir, d.Name), []byte(*d.Contents), 0o644); err != nil {
				return nil, err
			}
			unit.Dropins = append(unit.Dropins, *d.Contents)
		}
		// Ignition's createUnits (github.com/coreos/ignition/v2 internal/exec/stages/files
		// units.go, util/unit.go): enabled: true becomes an "enable" line of its preset file,
		// which systemd applies on the first boot (preset-all); enabled: false writes a
		// "disable" line only for a unit the OS image already enabled (DisableUnit), which a
		// unit Ignition writes is not; mask: true replaces the unit by a link to /dev/null
		// (MaskUnit). The machine-config daemon's first-boot check reads both (firstboot.go).
		if u.Enabled != nil && *u.Enabled {
			presets = append(presets, "enable "+u.Name+"\n")
		}
		if u.Mask != nil && *u.Mask {
			if err := os.MkdirAll(unitDir, 0o755); err != nil {
				return nil, err
			}
			p := filepath.Join(unitDir, u.Name)
			os.Remove(p)
			if err := os.Symlink("/dev/null", p); err != nil {
				return nil, err
			}
		}
		out.Units[u.Name] = unit
	}
	if len(presets) > 0 {
		// createSystemdPresetFiles: one line per unit, in the units' name order.
		sort.Slice(presets, func(i, j int) bool { return strings.Fields(presets[i])[1] < strings.Fields(presets[j])[1] })
		dir := filepath.Join(root, filepath.FromSlash(presetDir))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "20-ignition.preset"), []byte(strings.Join(presets, "")), 0o644); err != nil {
			return nil, err
		}
	}
	sort.Strings(out.Files)
	return out, nil
}
