package targets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/hostexec"
)

// The bridge family is seed 001's host network, as an option (network.externalBridge):
//
//	bridge/external  the named bridge, joined to the lab network's bridge by a veth pair
//	                 (the seed's vethlv on virbr0, vethbm on baremetal); no address (External)
//
// The lab network keeps its DHCP and DNS (libvirt's dnsmasq on its own bridge); the named
// bridge only extends that segment for a program that attaches to a bridge by name.
func init() {
	Register(Family{Name: "bridge", Doc: "network.externalBridge: a named bridge joined to the lab network by a veth pair (seed 001)", Targets: fromConfig(bridgeTargets)})
}

// brCommand builds the ip commands bridge/external runs; tests run them in their namespace.
var brCommand hostexec.Command = exec.Command

func bridgeTargets(c *lab.Config) []*engine.Target {
	if c.Network.ExternalBridge == "" {
		return nil
	}
	return []*engine.Target{{
		Name: "bridge/external", Doc: "network.externalBridge: the named bridge, joined to the lab bridge by a veth pair (no address)",
		Deps: []string{"libvirt/network"}, Reads: []string{lab.NetworkExternalBridge, lab.LibvirtNetwork}, Version: 1, External: true,
		Run: brRun, Probe: brProbe, Destroy: brDestroy,
	}}
}

// brRecord is what bridge/external made.
type brRecord struct {
	Bridge  string `json:"bridge"`  // network.externalBridge
	Lab     string `json:"lab"`     // the lab network's bridge (virbr-<network>)
	VethLab string `json:"vethLab"` // the veth end on Lab
	VethBr  string `json:"vethBr"`  // its peer, on Bridge
}

// brWanted names the links: the veth ends carry a hash of the bridge's name, so two labs'
// pairs never collide and each fits IFNAMSIZ.
func brWanted(s *engine.Step) (brRecord, error) {
	br, err := s.String(lab.NetworkExternalBridge)
	if err != nil {
		return brRecord{}, err
	}
	net, err := s.String(lab.LibvirtNetwork)
	if err != nil {
		return brRecord{}, err
	}
	h := sha256.Sum256([]byte(br + "/" + net))
	x := hex.EncodeToString(h[:4])
	return brRecord{Bridge: br, Lab: rl.Bridge(net), VethLab: "lbvl" + x, VethBr: "lbvb" + x}, nil
}

func brRun(ctx context.Context, s *engine.Step) error {
	name := s.Target().Name
	w, err := brWanted(s)
	if err != nil {
		return err
	}
	if prev, ok, err := readRecord[brRecord](s, recordFile); err != nil {
		return err
	} else if ok && prev != w {
		brRemove(prev) // a renamed bridge: the old one and its pair go
	}
	if _, ok := brCommand.LinkMaster(w.Bridge); !ok {
		if _, err := brCommand.IP("link", "add", "name", w.Bridge, "type", "bridge"); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if _, ok := brCommand.LinkMaster(w.VethLab); !ok {
		if _, err := brCommand.IP("link", "add", "name", w.VethLab, "type", "veth", "peer", "name", w.VethBr); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	for _, cmd := range [][]string{
		{"link", "set", w.VethLab, "master", w.Lab}, {"link", "set", w.VethBr, "master", w.Bridge},
		{"link", "set", w.Bridge, "up"}, {"link", "set", w.VethLab, "up"}, {"link", "set", w.VethBr, "up"},
	} {
		if _, err := brCommand.IP(cmd...); err != nil {
			return fmt.Errorf("%s: %w (is libvirt/network up?)", name, err)
		}
	}
	s.Logf("bridge %s joined to %s by %s/%s", w.Bridge, w.Lab, w.VethBr, w.VethLab)
	return writeRecord(s, recordFile, w)
}

func brProbe(ctx context.Context, s *engine.Step) (engine.ProbeResult, error) {
	w, err := brWanted(s)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	if _, ok := brCommand.LinkMaster(w.Bridge); !ok {
		return engine.ProbeResult{Action: engine.Create, Reason: "bridge " + w.Bridge + " is missing"}, nil
	}
	if m, ok := brCommand.LinkMaster(w.VethLab); !ok || m != w.Lab {
		return engine.ProbeResult{Action: engine.Update, Reason: "veth " + w.VethLab + " is not on " + w.Lab}, nil
	}
	if m, ok := brCommand.LinkMaster(w.VethBr); !ok || m != w.Bridge {
		return engine.ProbeResult{Action: engine.Update, Reason: "veth " + w.VethBr + " is not on " + w.Bridge}, nil
	}
	return engine.ProbeResult{Action: engine.Keep}, nil
}

// brRemove deletes the veth pair (one end takes the other) and the bridge; it reports whether
// anything existed.
func brRemove(r brRecord) bool {
	existed := false
	for _, dev := range []string{r.VethLab, r.Bridge} {
		if _, ok := brCommand.LinkMaster(dev); ok {
			existed = true
			brCommand.IP("link", "del", "dev", dev)
		}
	}
	return existed
}

// brDestroy removes the pair and the bridge; a second destroy finds nothing (AlreadyAbsent).
func brDestroy(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
	prev, ok, err := readRecord[brRecord](s, recordFile)
	if err != nil {
		return 0, err
	}
	if !ok || !brRemove(prev) {
		return engine.AlreadyAbsent, nil
	}
	for _, dev := range []string{prev.VethLab, prev.Bridge} {
		if _, still := brCommand.LinkMaster(dev); still {
			return 0, fmt.Errorf("%s: %s is still there after ip link del", s.Target().Name, dev)
		}
	}
	return engine.Destroyed, nil
}
