package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"

	"github.com/labbuild/labbuild/internal/rig/rehearsal"
	"github.com/labbuild/labbuild/internal/rig/testenv"
)

// TestSSHVerb runs `labbuild ssh` as a user does, inside the namespace of a lab bridge on which
// a rehearsal node runs Debian's sshd with core's keys from its Ignition: a command's output and
// exit status are passed on (the host key is recorded, and said so, on first use); without a
// command it is an interactive login on a pty of the user's terminal's size; a node whose host
// key changed is refused, naming the known_hosts line and how to remove it.
func TestSSHVerb(t *testing.T) {
	sshd := testenv.RequireSSHD(t)
	dir := t.TempDir()
	authorized := testenv.SSHKeyPair(t, filepath.Join(dir, "id"))
	os.WriteFile(filepath.Join(dir, "id.pub"), []byte(authorized+" user@lab\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "lab.yaml"), []byte(`network:
  machineNetwork: 198.18.9.0/24
  gateway: 198.18.9.1
  dns: 198.18.9.1
  apiVIP: 198.18.9.5
  ingressVIP: 198.18.9.6
  dhcpStart: 198.18.9.200
  dhcpEnd: 198.18.9.250
nodes:
  - {name: bootstrap, role: bootstrap, ip: 198.18.9.100}
  - {name: master-0, role: master, ip: 198.18.9.10}
access:
  sshKeyFile: id.pub
`), 0o644)
	ign := rehearsal.CoreIgnition(authorized)
	seq := os.Getpid() % 10000
	sn, err := rehearsal.StartSSHNode("master-0", fmt.Sprintf("lbv%d-lab", seq), fmt.Sprintf("lbv%d-m0", seq), "198.18.9.10", "198.18.9.1",
		filepath.Join(dir, "node"), sshd, ign, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sn.Stop()
	labbuild := func(args ...string) *exec.Cmd {
		cmd := exec.Command("ip", append([]string{"netns", "exec", sn.LabNS, os.Args[0], "-C", dir}, args...)...)
		// HOME: no ~/.ssh identity of the machine's; the key is access.sshKeyFile's private half.
		cmd.Env = append(os.Environ(), "LABBUILD_TEST_CHILD=1", "SSH_AUTH_SOCK=", "HOME="+dir, "TERM=xterm")
		return cmd
	}
	status := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}

	// A command: its output, and its exit status as labbuild's.
	var stdout, stderr bytes.Buffer
	cmd := labbuild("ssh", "master-0", "--", "hostname; exit 3")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if st := status(cmd.Run()); st != 3 || strings.TrimSpace(stdout.String()) != "master-0" {
		t.Errorf("labbuild ssh master-0 -- 'hostname; exit 3': status %d, stdout %q, stderr %q; want 3, master-0", st, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "labbuild: recorded master-0's host key (ssh-ed25519 "+ssh.FingerprintSHA256(sn.HostKey)+") in out/.labbuild/known_hosts") {
		t.Errorf("first use: stderr %q does not say the host key was recorded", stderr.String())
	}

	// Interactive: a pty of the terminal's size (stty size: rows cols), typed commands.
	cmd = labbuild("ssh", "master-0")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 30, Cols: 100})
	if err != nil {
		t.Fatal(err)
	}
	var screen bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&screen, ptmx); close(read) }()
	time.Sleep(500 * time.Millisecond)
	io.WriteString(ptmx, "echo size=$(stty size) user=$(id -un) host=$(hostname); exit 0\r")
	werr := cmd.Wait()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
	}
	ptmx.Close()
	if st := status(werr); st != 0 || !strings.Contains(screen.String(), "size=30 100 user=core host=master-0") {
		t.Errorf("interactive labbuild ssh master-0: status %d, screen %q; want 0 and size=30 100 user=core host=master-0", st, screen.String())
	}

	// The node now offers another key than the one recorded.
	kh := filepath.Join(dir, "out", ".labbuild", "known_hosts")
	other, _, _ := ed25519.GenerateKey(rand.Reader)
	op, _ := ssh.NewPublicKey(other)
	os.WriteFile(kh, []byte("198.18.9.10 "+string(ssh.MarshalAuthorizedKey(op))), 0o600)
	stdout.Reset()
	stderr.Reset()
	cmd = labbuild("ssh", "master-0", "--", "hostname")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	st := status(cmd.Run())
	if st != 1 || stdout.Len() != 0 {
		t.Errorf("changed host key: status %d, stdout %q; want 1 and nothing run", st, stdout.String())
	}
	for _, w := range []string{"master-0 (198.18.9.10:22): the host key changed", "out/.labbuild/known_hosts:1", "ssh-keygen -R 198.18.9.10 -f out/.labbuild/known_hosts"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("changed host key: stderr %q lacks %q", stderr.String(), w)
		}
	}
}

// TestEscapeReader: labbuild console passes keys through until Ctrl-], then ends its input.
func TestEscapeReader(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ls\r", "ls\r"},
		{"ls\r\x1d", "ls\r"},
		{"\x1dls\r", ""},
		{"a\x03b\x1dc", "a\x03b"}, // Ctrl-C goes to the guest
	} {
		got, err := io.ReadAll(&escapeReader{r: strings.NewReader(tc.in)})
		if err != nil || string(got) != tc.want {
			t.Errorf("escapeReader(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
