package hostexec

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestSSHArgs: the ssh(1) arguments follow the libvirt URI's user, port and parameters (the
// keyfile, the known-hosts file, no host-key check only where the URI says so); a URI without
// ssh gives no way in and says so; a local URI runs here.
func TestSSHArgs(t *testing.T) {
	base := []string{"-o", "BatchMode=yes", "-o", "ConnectTimeout=10"}
	for _, tc := range []struct{ uri, want, err string }{
		{"qemu+ssh://root@hv2/system", "-l root -- hv2", ""},
		{"qemu+ssh://lab@hv2:2222/system?keyfile=/k/id&known_hosts=/k/kh", "-p 2222 -l lab -i /k/id -o IdentitiesOnly=yes -o UserKnownHostsFile=/k/kh -o StrictHostKeyChecking=yes -- hv2", ""},
		{"qemu+libssh2://root@10.0.0.12/system?no_verify=1", "-l root -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -- 10.0.0.12", ""},
		{"qemu+libssh://root@hv2/system?known_hosts_verify=ignore&known_hosts=/k/kh", "-l root -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -- hv2", ""},
		{"qemu+tcp://hv2:16509/system", "", `no way into host hv2 for ip(8): transport "tcp" is not ssh`},
	} {
		got, err := SSHArgs(tc.uri)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.uri, err, tc.err)
			}
			continue
		}
		if want := append(slices.Clone(base), strings.Fields(tc.want)...); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s:\n got  %q (%v)\n want %q", tc.uri, got, err, want)
		}
	}
	if h, err := ForURI("qemu+unix:///system?socket=/run/x"); err != nil || h.Remote != "" || h.Root != "/" {
		t.Errorf("a local URI: %+v, %v", h, err)
	}
	if h, err := ForURI("qemu+ssh://root@hv2/system"); err != nil || h.Remote != "hv2" {
		t.Errorf("an ssh URI: %+v, %v", h, err)
	}
}

// TestShellQuote: the remote shell gets back exactly the words (a real sh parses the line).
func TestShellQuote(t *testing.T) {
	words := []string{"nft", "insert", "rule", "inet", "filter", "input", "{ 10.0.0.1, 10.0.0.2 }", `comment "labbuild:x"`, "it's", "$HOME;`id`"}
	out, err := exec.CommandContext(context.Background(), "sh", "-c", `for w in `+ShellQuote(words)+`; do printf '%s\n' "$w"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n"); !slices.Equal(got, words) {
		t.Errorf("sh read back %q, want %q", got, words)
	}
}
