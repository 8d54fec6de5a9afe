// Package ignition builds the lab's Ignition configs (spec 3.4.0, the version MCO 4.18 renders:
// machine-config-operator pkg/controller/common/constants.go InternalMCOIgnitionVersion; a node
// config follows its rendered MachineConfig, 3.5.0 from 4.20: version.go) with the types of
// github.com/coreos/ignition/v2/config/v3_4/types, and checks them with Ignition's own parser of
// their declared version.
//
// It is pure: bytes and values in, bytes out. The targets (targets/ignition.go) decide which
// upstream outputs land at which path on the node.
//
// The one merge rule: an addition REPLACES an entry of the base config with the same path
// (files, directories and links share one key space, as in Ignition's ValidateDups over
// v3_4/types/storage.go MergedKeys) or, for systemd units, the same name. Two additions with
// the same key are a defect and an error: Ignition refuses a config with a duplicate path at
// boot ("duplicate entry defined"), which is how openshift-the-hard-way's jq append of
// /var/lib/kubelet/config.json broke (spec stages.md §8.5).
package ignition

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coreos/go-semver/semver"
	ignerrors "github.com/coreos/ignition/v2/config/shared/errors"
	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_4/types"
	"github.com/coreos/ignition/v2/config/validate"
	"github.com/coreos/vcontext/report"
)

// Version is the Ignition spec version of the configs this package makes from nothing (New);
// a config built on a rendered MachineConfig keeps that config's version (Version35).
const Version = "3.4.0"

// CompressThreshold is the content size in bytes from which a file is embedded gzip-compressed
// (Resource.Compression "gzip") instead of plain base64, when compression makes it smaller.
// The bootstrap config carries ~100 CRDs of 10–400 KiB each; compressed they shrink ~5x.
const CompressThreshold = 4096

// Mode bits used for node files (Ignition wants decimal ints: 420 = 0644, 384 = 0600).
const (
	ModeFile    = 0o644
	ModeSecret  = 0o600
	ModeExec    = 0o755
	ModeDir     = 0o755
	ModePrivDir = 0o700
)

// File is one file to put on a node: absolute Path, permission Mode (0o644...), Contents.
type File struct {
	Path     string
	Mode     int
	Contents []byte
}

// Dir is one directory to create on a node with permission Mode.
type Dir struct {
	Path string
	Mode int
}

// Link is a symbolic link at Path pointing to Target.
type Link struct {
	Path   string
	Target string
}

// Unit is a systemd unit: Contents may be empty for drop-in-only units. Enabled nil leaves
// the preset alone.
type Unit struct {
	Name     string
	Enabled  *bool
	Contents string
	Dropins  []Dropin
}

// Dropin is a systemd drop-in (<unit>.d/<Name>).
type Dropin struct {
	Name     string
	Contents string
}

// Additions are entries put on top of a base config by Apply.
type Additions struct {
	Files []File
	Dirs  []Dir
	Links []Link
	Units []Unit
	// SSHKeys, when non-empty, become user core's authorized keys (the user entry "core" is
	// replaced as a whole, like every other addition).
	SSHKeys []string
}

// DuplicateError reports two additions with the same key (a path, or a unit name).
type DuplicateError struct {
	Kind string // "path" or "unit"
	Key  string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("ignition: %s %q is added twice; every %s must appear once (Ignition refuses duplicates at boot)", e.Kind, e.Key, e.Kind)
}

// New returns an empty config of spec Version.
func New() types.Config {
	return types.Config{Ignition: types.Ignition{Version: Version}}
}

// Source returns the Ignition source (a data URL) and compression for data. Contents of at
// least CompressThreshold bytes are gzip-compressed when that makes them smaller; the gzip
// stream has no name or time, so equal inputs give equal bytes.
//
// Compressing at gzip.BestCompression is most of a config's cost, and the same contents recur
// across configs (the kubelet CA, kubeconfigs and MCS files of every master; the pool's files
// of each node), so the result for large contents is remembered by their SHA-256 for the life
// of the process (up to sourceMemoMax bytes of sources) and the gzip writers are reused.
func Source(data []byte) (source string, compression *string) {
	if len(data) < CompressThreshold {
		return plainSource(data), nil
	}
	key := sha256.Sum256(data)
	sourceMemo.Lock()
	m, ok := sourceMemo.m[key]
	sourceMemo.Unlock()
	if !ok {
		m = compressSource(data)
		sourceMemo.Lock()
		if sourceMemo.m == nil {
			sourceMemo.m = map[[sha256.Size]byte]memoSource{}
		}
		if sourceMemo.bytes+len(m.source) <= sourceMemoMax {
			sourceMemo.m[key] = m
			sourceMemo.bytes += len(m.source)
		}
		sourceMemo.Unlock()
	}
	if !m.gzip {
		return m.source, nil
	}
	gz := "gzip"
	return m.source, &gz
}

// sourceMemoMax bounds the memory Source's memo holds: a lab's configs carry a few MiB.
const sourceMemoMax = 64 << 20

var sourceMemo struct {
	sync.Mutex
	m     map[[sha256.Size]byte]memoSource
	bytes int
}

type memoSource struct {
	source string
	gzip   bool
}

var gzipWriters = sync.Pool{New: func() any {
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestCompression)
	return zw
}}

// compressSource is Source for large data without the memo.
func compressSource(data []byte) memoSource {
	var b bytes.Buffer
	b.Grow(len(data)/3 + 64)
	zw := gzipWriters.Get().(*gzip.Writer)
	zw.Reset(&b) // a reset writer writes what a new one at the same level would
	zw.Write(data)
	zw.Close()
	gzipWriters.Put(zw)
	if b.Len() < len(data) {
		const prefix = "data:;base64,"
		out := make([]byte, len(prefix)+base64.StdEncoding.EncodedLen(b.Len()))
		copy(out, prefix)
		base64.StdEncoding.Encode(out[len(prefix):], b.Bytes())
		return memoSource{source: string(out), gzip: true}
	}
	return memoSource{source: plainSource(data)}
}

// plainSource is the installer's encoding (pkg/asset/ignition: dataurl.EncodeBytes).
func plainSource(data []byte) string {
	const prefix = "data:text/plain;charset=utf-8;base64,"
	out := make([]byte, len(prefix)+base64.StdEncoding.EncodedLen(len(data)))
	copy(out, prefix)
	base64.StdEncoding.Encode(out[len(prefix):], data)
	return string(out)
}

// IgnFile converts f to an Ignition file entry owned by root with overwrite true, as the
// installer and the MCO write them.
func IgnFile(f File) types.File {
	src, comp := Source(f.Contents)
	mode := f.Mode
	return types.File{
		Node: types.Node{Path: f.Path, Overwrite: ptr(true), User: types.NodeUser{Name: ptr("root")}},
		FileEmbedded1: types.FileEmbedded1{
			Mode:     &mode,
			Contents: types.Resource{Source: &src, Compression: comp},
		},
	}
}

// ignFiles is IgnFile over files, in order. Large contents are compressed on every core: the
// bootstrap config's ~100 CRDs are most of its cost, and each one's bytes depend on it alone.
func ignFiles(files []File) []types.File {
	out := make([]types.File, len(files))
	var large []int
	for i, f := range files {
		if len(f.Contents) >= CompressThreshold {
			large = append(large, i)
			continue
		}
		out[i] = IgnFile(f)
	}
	workers := min(runtime.GOMAXPROCS(0), len(large))
	if workers <= 1 {
		for _, i := range large {
			out[i] = IgnFile(files[i])
		}
		return out
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				n := int(next.Add(1)) - 1
				if n >= len(large) {
					return
				}
				out[large[n]] = IgnFile(files[large[n]])
			}
		})
	}
	wg.Wait()
	return out
}

// IgnUnit converts u to an Ignition unit.
func IgnUnit(u Unit) types.Unit {
	out := types.Unit{Name: u.Name, Enabled: u.Enabled}
	if u.Contents != "" {
		out.Contents = ptr(u.Contents)
	}
	for _, d := range u.Dropins {
		out.Dropins = append(out.Dropins, types.Dropin{Name: d.Name, Contents: ptr(d.Contents)})
	}
	return out
}

// Apply returns base with add put on top: each added file, directory or link replaces any
// base entry of the same path (in any of the three lists), each unit replaces the base unit
// of the same name, and SSHKeys replace user core. base is not modified. A key added twice
// is a *DuplicateError.
func Apply(base types.Config, add Additions) (types.Config, error) {
	paths := map[string]bool{}
	claim := func(p string) error {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("ignition: path %q must be absolute", p)
		}
		if paths[p] {
			return &DuplicateError{Kind: "path", Key: p}
		}
		paths[p] = true
		return nil
	}
	for _, f := range add.Files {
		if err := claim(f.Path); err != nil {
			return types.Config{}, err
		}
	}
	for _, d := range add.Dirs {
		if err := claim(d.Path); err != nil {
			return types.Config{}, err
		}
	}
	for _, l := range add.Links {
		if err := claim(l.Path); err != nil {
			return types.Config{}, err
		}
	}
	units := map[string]bool{}
	for _, u := range add.Units {
		if units[u.Name] {
			return types.Config{}, &DuplicateError{Kind: "unit", Key: u.Name}
		}
		units[u.Name] = true
	}

	out := base
	out.Storage.Files = nil
	for _, f := range base.Storage.Files {
		if !paths[f.Path] {
			out.Storage.Files = append(out.Storage.Files, f)
		}
	}
	out.Storage.Directories = nil
	for _, d := range base.Storage.Directories {
		if !paths[d.Path] {
			out.Storage.Directories = append(out.Storage.Directories, d)
		}
	}
	out.Storage.Links = nil
	for _, l := range base.Storage.Links {
		if !paths[l.Path] {
			out.Storage.Links = append(out.Storage.Links, l)
		}
	}
	out.Systemd.Units = nil
	for _, u := range base.Systemd.Units {
		if !units[u.Name] {
			out.Systemd.Units = append(out.Systemd.Units, u)
		}
	}
	for _, d := range add.Dirs {
		m := d.Mode
		out.Storage.Directories = append(out.Storage.Directories, types.Directory{
			Node:               types.Node{Path: d.Path, Overwrite: ptr(true), User: types.NodeUser{Name: ptr("root")}},
			DirectoryEmbedded1: types.DirectoryEmbedded1{Mode: &m},
		})
	}
	out.Storage.Files = append(out.Storage.Files, ignFiles(add.Files)...)
	for _, l := range add.Links {
		out.Storage.Links = append(out.Storage.Links, types.Link{
			Node:          types.Node{Path: l.Path, Overwrite: ptr(true)},
			LinkEmbedded1: types.LinkEmbedded1{Target: ptr(l.Target)},
		})
	}
	for _, u := range add.Units {
		out.Systemd.Units = append(out.Systemd.Units, IgnUnit(u))
	}
	if len(add.SSHKeys) > 0 {
		out.Passwd.Users = nil
		for _, u := range base.Passwd.Users {
			if u.Name != "core" {
				out.Passwd.Users = append(out.Passwd.Users, u)
			}
		}
		core := types.PasswdUser{Name: "core"}
		for _, k := range add.SSHKeys {
			core.SSHAuthorizedKeys = append(core.SSHAuthorizedKeys, types.SSHAuthorizedKey(strings.TrimSpace(k)))
		}
		out.Passwd.Users = append(out.Passwd.Users, core)
	}
	return out, nil
}

// Encode serializes cfg as compact JSON and validates the result as Validate does.
//
// raw is cfg's own encoding, so decoding it gives cfg back and it holds no key the types do
// not know: Ignition's validation of cfg itself (config/validate.ValidateWithContext without
// the raw JSON, every rule of v3_4/types, duplicates included) finds exactly what Validate(raw)
// would, without decoding the JSON twice (into the config and into the position tree) — for
// the bootstrap config ~4 MB. Only when it finds something, or the version is not 3.4.0, is
// raw validated in full, so the error is Validate's own, with lines and columns
// (TestEncodeValidatesLikeValidate).
func Encode(cfg types.Config) ([]byte, error) {
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("ignition: encode: %w", err)
	}
	if err := validateAt(cfg, raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Validate parses raw as Ignition's own v3_4.Parse does (parse34), or v3_5.Parse for a config
// that declares 3.5.0 (parse35), and fails on an error or on ANY report entry, warnings and
// info included (an unknown key is only a warning there, yet a typo that Ignition ignores at
// boot is a defect here). The error lists the entries (paths and messages, never file
// contents).
func Validate(raw []byte) error {
	_, rpt, err := parse(raw)
	return reportError(rpt, err)
}

// parse34 is github.com/coreos/ignition/v2/config/v3_4.Parse (v2.24.0, config/v3_4/config.go)
// step by step, with the same library calls: decode with config/util.HandleParseErrors (syntax
// and type errors with their positions), require ignition.version 3.4.0, and validate with
// config/validate.ValidateWithContext (every rule of v3_4/types, positions from the raw JSON).
// It exists because the v3_4 package also holds ParseCompatibleVersion, which links the parsers,
// types and translators of spec versions 3.0-3.3 and runs their initializers at start-up,
// though labbuild only ever reads and writes 3.4.0 (issue 18). TestParse34LikeIgnition holds
// the two to the same configs, reports and errors.
func parse34(raw []byte) (types.Config, report.Report, error) {
	if len(raw) == 0 {
		return types.Config{}, report.Report{}, ignerrors.ErrEmpty
	}
	var cfg types.Config
	if rpt, err := util.HandleParseErrors(raw, &cfg); err != nil {
		return types.Config{}, rpt, err
	}
	if v, err := semver.NewVersion(cfg.Ignition.Version); err != nil || *v != types.MaxVersion {
		return types.Config{}, report.Report{}, ignerrors.ErrUnknownVersion
	}
	rpt := validate.ValidateWithContext(cfg, raw)
	if rpt.IsFatal() {
		return types.Config{}, rpt, ignerrors.ErrInvalid
	}
	return cfg, rpt, nil
}

// reportError is Validate's verdict on what parse34 returned.
func reportError(rpt report.Report, err error) error {
	if err != nil || len(rpt.Entries) > 0 {
		msg := rpt.String()
		if err != nil {
			if msg == "" {
				return fmt.Errorf("ignition: invalid config: %w", err)
			}
			return fmt.Errorf("ignition: invalid config: %w:\n%s", err, msg)
		}
		return fmt.Errorf("ignition: config has report entries (every entry fails the build):\n%s", msg)
	}
	return nil
}

// Parse decodes and validates raw as in Validate and returns the config (3.4 types; a 3.5.0
// config keeps its version, see Version35).
func Parse(raw []byte) (types.Config, error) {
	cfg, rpt, err := parse(raw)
	if err := reportError(rpt, err); err != nil {
		return types.Config{}, err
	}
	return cfg, nil
}

// Paths returns every file, directory and link path of cfg, sorted, with duplicates kept (so
// a caller can assert there are none).
func Paths(cfg types.Config) []string {
	var out []string
	for _, f := range cfg.Storage.Files {
		out = append(out, f.Path)
	}
	for _, d := range cfg.Storage.Directories {
		out = append(out, d.Path)
	}
	for _, l := range cfg.Storage.Links {
		out = append(out, l.Path)
	}
	sort.Strings(out)
	return out
}

// Duplicates returns the paths and unit names that occur more than once in cfg.
func Duplicates(cfg types.Config) []string {
	var dups []string
	seen := map[string]int{}
	for _, p := range Paths(cfg) {
		seen[p]++
		if seen[p] == 2 {
			dups = append(dups, p)
		}
	}
	us := map[string]int{}
	for _, u := range cfg.Systemd.Units {
		us[u.Name]++
		if us[u.Name] == 2 {
			dups = append(dups, "unit "+u.Name)
		}
	}
	return dups
}

// FileContents returns the decoded contents of the file at path in cfg (data URLs only,
// gzip undone), or an error naming the path.
func FileContents(cfg types.Config, path string) ([]byte, error) {
	for _, f := range cfg.Storage.Files {
		if f.Path != path {
			continue
		}
		if f.Contents.Source == nil {
			return nil, nil
		}
		return DecodeSource(*f.Contents.Source, f.Contents.Compression)
	}
	return nil, fmt.Errorf("ignition: no file %s", path)
}

// DecodeSource decodes a data URL source (base64 or percent-encoded) with optional gzip.
func DecodeSource(src string, compression *string) ([]byte, error) {
	if !strings.HasPrefix(src, "data:") {
		return nil, fmt.Errorf("ignition: source is not a data URL")
	}
	comma := strings.IndexByte(src, ',')
	if comma < 0 {
		return nil, errors.New("ignition: malformed data URL (no comma)")
	}
	meta, payload := src[5:comma], src[comma+1:]
	var data []byte
	if strings.HasSuffix(meta, ";base64") {
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return nil, fmt.Errorf("ignition: data URL: %w", err)
		}
		data = b
	} else {
		s, err := unescape(payload)
		if err != nil {
			return nil, err
		}
		data = []byte(s)
	}
	if compression != nil && *compression == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("ignition: gzip: %w", err)
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(zr); err != nil {
			return nil, fmt.Errorf("ignition: gzip: %w", err)
		}
		return b.Bytes(), nil
	}
	return data, nil
}

// unescape undoes RFC 2397 percent-encoding.
func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("ignition: data URL: truncated escape")
		}
		var v byte
		for _, c := range []byte(s[i+1 : i+3]) {
			v <<= 4
			switch {
			case c >= '0' && c <= '9':
				v |= c - '0'
			case c >= 'a' && c <= 'f':
				v |= c - 'a' + 10
			case c >= 'A' && c <= 'F':
				v |= c - 'A' + 10
			default:
				return "", errors.New("ignition: data URL: bad escape")
			}
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}

func ptr[T any](v T) *T { return &v }
