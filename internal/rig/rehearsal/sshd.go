package rehearsal

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// coreUID is user core's uid and gid on RHCOS (the image's /etc/passwd; Ignition does not
// create core, it only adds its keys), wheel's gid 10.
const coreUID, wheelGID = 1000, 10

// CoreUser gives the node at root what RHCOS and Ignition's passwd stage give user core: the
// account (the host's /etc/passwd, /etc/group and /etc/shadow with core, in wheel, home
// /var/home/core), passwordless sudo for wheel (RHCOS's /etc/sudoers.d/coreos-sudo-group), and
// the config's passwd.users[core].sshAuthorizedKeys in ~/.ssh/authorized_keys.d/ignition, the
// file Ignition writes them to (ignition/internal/exec/util/passwd.go, AuthorizeSSHKeys, on
// systems with ssh-key-dir). It reads the keys from the node's Ignition (raw), so a config
// without them leaves core without a way in, as on a real node. Call it before StartNode.
func CoreUser(raw []byte, root string) error {
	cfg, err := Resolve(raw) // a single node's master.ign has its users in the merged config
	if err != nil {
		return err
	}
	var keys []string
	for _, u := range cfg.Passwd.Users {
		if u.Name == "core" {
			for _, k := range u.SSHAuthorizedKeys {
				keys = append(keys, string(k))
			}
		}
	}
	add := func(file, line string, mode os.FileMode) error {
		b, err := os.ReadFile(filepath.Join("/etc", file))
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		var out strings.Builder
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			l := sc.Text()
			name, _, _ := strings.Cut(l, ":")
			if name == "core" || name == "wheel" && file == "group" {
				continue
			}
			out.WriteString(l + "\n")
		}
		out.WriteString(line + "\n")
		p := filepath.Join(root, "etc", file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte(out.String()), mode)
	}
	uid, gid := freeID("passwd", "core", coreUID), freeID("group", "core", coreUID)
	if err := add("passwd", fmt.Sprintf("core:x:%d:%d:CoreOS Admin:/var/home/core:/bin/bash", uid, gid), 0o644); err != nil {
		return err
	}
	if err := add("group", fmt.Sprintf("core:x:%d:\nwheel:x:%d:core", gid, freeID("group", "wheel", wheelGID, gid)), 0o644); err != nil {
		return err
	}
	// "*": no password login, but not locked (sshd refuses a locked account even for keys).
	if err := add("shadow", "core:*:19000:0:99999:7:::", 0o640); err != nil {
		return err
	}
	sudoers := filepath.Join(root, "etc", "sudoers.d")
	if err := os.MkdirAll(sudoers, 0o750); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sudoers, "coreos-sudo-group"), []byte("%wheel ALL=(ALL) NOPASSWD: ALL\n"), 0o440); err != nil {
		return err
	}
	home := filepath.Join(root, "var", "home", "core")
	dir := filepath.Join(home, ".ssh", "authorized_keys.d")
	if err := os.MkdirAll(filepath.Dir(home), 0o755); err != nil { // /var, /var/home: 0755 as on the host
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f := filepath.Join(dir, "ignition")
	if err := os.WriteFile(f, []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	for _, p := range []string{home, filepath.Join(home, ".ssh"), dir, f} {
		if err := os.Chown(p, uid, gid); err != nil {
			return err
		}
		if p != f {
			os.Chmod(p, 0o700)
		}
	}
	return nil
}

// freeID returns prefer unless the host's /etc/<file> (passwd or group) gives it to another
// name (Debian's uucp has gid 10, a cloud image's first user uid 1000), whose name would then be
// the one found for it; then the first free id from 900.
func freeID(file, name string, prefer int, taken ...int) int {
	b, _ := os.ReadFile(filepath.Join("/etc", file))
	used := map[string]bool{}
	for _, id := range taken {
		used[fmt.Sprint(id)] = true
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, ":"); len(f) > 2 && f[0] != name {
			used[f[2]] = true
		}
	}
	if !used[fmt.Sprint(prefer)] {
		return prefer
	}
	id := 900
	for used[fmt.Sprint(id)] {
		id++
	}
	return id
}

// sshdConfig is the node's sshd_config: RHCOS's choices that matter to a client (keys only,
// ssh-key-dir's authorized_keys.d), with one host key of the node's own.
const sshdConfig = `Port 22
HostKey /etc/ssh/ssh_host_ed25519_key
AuthorizedKeysFile .ssh/authorized_keys .ssh/authorized_keys.d/ignition
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
PidFile /run/sshd.pid
`

// SSHD writes the node's sshd_config and a host key of its own under root (a node's first boot
// generates its host keys: sshd-keygen@.service) and returns the host key's public half. Call
// it before StartNode, then StartSSHD.
func SSHD(root string) (ssh.PublicKey, error) {
	dir := filepath.Join(root, "etc", "ssh")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ssh_host_ed25519_key"), pem.EncodeToMemory(blk), 0o600); err != nil {
		return nil, err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ssh_host_ed25519_key.pub"), ssh.MarshalAuthorizedKey(sp), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(sshdConfig), 0o644); err != nil {
		return nil, err
	}
	return sp, nil
}

// StartSSHD starts Debian's sshd (sshd path) in the node, on port 22 of its address, and waits
// until it listens there (ip is the node's address, dialled inside netns labNS).
func StartSSHD(nd *Node, sshd, ip, labNS string) error {
	if err := nd.Keep("sshd", nil, nil, "sh", "-c", "mkdir -p /run/sshd && chmod 0755 /run/sshd && exec "+sshd+" -D -e -f /etc/ssh/sshd_config"); err != nil {
		return err
	}
	dial := DialIn(labNS)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := contextWithTimeout(2 * time.Second)
		c, err := dial(ctx, "tcp", net.JoinHostPort(ip, "22"))
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(nd.LogDir, "sshd.log"))
			return fmt.Errorf("rehearsal: node %s: sshd does not listen on %s:22: %v: %s", nd.Name, ip, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// ResolveOwnName makes the node at root resolve its own host name (root/etc/hostname) without
// DNS, as RHCOS does through nss-myhostname: a line for it in root/etc/hosts (the host's
// /etc/hosts when the node has none yet). sudo looks the name up on every call, and the
// rehearsal's lab DNS may not answer. Call it before StartNode.
func ResolveOwnName(root string) error {
	hn, err := os.ReadFile(filepath.Join(root, "etc", "hostname"))
	if err != nil || len(strings.TrimSpace(string(hn))) == 0 {
		return nil
	}
	name := strings.TrimSpace(string(hn))
	p := filepath.Join(root, "etc", "hosts")
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		b, _ = os.ReadFile("/etc/hosts")
	} else if err != nil {
		return err
	}
	line := "127.0.1.1 " + name
	if short, _, ok := strings.Cut(name, "."); ok {
		line += " " + short
	}
	return os.WriteFile(p, append(bytes.TrimRight(b, "\n"), []byte("\n"+line+"\n")...), 0o644)
}

// SSHNode is one node with sshd on a bridge of its own, for the tests of labbuild ssh and
// gather that need no control plane: LabNS holds the bridge (dial the node from there).
type SSHNode struct {
	*Node
	LabNS   string
	IP      string
	HostKey ssh.PublicKey
}

// StartSSHNode makes network namespace labNS with a bridge at gateway/24, and on it node name
// at ip (its namespace netns), its root under work holding core (keys from the Ignition config
// ign), sshd and extra files (node path → content, written before the node starts), then starts
// sshd (Debian's, at sshdPath). Stop removes the node and the lab namespace.
func StartSSHNode(name, labNS, netns, ip, gateway, work, sshdPath string, ign []byte, extra map[string][]byte) (*SSHNode, error) {
	if err := LabNet(labNS, gateway); err != nil {
		return nil, err
	}
	fail := func(err error) (*SSHNode, error) {
		DeleteLabNet(labNS)
		return nil, err
	}
	root := filepath.Join(work, "root")
	if err := CoreUser(ign, root); err != nil {
		return fail(err)
	}
	hk, err := SSHD(root)
	if err != nil {
		return fail(err)
	}
	extra2 := map[string][]byte{"/etc/hostname": []byte(name + "\n")}
	for p, b := range extra {
		extra2[p] = b
	}
	for p, b := range extra2 {
		f := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			return fail(err)
		}
	}
	if err := ResolveOwnName(root); err != nil {
		return fail(err)
	}
	nd, err := StartNode(name, netns, root, filepath.Join(work, "logs"), NodeNet{IP: ip, Prefix: 24, Gateway: gateway, LabNS: labNS, Bridge: "br-lab"})
	if err != nil {
		return fail(err)
	}
	sn := &SSHNode{Node: nd, LabNS: labNS, IP: ip, HostKey: hk}
	if err := StartSSHD(nd, sshdPath, ip, labNS); err != nil {
		sn.Stop()
		return nil, err
	}
	return sn, nil
}

// Stop ends the node and deletes the lab namespace.
func (s *SSHNode) Stop() {
	s.Node.Stop()
	DeleteLabNet(s.LabNS)
}

// CoreIgnition is the smallest Ignition config (spec 3.4.0) that gives core one authorized
// key: what the tests of labbuild ssh and gather boot a node from when no lab is built.
func CoreIgnition(authorized string) []byte {
	b, _ := json.Marshal(map[string]any{
		"ignition": map[string]any{"version": "3.4.0"},
		"passwd":   map[string]any{"users": []any{map[string]any{"name": "core", "sshAuthorizedKeys": []string{authorized}}}},
	})
	return b
}

// LabNet makes network namespace name with a bridge br-lab at gateway/24: the lab network the
// nodes' veths join when no libvirt network is there. Delete it with DeleteLabNet.
func LabNet(name, gateway string) error {
	for _, s := range [][]string{
		{"ip", "netns", "add", name},
		{"ip", "-n", name, "link", "set", "lo", "up"},
		{"ip", "-n", name, "link", "add", "br-lab", "type", "bridge"},
		{"ip", "-n", name, "addr", "add", gateway + "/24", "dev", "br-lab"},
		{"ip", "-n", name, "link", "set", "br-lab", "up"},
	} {
		if err := run(s[0], s[1:]...); err != nil {
			DeleteLabNet(name)
			return err
		}
	}
	return nil
}

// DeleteLabNet deletes LabNet's namespace (and the bridge with it).
func DeleteLabNet(name string) { run("ip", "netns", "del", name) }
