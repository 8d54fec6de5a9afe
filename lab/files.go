package lab

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// CheckPullSecret validates a pull secret's shape — docker config JSON with an "auths" object
// whose entries carry "auth" (base64 of user:password) or username and password — without ever
// putting its content into the error (registry names only). field names the config field for
// the message. Problems are reported in registry order, the first one only.
func CheckPullSecret(data []byte, field string) error {
	fix := "download it again from console.redhat.com/openshift/install/pull-secret"
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return &ConfigError{Field: field, Msg: "the pull secret is not a JSON object", Fix: fix}
	}
	var auths map[string]json.RawMessage
	if raw, ok := top["auths"]; !ok {
		return &ConfigError{Field: field, Msg: `the pull secret has no "auths"`, Fix: fix}
	} else if err := json.Unmarshal(raw, &auths); err != nil {
		return &ConfigError{Field: field, Msg: `the pull secret's "auths" is not an object`, Fix: fix}
	}
	if len(auths) == 0 {
		return &ConfigError{Field: field, Msg: `the pull secret has no "auths" entries`, Fix: fix}
	}
	regs := make([]string, 0, len(auths))
	for r := range auths {
		regs = append(regs, r)
	}
	sort.Strings(regs)
	for _, reg := range regs {
		var a struct {
			Auth     string `json:"auth"`
			Username string `json:"username"`
			Password string `json:"password"`
		}
		if err := json.Unmarshal(auths[reg], &a); err != nil {
			return &ConfigError{Field: field, Msg: fmt.Sprintf("auths[%q] is not an object of strings", reg), Fix: fix}
		}
		if a.Auth == "" && (a.Username == "" || a.Password == "") {
			return &ConfigError{Field: field, Msg: fmt.Sprintf("auths[%q] has no credentials", reg), Fix: fix}
		}
		if a.Auth != "" {
			dec, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil || !strings.Contains(string(dec), ":") {
				return &ConfigError{Field: field, Msg: fmt.Sprintf("auths[%q].auth is not base64 of user:password", reg), Fix: fix}
			}
		}
	}
	return nil
}

// CheckSSHKey validates an SSH public key in authorized_keys format (one key). The message
// never quotes the file.
func CheckSSHKey(data []byte, field string) error {
	if strings.Contains(string(data), "PRIVATE KEY") {
		return &ConfigError{Field: field, Msg: "this is a private key", Fix: "point it at the public key, the .pub file next to it"}
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return &ConfigError{Field: field, Msg: "the file is empty", Fix: "point it at a .pub file, e.g. ~/.ssh/id_ed25519.pub"}
	}
	if _, _, _, _, err := ssh.ParseAuthorizedKey(data); err != nil {
		return &ConfigError{Field: field, Msg: "not an SSH public key", Fix: "point it at a .pub file, e.g. ~/.ssh/id_ed25519.pub"}
	}
	return nil
}

// FileFields are the config fields that name files on the host, in the order CheckFiles
// reports them.
var FileFields = []string{AccessPullSecretFile, AccessSSHKeyFile}

// CheckFiles checks the files the config names, as far as the fields listed in fields are read
// by the targets about to run: the pull secret (present, JSON, auths of user:password), the SSH
// key (present, one public key), and each oci: mirror's layout (present, with index.json). file
// names the config in messages; baseDir is the directory relative paths are taken from. It
// never puts a secret's content into a message.
func (c *Config) CheckFiles(file, baseDir string, fields []string) error {
	var errs ConfigErrors
	want := map[string]bool{}
	for _, f := range fields {
		want[f] = true
	}
	add := func(err error, field string) {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.File, ce.Line = file, c.Line(field)
			errs = append(errs, ce)
		}
	}
	for _, f := range []struct {
		field, path string
		check       func([]byte, string) error
		get         string
	}{
		{AccessPullSecretFile, c.Access.PullSecretFile, CheckPullSecret, "download it from console.redhat.com/openshift/install/pull-secret"},
		{AccessSSHKeyFile, c.Access.SSHKeyFile, CheckSSHKey, "ssh-keygen -t ed25519 writes one (~/.ssh/id_ed25519.pub)"},
	} {
		if !want[f.field] {
			continue
		}
		dflt := ""
		if c.Line(f.field) == 0 {
			dflt = " (the default: " + file + " does not set it)"
		}
		if f.path == "" {
			add(&ConfigError{Field: f.field, Msg: "is empty", Fix: f.get + ", and set " + f.field + " to its path"}, f.field)
			continue
		}
		p := ExpandPath(f.path, baseDir)
		data, err := ReadFile(p, MaxFileBytes)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			add(&ConfigError{Field: f.field, Msg: fmt.Sprintf("%s does not exist%s", p, dflt), Fix: f.get + ", and set " + f.field + " to its path"}, f.field)
		case err != nil:
			add(&ConfigError{Field: f.field, Msg: fmt.Sprintf("cannot read %s: %v%s", p, errors.Unwrap(err), dflt), Fix: "name a readable regular file of at most " + sizeText(MaxFileBytes)}, f.field)
		default:
			add(f.check(data, f.field), f.field)
		}
	}
	if want[ReleaseMirrors] {
		keys := make([]string, 0, len(c.Release.Mirrors))
		for k := range c.Release.Mirrors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			dir, ok := strings.CutPrefix(c.Release.Mirrors[k], "oci:")
			if !ok || !filepath.IsAbs(dir) {
				continue
			}
			field := fmt.Sprintf("%s[%q]", ReleaseMirrors, k)
			if st, err := os.Stat(filepath.Join(dir, "index.json")); err != nil || !st.Mode().IsRegular() {
				add(&ConfigError{Field: field, Msg: fmt.Sprintf("%s is not an OCI image layout (no index.json)", dir), Fix: "point it at a layout directory (oc mirror / skopeo copy oci:DIR write one)"}, field)
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// ExpandPath resolves a path from the lab config: "~/" is $HOME, and a relative path is taken
// from baseDir (the config file's directory).
func ExpandPath(p, baseDir string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[2:])
		}
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(baseDir, p)
	}
	return p
}

// MaxFileBytes caps every file a lab names and labbuild reads whole: the lab config, the pull
// secret (a few KB from console.redhat.com), the SSH public key. A larger file is an error
// stating the cap, read no further: /dev/zero named as lab.yaml read 1.1 GB in a second before
// this cap (issue 39).
const MaxFileBytes = 1 << 20

// ReadFile reads the regular file at p whole if it holds at most max bytes. It never blocks
// and never reads without end: the file is opened non-blocking (a FIFO with no writer would
// block open(2) itself) and its kind is checked on the open descriptor, so a FIFO, a device, a
// directory or a socket is an error naming what it is, and a larger file an error stating the
// cap (cache.ReadRegular, in words the CLI shares; lab imports nothing of labbuild's).
func ReadFile(p string, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: errors.New(fileKind(st.Mode()) + ", not a regular file")}
	}
	if st.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fmt.Errorf("%d bytes, over the %s cap", st.Size(), sizeText(max))}
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(b)) > max {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fmt.Errorf("over the %s cap", sizeText(max))}
	}
	return b, err
}

// fileKind names the kind of a file that is not regular.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

// sizeText writes a cap for people: "1 MiB", "64 KiB", "512 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
