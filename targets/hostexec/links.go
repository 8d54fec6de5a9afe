package hostexec

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Link is one network interface as `ip -j -d link show` (and `ip -j addr show`) prints it: the
// fields the multi-host lab reads (its bridges, VXLAN devices and underlay interfaces).
type Link struct {
	Name   string `json:"ifname"`
	MTU    int    `json:"mtu"`
	Master string `json:"master"`
	// Up is whether the link is administratively up (flag UP).
	Up bool `json:"-"`
	// Kind is linkinfo.info_kind ("vxlan", "bridge", "veth", "" for a plain NIC).
	Kind string `json:"-"`
	// VXLAN is a VXLAN device's id, local address and destination port; zero otherwise.
	VXLAN VXLANInfo `json:"-"`
	// Addrs are the link's IPv4 addresses (ip addr only).
	Addrs []string `json:"-"`
}

// VXLANInfo is a VXLAN device's linkinfo.info_data.
type VXLANInfo struct {
	ID    int    `json:"id"`
	Local string `json:"local"`
	Port  int    `json:"port"`
}

// ParseLinks decodes `ip -j -d addr show` (or `ip -j -d link show`).
func ParseLinks(out []byte) ([]Link, error) {
	var raw []struct {
		Link
		Flags    []string `json:"flags"`
		LinkInfo *struct {
			Kind string    `json:"info_kind"`
			Data VXLANInfo `json:"info_data"`
		} `json:"linkinfo"`
		AddrInfo []struct {
			Family string `json:"family"`
			Local  string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("ip -j: %w", err)
	}
	links := make([]Link, 0, len(raw))
	for _, r := range raw {
		l := r.Link
		for _, f := range r.Flags {
			l.Up = l.Up || f == "UP"
		}
		if r.LinkInfo != nil {
			l.Kind = r.LinkInfo.Kind
			if l.Kind == "vxlan" {
				l.VXLAN = r.LinkInfo.Data
			}
		}
		for _, a := range r.AddrInfo {
			if a.Family == "inet" {
				l.Addrs = append(l.Addrs, a.Local)
			}
		}
		links = append(links, l)
	}
	return links, nil
}

// Links returns the host's interfaces with their addresses (`ip -j -d addr show`).
func (h Host) Links(ctx context.Context) ([]Link, error) {
	out, err := h.Run(ctx, "ip", "-j", "-d", "addr", "show")
	if err != nil {
		return nil, fmt.Errorf("%sip -j -d addr show: %w: %s", h.on(), err, bytes.TrimSpace(out))
	}
	return ParseLinks(out)
}

// FloodPeers returns the destinations of dev's all-zero FDB entries (`bridge -j fdb show dev
// DEV`): the VXLAN peers that get the tunnel's broadcast, unknown-unicast and multicast frames.
func (h Host) FloodPeers(ctx context.Context, dev string) ([]string, error) {
	out, err := h.Run(ctx, "bridge", "-j", "fdb", "show", "dev", dev)
	if err != nil {
		return nil, fmt.Errorf("%sbridge -j fdb show dev %s: %w: %s", h.on(), dev, err, bytes.TrimSpace(out))
	}
	var fdb []struct {
		MAC string `json:"mac"`
		Dst string `json:"dst"`
	}
	if err := json.Unmarshal(out, &fdb); err != nil {
		return nil, fmt.Errorf("bridge -j fdb: %w", err)
	}
	var peers []string
	for _, e := range fdb {
		if e.MAC == "00:00:00:00:00:00" && e.Dst != "" {
			peers = append(peers, e.Dst)
		}
	}
	return peers, nil
}

// Do runs name with args; a failure's error holds the host, the command line and the output.
func (h Host) Do(ctx context.Context, name string, args ...string) error {
	out, err := h.Run(ctx, name, args...)
	if err != nil {
		return fmt.Errorf("%s%s %s: %w: %s", h.on(), name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// on prefixes a message with the remote host it comes from ("on hv2: "), nothing locally.
func (h Host) on() string {
	if h.Remote == "" {
		return ""
	}
	return "on " + h.Remote + ": "
}
