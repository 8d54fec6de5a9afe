// Package nodessh opens SSH sessions to a lab's nodes as user core, as `ssh core@<node IP>`
// does on an OpenShift node (RHCOS has no other login; Ignition's passwd.users[core] carries
// the keys, targets/ignition.go): labbuild ssh, console-less debugging and labbuild gather.
//
// Authentication offers the user's SSH agent (SSH_AUTH_SOCK) and the private keys found beside
// the lab's access.sshKeyFile (its name without ".pub") and in ~/.ssh. Host keys are trusted on
// first use and recorded in a known_hosts file per lab (out/.labbuild/known_hosts, 0600, the
// OpenSSH format); a key that differs from the recorded one is refused with the line to remove,
// never accepted silently.
package nodessh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// User is the login of every RHCOS node (the only user Ignition configures in a lab).
const User = "core"

// Config says how to reach one node.
type Config struct {
	// Node is the lab node's name (master-0), for messages; Addr its "IP:22".
	Node, Addr string
	// KeyFiles are private key files to offer, in order; missing ones are skipped, and a key
	// with a passphrase is skipped (the agent holds such keys).
	KeyFiles []string
	// KnownHosts is the lab's known_hosts file; it is created (0600) on first use.
	KnownHosts string
	// Timeout bounds the TCP connect and the handshake (default 10 s).
	Timeout time.Duration
	// Notify, when set, is told when a new host key is recorded (a line for the user).
	Notify func(msg string)
	// Dial, when set, opens the TCP connection (tests dial inside a network namespace).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// KeyFiles lists the private keys to try: the private half of the lab's public key file
// (access.sshKeyFile without ".pub", when it exists), then ~/.ssh's default identities, as
// ssh(1) tries id_ed25519, id_ecdsa and id_rsa.
func KeyFiles(publicKeyFile string) []string {
	var out []string
	if strings.HasSuffix(publicKeyFile, ".pub") {
		out = append(out, strings.TrimSuffix(publicKeyFile, ".pub"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			out = append(out, filepath.Join(home, ".ssh", n))
		}
	}
	return out
}

// HostKeyChangedError is a node whose host key differs from the recorded one: the node was
// reinstalled (a new VM generates new keys) or something else answers at its address.
type HostKeyChangedError struct {
	Node, Addr string
	KnownHosts string
	Line       int
	Was, Now   string // SHA256 fingerprints
	Algorithm  string
	RemoveHint string
}

func (e *HostKeyChangedError) Error() string {
	return fmt.Sprintf("%s (%s): the host key changed: %s:%d records %s, the node now offers %s %s; "+
		"if the node was reinstalled, remove the old key (%s) and connect again; otherwise something else answers at its address",
		e.Node, e.Addr, e.KnownHosts, e.Line, e.Was, e.Algorithm, e.Now, e.RemoveHint)
}

// hostKeys is the trust-on-first-use callback over one known_hosts file.
type hostKeys struct {
	path   string
	node   string
	notify func(string)
	mu     sync.Mutex
}

func (h *hostKeys) check(hostname string, remote net.Addr, key ssh.PublicKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(h.path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(h.path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	cb, err := knownhosts.New(h.path)
	if err != nil {
		return fmt.Errorf("%s: %w", h.path, err)
	}
	err = cb(hostname, remote, key)
	var ke *knownhosts.KeyError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ke) && len(ke.Want) > 0:
		// Known under another key. knownhosts also answers so when the recorded key is of
		// another algorithm only; OpenSSH then refuses too (it would need UpdateHostKeys).
		w := ke.Want[0]
		host, _, _ := net.SplitHostPort(hostname)
		return &HostKeyChangedError{Node: h.node, Addr: hostname, KnownHosts: h.path, Line: w.Line,
			Was: ssh.FingerprintSHA256(w.Key), Now: ssh.FingerprintSHA256(key), Algorithm: key.Type(),
			RemoveHint: fmt.Sprintf("ssh-keygen -R %s -f %s", host, h.path)}
	case errors.As(err, &ke):
		// Unknown: record it (trust on first use), as ssh -o StrictHostKeyChecking=accept-new.
		line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key)
		af, err := os.OpenFile(h.path, os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		if _, err := af.WriteString(line + "\n"); err != nil {
			af.Close()
			return err
		}
		if err := af.Close(); err != nil {
			return err
		}
		if h.notify != nil {
			h.notify(fmt.Sprintf("recorded %s's host key (%s %s) in %s", h.node, key.Type(), ssh.FingerprintSHA256(key), h.path))
		}
		return nil
	}
	return err
}

// Dial connects and authenticates to the node as core.
func Dial(ctx context.Context, c Config) (*ssh.Client, error) {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	var methods []ssh.AuthMethod
	var signers []ssh.Signer
	var closers []func()
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if conn, err := net.Dial("unix", sock); err == nil {
			ag := agent.NewClient(conn)
			if s, err := ag.Signers(); err == nil {
				signers = append(signers, s...)
			}
			closers = append(closers, func() { conn.Close() })
		}
	}
	defer func() {
		for _, f := range closers {
			f()
		}
	}()
	var tried []string
	for _, p := range c.KeyFiles {
		b, err := readKey(p)
		if err != nil {
			continue
		}
		s, err := ssh.ParsePrivateKey(b)
		if err != nil {
			continue // passphrase-protected or not a key: the agent's business
		}
		signers = append(signers, s)
		tried = append(tried, p)
	}
	if len(signers) == 0 {
		return nil, fmt.Errorf("%s: no SSH key to log in with: no agent (SSH_AUTH_SOCK) and none of %s readable without a passphrase",
			c.Node, strings.Join(c.KeyFiles, ", "))
	}
	methods = append(methods, ssh.PublicKeys(signers...))
	hk := &hostKeys{path: c.KnownHosts, node: c.Node, notify: c.Notify}
	cfg := &ssh.ClientConfig{User: User, Auth: methods, HostKeyCallback: hk.check, Timeout: c.Timeout}
	dial := c.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: c.Timeout}
		dial = d.DialContext
	}
	dctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	conn, err := dial(dctx, "tcp", c.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Node, err)
	}
	conn.SetDeadline(time.Now().Add(c.Timeout))
	sc, chans, reqs, err := ssh.NewClientConn(conn, c.Addr, cfg)
	if err != nil {
		conn.Close()
		var hc *HostKeyChangedError
		if errors.As(err, &hc) {
			return nil, hc
		}
		return nil, fmt.Errorf("%s: ssh %s@%s: %w", c.Node, User, c.Addr, err)
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(sc, chans, reqs), nil
}

// Output runs cmd on the node and returns its standard output; a failing command's error
// carries the tail of its standard error.
func Output(ctx context.Context, cl *ssh.Client, cmd string, stdin []byte) ([]byte, error) {
	s, err := cl.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	if stdin != nil {
		s.Stdin = bytes.NewReader(stdin)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		s.Signal(ssh.SIGKILL)
		cl.Close()
		return out.Bytes(), ctx.Err()
	}
	if err != nil {
		e := strings.TrimSpace(errb.String())
		if len(e) > 500 {
			e = "…" + e[len(e)-500:]
		}
		return out.Bytes(), fmt.Errorf("%w: %s", err, e)
	}
	return out.Bytes(), nil
}

// maxKeyBytes caps a private key file: an RSA-16384 key in OpenSSH's format is under 13 KB.
const maxKeyBytes = 64 << 10

// readKey reads the private key file at p: a regular file of at most maxKeyBytes, opened
// without blocking (a FIFO named as a key must not hang labbuild ssh; issue 39). Anything else
// is an error, and Dial goes on to the next key.
func readKey(p string) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > maxKeyBytes {
		return nil, fmt.Errorf("%s: not a regular file of at most %d KiB", p, maxKeyBytes>>10)
	}
	return io.ReadAll(io.LimitReader(f, maxKeyBytes))
}
