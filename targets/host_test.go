package targets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
)

// fakeHost is a HostView filled by the test.
type fakeHost struct {
	libvirtErr error
	domains    []string
	netActive  bool
	kvmErr     error
	memMiB     int64
	freeGiB    float64
	forward    bool
	freePath   string // the path FreeGiB was asked about
}

func (f *fakeHost) Libvirt(uri, network string) ([]string, bool, error) {
	return f.domains, f.netActive, f.libvirtErr
}
func (f *fakeHost) KVM() error                      { return f.kvmErr }
func (f *fakeHost) MemAvailableMiB() (int64, error) { return f.memMiB, nil }
func (f *fakeHost) FreeGiB(p string) (float64, error) {
	f.freePath = p
	return f.freeGiB, nil
}
func (f *fakeHost) IPForward() (bool, error) { return f.forward, nil }

// setHostView replaces hostView for the test.
func setHostView(t *testing.T, h HostView) {
	old := hostView
	hostView = h
	t.Cleanup(func() { hostView = old })
}

// TestHostPreflight: host/preflight reports every failed check at once, each with its fix,
// and the libvirt family builds nothing after it; a healthy host passes and a rerun runs
// nothing; VMs already defined no longer count against memory and disk; IP forwarding off
// while the lab network runs fails; a pull secret without auths for an unmirrored payload
// registry fails naming the registry, never the secret.
func TestHostPreflight(t *testing.T) {
	newLab, needMiB, needGiB := preflightLab(t)
	c0 := newLab()
	healthy := func() *fakeHost {
		return &fakeHost{memMiB: int64(needMiB), freeGiB: float64(needGiB), forward: true, netActive: true}
	}
	var allDomains []string
	for _, n := range c0.Nodes {
		allDomains = append(allDomains, c0.Cluster.Name+"-"+n.Name)
	}
	tests := []struct {
		name     string
		host     *fakeHost
		edit     func(*lab.Config)
		wantErrs []string // substrings, each of a different failure
		wantN    int      // number of failures
		wantWarn string   // a substring of the printed warning ("" = no warning)
	}{
		{"healthy", healthy(), nil, nil, 0, ""},
		{"everything wrong at once", &fakeHost{libvirtErr: errors.New("dial unix /run/libvirt/libvirt-sock: connect: no such file"),
			kvmErr: errors.New("open /dev/kvm: no such file or directory"), memMiB: 4096, freeGiB: 10, forward: false},
			func(c *lab.Config) {
				c.Release.Mirrors = map[string]string{}
				for k, v := range c0.Release.Mirrors {
					if strings.HasSuffix(k, "/release") {
						c.Release.Mirrors[k] = v // the component repository is left unmirrored
					}
				}
				ps := filepath.Join(t.TempDir(), "ps.json")
				os.WriteFile(ps, []byte(`{"auths":{"quay.io":{"auth":"dXNlcjpzM2NyM3Q="}}}`), 0o600)
				c.Access.PullSecretFile = ps
			},
			[]string{"libvirtd at libvirt.uri qemu:///system", "systemctl enable --now libvirtd",
				"/dev/kvm is not usable", "libvirt.domainType: qemu",
				"need " + itoa(needMiB) + " MiB", "sizes.<role>.memoryMiB",
				"may grow to " + itoa(needGiB) + " GiB", "libvirt.poolPath /srv/labbuild/pool",
				"no auth for registry.labbuild.invalid", "console.redhat.com"}, 5, ""},
		{"qemu domain type needs no /dev/kvm", &fakeHost{kvmErr: errors.New("no kvm"), memMiB: int64(needMiB), freeGiB: float64(needGiB), forward: true},
			func(c *lab.Config) { c.Libvirt.DomainType = "qemu" }, nil, 0, ""},
		{"defined VMs hold their memory and disk already", &fakeHost{domains: allDomains, memMiB: 0, freeGiB: 0, forward: true}, nil, nil, 0, ""},
		{"forwarding off while the lab network runs", &fakeHost{memMiB: int64(needMiB), freeGiB: float64(needGiB), netActive: true},
			nil, []string{"net.ipv4.ip_forward is off while libvirt network", "sysctl -w net.ipv4.ip_forward=1"}, 1, ""},
		{"forwarding off before the network exists (libvirt turns it on)", &fakeHost{memMiB: int64(needMiB), freeGiB: float64(needGiB)}, nil, nil, 0, ""},
		{"memory short: a failure naming the overcommit option", &fakeHost{memMiB: 22000, freeGiB: float64(needGiB), forward: true},
			nil, []string{"need " + itoa(needMiB) + " MiB", "host has 22000 MiB available", "libvirt.memoryOvercommit: true"}, 1, ""},
		{"memory short with libvirt.memoryOvercommit: a printed warning, sizes unchanged", &fakeHost{memMiB: 22000, freeGiB: float64(needGiB), forward: true},
			func(c *lab.Config) { c.Libvirt.MemoryOvercommit = true }, nil, 0,
			"labbuild: warning: host/preflight: libvirt.memoryOvercommit: the VMs still to define (bootstrap, master-0, master-1, master-2, worker-0, worker-1) may use " + itoa(needMiB) + " MiB of memory; the host has 22000 MiB available"},
		{"memory enough with libvirt.memoryOvercommit: no warning", healthy(), func(c *lab.Config) { c.Libvirt.MemoryOvercommit = true }, nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setHostView(t, tt.host)
			c := newLab()
			if tt.edit != nil {
				tt.edit(c)
			}
			out := t.TempDir()
			var log strings.Builder
			r, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"host/preflight"}, Stdout: &log, Stderr: &log})
			if tt.wantN == 0 {
				if err != nil {
					t.Fatalf("%v\n%s", err, log.String())
				}
				if got := strings.Contains(log.String(), "warning"); got != (tt.wantWarn != "") || !strings.Contains(log.String(), tt.wantWarn) {
					t.Errorf("want warning %q, got:\n%s", tt.wantWarn, log.String())
				}
				if tt.host.freePath != "" && tt.host.freePath != "/srv/labbuild/pool" {
					t.Errorf("free space asked of %s, want libvirt.poolPath", tt.host.freePath)
				}
				if r, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"host/preflight"}, Stdout: &log, Stderr: &log}); err != nil || len(r.Built) != 0 {
					t.Errorf("rerun on the same host executed %v (%v)", r.Built, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("preflight passed; want %d failures", tt.wantN)
			}
			msg := err.Error() + log.String()
			if !strings.Contains(msg, itoa(tt.wantN)+" host checks failed") {
				t.Errorf("want %d failures reported at once:\n%s", tt.wantN, msg)
			}
			for _, w := range tt.wantErrs {
				if !strings.Contains(msg, w) {
					t.Errorf("report lacks %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, "s3cr3t") || strings.Contains(msg, "dXNlcjpzM2NyM3Q=") {
				t.Errorf("the report shows the pull secret:\n%s", msg)
			}
			_ = r
			// Nothing is created after a failed preflight.
			r, _ = engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"libvirt"}, Stdout: &log, Stderr: &log})
			for _, e := range r.Built {
				if strings.HasPrefix(e, "libvirt/") {
					t.Errorf("%s ran after a failed preflight", e)
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// preflightLab returns the preflight tests' lab (the default lab on the sample release, domain
// type kvm, on qemu:///system) and the memory (MiB) and disk (GiB) its VMs need: 1 bootstrap
// (16 GiB, 120 GiB), 3 masters (16 GiB, 120 GiB), 2 workers (8 GiB, 120 GiB).
func preflightLab(t *testing.T) (newLab func() *lab.Config, needMiB, needGiB int) {
	sr := testenv.StartSampleRelease(t, false)
	newLab = func() *lab.Config {
		c := testLabConfig()
		c.Release.Image, c.Release.Version, c.Release.Mirrors = sr.Image, sr.Version, sr.Mirrors
		c.Access.PullSecretFile, c.Access.SSHKeyFile = sr.PullSecretFile, sr.SSHKeyFile
		c.Libvirt.URI, c.Libvirt.DomainType, c.Libvirt.PoolPath = "qemu:///system", "kvm", "/srv/labbuild/pool"
		return c
	}
	c0 := newLab()
	for _, n := range c0.Nodes {
		needMiB += c0.SizeOf(n).MemoryMiB
		needGiB += c0.SizeOf(n).DiskGiB
	}
	return newLab, needMiB, needGiB
}

// netnsHost is the host as a lab inside the test's network namespace sees it: the real
// libvirtd, memory and disks, and the namespace's own net.ipv4.ip_forward (the one libvirt
// sets when it starts the lab's NAT network there).
type netnsHost struct {
	realHost
	d *testenv.Libvirtd
}

func (h netnsHost) IPForward() (bool, error) {
	b, err := h.d.Exec("cat", "/proc/sys/net/ipv4/ip_forward")
	return strings.TrimSpace(string(b)) == "1", err
}

// useNetnsHost makes host/preflight look at d's namespace for the test.
func useNetnsHost(t *testing.T, d *testenv.Libvirtd) { setHostView(t, netnsHost{d: d}) }

// TestPreflightNestedKVM: the nested-KVM check of platform baremetal reads the KVM module's
// nested parameter from an injected sysfs root: on (Intel's Y, AMD's 1) passes, off warns with
// the modprobe fix, no module or a value that is neither fails naming the file.
func TestPreflightNestedKVM(t *testing.T) {
	for _, tc := range []struct {
		name       string
		files      map[string]string // under <root>/module/
		fail, warn string            // substrings; both "" = passed
		failFix    string
	}{
		{"intel on", map[string]string{"kvm_intel/parameters/nested": "Y\n"}, "", "", ""},
		{"amd on", map[string]string{"kvm_amd/parameters/nested": "1\n"}, "", "", ""},
		{"intel off", map[string]string{"kvm_intel/parameters/nested": "N\n"}, "", "options kvm_intel nested=1", ""},
		{"amd off", map[string]string{"kvm_amd/parameters/nested": "0\n"}, "", "options kvm_amd nested=1", ""},
		{"intel wins over a stray amd", map[string]string{"kvm_intel/parameters/nested": "Y\n", "kvm_amd/parameters/nested": "0\n"}, "", "", ""},
		{"no module", map[string]string{"kvm/parameters/halt_poll_ns": "0\n"}, "neither kvm_intel nor kvm_amd is loaded", "", "sudo modprobe kvm_intel"},
		{"garbage", map[string]string{"kvm_intel/parameters/nested": "maybe\n"}, `reads "maybe"`, "", "modinfo kvm_intel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for p, v := range tc.files {
				f := filepath.Join(root, "module", p)
				os.MkdirAll(filepath.Dir(f), 0o755)
				os.WriteFile(f, []byte(v), 0o644)
			}
			st := nestedKVM(root)
			if (st.fail == "") != (tc.fail == "") || !strings.Contains(st.fail, tc.fail) || !strings.Contains(st.fix, tc.failFix) {
				t.Errorf("fail %q fix %q, want %q / %q", st.fail, st.fix, tc.fail, tc.failFix)
			}
			if (st.warn == "") != (tc.warn == "") || !strings.Contains(st.warn, tc.warn) {
				t.Errorf("warn %q, want %q", st.warn, tc.warn)
			}
			if tc.fail != "" && !strings.Contains(st.fail, root) {
				t.Errorf("the failure does not name the file it read: %q", st.fail)
			}
		})
	}
}

// TestPreflightNestedKVMPlatform: host/preflight runs the nested-KVM check for platform
// baremetal only (a default lab's preflight is unchanged), and fails with it.
func TestPreflightNestedKVMPlatform(t *testing.T) {
	root := t.TempDir() // no KVM module: the check fails when it runs
	old := hostSysRoot
	hostSysRoot = root
	t.Cleanup(func() { hostSysRoot = old })
	newLab, needMiB, needGiB := preflightLab(t)
	for _, baremetal := range []bool{false, true} {
		setHostView(t, &fakeHost{memMiB: int64(needMiB) * 2, freeGiB: float64(needGiB) * 2, forward: true, netActive: true})
		c := newLab()
		if baremetal {
			c.Platform, c.Network.LoadBalancer = lab.PlatformBaremetal, lab.LoadBalancerInCluster
		}
		var log strings.Builder
		_, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: c}, OutDir: t.TempDir(), Goals: []string{"host/preflight"}, Stdout: &log, Stderr: &log})
		if got := err != nil && strings.Contains(log.String(), "nested KVM: neither"); got != baremetal {
			t.Errorf("baremetal %v: preflight error %v\n%s", baremetal, err, log.String())
		}
	}
}
