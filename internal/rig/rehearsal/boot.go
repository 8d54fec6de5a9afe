package rehearsal

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// KeyfileNet is the IPv4 setup a node's NetworkManager keyfile (render/ignition Keyfile, at
// /etc/NetworkManager/system-connections/labbuild.nmconnection) gives it.
type KeyfileNet struct {
	IP      string
	Prefix  int
	Gateway string
	DNS     []string
	Search  []string
	// MTU is [ethernet] mtu (a lab on several hosts: the VXLAN tunnel's); 0 when unset.
	MTU int
}

// PathKeyfile is where labbuild's Ignition puts the node's NetworkManager keyfile.
const PathKeyfile = "/etc/NetworkManager/system-connections/labbuild.nmconnection"

// ReadKeyfile parses the node's keyfile from its root ([ipv4] address1, gateway, dns,
// dns-search; [ethernet] mtu), as NetworkManager would apply it at boot.
func ReadKeyfile(root string) (*KeyfileNet, error) {
	b, err := os.ReadFile(filepath.Join(root, PathKeyfile))
	if err != nil {
		return nil, fmt.Errorf("rehearsal: %w", err)
	}
	k := &KeyfileNet{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "[") {
			section = l
			continue
		}
		key, v, ok := strings.Cut(l, "=")
		if ok && section == "[ethernet]" && key == "mtu" {
			if k.MTU, err = strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("rehearsal: keyfile [ethernet] mtu %q: %w", v, err)
			}
		}
		if !ok || section != "[ipv4]" {
			continue
		}
		list := func() []string {
			var out []string
			for _, f := range strings.Split(v, ";") {
				if f = strings.TrimSpace(f); f != "" {
					out = append(out, f)
				}
			}
			return out
		}
		switch key {
		case "address1":
			a, _, _ := strings.Cut(v, ",")
			p, err := netip.ParsePrefix(a)
			if err != nil {
				return nil, fmt.Errorf("rehearsal: keyfile address1 %q: %w", v, err)
			}
			k.IP, k.Prefix = p.Addr().String(), p.Bits()
		case "gateway":
			k.Gateway = v
		case "dns":
			k.DNS = list()
		case "dns-search":
			k.Search = list()
		}
	}
	if k.IP == "" || k.Gateway == "" {
		return nil, fmt.Errorf("rehearsal: keyfile %s has no [ipv4] address1 or gateway", PathKeyfile)
	}
	return k, nil
}

// BootStandins writes into the node root what RHCOS's boot would write there and nothing of
// labbuild's makes: /etc/resolv.conf from the keyfile's DNS servers and search domain
// (NetworkManager's job), and, when hosts is not empty, /etc/hosts as the host's plus those
// name → address lines (a stand-in for the lab DNS where no dnsmasq runs).
func BootStandins(root string, k *KeyfileNet, hosts map[string]string) error {
	var rc strings.Builder
	rc.WriteString("# written by the rehearsal as NetworkManager would, from the node's keyfile\n")
	if len(k.Search) > 0 {
		fmt.Fprintf(&rc, "search %s\n", strings.Join(k.Search, " "))
	}
	for _, d := range k.DNS {
		fmt.Fprintf(&rc, "nameserver %s\n", d)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "resolv.conf"), []byte(rc.String()), 0o644); err != nil {
		return err
	}
	if len(hosts) == 0 {
		return nil
	}
	base, _ := os.ReadFile("/etc/hosts")
	var names []string
	for n := range hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.Write(base)
	b.WriteString("# rehearsal stand-in for the lab DNS\n")
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s\n", hosts[n], n)
	}
	return os.WriteFile(filepath.Join(root, "etc", "hosts"), []byte(b.String()), 0o644)
}

// RunOneshot runs a oneshot unit's ExecStart from the node root inside the node (with its
// environment, in its WorkingDirectory), as systemd would before the units ordered after it: the kubelet's
// kubelet-auto-node-size.service writes /etc/node-sizing.env, which kubelet.service needs.
func RunOneshot(ctx context.Context, nd *Node, unit string) error {
	s, err := ParseService(nd.Root, unit)
	if err != nil {
		return err
	}
	var env []string
	for k, v := range s.Env {
		env = append(env, k+"="+v)
	}
	argv := s.Argv
	if s.WorkDir != "" { // WorkingDirectory=: install-to-disk.service's scripts keep .done files there
		argv = append([]string{"sh", "-c", `cd "$0" && exec "$@"`, s.WorkDir}, argv...)
	}
	return nd.Run(ctx, strings.TrimSuffix(unit, ".service"), env, argv...)
}
