package targets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/haproxy"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/hostexec"
)

// The haproxy family is the host load balancer of stage 02 (setup-haproxy.sh):
//
//	haproxy/config             haproxy.cfg with the bootstrap in the API and MCS backends
//	haproxy/config-post-pivot  haproxy.cfg without it (cluster/pivot switches to it)
//	haproxy/service  labbuild's own haproxy process for this cluster, bound to the API and
//	                 ingress VIPs, which it adds to the lab bridge (External)
//
// Unlike stage 02, nothing in /etc is edited and no system unit is used: each cluster has its
// own process (its VIPs differ, so several clusters do not collide), started and reloaded
// (haproxy -sf) by labbuild, recorded by pid, and stopped by `labbuild destroy`.
func init() {
	Register(Family{Name: "haproxy", Doc: "host load balancer: haproxy.cfg and labbuild's haproxy on the VIPs (stage 02)", Targets: fromConfig(haproxyTargets)})
}

// HAProxyConfigFile is the output of haproxy/config and haproxy/config-post-pivot.
const HAProxyConfigFile = "haproxy.cfg"

func haproxyTargets(c *lab.Config) []*engine.Target {
	if c.InCluster() {
		// keepalived on the nodes holds the VIPs and haproxy runs as the masters' static pod
		// (targets/shared_vip.go): nothing of this family exists, so no plan lists it.
		return nil
	}
	nodes := lab.NodeNames(c.Nodes) // in config order: the backends' order
	reads := []string{lab.NetworkAPIVIP, lab.NetworkIngressVIP, lab.HAProxyStatsPort}
	for _, n := range nodes {
		reads = append(reads, lab.NodePath(n, lab.NodeRole), lab.NodePath(n, lab.NodeIP))
	}
	return []*engine.Target{
		{
			Name: "haproxy/config", Doc: "haproxy.cfg: TCP 6443/22623/80/443 on the VIPs, /readyz checks, bootstrap in the backends",
			Reads: reads, Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error { return hpConfigRun(s, nodes, false) },
		},
		{
			Name: "haproxy/config-post-pivot", Doc: "haproxy.cfg after the pivot: the same without the bootstrap",
			Reads: reads, Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error { return hpConfigRun(s, nodes, true) },
		},
		{
			Name: "haproxy/service", Doc: "labbuild's haproxy for this cluster on the API and ingress VIPs (added to the lab bridge)",
			Deps: []string{"haproxy/config", "haproxy/config-post-pivot", "libvirt/network"},
			// It reads the configs' fields too: its Probe renders the config it should serve,
			// so that a plan names the backends a soft reload adds or drops before the
			// configs are rebuilt.
			Reads:   addReads([]string{lab.LibvirtNetwork, lab.NetworkMachineNetwork}, reads...),
			Version: 1, External: true,
			Run: hpServiceRun,
			Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
				return hpServiceProbe(ctx, s, nodes)
			},
			Destroy: hpServiceDestroy,
		},
	}
}

// hpSpec assembles the load balancer from the declared values of nodes (their names, in
// config order, as the target declared them).
func hpSpec(s *engine.Step, nodes []string) (haproxy.Spec, error) {
	var sp haproxy.Spec
	var err error
	if sp.APIVIP, err = s.String(lab.NetworkAPIVIP); err != nil {
		return sp, err
	}
	if sp.IngressVIP, err = s.String(lab.NetworkIngressVIP); err != nil {
		return sp, err
	}
	if err := s.Value(lab.HAProxyStatsPort, &sp.StatsPort); err != nil {
		return sp, err
	}
	for _, name := range nodes {
		srv := haproxy.Server{Name: name}
		if srv.IP, err = s.String(lab.NodePath(name, lab.NodeIP)); err != nil {
			return sp, err
		}
		role, err := s.String(lab.NodePath(name, lab.NodeRole))
		if err != nil {
			return sp, err
		}
		switch role {
		case lab.RoleBootstrap:
			sp.Bootstrap = &srv
		case lab.RoleMaster:
			sp.Masters = append(sp.Masters, srv)
		default:
			sp.Workers = append(sp.Workers, srv)
		}
	}
	return sp, nil
}

func hpConfigRun(s *engine.Step, nodes []string, postPivot bool) error {
	sp, err := hpSpec(s, nodes)
	if err != nil {
		return err
	}
	if postPivot {
		sp = haproxy.PostPivot(sp)
	}
	cfg, err := haproxy.Config(sp)
	if err != nil {
		return err
	}
	return s.WriteFile(HAProxyConfigFile, cfg, 0o644)
}

// hpCommand builds the commands haproxy/service runs (ip, haproxy). Tests replace it to run
// them inside their network namespace.
var hpCommand hostexec.Command = exec.Command

// hpRecord is what haproxy/service made: the process and the addresses it added.
type hpRecord struct {
	PID    int      `json:"pid"`
	Config string   `json:"config"`
	Bridge string   `json:"bridge"`
	Addrs  []string `json:"addrs"` // "VIP/prefix" added to Bridge
	// Phase is the cluster phase Config belongs to: "bootstrap" (haproxy/config, the
	// bootstrap in the backends) or "post-pivot" (haproxy/config-post-pivot).
	Phase string `json:"phase"`
}

// Cluster phases of the load balancer (hpRecord.Phase).
const (
	hpPhaseBootstrap = "bootstrap"
	hpPhasePostPivot = "post-pivot"
)

// hpPivotMarker is the file, in the haproxy family's output directory, that cluster/pivot's
// switch leaves: from then on haproxy/service runs the post-pivot config, so a later edit of
// haproxy/config (a node added, a VIP moved), a killed haproxy or a host reboot never brings
// the bootstrap back into the backends. haproxy/service's Destroy removes it.
const hpPivotMarker = ".pivoted"

// hpPivoted reports whether this lab's load balancer is past the pivot: the marker is there,
// or a running haproxy of the lab already serves a config under postDir.
func hpPivoted(familyDir, postDir string) bool {
	if familyDir == "" {
		return false
	}
	if _, err := os.Stat(filepath.Join(familyDir, hpPivotMarker)); err == nil {
		return true
	}
	for _, cfg := range hostexec.HAProxyRunningConfigs(familyDir) {
		if strings.HasPrefix(cfg, filepath.Clean(postDir)+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

type hpServiceSpec struct {
	bridge string
	addrs  []string
}

func hpService(s *engine.Step) (hpServiceSpec, error) {
	var sp hpServiceSpec
	net, err := s.String(lab.LibvirtNetwork)
	if err != nil {
		return sp, err
	}
	sp.bridge = rl.Bridge(net)
	mn, err := s.String(lab.NetworkMachineNetwork)
	if err != nil {
		return sp, err
	}
	pfx, err := netip.ParsePrefix(mn)
	if err != nil {
		return sp, fmt.Errorf("network.machineNetwork %q: %w", mn, err)
	}
	for _, p := range []string{lab.NetworkAPIVIP, lab.NetworkIngressVIP} {
		v, err := s.String(p)
		if err != nil {
			return sp, err
		}
		a := v + "/" + strconv.Itoa(pfx.Bits())
		if len(sp.addrs) == 0 || sp.addrs[0] != a {
			sp.addrs = append(sp.addrs, a)
		}
	}
	return sp, nil
}

func hpPrev(s *engine.Step) (hpRecord, bool, error) { return readRecord[hpRecord](s, recordFile) }

// hpFamilyDir is the haproxy family's output directory, given a config file one of its
// targets wrote (<out>/haproxy/<target>/haproxy.cfg).
func hpFamilyDir(cfgFile string) string {
	if cfgFile == "" {
		return ""
	}
	return filepath.Dir(filepath.Dir(cfgFile))
}

// hpServing is the file, in the haproxy family's output directory, holding a copy of the
// configuration labbuild's haproxy last loaded. A record restored from the store (worker-2
// removed again: the six-node configs come back byte for byte) says nothing of what the
// running process loaded; this copy does, so haproxy/service's Probe sees that the running
// haproxy still has worker-2 in its backends and reloads it, and a plan names the change.
const hpServing = ".serving.cfg"

// hpNoteServing records that labbuild's haproxy now runs cfgFile.
func hpNoteServing(cfgFile string) error {
	b, err := os.ReadFile(cfgFile)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(hpFamilyDir(cfgFile), hpServing), b, 0o644)
}

// hpServers lists a config's servers as "backend name ip" ("ingress-https-backend worker-2
// 198.18.0.23").
func hpServers(cfg []byte) []string {
	var out []string
	backend := ""
	for _, l := range strings.Split(string(cfg), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) == 2 && f[0] == "backend":
			backend = f[1]
		case len(f) >= 3 && f[0] == "server" && backend != "":
			ip, _, _ := strings.Cut(f[2], ":")
			out = append(out, backend+" "+f[1]+" "+ip)
		}
	}
	return out
}

// hpServerChanges says which servers a reload from old to new adds to and drops from which
// backends: "+worker-2 198.18.0.23 in ingress-http, ingress-https". Empty when the backends
// are the same.
func hpServerChanges(old, new []byte) string {
	o, n := hpServers(old), hpServers(new)
	group := func(from, other []string, sign string) []string {
		by := map[string][]string{}
		var names []string
		for _, x := range from {
			if slices.Contains(other, x) {
				continue
			}
			be, srv, _ := strings.Cut(x, " ")
			if by[srv] == nil {
				names = append(names, srv)
			}
			by[srv] = append(by[srv], strings.TrimSuffix(be, "-backend"))
		}
		var out []string
		for _, srv := range names {
			out = append(out, sign+srv+" in "+strings.Join(by[srv], ", "))
		}
		return out
	}
	return strings.Join(append(group(n, o, "+"), group(o, n, "-")...), "; ")
}

// hpWanted returns the config haproxy/service serves: the one that matches the cluster's
// phase — after the pivot, the one without the bootstrap, whatever made this run (an edit, a
// dead process, a reboot).
func hpWanted(s *engine.Step, prev hpRecord, hadPrev bool) (cfg, phase string, err error) {
	cfg, err = s.DepPath("haproxy/config", HAProxyConfigFile)
	if err != nil {
		return "", "", err
	}
	post, err := s.DepPath("haproxy/config-post-pivot", HAProxyConfigFile)
	if err != nil {
		return "", "", err
	}
	if (hadPrev && prev.Phase == hpPhasePostPivot) || hpPivoted(hpFamilyDir(cfg), filepath.Dir(post)) {
		return post, hpPhasePostPivot, nil
	}
	return cfg, hpPhaseBootstrap, nil
}

func hpServiceRun(ctx context.Context, s *engine.Step) error {
	sp, err := hpService(s)
	if err != nil {
		return err
	}
	prev, hadPrev, err := hpPrev(s)
	if err != nil {
		return err
	}
	cfg, phase, err := hpWanted(s, prev, hadPrev)
	if err != nil {
		return err
	}
	if phase == hpPhasePostPivot {
		s.Logf("the cluster is past the pivot: serving %s (no bootstrap backends)", cfg)
	}
	// Addresses recorded before but no longer wanted (a VIP moved) are removed.
	if hadPrev {
		for _, a := range prev.Addrs {
			if !slices.Contains(sp.addrs, a) || prev.Bridge != sp.bridge {
				_ = hpCommand.Run("ip", "addr", "del", a, "dev", prev.Bridge)
			}
		}
	}
	for _, a := range sp.addrs {
		if err := hpCommand.Run("ip", "addr", "replace", a, "dev", sp.bridge); err != nil {
			return fmt.Errorf("%s: add VIP: %w", s.Target().Name, err)
		}
	}
	scratch, err := s.Scratch()
	if err != nil {
		return err
	}
	// Soft reload of what runs: the recorded process, or the one the pivot reloaded.
	var old []int
	if hadPrev && hostexec.HAProxyAlive(prev.PID) {
		old = []int{prev.PID}
	}
	for _, p := range hostexec.HAProxyRunningFrom(hpFamilyDir(cfg)) {
		if !slices.Contains(old, p) {
			old = append(old, p)
		}
	}
	if len(old) > 0 {
		s.Logf("reload haproxy (old pids %v)", old)
	}
	pid, err := hpCommand.HAProxyReload(cfg, filepath.Join(scratch, "haproxy.pid"), old)
	if err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	s.Logf("haproxy pid %d on %s", pid, strings.Join(sp.addrs, ", "))
	if err := hpNoteServing(cfg); err != nil {
		return fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	rec, _ := json.MarshalIndent(hpRecord{PID: pid, Config: cfg, Bridge: sp.bridge, Addrs: sp.addrs, Phase: phase}, "", "  ")
	return s.WriteFile("record.json", append(rec, '\n'), 0o644)
}

func hpServiceProbe(ctx context.Context, s *engine.Step, nodes []string) (engine.ProbeResult, error) {
	prev, ok, err := hpPrev(s)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if !ok || !hostexec.HAProxyAlive(prev.PID) && len(hostexec.HAProxyRunningFrom(hpFamilyDir(prev.Config))) == 0 {
		return engine.ProbeResult{Action: engine.Create, Reason: "haproxy is not running"}, nil
	}
	sp, err := hpService(s)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	missing, err := hpCommand.AddrsMissing(sp.bridge, sp.addrs)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if len(missing) > 0 {
		return engine.ProbeResult{Action: engine.Update, Reason: "VIPs " + strings.Join(missing, ", ") + " missing on " + sp.bridge}, nil
	}
	// The config it should serve, rendered from the config values (in a plan the configs'
	// files are not rebuilt yet), against the copy of what the running haproxy loaded.
	cfg, phase, err := hpWanted(s, prev, ok)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	loaded, err := os.ReadFile(filepath.Join(hpFamilyDir(cfg), hpServing))
	if err != nil {
		return engine.ProbeResult{Action: engine.Keep}, nil // a lab from before the copy: its configs' keys decide
	}
	hs, err := hpSpec(s, nodes)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if phase == hpPhasePostPivot {
		hs = haproxy.PostPivot(hs)
	}
	want, err := haproxy.Config(hs)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if !bytes.Equal(want, loaded) {
		what := hpServerChanges(loaded, want)
		if what == "" {
			what = "its configuration changed"
		}
		return engine.ProbeResult{Action: engine.Update, Reason: "soft reload (haproxy -sf): " + what}, nil
	}
	return engine.ProbeResult{Action: engine.Keep}, nil
}

// hpServiceDestroy stops the recorded haproxy (by its pid, after checking it is haproxy) and
// removes the VIPs it added. Destroyed when a haproxy ran or a VIP was still on the bridge;
// AlreadyAbsent otherwise. Safe to rerun.
func hpServiceDestroy(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
	prev, ok, err := hpPrev(s)
	if err != nil {
		return 0, err
	}
	if !ok {
		return engine.AlreadyAbsent, nil
	}
	pids := hostexec.HAProxyRunningFrom(hpFamilyDir(prev.Config))
	if hostexec.HAProxyAlive(prev.PID) && !slices.Contains(pids, prev.PID) {
		pids = append(pids, prev.PID)
	}
	existed := false
	for _, pid := range pids {
		err := syscall.Kill(pid, syscall.SIGTERM)
		if err != nil && !errors.Is(err, syscall.ESRCH) {
			return 0, fmt.Errorf("stop haproxy pid %d: %w", pid, err)
		}
		existed = existed || err == nil
	}
	for _, a := range prev.Addrs {
		if hpCommand.Run("ip", "addr", "del", a, "dev", prev.Bridge) == nil { // gone with the bridge is fine
			existed = true
		}
	}
	for _, f := range []string{hpPivotMarker, hpServing} {
		if err := os.Remove(filepath.Join(hpFamilyDir(prev.Config), f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
	}
	if !existed {
		return engine.AlreadyAbsent, nil
	}
	return engine.Destroyed, nil
}
