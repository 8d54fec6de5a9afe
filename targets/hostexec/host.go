package hostexec

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Host is the machine as host/dns and host/firewall reach it: a file root and a command
// runner. Local is the real one; tests point Root at a temporary directory and run the
// commands inside a network namespace they created.
type Host struct {
	// Root is the file root: "/" for the real host.
	Root string
	// Run runs name with args and returns its combined output (exec.Cmd.CombinedOutput).
	Run func(ctx context.Context, name string, args ...string) ([]byte, error)
	// Remote is the host name ssh reaches it by (ForURI), "" for this machine: its files are
	// not under Root.
	Remote string
}

// Local is the host labbuild runs on: root "/", programs from PATH.
func Local() Host {
	return Host{Root: "/", Run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, name, args...).CombinedOutput()
	}}
}

// Path returns the host path p (slash-separated, absolute) under h's root.
func (h Host) Path(p string) string { return filepath.Join(h.Root, filepath.FromSlash(p)) }

// NetworkManager's configuration paths.
const (
	// NMDnsmasqDir holds the dnsmasq drop-ins of NetworkManager's dns=dnsmasq mode.
	NMDnsmasqDir = "/etc/NetworkManager/dnsmasq.d"
	// NMConfDir holds NetworkManager's configuration drop-ins.
	NMConfDir = "/etc/NetworkManager/conf.d"
)

// NMRunning reports whether NetworkManager runs (`nmcli -t -f RUNNING general` says
// "running").
func (h Host) NMRunning(ctx context.Context) bool {
	out, err := h.Run(ctx, "nmcli", "-t", "-f", "RUNNING", "general")
	return err == nil && strings.TrimSpace(string(out)) == "running"
}

// NMUsesDnsmasq reports whether NetworkManager.conf or a conf.d file sets dns=dnsmasq.
func (h Host) NMUsesDnsmasq() bool {
	files, _ := filepath.Glob(h.Path(NMConfDir + "/*.conf"))
	if b, err := os.ReadFile(h.Path("/etc/NetworkManager/NetworkManager.conf")); err == nil && DNSMode(b) == "dnsmasq" {
		return true
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && DNSMode(b) == "dnsmasq" {
			return true
		}
	}
	return false
}

// DNSMode returns the dns= key of a NetworkManager.conf [main] section ("" when unset).
func DNSMode(b []byte) string {
	main := false
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			main = l == "[main]"
		} else if k, v, ok := strings.Cut(l, "="); ok && main && strings.TrimSpace(k) == "dns" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// Firewall says which firewall the host uses: "firewalld" (firewall-cmd --state says
// running), "nftables" (nft lists the tables), or "none".
func (h Host) Firewall(ctx context.Context) string {
	if out, err := h.Run(ctx, "firewall-cmd", "--state"); err == nil && strings.TrimSpace(string(out)) == "running" {
		return "firewalld"
	}
	if _, err := h.Run(ctx, "nft", "list", "tables"); err == nil {
		return "nftables"
	}
	return "none"
}

// NFTObj is one nftables chain or rule, as `nft -j list ruleset` prints it.
type NFTObj struct {
	Family  string `json:"family"`
	Table   string `json:"table"`
	Name    string `json:"name"`
	Chain   string `json:"chain"`
	Hook    string `json:"hook"`
	Handle  int    `json:"handle"`
	Comment string `json:"comment"`
}

// NFT returns the ruleset's input hook base chains (families inet and ip) and the rules
// whose comment is tag (`nft -j list ruleset`).
func (h Host) NFT(ctx context.Context, tag string) (inputs, tagged []NFTObj, err error) {
	out, err := h.Run(ctx, "nft", "-j", "list", "ruleset")
	if err != nil {
		return nil, nil, fmt.Errorf("nft -j list ruleset: %w: %s", err, bytes.TrimSpace(out))
	}
	var doc struct {
		Nftables []struct {
			Chain *NFTObj `json:"chain"`
			Rule  *NFTObj `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, nil, fmt.Errorf("nft -j list ruleset: %w", err)
	}
	for _, o := range doc.Nftables {
		if o.Chain != nil && o.Chain.Hook == "input" && (o.Chain.Family == "inet" || o.Chain.Family == "ip") {
			inputs = append(inputs, *o.Chain)
		}
		if o.Rule != nil && o.Rule.Comment == tag {
			tagged = append(tagged, *o.Rule)
		}
	}
	return inputs, tagged, nil
}

// NFTMissing returns the input chains in which no tagged rule sits.
func NFTMissing(inputs, tagged []NFTObj) []NFTObj {
	var missing []NFTObj
	for _, c := range inputs {
		if !slices.ContainsFunc(tagged, func(r NFTObj) bool {
			return r.Family == c.Family && r.Table == c.Table && r.Chain == c.Name
		}) {
			missing = append(missing, c)
		}
	}
	return missing
}
