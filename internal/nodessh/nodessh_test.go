package nodessh_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/labbuild/labbuild/internal/nodessh"
	"github.com/labbuild/labbuild/internal/rig/rehearsal"
	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// sshNode starts a rehearsal node at ip on a bridge in a new namespace, with core's keys from a
// minimal Ignition config holding authorized, and Debian's sshd; it returns the lab namespace
// and the node's host key.
func sshNode(t *testing.T, ip, authorized string) (string, ssh.PublicKey) {
	t.Helper()
	sshd := testenv.RequireSSHD(t)
	ign := rehearsal.CoreIgnition(authorized)
	seq := os.Getpid() % 10000
	work := t.TempDir()
	sn, err := rehearsal.StartSSHNode("master-0", fmt.Sprintf("lbs%d-lab", seq), fmt.Sprintf("lbs%d-m0", seq), ip, "198.18.7.1", work, sshd, ign, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sn.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(work, "logs", "sshd.log"))
			t.Logf("sshd.log:\n%s", b)
		}
	})
	return sn.LabNS, sn.HostKey
}

// TestDialRealSSHD logs in to Debian's sshd as core with the key whose public half the node's
// Ignition carries, records the host key on first use (0600, OpenSSH format), accepts it next
// time without a word, and refuses a node whose key differs from the recorded one, naming the
// line and the command that removes it; a key the node does not authorize is refused.
func TestDialRealSSHD(t *testing.T) {
	dir := t.TempDir()
	priv := filepath.Join(dir, "id")
	const ip = "198.18.7.10"
	labNS, hostKey := sshNode(t, ip, testenv.SSHKeyPair(t, priv))
	t.Setenv("SSH_AUTH_SOCK", "")
	kh := filepath.Join(dir, "out", ".labbuild", "known_hosts")
	var notes []string
	cfg := nodessh.Config{Node: "master-0", Addr: ip + ":22", KeyFiles: []string{filepath.Join(dir, "missing"), priv},
		KnownHosts: kh, Dial: rehearsal.DialIn(labNS), Notify: func(m string) { notes = append(notes, m) }}
	ctx := context.Background()

	cl, err := nodessh.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := nodessh.Output(ctx, cl, "hostname; id -un; sudo -n id -u", nil)
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != "master-0 core 0" {
		t.Errorf("hostname; id -un; sudo -n id -u = %q, want master-0 core 0", out)
	}
	b, err := os.ReadFile(kh)
	if err != nil {
		t.Fatal(err)
	}
	if want := "198.18.7.10 " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostKey))) + "\n"; string(b) != want {
		t.Errorf("known_hosts = %q, want %q", b, want)
	}
	if st, _ := os.Stat(kh); st.Mode().Perm() != 0o600 {
		t.Errorf("known_hosts mode %v, want 0600", st.Mode().Perm())
	}
	if len(notes) != 1 || !strings.Contains(notes[0], ssh.FingerprintSHA256(hostKey)) {
		t.Errorf("first use: notes %q, want one naming %s", notes, ssh.FingerprintSHA256(hostKey))
	}

	notes = nil
	cl, err = nodessh.Dial(ctx, cfg)
	if err != nil {
		t.Fatalf("second dial: %v", err)
	}
	cl.Close()
	if len(notes) != 0 {
		t.Errorf("second dial recorded again: %q", notes)
	}

	// Another key recorded for the address: the node is refused.
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	op, _ := ssh.NewPublicKey(other)
	os.WriteFile(kh, []byte("198.18.7.10 "+string(ssh.MarshalAuthorizedKey(op))), 0o600)
	_, err = nodessh.Dial(ctx, cfg)
	var hc *nodessh.HostKeyChangedError
	if !errors.As(err, &hc) {
		t.Fatalf("changed host key: err = %v, want HostKeyChangedError", err)
	}
	for _, w := range []string{"host key changed", kh + ":1", ssh.FingerprintSHA256(op), ssh.FingerprintSHA256(hostKey), "ssh-keygen -R 198.18.7.10 -f " + kh} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("changed host key: %q does not say %q", err, w)
		}
	}

	// A key the node's Ignition does not carry.
	os.Remove(kh)
	stranger := filepath.Join(dir, "stranger")
	testenv.SSHKeyPair(t, stranger)
	cfg.KeyFiles = []string{stranger}
	if _, err := nodessh.Dial(ctx, cfg); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("an unauthorized key: err = %v, want unable to authenticate", err)
	}
}
