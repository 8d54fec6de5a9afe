package targets

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/ignition/v2/config/v3_4/types"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/isofs"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/ignition"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/liveiso"
	"github.com/labbuild/labbuild/targets/virt"
)

// snoMCOLab is newMCOLab's lab as a single node (init --sno's nodes and sizes).
func snoMCOLab(t *testing.T) *mcoLab {
	l := newMCOLab(t)
	sno := snoConfig(t)
	l.cfg.Nodes, l.cfg.Sizes = sno.Nodes, sno.Sizes
	return l
}

// bipLoad reads out/ignition/bootstrap-in-place-for-live-iso.ign, validated by Ignition's
// parser, without duplicates, 0600.
func (l *mcoLab) bipLoad() types.Config {
	l.t.Helper()
	p := filepath.Join(l.out, "ignition", ignition.BootstrapInPlaceFile)
	raw, err := os.ReadFile(p)
	if err != nil {
		l.t.Fatal(err)
	}
	cfg, err := ignition.Parse(raw)
	if err != nil {
		l.t.Fatalf("%s: %v", ignition.BootstrapInPlaceFile, err)
	}
	if d := ignition.Duplicates(cfg); len(d) > 0 {
		l.t.Errorf("%s: duplicate entries %v", ignition.BootstrapInPlaceFile, d)
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
		l.t.Errorf("%s: mode %v (err %v), want 0600", ignition.BootstrapInPlaceFile, st.Mode(), err)
	}
	return cfg
}

// TestIgnitionSNO is `labbuild` on a single-node lab (the MCO stand-in over the real
// templates): the BiP Ignition is valid and is the bootstrap's config on master-0 (its name and
// address, one etcd member there); the topologies are SingleReplica and the rendered master
// config has the MCO's sno templates; the master Ignition it carries is master-0's, byte for
// byte, and passes the machine-config daemon's first-boot check against the rendered
// MachineConfig (render/ignition.FirstBoot), and what bootstrap-in-place.sh adds to it for the
// installed master collides with no path or unit of the rendered config.
func TestIgnitionSNO(t *testing.T) {
	l := snoMCOLab(t)
	l.build("ignition", "manifests/bootstrap")
	bip := l.bipLoad()
	if h := ignContents(t, bip, "bip", ignition.PathHostname); string(h) != "master-0.ocp4.example.com\n" {
		t.Errorf("BiP hostname %q, want master-0's", h)
	}
	etcd := ignContents(t, bip, "bip", manifests.StaticPodDir+"/"+manifests.EtcdPodFile)
	if !bytes.Contains(etcd, []byte("--initial-cluster=etcd-bootstrap=https://192.168.126.101:2380\n")) {
		t.Errorf("the bootstrap etcd is not one member on master-0's address:\n%s", etcd)
	}
	orig := ignContents(t, bip, "bip", ignition.PathOriginalMaster)
	if !bytes.Equal(orig, l.file("ignition", "master-0.ign")) {
		t.Error("the BiP config's original-master.ign is not ignition/master-0's")
	}
	infra := l.file("manifests/bootstrap", "manifests/02-config-infrastructure.yaml")
	for _, w := range []string{"controlPlaneTopology: SingleReplica", "infrastructureTopology: SingleReplica"} {
		if !bytes.Contains(infra, []byte(w)) {
			t.Errorf("Infrastructure lacks %q:\n%s", w, infra)
		}
	}
	if sched := l.file("manifests/bootstrap", "manifests/02-config-scheduler.yaml"); !bytes.Contains(sched, []byte("mastersSchedulable: true")) {
		t.Errorf("the single master is not schedulable:\n%s", sched)
	}
	mc, err := ignition.ParseMachineConfig(l.file("mco/base/master", "machineconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The MCO's sno templates (../shared/fixtures/mco/templates/common/sno,
	// master/00-master/sno): rendered for a SingleReplica control plane only.
	for _, p := range []string{"/etc/dnsmasq.conf", "/etc/NetworkManager/dispatcher.d/forcedns-rhel9-fix"} {
		if _, err := ignition.FileContents(mc.Config, p); err != nil {
			t.Errorf("the rendered master config lacks the sno template's %s: %v", p, err)
		}
	}
	node, err := ignition.Parse(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := ignition.FirstBoot(node, mc); err != nil {
		t.Errorf("the installed master goes Degraded on first boot: %v", err)
	}
	script := string(ignContents(t, bip, "bip", ignition.PathBootstrapInPlace))
	carried := regexp.MustCompile(`(?m)^(entry|tree) (/\S+)`).FindAllStringSubmatch(script, -1)
	if len(carried) < 8 {
		t.Fatalf("bootstrap-in-place.sh carries %d paths:\n%s", len(carried), script)
	}
	for _, c := range carried {
		for _, f := range mc.Config.Storage.Files {
			if f.Path == c[2] || (c[1] == "tree" && strings.HasPrefix(f.Path, c[2]+"/")) {
				t.Errorf("bootstrap-in-place.sh's %s %s overwrites the rendered config's %s: the daemon would see it differ", c[1], c[2], f.Path)
			}
		}
	}
	for _, u := range mc.Config.Systemd.Units {
		if u.Name == "bootkube.service" {
			t.Error("the rendered config has a bootkube.service, which the installed master's post-reboot unit would replace")
		}
	}
	st, _ := os.Stat(filepath.Join(l.out, "ignition", ignition.BootstrapInPlaceFile))
	t.Logf("%s: %d bytes, %d files, %d units", ignition.BootstrapInPlaceFile, st.Size(), len(bip.Storage.Files), len(bip.Systemd.Units))
}

// TestBootstrapInPlaceTable: every path and unit docs/sno.md's table of the BiP Ignition names
// in its last column is in the built BiP config (a file, a directory holding files, a unit) or
// among what its bootstrap-in-place.sh writes into the master Ignition.
func TestBootstrapInPlaceTable(t *testing.T) {
	l := snoMCOLab(t)
	l.build(IgnBootstrapInPlace)
	bip := l.bipLoad()
	script := string(ignContents(t, bip, "bip", ignition.PathBootstrapInPlace))
	units := map[string]bool{}
	for _, u := range bip.Systemd.Units {
		units[u.Name] = true
	}
	doc, err := os.Open("../docs/sno.md")
	if err != nil {
		t.Fatal(err)
	}
	defer doc.Close()
	in, rows, names := false, 0, 0
	sc := bufio.NewScanner(doc)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "| installer (release-4.18) |") {
			in = true
			continue
		}
		if !in || strings.HasPrefix(line, "| ---") {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if rows > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("row with %d cells, want 4: %s", len(cells), line)
		}
		rows++
		if !strings.Contains(cells[0], "`") {
			t.Errorf("row %d names no installer file or identifier: %s", rows, line)
		}
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cells[3], -1) {
			name := m[1]
			names++
			switch {
			case strings.HasSuffix(name, ".service"):
				if !units[name] {
					t.Errorf("row %d: unit %s is not in the BiP config", rows, name)
				}
			case strings.HasPrefix(name, "/"):
				found := strings.Contains(script, " "+name+" ") || strings.Contains(script, " "+name+"\n") || strings.Contains(script, " "+name+"/")
				for _, f := range bip.Storage.Files {
					found = found || f.Path == name || strings.HasPrefix(f.Path, name+"/")
				}
				if !found {
					t.Errorf("row %d: %s is neither in the BiP config nor written by its bootstrap-in-place.sh", rows, name)
				}
			default:
				t.Errorf("row %d: %q is not a path or a unit", rows, name)
			}
		}
	}
	if rows < 25 || names < 25 {
		t.Errorf("docs/sno.md's table has %d rows naming %d paths and units; want the whole table", rows, names)
	}
}

// TestSNOIngressOnMaster: a single node's host load balancer sends the API, the
// machine-config server and ingress to the master, and has no bootstrap backend (before or
// after a pivot that never comes).
func TestSNOIngressOnMaster(t *testing.T) {
	c := snoConfig(t)
	out := t.TempDir()
	if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"haproxy/config", "haproxy/config-post-pivot"},
		Targets: haproxyTargets(c)[:2], Now: func() time.Time { return time.Unix(1e9, 0) }}); err != nil {
		t.Fatal(err)
	}
	for _, tgt := range []string{"haproxy/config", "haproxy/config-post-pivot"} {
		b, err := os.ReadFile(filepath.Join(out, tgt, HAProxyConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		var backends []string
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 2 && f[0] == "server" {
				backends = append(backends, f[1]+"="+f[2])
			}
		}
		if len(backends) < 4 || slices.ContainsFunc(backends, func(s string) bool { return !strings.HasPrefix(s, "master-0=192.168.126.101:") }) {
			t.Errorf("%s backends %v; want master-0 in each of the API, MCS and ingress", tgt, backends)
		}
	}
}

// TestLibvirtSNOShapeReplace: on a real libvirtd, a 1+1 lab's VMs built and then the lab turned
// into a single node (master-0 alone): the plan replaces master-0's disk (an empty one, not over
// the QEMU image) and its domain (the live ISO behind the disk, the BiP Ignition) and destroys
// the bootstrap's and the worker's; applied, the domain boots hd then cdrom from the ISO whose
// karg areas name the qemu platform, with the BiP config on fw_cfg. Turned back, master-0 is
// replaced again.
func TestLibvirtSNOShapeReplace(t *testing.T) {
	d, sr := lvHost(t)
	ctx := context.Background()
	out := t.TempDir()
	build := lvBuilder(ctx, t, out, "libvirt")
	base := lvLab(d, sr)
	base.Nodes = []lab.Node{base.Nodes[0], base.Nodes[1], base.Nodes[4]} // bootstrap, master-0, worker-0
	build(base, false)
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: base}, OutDir: out}) })

	iso, err := isofs.LiveISO("coreos.liveiso=rhcos-418 ignition.firstboot ignition.platform.id=metal", 1139)
	if err != nil {
		t.Fatal(err)
	}
	isoPath := filepath.Join(t.TempDir(), "rhcos-live.x86_64.iso")
	os.WriteFile(isoPath, iso, 0o644)
	sum := sha256.Sum256(iso)
	t.Setenv(RHCOSCacheEnv, t.TempDir())
	// A single node at the single-node minimums (preflight checks them): memory overcommitted,
	// and room for its thin 120 GiB disk (the test's filesystem has less).
	setHostView(t, roomyHost{netnsHost{d: d}})
	sno := lvLab(d, sr)
	sno.Nodes = []lab.Node{base.Nodes[1]}
	sno.Sizes.Master = lab.Size{VCPUs: lab.SNOMinVCPUs, MemoryMiB: lab.SNOMinMemoryMiB, DiskGiB: lab.SNOMinDiskGiB}
	sno.Libvirt.MemoryOvercommit = true
	sno.RHCOS.LiveISOURL, sno.RHCOS.LiveISOSHA256 = "file://"+isoPath, hex.EncodeToString(sum[:])
	plan, why := map[string]string{}, map[string]string{}
	for _, it := range build(sno, true).Plan {
		plan[it.Target] = string(it.Action)
		for _, r := range it.Reasons {
			why[it.Target] += r.String()
		}
	}
	// master-0's disk is replaced (the plan says why); its domain follows its new upstreams
	// (the disk, the ISO, the BiP Ignition) and is replaced when it runs (below).
	for tgt, want := range map[string]engine.Action{"libvirt/volume/master-0": engine.Replace, "libvirt/vm/master-0": engine.ActionBuild,
		"libvirt/vm/bootstrap": engine.ActionDestroy, "libvirt/vm/worker-0": engine.ActionDestroy, "libvirt/volume/bootstrap": engine.ActionDestroy} {
		if plan[tgt] != string(want) {
			t.Errorf("plan for %s: %q, want %q (plan %v)", tgt, plan[tgt], want, plan)
		}
	}
	if !strings.Contains(why["libvirt/volume/master-0"], "the lab is a single node now") {
		t.Errorf("the plan does not say why master-0's disk is replaced: %q", why["libvirt/volume/master-0"])
	}
	build(sno, false)
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: sno}, OutDir: out}) })
	conn, err := virt.Connect(sno.Libvirt.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dom, _, found, err := conn.Domain("lbt-master-0")
	if err != nil || !found {
		t.Fatalf("domain lbt-master-0: %v (found %v)", err, found)
	}
	var boot []string
	for _, b := range dom.OS.BootDevices {
		boot = append(boot, b.Dev)
	}
	var cdrom string
	for _, dk := range dom.Devices.Disks {
		if dk.Device == "cdrom" && dk.Source != nil && dk.Source.File != nil {
			cdrom = dk.Source.File.File
		}
	}
	if !slices.Equal(boot, []string{"hd", "cdrom"}) || cdrom == "" {
		t.Fatalf("single node's domain boots %v with CD-ROM %q; want hd, cdrom with the live ISO", boot, cdrom)
	}
	f, err := os.Open(cdrom)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if k, err := liveiso.ReadKargs(f); err != nil || !strings.Contains(k.Current, "ignition.platform.id=qemu") {
		t.Errorf("the CD-ROM's kernel arguments: %+v, %v; want the qemu platform", k, err)
	}
	var fwcfg string
	for _, si := range dom.SysInfo {
		if si.FWCfg != nil {
			for _, e := range si.FWCfg.Entry {
				fwcfg = e.File
			}
		}
	}
	if filepath.Base(fwcfg) != ignition.BootstrapInPlaceFile {
		t.Errorf("fw_cfg names %q, want the BiP config", fwcfg)
	}
	if vol, found, err := conn.Volume("lbt", "lbt-master-0.qcow2"); err != nil || !found || vol.BackingStore != nil && vol.BackingStore.Path != "" {
		t.Errorf("master-0's disk: %+v, %v; want an empty volume", vol, err)
	}
	back, backWhy := map[string]string{}, ""
	for _, it := range build(base, true).Plan {
		back[it.Target] = string(it.Action)
		if it.Target == "libvirt/volume/master-0" {
			for _, r := range it.Reasons {
				backWhy += r.String()
			}
		}
	}
	if back["libvirt/volume/master-0"] != string(engine.Replace) || !strings.Contains(backWhy, "no longer a single node") ||
		back["libvirt/vm/bootstrap"] != string(engine.Create) {
		t.Errorf("back to 1+1: plan %v (%q); want master-0's disk replaced, the bootstrap's domain created", back, backWhy)
	}
}

// roomyHost is netnsHost with a filesystem of 1 TiB free under the pool: a single node's thin
// 120 GiB disk passes preflight on a test machine with less.
type roomyHost struct{ netnsHost }

func (roomyHost) FreeGiB(string) (float64, error) { return 1024, nil }
