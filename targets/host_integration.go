package targets

// Host integration: what the host itself needs so that the lab works from it, as External
// targets with Probe and Destroy (openshift-the-hard-way did both by hand: stage 02's
// "HAProxy" and "Infrastructure" open 6443/22623/80/443 and point the host's resolver at the
// lab).
//
//	host/dns       the cluster domain resolvable on the host: where NetworkManager runs, a
//	               dnsmasq split-DNS drop-in (/etc/NetworkManager/dnsmasq.d/labbuild-<cluster>.conf:
//	               server=/<cluster domain>/<lab DNS>) and, unless NetworkManager already runs
//	               dnsmasq, a conf.d file selecting it; elsewhere a note saying what to add.
//	host/firewall  the VIP ports (6443, 22623, 80, 443) accepted from the lab bridge: firewalld's
//	               libvirt zone where firewalld runs, else a rule in every nftables input hook
//	               chain (tagged with a comment, found and deleted by it), else nothing.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/hostexec"
)

// hostEnv is how host/dns and host/firewall reach the host; tests replace it.
var hostEnv = hostexec.Local()

// hostVIPPorts are the ports the VMs reach on the host's VIPs: API, machine config server,
// ingress HTTP and HTTPS (haproxy/config's frontends).
var hostVIPPorts = []string{"6443", "22623", "80", "443"}

// hostFWPorts are the TCP ports host/firewall opens from the lab bridge: hostVIPPorts; on
// platform baremetal the BMC's (BMCPort), which the cluster's Metal3 reaches from the masters
// (Ironic runs there, host-networked) as bmc/manifests' addresses say; with mirror.enabled the
// mirror's (mirror.port), which every node's CRI-O pulls from at network.gateway (the
// ImageDigestMirrorSet's registry; issue 38: a firewall that drops it leaves every pull to time
// out). platform and the mirror's fields are read only where they matter (the target's Reads),
// so other labs' keys are unchanged.
func hostFWPorts(s *engine.Step) []string {
	ports := slices.Clone(hostVIPPorts)
	if slices.Contains(s.Target().Reads, lab.Platform) {
		if p, _ := s.String(lab.Platform); p == lab.PlatformBaremetal {
			ports = append(ports, strconv.Itoa(BMCPort))
		}
	}
	if slices.Contains(s.Target().Reads, lab.MirrorPort) {
		var on bool
		var port int
		if s.Value(lab.MirrorEnabled, &on) == nil && on && s.Value(lab.MirrorPort, &port) == nil && port > 0 {
			ports = append(ports, strconv.Itoa(port))
		}
	}
	return ports
}

func hostIntegrationTargets(c *lab.Config) []*engine.Target {
	fwReads := []string{lab.ClusterName, lab.LibvirtNetwork}
	if c.Baremetal() {
		fwReads = append(fwReads, lab.Platform) // the BMC's port (hostFWPorts)
	}
	if c.MirrorOn() {
		fwReads = append(fwReads, lab.MirrorEnabled, lab.MirrorPort) // the mirror's port (hostFWPorts)
	}
	if lab.LibvirtRemoteHost(c.Libvirt.URI) != "" {
		// The lab bridge and its dnsmasq are on the daemon's host: a drop-in or a firewall
		// rule here would name a bridge this machine does not have. Validation refuses the
		// host load balancer with a remote URI for the same reason and says what is left out.
		return nil
	}
	return []*engine.Target{
		{
			Name:  "host/dns",
			Doc:   "the cluster domain resolvable on the host: NetworkManager dnsmasq split-DNS drop-in to the lab's DNS (or a note saying what to add)",
			Reads: []string{lab.ClusterName, lab.ClusterBaseDomain, lab.NetworkDNS}, Version: 1, External: true,
			Run: hostDNSRun, Probe: hostDNSProbe, Destroy: hostDNSDestroy,
		},
		{
			Name:  "host/firewall",
			Doc:   "VIP ports 6443/22623/80/443 (and the BMC's 8000 on platform baremetal, the mirror's port with mirror.enabled) open from the lab bridge: firewalld's libvirt zone, or rules in the nftables input chains, or nothing",
			Deps:  []string{hostPreflight},
			Reads: fwReads, Version: 1, External: true,
			Run: hostFWRun, Probe: hostFWProbe, Destroy: hostFWDestroy,
		},
	}
}

// hostRecord is what a host integration target made, to find and undo it later.
type hostRecord struct {
	Mode  string   `json:"mode"`            // dns: networkmanager | manual; firewall: firewalld | nftables | none
	Files []string `json:"files,omitempty"` // files written (paths under the host root)
	Zone  string   `json:"zone,omitempty"`  // firewalld zone
	Ports []string `json:"ports,omitempty"` // "6443/tcp"
	Tag   string   `json:"tag,omitempty"`   // nftables rule comment
	Note  string   `json:"note,omitempty"`  // what the user must do by hand, if anything
}

func hostPrev(s *engine.Step) (hostRecord, bool, error) { return readRecord[hostRecord](s, recordFile) }

func hostWrite(s *engine.Step, r hostRecord) error {
	if err := writeRecord(s, recordFile, r); err != nil {
		return err
	}
	if r.Note != "" {
		s.Logf("%s", r.Note)
		return s.WriteFile("note.txt", []byte(r.Note+"\n"), 0o644)
	}
	return nil
}

// --- host/dns ---

// hostDNSWant returns the drop-in's path and content for the lab.
func hostDNSWant(s *engine.Step) (name, content, domain, server string, err error) {
	if domain, err = clusterDomain(s); err != nil {
		return
	}
	if server, err = s.String(lab.NetworkDNS); err != nil {
		return
	}
	cluster, _ := s.String(lab.ClusterName)
	name = hostexec.NMDnsmasqDir + "/labbuild-" + cluster + ".conf"
	content = fmt.Sprintf("# labbuild: lab %s; removed by labbuild destroy\nserver=/%s/%s\n", cluster, domain, server)
	return
}

func hostDNSRun(ctx context.Context, s *engine.Step) error {
	name, content, domain, server, err := hostDNSWant(s)
	if err != nil {
		return err
	}
	if prev, ok, err := hostPrev(s); err != nil {
		return err
	} else if ok {
		hostRemoveFiles(prev.Files, name)
	}
	if !hostEnv.NMRunning(ctx) {
		return hostWrite(s, hostRecord{Mode: "manual", Note: fmt.Sprintf(
			"host/dns: NetworkManager does not run here, so labbuild did not change the host's resolver. To resolve api.%[1]s and *.apps.%[1]s from the host, send the domain %[1]s to the lab's DNS at %[2]s: with dnsmasq, add server=/%[1]s/%[2]s; with systemd-resolved, resolvectl dns <lab bridge> %[2]s && resolvectl domain <lab bridge> ~%[1]s.",
			domain, server)})
	}
	files := []string{name}
	if err := hostWriteFile(name, content); err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	if !hostEnv.NMUsesDnsmasq() {
		conf := hostexec.NMConfDir + "/labbuild-dnsmasq.conf"
		if err := hostWriteFile(conf, "# labbuild: NetworkManager's own dnsmasq, for split DNS to labs; removed by labbuild destroy\n[main]\ndns=dnsmasq\n"); err != nil {
			return fmt.Errorf("%s: %w", s.Target().Name, err)
		}
		files = append(files, conf)
	}
	if out, err := hostEnv.Run(ctx, "nmcli", "general", "reload", "conf", "dns-full"); err != nil {
		return fmt.Errorf("%s: nmcli general reload: %w: %s (the drop-in %s is in place: systemctl reload NetworkManager)", s.Target().Name, err, bytes.TrimSpace(out), name)
	}
	s.Logf("wrote %s: %s resolves through %s", name, domain, server)
	return hostWrite(s, hostRecord{Mode: "networkmanager", Files: files})
}

func hostDNSProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	prev, ok, err := hostPrev(s)
	if err != nil || !ok {
		return engine.ProbeResult{Action: engine.Create, Reason: "not set up yet"}, err
	}
	if (prev.Mode == "networkmanager") != hostEnv.NMRunning(ctx) {
		return engine.ProbeResult{Action: engine.Update, Reason: "NetworkManager started or stopped since"}, nil
	}
	if prev.Mode != "networkmanager" {
		return engine.ProbeResult{Action: engine.Keep}, nil
	}
	name, content, _, _, err := hostDNSWant(s)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if b, err := os.ReadFile(hostEnv.Path(name)); err != nil || string(b) != content {
		return engine.ProbeResult{Action: engine.Update, Reason: name + " missing or changed"}, nil
	}
	return engine.ProbeResult{Action: engine.Keep}, nil
}

// hostDNSDestroy removes the drop-ins host/dns wrote and reloads NetworkManager: Destroyed
// when one was there, AlreadyAbsent when none was, RecordOnly when it wrote none (no
// NetworkManager: the note said what to add by hand). A file it cannot remove is an error.
func hostDNSDestroy(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
	prev, ok, err := hostPrev(s)
	if err != nil {
		return 0, err
	}
	if !ok {
		return engine.AlreadyAbsent, nil
	}
	if len(prev.Files) == 0 {
		return engine.RecordOnly, nil
	}
	// The shared dnsmasq selector stays while another lab's drop-in still needs it.
	others, _ := filepath.Glob(hostEnv.Path(hostexec.NMDnsmasqDir + "/labbuild-*.conf"))
	keep := ""
	if len(others) > 1 {
		keep = hostexec.NMConfDir + "/labbuild-dnsmasq.conf"
	}
	removed, err := hostRemoveFiles(prev.Files, keep)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	if !removed {
		return engine.AlreadyAbsent, nil
	}
	if hostEnv.NMRunning(ctx) {
		if out, err := hostEnv.Run(ctx, "nmcli", "general", "reload", "conf", "dns-full"); err != nil {
			return 0, fmt.Errorf("%s: nmcli general reload: %w: %s", s.Target().Name, err, bytes.TrimSpace(out))
		}
	}
	return engine.Destroyed, nil
}

// hostWriteFile writes a file under the host root atomically.
func hostWriteFile(name, content string) error {
	p := hostEnv.Path(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return engine.WriteFileAtomic(p, []byte(content), 0o644)
}

// hostRemoveFiles removes files under the host root except keep; it reports whether any was
// there. A file that is there but cannot be removed is an error.
func hostRemoveFiles(files []string, keep string) (bool, error) {
	removed := false
	for _, f := range files {
		if f == keep {
			continue
		}
		err := os.Remove(hostEnv.Path(f))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed = removed || err == nil
	}
	return removed, nil
}

// --- host/firewall ---

// hostFWWant returns the lab's bridge and the nftables rule tag.
func hostFWWant(s *engine.Step) (bridge, tag string, err error) {
	net, err := s.String(lab.LibvirtNetwork)
	if err != nil {
		return "", "", err
	}
	cluster, err := s.String(lab.ClusterName)
	if err != nil {
		return "", "", err
	}
	return rl.Bridge(net), "labbuild:" + cluster, nil
}

func hostFWRun(ctx context.Context, s *engine.Step) error {
	bridge, tag, err := hostFWWant(s)
	if err != nil {
		return err
	}
	if prev, ok, err := hostPrev(s); err != nil {
		return err
	} else if ok {
		if _, err := hostFWUndo(ctx, prev); err != nil {
			return fmt.Errorf("%s: %w", s.Target().Name, err)
		}
	}
	open := hostFWPorts(s)
	var ports []string
	for _, p := range open {
		ports = append(ports, p+"/tcp")
	}
	switch mode := hostEnv.Firewall(ctx); mode {
	case "firewalld":
		// libvirt puts its bridges in firewalld's "libvirt" zone, which rejects what it does
		// not list; open the VIP ports there, now and across reloads.
		for _, perm := range [][]string{nil, {"--permanent"}} {
			args := append([]string{"--zone=libvirt"}, perm...)
			for _, p := range ports {
				args = append(args, "--add-port="+p)
			}
			if out, err := hostEnv.Run(ctx, "firewall-cmd", args...); err != nil {
				return fmt.Errorf("%s: firewall-cmd %s: %w: %s", s.Target().Name, strings.Join(args, " "), err, bytes.TrimSpace(out))
			}
		}
		s.Logf("firewalld zone libvirt: opened %s", strings.Join(ports, " "))
		return hostWrite(s, hostRecord{Mode: mode, Zone: "libvirt", Ports: ports})
	case "nftables":
		inputs, tagged, err := hostEnv.NFT(ctx, tag)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Target().Name, err)
		}
		// nftables runs every base chain of a hook: an accept in a table of our own would not
		// outvote another table's drop, so the rule goes first into each input chain there is.
		for _, c := range hostexec.NFTMissing(inputs, tagged) {
			args := []string{"insert", "rule", c.Family, c.Table, c.Name, "iifname", bridge, "tcp", "dport", "{ " + strings.Join(open, ", ") + " }", "accept", "comment", `"` + tag + `"`}
			if out, err := hostEnv.Run(ctx, "nft", args...); err != nil {
				return fmt.Errorf("%s: nft %s: %w: %s", s.Target().Name, strings.Join(args, " "), err, bytes.TrimSpace(out))
			}
			s.Logf("nftables %s %s %s: accept tcp %s from %s", c.Family, c.Table, c.Name, strings.Join(open, ","), bridge)
		}
		return hostWrite(s, hostRecord{Mode: mode, Tag: tag, Ports: ports})
	default:
		s.Logf("neither firewalld nor nftables runs: nothing to open")
		return hostWrite(s, hostRecord{Mode: "none"})
	}
}

func hostFWProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	prev, ok, err := hostPrev(s)
	if err != nil || !ok {
		return engine.ProbeResult{Action: engine.Create, Reason: "not set up yet"}, err
	}
	if mode := hostEnv.Firewall(ctx); mode != prev.Mode {
		return engine.ProbeResult{Action: engine.Update, Reason: "the host's firewall is now " + mode + ", was " + prev.Mode}, nil
	}
	switch prev.Mode {
	case "firewalld":
		out, err := hostEnv.Run(ctx, "firewall-cmd", "--zone="+prev.Zone, "--list-ports")
		for _, p := range prev.Ports {
			if err != nil || !slices.Contains(strings.Fields(string(out)), p) {
				return engine.ProbeResult{Action: engine.Update, Reason: "firewalld zone " + prev.Zone + " lacks " + p}, nil
			}
		}
	case "nftables":
		inputs, tagged, err := hostEnv.NFT(ctx, prev.Tag)
		if err != nil {
			return engine.ProbeResult{Action: engine.Update, Reason: err.Error()}, nil
		}
		if m := hostexec.NFTMissing(inputs, tagged); len(m) > 0 {
			return engine.ProbeResult{Action: engine.Update, Reason: fmt.Sprintf("nftables chain %s %s %s lacks the lab's rule", m[0].Family, m[0].Table, m[0].Name)}, nil
		}
	}
	return engine.ProbeResult{Action: engine.Keep}, nil
}

// hostFWDestroy removes the lab's firewall openings: Destroyed when a rule or port was still
// there, AlreadyAbsent when a reload or a hand removed them, RecordOnly when no firewall ran.
func hostFWDestroy(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
	prev, ok, err := hostPrev(s)
	if err != nil {
		return 0, err
	}
	if !ok {
		return engine.AlreadyAbsent, nil
	}
	if prev.Mode != "firewalld" && prev.Mode != "nftables" {
		return engine.RecordOnly, nil
	}
	removed, err := hostFWUndo(ctx, prev)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	if !removed {
		return engine.AlreadyAbsent, nil
	}
	return engine.Destroyed, nil
}

// hostFWUndo removes what a record says was opened; what is already gone is fine. It reports
// whether anything was still there.
func hostFWUndo(ctx context.Context, r hostRecord) (removed bool, err error) {
	switch r.Mode {
	case "firewalld":
		for _, perm := range [][]string{nil, {"--permanent"}} {
			args := append([]string{"--zone=" + r.Zone}, perm...)
			for _, p := range r.Ports {
				args = append(args, "--remove-port="+p)
			}
			out, err := hostEnv.Run(ctx, "firewall-cmd", args...)
			if err != nil && hostEnv.Firewall(ctx) == "firewalld" {
				return removed, fmt.Errorf("firewall-cmd %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
			}
			// firewall-cmd warns "NOT_ENABLED: 80/tcp" for each port that was not open.
			if err == nil && bytes.Count(out, []byte("NOT_ENABLED")) < len(r.Ports) {
				removed = true
			}
		}
	case "nftables":
		_, tagged, err := hostEnv.NFT(ctx, r.Tag)
		if err != nil {
			return false, nil // nftables gone: so are the rules
		}
		for _, t := range tagged {
			args := []string{"delete", "rule", t.Family, t.Table, t.Chain, "handle", fmt.Sprint(t.Handle)}
			if out, err := hostEnv.Run(ctx, "nft", args...); err != nil {
				return removed, fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
			}
			removed = true
		}
	}
	return removed, nil
}
