package targets

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/render/vip"
	"github.com/labbuild/labbuild/targets/hostexec"
)

// The vxlan family joins the bridges of a lab spread over several hosts into one L2 for the
// machine network (lab.yaml hosts:, vxlan:):
//
//	vxlan/<host>  on each host, a Linux kernel VXLAN device vx-<network> (vxlan.vni, UDP
//	              vxlan.port, local address the host's underlay, MTU the machine network's)
//	              on the lab bridge virbr-<network> — the first host's libvirt network, another
//	              host's isolated one (libvirt/bridge/<host>) — with one all-zero FDB entry per
//	              peer host (unicast head-end replication of broadcast and unknown unicast; the
//	              device learns where each MAC is), and the UDP port opened from the peers in
//	              the host's firewall (nftables rules tagged labbuild:<cluster>:vxlan, or
//	              firewalld rich rules)
//
// libvirt's network XML cannot make a VXLAN device, so labbuild runs iproute2 on the host: here
// for a local URI, else over ssh(1) as the user of the host's qemu+ssh URI (hostexec.ForURI),
// the way libvirt itself reaches that host. No agent of labbuild's runs there. The device
// rides the underlay address; no host interface is enslaved to a bridge or changed.
// docs/multi-host.md says why VXLAN and not Open vSwitch.
func init() {
	Register(Family{Name: "vxlan", Doc: "a lab on several hosts: VXLAN devices joining the hosts' lab bridges into one machine network", Targets: fromConfig(vxlanTargets)})
}

// vxHostFor reaches the host a libvirt URI names (hostexec.ForURI); tests point it into the
// network namespaces they created.
var vxHostFor = hostexec.ForURI

func vxlanTargets(c *lab.Config) []*engine.Target {
	if !c.MultiHost() {
		return nil
	}
	var underlays []string
	for _, h := range c.Hosts {
		underlays = append(underlays, lab.HostPath(h.Name, lab.HostUnderlay))
	}
	var ts []*engine.Target
	for _, h := range c.Hosts {
		bridge := "libvirt/network"
		if !c.IsFirstHost(h) {
			bridge = "libvirt/bridge/" + h.Name
		}
		reads := append(hostReads(c, h, lab.Node{}), underlays...)
		reads = append(append(reads, lab.LibvirtNetwork, lab.ClusterName, lab.VXLANVNI, lab.VXLANPort), mtuReads(c)...)
		if c.InCluster() {
			reads = append(reads, lab.NetworkLoadBalancer) // the VRRP ids the plan shows
		}
		ts = append(ts, &engine.Target{
			Name:  "vxlan/" + h.Name,
			Doc:   "VXLAN device vx-<network> on host " + h.Name + "'s lab bridge, FDB entries to the other hosts, the UDP port opened from them",
			Deps:  []string{hostPreflight, bridge},
			Reads: reads, Version: 1, External: true,
			Run: vxRun, Probe: vxProbe, Destroy: vxDestroy,
		})
	}
	return ts
}

// vxRecord is what vxlan/<host> made on its host: enough to remove it after the config changed.
type vxRecord struct {
	Host   string   `json:"host"`
	URI    string   `json:"uri"` // the libvirt URI: how the host is reached (hostexec.ForURI)
	Device string   `json:"device"`
	Bridge string   `json:"bridge"`
	VNI    int      `json:"vni"`
	Port   int      `json:"port"`
	Local  string   `json:"local"`
	Peers  []string `json:"peers"`
	MTU    int      `json:"mtu"`
	// Firewall is how the port was opened: "nftables" (rules tagged Tag), "firewalld" (Rules,
	// rich rules in the runtime and permanent configuration) or "none".
	Firewall string   `json:"firewall"`
	Tag      string   `json:"tag,omitempty"`
	Rules    []string `json:"rules,omitempty"`
}

// vxWant is the device the config asks for on the target's host, with the plan's summary.
type vxWant struct {
	vxRecord
	mtus string // mtuSummary
	vrrp string // in-cluster: the keepalived virtual_router_ids, for the plan
}

func vxWanted(s *engine.Step) (vxWant, error) {
	var w vxWant
	uri, host, err := stepHost(s)
	if err != nil {
		return w, err
	}
	w.Host, w.URI = host, uri
	net, err := s.String(lab.LibvirtNetwork)
	if err != nil {
		return w, err
	}
	cluster, err := s.String(lab.ClusterName)
	if err != nil {
		return w, err
	}
	w.Device, w.Bridge, w.Tag = "vx-"+net, rl.Bridge(net), "labbuild:"+cluster+":vxlan"
	for p, v := range map[string]*int{lab.VXLANVNI: &w.VNI, lab.VXLANPort: &w.Port, lab.DerivedMachineMTU: &w.MTU} {
		if err := s.Value(p, v); err != nil {
			return w, err
		}
	}
	if w.mtus, err = mtuSummary(s); err != nil {
		return w, err
	}
	for _, r := range s.Target().Reads {
		name, f, ok := lab.SplitHostPath(r)
		if !ok || f != lab.HostUnderlay {
			continue
		}
		a, err := s.String(r)
		if err != nil {
			return w, err
		}
		if name == host {
			w.Local = a
		} else {
			w.Peers = append(w.Peers, a)
		}
	}
	if slices.Contains(s.Target().Reads, lab.NetworkLoadBalancer) {
		w.vrrp = fmt.Sprintf("; keepalived virtual_router_id api %d, ingress %d (Fletcher-8 of %s-api, %s-ingress, as runtimecfg derives them; a separate VNI keeps another lab's VRRP off this L2)",
			vip.FletcherChecksum8(cluster+"-api"), vip.FletcherChecksum8(cluster+"-ingress"), cluster, cluster)
	}
	return w, nil
}

// summary is the plan's sentence about the tunnel and the MTU it leaves.
func (w vxWant) summary() string {
	return fmt.Sprintf("%s (VNI %d, UDP %d) on host %s's %s, local %s, peers %s; %s%s",
		w.Device, w.VNI, w.Port, w.Host, w.Bridge, w.Local, strings.Join(w.Peers, ", "), w.mtus, w.vrrp)
}

// vxState is the device as the host has it.
type vxState struct {
	found, replace bool
	fixes          []string // what an update changes: MTU, master, up, FDB entries, the firewall
	missingPeers   []string
	extraPeers     []string
	firewall       string
}

// vxObserve reads the host: the underlay address must be one of its interfaces', no other VXLAN
// device may hold the VNI and port (another lab on this L2), and the device, its FDB and the
// firewall are compared with w.
func vxObserve(ctx context.Context, h hostexec.Host, w vxWant) (vxState, error) {
	var st vxState
	links, err := h.Links(ctx)
	if err != nil {
		return st, err
	}
	var local, dev *hostexec.Link
	for i := range links {
		l := &links[i]
		if slices.Contains(l.Addrs, w.Local) {
			local = l
		}
		if l.Name == w.Device {
			dev = l
		} else if l.Kind == "vxlan" && l.VXLAN.ID == w.VNI && l.VXLAN.Port == w.Port {
			return st, fmt.Errorf("VXLAN VNI %d on UDP %d is already device %s's on host %s (another lab on these hosts? choose another vxlan.vni)", w.VNI, w.Port, l.Name, w.Host)
		}
	}
	if local == nil {
		return st, fmt.Errorf("host %s has no interface with the underlay address %s (hosts.%s.underlay)", w.Host, w.Local, w.Host)
	}
	if dev == nil {
		return st, nil
	}
	st.found = true
	if dev.Kind != "vxlan" || dev.VXLAN.ID != w.VNI || dev.VXLAN.Port != w.Port || dev.VXLAN.Local != w.Local {
		st.replace = true
		st.fixes = append(st.fixes, fmt.Sprintf("%s is %s VNI %d port %d local %s, want VNI %d port %d local %s", w.Device, dev.Kind, dev.VXLAN.ID, dev.VXLAN.Port, dev.VXLAN.Local, w.VNI, w.Port, w.Local))
		return st, nil
	}
	if dev.MTU != w.MTU {
		st.fixes = append(st.fixes, fmt.Sprintf("MTU %d → %d", dev.MTU, w.MTU))
	}
	if dev.Master != w.Bridge {
		st.fixes = append(st.fixes, fmt.Sprintf("not on %s (master %q)", w.Bridge, dev.Master))
	}
	if !dev.Up {
		st.fixes = append(st.fixes, "down")
	}
	have, err := h.FloodPeers(ctx, w.Device)
	if err != nil {
		return st, err
	}
	for _, p := range w.Peers {
		if !slices.Contains(have, p) {
			st.missingPeers = append(st.missingPeers, p)
		}
	}
	for _, p := range have {
		if !slices.Contains(w.Peers, p) {
			st.extraPeers = append(st.extraPeers, p)
		}
	}
	if len(st.missingPeers) > 0 {
		st.fixes = append(st.fixes, "no FDB entry to "+strings.Join(st.missingPeers, ", "))
	}
	if len(st.extraPeers) > 0 {
		st.fixes = append(st.fixes, "FDB entries to former peers "+strings.Join(st.extraPeers, ", "))
	}
	return st, nil
}

// vxFirewallMissing says what of the port's opening the host's firewall lacks ("" when none).
func vxFirewallMissing(ctx context.Context, h hostexec.Host, w vxWant, prev *vxRecord) string {
	switch mode := h.Firewall(ctx); mode {
	case "nftables":
		inputs, tagged, err := h.NFT(ctx, w.Tag)
		if err != nil {
			return err.Error()
		}
		if m := hostexec.NFTMissing(inputs, tagged); len(m) > 0 {
			return fmt.Sprintf("nftables chain %s %s %s does not accept UDP %d from the peers", m[0].Family, m[0].Table, m[0].Name, w.Port)
		}
		if vxRulesStale(prev, w) {
			return fmt.Sprintf("the nftables rules accept UDP %d from %s, not %s", prev.Port, strings.Join(prev.Peers, ", "), strings.Join(w.Peers, ", "))
		}
	case "firewalld":
		if prev == nil || prev.Firewall != mode || !slices.Equal(prev.Rules, vxRichRules(w)) {
			return "firewalld does not accept UDP " + strconv.Itoa(w.Port) + " from the peers"
		}
	}
	return ""
}

// vxRulesStale reports whether the recorded nftables rules open another port or other peers
// than w wants.
func vxRulesStale(prev *vxRecord, w vxWant) bool {
	return prev != nil && prev.Firewall == "nftables" && (prev.Port != w.Port || !slices.Equal(prev.Peers, w.Peers))
}

// vxRichRules are firewalld's rich rules accepting the VXLAN port from each peer.
func vxRichRules(w vxWant) []string {
	var out []string
	for _, p := range w.Peers {
		out = append(out, fmt.Sprintf(`rule family="ipv4" source address="%s" port port="%d" protocol="udp" accept`, p, w.Port))
	}
	return out
}

func vxPrev(s *engine.Step) (*vxRecord, error) {
	r, ok, err := readRecord[vxRecord](s, recordFile)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

func vxProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	w, err := vxWanted(s)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	h, err := vxHostFor(w.URI)
	if err != nil {
		return engine.ProbeResult{}, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	prev, err := vxPrev(s)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	st, err := vxObserve(ctx, h, w)
	if err != nil {
		return engine.ProbeResult{}, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	switch {
	case prev != nil && (prev.URI != w.URI || prev.Device != w.Device):
		return engine.ProbeResult{Action: engine.Replace, Reason: fmt.Sprintf("%s on host %s moves: %s", prev.Device, prev.Host, w.summary())}, nil
	case !st.found:
		return engine.ProbeResult{Action: engine.Create, Reason: w.summary()}, nil
	case st.replace:
		return engine.ProbeResult{Action: engine.Replace, Reason: strings.Join(st.fixes, "; ") + ": " + w.summary()}, nil
	}
	if fw := vxFirewallMissing(ctx, h, w, prev); fw != "" {
		st.fixes = append(st.fixes, fw)
	}
	if len(st.fixes) > 0 {
		return engine.ProbeResult{Action: engine.Update, Reason: strings.Join(st.fixes, "; ") + ": " + w.summary()}, nil
	}
	return engine.ProbeResult{Action: engine.Keep}, nil
}

func vxRun(ctx context.Context, s *engine.Step) error {
	name := s.Target().Name
	w, err := vxWanted(s)
	if err != nil {
		return err
	}
	h, err := vxHostFor(w.URI)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	prev, err := vxPrev(s)
	if err != nil {
		return err
	}
	if prev != nil && (prev.URI != w.URI || prev.Device != w.Device) {
		s.Logf("%s on host %s moved: removing it", prev.Device, prev.Host)
		if _, err := vxUndo(ctx, *prev); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	st, err := vxObserve(ctx, h, w)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if st.replace {
		s.Logf("replace: %s", strings.Join(st.fixes, "; "))
		if err := h.Do(ctx, "ip", "link", "del", "dev", w.Device); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		st.found = false
	}
	if !st.found {
		// Learning stays on: the device learns behind which peer each MAC is from what it
		// receives, and floods the rest to every all-zero FDB entry.
		if err := h.Do(ctx, "ip", "link", "add", w.Device, "type", "vxlan", "id", strconv.Itoa(w.VNI), "dstport", strconv.Itoa(w.Port), "local", w.Local); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		st.missingPeers = w.Peers
		s.Logf("created %s", w.summary())
	}
	for _, cmd := range [][]string{
		{"link", "set", "dev", w.Device, "mtu", strconv.Itoa(w.MTU)},
		{"link", "set", "dev", w.Device, "master", w.Bridge},
		{"link", "set", "dev", w.Device, "up"},
	} {
		if err := h.Do(ctx, "ip", cmd...); err != nil {
			return fmt.Errorf("%s: %w (is %s up?)", name, err, w.Bridge)
		}
	}
	for _, p := range st.missingPeers {
		if err := h.Do(ctx, "bridge", "fdb", "append", "00:00:00:00:00:00", "dev", w.Device, "dst", p); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	for _, p := range st.extraPeers {
		if err := h.Do(ctx, "bridge", "fdb", "del", "00:00:00:00:00:00", "dev", w.Device, "dst", p); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	rec := w.vxRecord
	if rec.Firewall, rec.Rules, err = vxOpen(ctx, h, w, prev); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s.Logf("%s: FDB to %s; UDP %d open from them (%s)", w.Device, strings.Join(w.Peers, ", "), w.Port, rec.Firewall)
	return writeRecord(s, recordFile, rec)
}

// vxOpen accepts UDP w.Port from the peers in the host's firewall: a tagged rule first in every
// nftables input hook chain (as host/firewall does: another table's drop would outvote a table
// of our own), or firewalld rich rules (runtime and permanent); nothing where no firewall runs.
func vxOpen(ctx context.Context, h hostexec.Host, w vxWant, prev *vxRecord) (mode string, rules []string, err error) {
	switch mode = h.Firewall(ctx); mode {
	case "nftables":
		inputs, tagged, err := h.NFT(ctx, w.Tag)
		if err != nil {
			return mode, nil, err
		}
		if vxRulesStale(prev, w) { // other peers or another port: the tagged rules go first
			for _, t := range tagged {
				if err := h.Do(ctx, "nft", "delete", "rule", t.Family, t.Table, t.Chain, "handle", strconv.Itoa(t.Handle)); err != nil {
					return mode, nil, err
				}
			}
			tagged = nil
		}
		for _, c := range hostexec.NFTMissing(inputs, tagged) {
			if err := h.Do(ctx, "nft", "insert", "rule", c.Family, c.Table, c.Name, "ip", "saddr", "{ "+strings.Join(w.Peers, ", ")+" }",
				"udp", "dport", strconv.Itoa(w.Port), "accept", "comment", `"`+w.Tag+`"`); err != nil {
				return mode, nil, err
			}
		}
		return mode, nil, nil
	case "firewalld":
		if prev != nil && prev.Firewall == mode {
			vxFirewalldRemove(ctx, h, prev.Rules)
		}
		rules = vxRichRules(w)
		for _, perm := range [][]string{nil, {"--permanent"}} {
			for _, r := range rules {
				if err := h.Do(ctx, "firewall-cmd", append(perm, "--add-rich-rule="+r)...); err != nil {
					return mode, nil, err
				}
			}
		}
		return mode, rules, nil
	}
	return mode, nil, nil
}

// vxFirewalldRemove removes rich rules (runtime and permanent); what is gone already is fine.
func vxFirewalldRemove(ctx context.Context, h hostexec.Host, rules []string) (removed bool) {
	for _, perm := range [][]string{nil, {"--permanent"}} {
		for _, r := range rules {
			out, err := h.Run(ctx, "firewall-cmd", append(perm, "--remove-rich-rule="+r)...)
			removed = removed || (err == nil && !strings.Contains(string(out), "NOT_ENABLED"))
		}
	}
	return removed
}

// vxUndo removes what a record says vxlan/<host> made: the device (its FDB entries go with it)
// and the firewall opening. It reports whether anything was still there; a host it cannot
// reach is an error naming the host, so the record stays.
func vxUndo(ctx context.Context, r vxRecord) (bool, error) {
	h, err := vxHostFor(r.URI)
	if err != nil {
		return false, fmt.Errorf("host %s: %w", r.Host, err)
	}
	links, err := h.Links(ctx)
	if err != nil {
		return false, fmt.Errorf("host %s is unreachable, %s stays recorded: %w", r.Host, r.Device, err)
	}
	removed := false
	for _, l := range links {
		if l.Name == r.Device && l.Kind == "vxlan" {
			if err := h.Do(ctx, "ip", "link", "del", "dev", r.Device); err != nil {
				return false, err
			}
			removed = true
		}
	}
	switch r.Firewall {
	case "nftables":
		if _, tagged, err := h.NFT(ctx, r.Tag); err == nil {
			for _, t := range tagged {
				if err := h.Do(ctx, "nft", "delete", "rule", t.Family, t.Table, t.Chain, "handle", strconv.Itoa(t.Handle)); err != nil {
					return removed, err
				}
				removed = true
			}
		}
	case "firewalld":
		removed = vxFirewalldRemove(ctx, h, r.Rules) || removed
	}
	return removed, nil
}

// vxDestroy removes the recorded device and firewall opening: Destroyed when something was
// there, AlreadyAbsent when not; an unreachable host fails, naming it, and keeps the record.
func vxDestroy(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
	prev, err := vxPrev(s)
	if err != nil {
		return 0, err
	}
	if prev == nil {
		return engine.AlreadyAbsent, nil
	}
	removed, err := vxUndo(ctx, *prev)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	if !removed {
		return engine.AlreadyAbsent, nil
	}
	return engine.Destroyed, nil
}
