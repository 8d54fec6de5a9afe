// Package hostexec is the adapter to the host's own programs and files that the host-side
// families use: ip (bridges, veth pairs, the VIP addresses, VXLAN devices), bridge (FDB
// entries), haproxy (start, soft reload, the running processes), NetworkManager (nmcli, its
// dnsmasq drop-ins) and the firewall (firewall-cmd, nft) — on this machine, or on another
// libvirt host over ssh(1) as its qemu+ssh URI's user (ForURI). It knows no engine and no family: each function takes what it runs and
// returns what the host says, and the families decide what to make of it. Tests point a
// Command or a Host into a network namespace and a temporary root they created.
package hostexec

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// Command builds the command for program name with args, as exec.Command does (which it is
// in production); tests return a command that runs it inside their network namespace.
type Command func(name string, args ...string) *exec.Cmd

// Run runs name with args; a failure's error holds the command line and its trimmed combined
// output.
func (c Command) Run(name string, args ...string) error {
	out, err := c(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// IP runs ip(8) with args and returns its combined output; a failure's error holds the
// command line and the output.
func (c Command) IP(args ...string) ([]byte, error) {
	out, err := c("ip", args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// LinkMaster returns the master of link dev ("" for none; `ip -o link show dev DEV`) and
// whether the link exists.
func (c Command) LinkMaster(dev string) (master string, exists bool) {
	out, err := c("ip", "-o", "link", "show", "dev", dev).CombinedOutput()
	if err != nil {
		return "", false
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "master" {
			return f[i+1], true
		}
	}
	return "", true
}

// AddrsMissing returns which of addrs ("198.18.0.10/24") are not on bridge (`ip -o -4 addr
// show dev BRIDGE`); an error when the bridge cannot be listed.
func (c Command) AddrsMissing(bridge string, addrs []string) ([]string, error) {
	out, err := c("ip", "-o", "-4", "addr", "show", "dev", bridge).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("ip addr show dev %s: %w: %s (is libvirt/network running?)", bridge, err, bytes.TrimSpace(out))
	}
	var missing []string
	for _, a := range addrs {
		if !bytes.Contains(out, []byte(" "+a+" ")) {
			missing = append(missing, a)
		}
	}
	return missing, nil
}
