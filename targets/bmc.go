package targets

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/render/manifests"
	"github.com/labbuild/labbuild/targets/bmc"
	"github.com/labbuild/labbuild/targets/daemon"
)

// The bmc family is platform: baremetal's virtual BMC (seed 001: sushy-tools' dynamic Redfish
// emulator on the libvirt network's address, port 8000), labbuild's own (targets/bmc):
//
//	bmc/credentials  the BMC's basic-auth user and generated password (sticky, 0600)
//	bmc/service      labbuild's Redfish BMC for this lab's VMs, on network.gateway:8000 over
//	                 TLS (pki/cert/bmc-server, issued by the lab's pki/ca/bmc) (External)
//	bmc/manifests    the masters (externally provisioned) and workers as BareMetalHosts with their BMC Secrets, and the worker
//	                 MachineSet (openshift-machine-api), as openshift-install writes them
//
// The BMC runs as `labbuild-full __bmc-serve CONFIG`, a daemon of targets/daemon: its
// record keeps the pid, start time and program, so Probe and Destroy find it in a later run.
func init() {
	Register(Family{Name: "bmc", Doc: "platform baremetal: labbuild's virtual Redfish BMC for the lab's VMs (seed 001)", Targets: fromConfig(bmcTargets)})
}

// BMCServeVerb is the hidden first argument that makes labbuild-full run the BMC
// (cmd/labbuild-full/bmcserve.go).
const BMCServeVerb = "__bmc-serve"

// BMCUser is the BMC's user name; its password is generated (bmc/credentials).
const BMCUser = "labbuild"

// bmcCommand returns the BMC daemon's argv for its config file and the base name of the
// program that serves (which daemon.Record.Alive checks). Tests wrap it to run inside their
// network namespace.
var bmcCommand = func(cfg string) (argv []string, program string, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	return []string{exe, BMCServeVerb, cfg}, filepath.Base(exe), nil
}

func bmcTargets(c *lab.Config) []*engine.Target {
	if !c.Baremetal() {
		return nil
	}
	nodes := lab.NodeNames(c.Nodes)
	reads := []string{lab.LibvirtURI, lab.LibvirtPoolPath, lab.NetworkGateway, lab.ClusterName}
	for _, n := range nodes {
		reads = append(reads, lab.NodePath(n, lab.NodeName))
	}
	hosts := lab.NodeNames(append(c.NodesByRole(lab.RoleMaster), c.NodesByRole(lab.RoleWorker)...))
	return []*engine.Target{
		{
			Name: "bmc/credentials", Doc: "the virtual BMC's basic-auth credentials (sticky: generated once; 0600, never printed)",
			Version: 1, Sticky: true,
			Run: func(ctx context.Context, s *engine.Step) error {
				b := make([]byte, 18)
				if _, err := rand.Read(b); err != nil {
					return err
				}
				j, _ := json.MarshalIndent(bmc.Credentials{Username: BMCUser, Password: base64.RawURLEncoding.EncodeToString(b)}, "", "  ")
				return s.WriteFile("credentials.json", append(j, '\n'), 0o600)
			},
		},
		{
			Name: "bmc/manifests", Doc: "the masters' (externally provisioned) and workers' BareMetalHosts (BMC address, boot MAC, credentials Secret) and the worker MachineSet, as openshift-install writes them",
			Deps: []string{"bmc/credentials", "manifests/ids"}, Reads: bmcManifestReads(c, hosts), Version: 1,
			Run: func(ctx context.Context, s *engine.Step) error { return bmcManifestsRun(s, hosts) },
		},
		{
			Name: "bmc/service", Doc: "labbuild's Redfish BMC (virtual media) for the lab's VMs on network.gateway:8000, TLS + basic auth",
			Deps:    []string{"bmc/credentials", "pki/cert/bmc-server", "pki/key/bmc-server", "libvirt/network"},
			Reads:   reads,
			Version: 1, External: true,
			Run:   func(ctx context.Context, s *engine.Step) error { return bmcServiceRun(ctx, s, nodes) },
			Probe: bmcServiceProbe, Destroy: bmcServiceDestroy,
		},
	}
}

// bmcRecord is what bmc/service started.
type bmcRecord struct {
	daemon.Record
	// Listen is the address it serves on; StateDir holds its log and downloaded images.
	Listen   string `json:"listen"`
	StateDir string `json:"stateDir"`
}

// bmcStateDir is where the BMC keeps its log and the images it downloads: beside the lab's
// disks, which QEMU (user libvirt-qemu under qemu:///system) can read.
func bmcStateDir(s *engine.Step) (string, error) {
	pool, err := s.String(lab.LibvirtPoolPath)
	if err != nil {
		return "", err
	}
	cluster, err := s.String(lab.ClusterName)
	if err != nil {
		return "", err
	}
	return filepath.Join(pool, cluster+"-bmc"), nil
}

func bmcServiceRun(ctx context.Context, s *engine.Step, nodes []string) error {
	name := s.Target().Name
	if prev, ok, err := readRecord[bmcRecord](s, recordFile); err != nil {
		return err
	} else if ok {
		if _, err := prev.Stop(5 * time.Second); err != nil {
			return fmt.Errorf("%s: stop the previous BMC: %w", name, err)
		}
	}
	uri, err := s.String(lab.LibvirtURI)
	if err != nil {
		return err
	}
	if h := lab.LibvirtRemoteHost(uri); h != "" {
		return fmt.Errorf("%s: libvirt.uri %q is remote: the BMC attaches the images it downloads by path, so it must run on %s (fix: run labbuild there)", name, uri, h)
	}
	gw, err := s.String(lab.NetworkGateway)
	if err != nil {
		return err
	}
	cluster, err := s.String(lab.ClusterName)
	if err != nil {
		return err
	}
	var domains []string
	for _, n := range nodes {
		domains = append(domains, cluster+"-"+n)
	}
	state, err := bmcStateDir(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(state, "media"), 0o755); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	scratch, err := s.Scratch()
	if err != nil {
		return err
	}
	dc := bmc.DaemonConfig{Listen: net.JoinHostPort(gw, strconv.Itoa(BMCPort)), LibvirtURI: uri, MediaDir: filepath.Join(state, "media"),
		Domains: domains, ReadyFile: filepath.Join(scratch, "ready")}
	if dc.CertFile, err = s.DepPath("pki/cert/bmc-server", "tls.crt"); err != nil {
		return err
	}
	if dc.KeyFile, err = s.DepPath("pki/key/bmc-server", "tls.key"); err != nil {
		return err
	}
	if dc.CredentialsFile, err = s.DepPath("bmc/credentials", "credentials.json"); err != nil {
		return err
	}
	cfg := filepath.Join(scratch, "bmc.json")
	b, _ := json.MarshalIndent(dc, "", "  ")
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		return err
	}
	argv, program, err := bmcCommand(cfg)
	if err != nil {
		return err
	}
	rec, err := daemon.Start(ctx, daemon.Spec{Argv: argv, Log: filepath.Join(state, "bmc.log"), Timeout: 30 * time.Second,
		Ready: func(context.Context) error {
			if _, err := os.Stat(dc.ReadyFile); err != nil {
				return errors.New("not listening yet")
			}
			return nil
		}})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	rec.Program = program // argv may be a wrapper (a test's ip netns exec) that execs it
	s.Logf("BMC pid %d on https://%s/redfish/v1 for %d domains", rec.PID, dc.Listen, len(domains))
	return writeRecord(s, recordFile, bmcRecord{Record: rec, Listen: dc.Listen, StateDir: state})
}

func bmcServiceProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	prev, ok, err := readRecord[bmcRecord](s, recordFile)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if !ok || !prev.Alive() {
		return engine.ProbeResult{Action: engine.Create, Reason: "the BMC is not running"}, nil
	}
	return engine.ProbeResult{Action: engine.Keep}, nil
}

// bmcServiceDestroy stops the recorded BMC (checked by pid, start time and program) and
// removes its state directory (log and downloaded images). Safe to rerun: a second destroy
// finds nothing and reports AlreadyAbsent.
func bmcServiceDestroy(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
	prev, ok, err := readRecord[bmcRecord](s, recordFile)
	if err != nil {
		return 0, err
	}
	if !ok {
		return engine.AlreadyAbsent, nil
	}
	existed, err := prev.Stop(5 * time.Second)
	if err != nil {
		return 0, err
	}
	if prev.StateDir != "" {
		if _, serr := os.Stat(prev.StateDir); serr == nil {
			existed = true
			if err := os.RemoveAll(prev.StateDir); err != nil {
				return 0, err
			}
		}
	}
	if !existed {
		return engine.AlreadyAbsent, nil
	}
	return engine.Destroyed, nil
}

// bmcManifestReads: the BMC address (network.gateway), the domains' UUIDs (cluster.name and
// the names of hosts) and each host's boot MAC.
func bmcManifestReads(c *lab.Config, hosts []string) []string {
	reads := []string{lab.NetworkGateway, lab.ClusterName}
	for _, n := range hosts {
		reads = append(reads, lab.NodePath(n, lab.NodeName), lab.NodePath(n, lab.NodeRole))
		if c.Node(n).MAC != "" {
			reads = append(reads, lab.NodePath(n, lab.NodeMAC))
		}
	}
	return reads
}

// bmcManifestsRun writes, for every master and worker, its BMC Secret and BareMetalHost (the
// Redfish virtual-media address of its domain on the lab's BMC; masters externally
// provisioned), and the worker MachineSet with one replica per worker. The hosts leave
// disableCertificateVerification unset: Ironic verifies the BMC against ConfigMap
// openshift-machine-api/cbo-trusted-ca, which holds the lab's trust bundle and so the BMC CA
// (targets/shared_trust.go, docs/baremetal.md).
func bmcManifestsRun(s *engine.Step, nodes []string) error {
	name := s.Target().Name
	cluster, err := s.String(lab.ClusterName)
	if err != nil {
		return err
	}
	infra, err := s.DepFile("manifests/ids", "infrastructure-name")
	if err != nil {
		return err
	}
	var hosts []manifests.BMCHost
	workers := 0
	err = bmcEachHost(s, cluster, nodes, func(node string, h manifests.BMCHost) error {
		role, err := s.String(lab.NodePath(node, lab.NodeRole))
		if err != nil {
			return err
		}
		h.ControlPlane = role == lab.RoleMaster
		if !h.ControlPlane {
			workers++
		}
		hosts = append(hosts, h)
		return nil
	})
	if err != nil {
		return err
	}
	fs, err := manifests.BareMetalHosts(hosts)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	ms, err := manifests.WorkerMachineSet(strings.TrimSpace(string(infra)), workers)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return writeManifests(s, append(fs, ms)...)
}
