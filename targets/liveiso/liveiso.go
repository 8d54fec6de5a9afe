// Package liveiso reads and rewrites the kernel arguments a CoreOS live ISO boots with, as
// coreos-installer's `iso kargs modify` does (coreos/coreos-installer src/live/embed.rs
// KargEmbedAreas, KargEmbedInfo; src/iso9660.rs): the ISO lists in coreos/kargs.json the files
// and offsets of its karg embed areas (the bootloaders' configs: the same arguments at each),
// each Size bytes, holding the arguments, a newline and '#' padding. A single-node lab boots
// the live ISO with ignition.platform.id=qemu there, so that Ignition reads the node's config
// from QEMU's fw_cfg as labbuild's other nodes do (docs/sno.md says why).
//
// It reads the ISO 9660 directory records only (Primary Volume Descriptor, root directory,
// subdirectories), which is what coreos-installer's IsoFs walks.
package liveiso

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// sector is an ISO 9660 logical block (ECMA-119 6.1.2: 2048 bytes on every ISO that boots).
const sector = 2048

// KargsInfoPath is coreos/kargs.json by its ISO 9660 name, 8.3 as the primary volume
// descriptor's records name it (coreos-installer COREOS_KARG_EMBED_INFO_PATH).
const KargsInfoPath = "COREOS/KARGS.JSO"

// maxKargsSize bounds an embed area (coreos-installer COREOS_KARG_EMBED_AREA_MAX_SIZE).
const maxKargsSize = 2048

// ErrNotFound is returned for a path the ISO does not have.
var ErrNotFound = errors.New("not found in the ISO")

// File is a file of the ISO: its byte offset in the image and its length.
type File struct{ Offset, Length int64 }

// Find returns the file at path (slash-separated, case-insensitive, without the ";1"
// version), walking the directory records from the Primary Volume Descriptor.
func Find(r io.ReaderAt, path string) (File, error) {
	pvd := make([]byte, sector)
	if _, err := r.ReadAt(pvd, 16*sector); err != nil {
		return File{}, fmt.Errorf("reading the volume descriptor: %w", err)
	}
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" {
		return File{}, errors.New("not an ISO 9660 image (no primary volume descriptor at sector 16)")
	}
	dir, isDir := record(pvd[156:190])
	if !isDir {
		return File{}, errors.New("the root directory record is not a directory")
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, name := range parts {
		next, nextDir, err := lookup(r, dir, name)
		if err != nil {
			return File{}, fmt.Errorf("%s: %w", path, err)
		}
		if last := i == len(parts)-1; last == nextDir {
			return File{}, fmt.Errorf("%s: %s is %s", path, name, map[bool]string{true: "a directory", false: "not a directory"}[nextDir])
		}
		dir = next
	}
	return dir, nil
}

// record decodes a directory record's extent, length and directory flag (ECMA-119 9.1).
func record(b []byte) (File, bool) {
	lba := binary.LittleEndian.Uint32(b[2:6])
	n := binary.LittleEndian.Uint32(b[10:14])
	return File{Offset: int64(lba) * sector, Length: int64(n)}, b[25]&2 != 0
}

// lookup finds name in directory dir. Records do not cross sectors; a zero length byte ends a
// sector's records.
func lookup(r io.ReaderAt, dir File, name string) (File, bool, error) {
	data := make([]byte, dir.Length)
	if _, err := r.ReadAt(data, dir.Offset); err != nil {
		return File{}, false, fmt.Errorf("reading a directory: %w", err)
	}
	for off := 0; off < len(data); {
		n := int(data[off])
		if n == 0 {
			off = (off/sector + 1) * sector
			continue
		}
		if n < 34 || off+n > len(data) {
			return File{}, false, errors.New("a malformed directory record")
		}
		rec := data[off : off+n]
		id := string(rec[33 : 33+int(rec[32])])
		if i := strings.IndexByte(id, ';'); i >= 0 {
			id = id[:i]
		}
		id = strings.TrimSuffix(id, ".")
		if strings.EqualFold(id, name) {
			f, isDir := record(rec)
			return f, isDir, nil
		}
		off += n
	}
	return File{}, false, fmt.Errorf("%s: %w", name, ErrNotFound)
}

// Kargs is what a live ISO's kernel-argument embed areas hold.
type Kargs struct {
	// Default is the arguments the ISO was built with (kargs.json "default").
	Default string
	// Current is what the areas hold now (the same at every area).
	Current string
	// Size is each area's length in bytes.
	Size  int
	areas []area
}

type area struct {
	offset   int64
	pad, end byte
}

// kargsInfo is coreos/kargs.json (coreos-installer KargEmbedInfo).
type kargsInfo struct {
	Default string `json:"default"`
	Files   []struct {
		Path   string  `json:"path"`
		Offset int64   `json:"offset"`
		Pad    *string `json:"pad"`
		End    *string `json:"end"`
	} `json:"files"`
	Size int `json:"size"`
}

// ReadKargs reads the ISO's karg embed areas (coreos-installer KargEmbedAreas::for_iso): every
// area must hold the same arguments.
func ReadKargs(r io.ReaderAt) (*Kargs, error) {
	f, err := Find(r, KargsInfoPath)
	if err != nil {
		return nil, fmt.Errorf("not a CoreOS live ISO with karg embed areas: %w", err)
	}
	raw := make([]byte, f.Length)
	if _, err := r.ReadAt(raw, f.Offset); err != nil {
		return nil, err
	}
	var info kargsInfo
	if err := json.Unmarshal(bytes.TrimRight(raw, " \x00"), &info); err != nil {
		return nil, fmt.Errorf("%s: %w", KargsInfoPath, err)
	}
	if info.Size <= 0 || info.Size > maxKargsSize || len(info.Files) == 0 {
		return nil, fmt.Errorf("%s: size %d and %d areas: want 1-%d bytes and at least one area", KargsInfoPath, info.Size, len(info.Files), maxKargsSize)
	}
	k := &Kargs{Default: info.Default, Size: info.Size}
	for i, loc := range info.Files {
		cf, err := Find(r, loc.Path)
		if err != nil {
			return nil, err
		}
		if loc.Offset < 0 || loc.Offset+int64(info.Size) > cf.Length {
			return nil, fmt.Errorf("%s: area %d of %s is outside the file", KargsInfoPath, i, loc.Path)
		}
		a := area{offset: cf.Offset + loc.Offset, pad: '#', end: '\n'}
		if loc.Pad != nil && len(*loc.Pad) == 1 {
			a.pad = (*loc.Pad)[0]
		}
		if loc.End != nil && len(*loc.End) == 1 {
			a.end = (*loc.End)[0]
		}
		b := make([]byte, info.Size)
		if _, err := r.ReadAt(b, a.offset); err != nil {
			return nil, err
		}
		cur := strings.TrimSpace(strings.TrimRight(strings.TrimRight(string(b), string(a.pad)), string(a.end)))
		if i == 0 {
			k.Current = cur
		} else if cur != k.Current {
			return nil, fmt.Errorf("%s: the karg areas differ (%q at %s, %q at the first)", KargsInfoPath, cur, loc.Path, k.Current)
		}
		k.areas = append(k.areas, a)
	}
	return k, nil
}

// Write puts kargs into every area of the ISO at w, as coreos-installer's set_kargs: the
// arguments, the area's end character, padding to the area's size.
func (k *Kargs) Write(w io.WriterAt, kargs string) error {
	kargs = strings.TrimSpace(kargs)
	if len(kargs) >= k.Size {
		return fmt.Errorf("kernel arguments of %d bytes do not fit the ISO's %d-byte karg areas", len(kargs)+1, k.Size)
	}
	for _, a := range k.areas {
		b := bytes.Repeat([]byte{a.pad}, k.Size)
		copy(b, kargs+string(a.end))
		if _, err := w.WriteAt(b, a.offset); err != nil {
			return err
		}
	}
	k.Current = kargs
	return nil
}

// Platform karg values: Ignition's platform id (coreos/ignition internal/platform).
const (
	platformKarg = "ignition.platform.id="
	PlatformQEMU = "qemu"
)

// SerialConsole is the console argument added to the live kernel: the guest's serial port,
// which `labbuild console` and `virsh console` show.
const SerialConsole = "console=ttyS0,115200n8"

// QEMUKargs returns kargs with Ignition's platform set to qemu (the live ISO's is metal, whose
// Ignition reads no fw_cfg) and the serial console added. kargs must name a platform once.
func QEMUKargs(kargs string) (string, error) {
	fields := strings.Fields(kargs)
	n := 0
	for i, f := range fields {
		if strings.HasPrefix(f, platformKarg) {
			fields[i] = platformKarg + PlatformQEMU
			n++
		}
	}
	if n != 1 {
		return "", fmt.Errorf("the live ISO's kernel arguments name %d Ignition platforms (%s), want one: %q", n, platformKarg, kargs)
	}
	if !strings.Contains(" "+kargs+" ", " "+SerialConsole+" ") {
		fields = append(fields, SerialConsole)
	}
	return strings.Join(fields, " "), nil
}
