package testenv

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// RequireSSHD returns the path of Debian's sshd after checking what a test of labbuild ssh or
// gather against a rehearsal node needs: root (namespaces), ip, nsenter, unshare, sudo and
// sshd (.ci/install-ssh.sh). Missing, it skips (fails in CI).
func RequireSSHD(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "network and mount namespaces need root")
	}
	for _, p := range []string{"ip", "nsenter", "unshare", "sudo"} {
		Require(t, p)
	}
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil {
		Missing(t, "sshd missing (Debian openssh-server: bash .ci/install-ssh.sh)")
	}
	return sshd
}

// SSHKeyPair writes a new ed25519 private key (OpenSSH format, 0600) to path and returns its
// authorized_keys line ("ssh-ed25519 AAAA…").
func SSHKeyPair(t testing.TB, path string) string {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
}
