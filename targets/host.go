package targets

// The host family checks and integrates the machine the lab runs on:
//
//	host/preflight  checks the host before anything is created: libvirtd reachable, /dev/kvm usable
//	                (or libvirt.domainType qemu), free memory against the VMs still to define,
//	                free space under libvirt.poolPath against their disks, the pull secret holding
//	                auths for every registry the payload pulls from, IP forwarding on. Every
//	                failure is reported at once, each with its fix. Upstream of every libvirt
//	                target, and so of every cluster phase.
//	host/dns        the cluster domain resolvable on the host (host_integration.go)
//	host/firewall   the VIP ports open from the lab bridge (host_integration.go)
//
// The checks read the host through HostView, which tests fill.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/virt"
)

// HostView is what host/preflight reads of the host. Production reads /proc, /dev/kvm,
// statfs(2) and libvirtd (realHost); tests fill a struct.
type HostView interface {
	// Libvirt connects to uri and returns the names of the domains defined there and whether
	// the named network is active, or the connection error.
	Libvirt(uri, network string) (domains []string, netActive bool, err error)
	// KVM opens /dev/kvm for reading and writing, as QEMU does for domain type kvm.
	KVM() error
	// MemAvailableMiB is /proc/meminfo MemAvailable, in MiB.
	MemAvailableMiB() (int64, error)
	// FreeGiB is the space available to unprivileged users on the filesystem holding path (or
	// its nearest existing parent), in GiB.
	FreeGiB(path string) (float64, error)
	// IPForward is /proc/sys/net/ipv4/ip_forward == 1 (in the caller's network namespace).
	IPForward() (bool, error)
}

// hostView is the HostView host/preflight uses; tests replace it and restore it.
var hostView HostView = realHost{}

type realHost struct{}

func (realHost) Libvirt(uri, network string) ([]string, bool, error) {
	c, err := virt.Connect(uri)
	if err != nil {
		return nil, false, err
	}
	defer c.Close()
	ds, err := c.DomainNames()
	if err != nil {
		return nil, false, err
	}
	_, active, _, err := c.Network(network)
	return ds, active, err
}

func (realHost) KVM() error {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

func (realHost) MemAvailableMiB() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable")
}

func (realHost) FreeGiB(path string) (float64, error) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return float64(st.Bavail) * float64(st.Bsize) / (1 << 30), nil
		}
		if !errors.Is(err, syscall.ENOENT) || p == filepath.Dir(p) {
			return 0, err
		}
	}
}

func (realHost) IPForward() (bool, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) == "1", nil
}

func init() {
	Register(Family{Name: "host", Doc: "the host itself: preflight checks, DNS for the cluster domain, firewall openings for the VIPs", Targets: fromConfig(hostTargets)})
}

// hostPreflight is the target's name; hostTargets' other targets are in host_integration.go.
const hostPreflight = "host/preflight"

func hostTargets(c *lab.Config) []*engine.Target {
	reads := append([]string{lab.LibvirtURI, lab.LibvirtDomainType, lab.LibvirtPoolPath, lab.LibvirtNetwork, lab.ClusterName, lab.Nodes, lab.Sizes, lab.ReleaseImage},
		releaseRowReads...)
	if len(c.Release.Mirrors) > 0 {
		reads = append(reads, lab.ReleaseMirrors)
	}
	if c.Libvirt.MemoryOvercommit {
		reads = append(reads, lab.LibvirtMemoryOvercommit) // only when set: a default lab's key is unchanged
	}
	if c.Baremetal() {
		reads = append(reads, lab.Platform) // the nested-KVM check; only then, as above
	}
	pre := &engine.Target{
		Name: hostPreflight,
		Doc:  "checks libvirtd, /dev/kvm, memory, pool disk space, pull secret auths and IP forwarding before anything is created; every failure at once, with its fix",
		Deps: []string{"release/image-references"}, Reads: reads, Files: []string{lab.AccessPullSecretFile},
		// Version 3: an OKD payload pulls without credentials (issue 37).
		Version: 3, External: true, Gate: true,
		Run: func(ctx context.Context, s *engine.Step) error {
			passed, fails, warns, err := hostChecks(s)
			if err != nil {
				return err
			}
			if len(fails) > 0 {
				return hostFailures(s, fails)
			}
			for _, w := range warns {
				s.Warnf("%s", w)
			}
			// A Gate: the output is the same bytes whenever the checks pass, so a rerun (a size
			// edit) changes nothing downstream; which checks ran goes to the log.
			s.Logf("passed: %s", strings.Join(passed, ", "))
			return s.WriteFile("preflight.json", []byte("{\"passed\": true}\n"), 0o644)
		},
		// Every build that needs the host checks it again (the host changes under a lab:
		// libvirtd stopped, disk filled); VMs already defined no longer count against memory
		// and disk.
		Probe: func(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
			_, fails, _, err := hostChecks(s)
			if err != nil {
				return engine.ProbeResult{}, err
			}
			if len(fails) > 0 {
				return engine.ProbeResult{Action: engine.Update, Reason: fmt.Sprintf("%d host checks fail: %s", len(fails), fails[0].what)}, nil
			}
			return engine.ProbeResult{Action: engine.Keep}, nil
		},
		Destroy: func(context.Context, *engine.Step) (engine.DestroyOutcome, error) { return engine.RecordOnly, nil }, // it changes nothing
	}
	return append([]*engine.Target{pre}, hostIntegrationTargets(c)...)
}

// hostFail is one failed check: what is wrong and how to fix it.
type hostFail struct{ what, fix string }

// hostFailures is the error listing every failed check.
func hostFailures(s *engine.Step, fails []hostFail) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d host checks failed (nothing was created):", s.Target().Name, len(fails))
	for _, f := range fails {
		fmt.Fprintf(&b, "\n  - %s\n    fix: %s", f.what, f.fix)
	}
	return errors.New(b.String())
}

// hostChecks runs every check and returns the names of those that passed, the failures, and
// the warnings (a memory shortfall the lab allows with libvirt.memoryOvercommit). The error is
// for the build's own inputs (a config or upstream output it cannot read).
func hostChecks(s *engine.Step) (passed []string, fails []hostFail, warns []string, err error) {
	var uri, domType, poolPath, network, cluster string
	for p, v := range map[string]*string{lab.LibvirtURI: &uri, lab.LibvirtDomainType: &domType, lab.LibvirtPoolPath: &poolPath,
		lab.LibvirtNetwork: &network, lab.ClusterName: &cluster} {
		if *v, err = s.String(p); err != nil {
			return nil, nil, nil, err
		}
	}
	overcommit := false
	if slices.Contains(s.Target().Reads, lab.LibvirtMemoryOvercommit) {
		if err := s.Value(lab.LibvirtMemoryOvercommit, &overcommit); err != nil {
			return nil, nil, nil, err
		}
	}
	var nodes []lab.Node
	var sizes lab.RoleSizes
	if err := s.Value(lab.Nodes, &nodes); err != nil {
		return nil, nil, nil, err
	}
	if err := s.Value(lab.Sizes, &sizes); err != nil {
		return nil, nil, nil, err
	}
	ok := func(name string) { passed = append(passed, name) }
	fail := func(what, fix string) { fails = append(fails, hostFail{what, fix}) }

	u, perr := url.Parse(uri)
	test := perr == nil && strings.HasPrefix(u.Scheme, "test") // test:///default, test+unix://...: objects only
	remote := perr == nil && u.Host != ""                      // qemu+ssh://host/system: its memory and disks are not ours
	defined := map[string]bool{}
	domains, netActive, err := hostView.Libvirt(uri, network)
	if err != nil {
		fail(fmt.Sprintf("libvirtd at libvirt.uri %s: %v", uri, err),
			"start libvirtd (sudo systemctl enable --now libvirtd, or the virtqemud/virtnetworkd/virtstoraged sockets) and let your user open its socket (sudo usermod -aG libvirt $USER, then log in again)")
	} else {
		ok("libvirtd")
		for _, d := range domains {
			defined[d] = true
		}
	}
	if domType == "kvm" && !remote {
		if err := hostView.KVM(); err != nil {
			fail(fmt.Sprintf("/dev/kvm is not usable: %v", err),
				"enable virtualization (VT-x/AMD-V) in the firmware, load kvm_intel or kvm_amd, and add your user to group kvm; or set libvirt.domainType: qemu (software emulation, much slower)")
		} else {
			ok("kvm")
		}
	}
	if slices.Contains(s.Target().Reads, lab.Platform) && domType == "kvm" && !remote {
		switch st := nestedKVM(hostSysRoot); {
		case st.fail != "":
			fail(st.fail, st.fix)
		case st.warn != "":
			warns = append(warns, st.warn)
			ok("nested-kvm (off)")
		default:
			ok("nested-kvm")
		}
	}
	if !test && !remote {
		// What the VMs still to be defined need; defined ones already hold theirs.
		var memMiB, diskGiB int64
		var pending []string
		for _, n := range nodes {
			if defined[cluster+"-"+n.Name] {
				continue
			}
			sz := sizes.Of(n)
			memMiB += int64(sz.MemoryMiB)
			diskGiB += int64(sz.DiskGiB)
			pending = append(pending, n.Name)
		}
		if avail, err := hostView.MemAvailableMiB(); err != nil {
			fail("free memory: "+err.Error(), "check that /proc/meminfo is readable")
		} else if memMiB > avail && overcommit {
			warns = append(warns, fmt.Sprintf("libvirt.memoryOvercommit: the VMs still to define (%s) may use %d MiB of memory; the host has %d MiB available. "+
				"QEMU allocates guest memory as the guests touch it: a node that uses its full size makes the host swap or QEMU be OOM-killed", strings.Join(pending, ", "), memMiB, avail))
			ok("memory (overcommitted)")
		} else if memMiB > avail {
			fail(fmt.Sprintf("the VMs still to define (%s) need %d MiB of memory; the host has %d MiB available", strings.Join(pending, ", "), memMiB, avail),
				"free memory, or remove workers (3 masters + 0 workers is a compact cluster); sizes.<role>.memoryMiB / nodes[].memoryMiB cannot go below OpenShift's minimums (16384 MiB for the bootstrap and masters, 8192 MiB for workers), which validation enforces; or set libvirt.memoryOvercommit: true to start the VMs anyway (QEMU allocates guest memory lazily)")
		} else {
			ok("memory")
		}
		if free, err := hostView.FreeGiB(poolPath); err != nil {
			fail(fmt.Sprintf("free space under libvirt.poolPath %s: %v", poolPath, err), "set libvirt.poolPath to a directory on a local filesystem")
		} else if float64(diskGiB) > free {
			fail(fmt.Sprintf("the disks still to create (%s) may grow to %d GiB; the filesystem of libvirt.poolPath %s has %.1f GiB free", strings.Join(pending, ", "), diskGiB, poolPath, free),
				"set libvirt.poolPath to a filesystem with room, or shrink sizes.<role>.diskGiB / nodes[].diskGiB in "+s.ConfigFile())
		} else {
			ok("disk")
		}
		// libvirt turns forwarding on when it starts a NAT network; off while the lab's
		// network runs means something turned it off again (a sysctl reload, a firewall tool),
		// and the VMs cannot reach the registries.
		if on, err := hostView.IPForward(); netActive && (err != nil || !on) {
			fail(fmt.Sprintf("net.ipv4.ip_forward is off while libvirt network %s runs%s: the VMs cannot reach the registries", network, errText(err)),
				"sudo sysctl -w net.ipv4.ip_forward=1, and keep it in /etc/sysctl.d/99-labbuild.conf")
		} else {
			ok("ip-forward")
		}
	}
	row, err := releaseRow(s)
	if err != nil {
		return nil, nil, nil, err
	}
	var missing []string
	if row.FakePullSecret == "" { // OKD's images on quay.io/okd pull anonymously: no gap to report
		if missing, err = hostPullSecretGaps(s); err != nil {
			return nil, nil, nil, err
		}
	}
	if len(missing) > 0 {
		fail(fmt.Sprintf("access.pullSecretFile has no auth for %s, which the payload pulls from", strings.Join(missing, ", ")),
			"download the pull secret from https://console.redhat.com/openshift/install/pull-secret into access.pullSecretFile, or mirror those repositories (release.mirrors)")
	} else {
		ok("pull-secret")
	}
	return passed, fails, warns, nil
}

// hostPullSecretGaps returns the registries the payload pulls from (release.image and every
// image-references pull spec) that neither the pull secret has an auth for nor release.mirrors
// serves. Names only: the secret's content never appears.
func hostPullSecretGaps(s *engine.Step) ([]string, error) {
	// The pull client's keychain and mirrors, as release/* would pull with them.
	c, err := releaseClient(s)
	if err != nil {
		return nil, err
	}
	kc, mirrors := c.Keychain, c.Mirrors
	image, err := s.String(lab.ReleaseImage)
	if err != nil {
		return nil, err
	}
	refs, err := s.DepFile("release/image-references", "image-references")
	if err != nil {
		return nil, err
	}
	is, err := releaseParseImageReferences(refs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Target().Name, err)
	}
	pulls := []string{image}
	for _, t := range is.Spec.Tags {
		pulls = append(pulls, t.From.Name)
	}
	gaps := map[string]bool{}
	for _, p := range pulls {
		repo := hostRepo(p)
		mirrored := false
		for k := range mirrors {
			k = strings.TrimSuffix(k, "/")
			mirrored = mirrored || repo == k || strings.HasPrefix(repo, k+"/")
		}
		if !mirrored && !kc.Has(repo) {
			reg, _, _ := strings.Cut(repo, "/")
			gaps[reg] = true
		}
	}
	out := make([]string, 0, len(gaps))
	for g := range gaps {
		out = append(out, g)
	}
	sort.Strings(out)
	return out, nil
}

// hostRepo strips the tag or digest from a pull spec.
func hostRepo(pullspec string) string {
	if i := strings.Index(pullspec, "@"); i >= 0 {
		pullspec = pullspec[:i]
	}
	if i := strings.LastIndex(pullspec, ":"); i > strings.LastIndex(pullspec, "/") {
		pullspec = pullspec[:i]
	}
	return pullspec
}

// hostSysRoot is the sysfs host/preflight reads the KVM modules' parameters from; tests point
// it at a directory of their own.
var hostSysRoot = "/sys"

// nestedState is the nested-KVM check's outcome: a failure (with its fix), a warning, or
// neither (passed).
type nestedState struct{ fail, fix, warn string }

// nestedKVM reads <root>/module/kvm_intel/parameters/nested, else kvm_amd's (the kernel's
// module parameter: Y/N for kvm_intel, 1/0 for kvm_amd). Seed 001 asks for "one physical
// machine or a VM that supports nested KVM": a lab host that is itself a VM has /dev/kvm only
// when its hypervisor nests (the /dev/kvm check), and with nested on here the lab's VMs can run
// KVM in turn (a bare-metal host that runs VMs: OpenShift Virtualization on the workers, or the
// installer's own bootstrap VM on a lab host). Off is a warning: the lab itself installs; no
// loaded module is a failure (no KVM at all).
func nestedKVM(root string) nestedState {
	for _, mod := range []string{"kvm_intel", "kvm_amd"} {
		p := filepath.Join(root, "module", mod, "parameters", "nested")
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nestedState{fail: fmt.Sprintf("nested KVM: %v", err), fix: "make " + p + " readable (labbuild reads it as the user it runs as)"}
		}
		switch v := strings.TrimSpace(string(b)); v {
		case "Y", "y", "1":
			return nestedState{}
		case "N", "n", "0":
			return nestedState{warn: fmt.Sprintf("nested KVM is off (%s = %s): the lab installs, but its VMs cannot run KVM themselves (OpenShift Virtualization, an installer bootstrap VM inside a node). "+
				"To turn it on: echo 'options %s nested=1' | sudo tee /etc/modprobe.d/kvm-nested.conf, stop the VMs, sudo modprobe -r %s && sudo modprobe %s", p, v, mod, mod, mod)}
		default:
			return nestedState{fail: fmt.Sprintf("nested KVM: %s reads %q, not Y/N or 1/0", p, v), fix: "check the " + mod + " module (modinfo " + mod + ")"}
		}
	}
	return nestedState{fail: fmt.Sprintf("nested KVM: neither kvm_intel nor kvm_amd is loaded (no %s)", filepath.Join(root, "module", "kvm_{intel,amd}", "parameters", "nested")),
		fix: "load the module for your CPU (sudo modprobe kvm_intel or kvm_amd) with virtualization on in the firmware; on a VM host, enable nested virtualization on its hypervisor first"}
}
