package hostexec

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
)

// ForURI returns the Host a libvirt daemon at uri runs on, for what libvirt cannot do itself
// (a VXLAN device, a firewall rule, a look at /proc): Local for a URI without a host
// (qemu:///system, qemu+unix:///system?socket=…), and for qemu+ssh, qemu+libssh and
// qemu+libssh2 the same user and host over ssh(1), with the URI's port, keyfile and known-hosts
// parameters (libvirt's remote URI parameters: keyfile, known_hosts, no_verify,
// known_hosts_verify=ignore). Commands run as that user; a file root is the local machine's
// only. Another transport (tcp, tls) gives no way in: an error says so.
func ForURI(uri string) (Host, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return Host{}, fmt.Errorf("libvirt URI %q: %w", uri, err)
	}
	if u.Host == "" {
		return Local(), nil
	}
	args, err := SSHArgs(uri)
	if err != nil {
		return Host{}, err
	}
	return Host{Run: func(ctx context.Context, name string, cmd ...string) ([]byte, error) {
		return exec.CommandContext(ctx, "ssh", append(args, ShellQuote(append([]string{name}, cmd...)))...).CombinedOutput()
	}, Remote: u.Hostname()}, nil
}

// SSHArgs returns ssh(1)'s arguments up to the remote command for the host a qemu+ssh (libssh,
// libssh2) URI names: batch mode (no password prompt: a key or an agent), a 10 s connect
// timeout, its port, user, keyfile and known-hosts file, and no host-key check only where the
// URI says so (no_verify=1 or known_hosts_verify=ignore), as libvirt's own ssh transport reads
// them.
func SSHArgs(uri string) ([]string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("libvirt URI %q: %w", uri, err)
	}
	_, tr, _ := strings.Cut(u.Scheme, "+")
	if tr != "ssh" && tr != "libssh" && tr != "libssh2" {
		return nil, fmt.Errorf("libvirt URI %s: no way into host %s for ip(8): transport %q is not ssh (use qemu+ssh://user@%s/system)", uri, u.Hostname(), tr, u.Hostname())
	}
	args := []string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=10"}
	if p := u.Port(); p != "" {
		args = append(args, "-p", p)
	}
	if n := u.User.Username(); n != "" {
		args = append(args, "-l", n)
	}
	q := u.Query()
	if k := q.Get("keyfile"); k != "" {
		args = append(args, "-i", k, "-o", "IdentitiesOnly=yes")
	}
	switch {
	case q.Get("no_verify") == "1" || q.Get("known_hosts_verify") == "ignore":
		args = append(args, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null")
	case q.Get("known_hosts") != "":
		args = append(args, "-o", "UserKnownHostsFile="+q.Get("known_hosts"), "-o", "StrictHostKeyChecking=yes")
	}
	return append(args, "--", u.Hostname()), nil
}

// ShellQuote joins argv into one command line for the remote user's shell, each word in single
// quotes (ssh(1) hands the remote side a string, not a vector).
func ShellQuote(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
