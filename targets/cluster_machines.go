package targets

// The production ClusterMachines: libvirt domains powered through targets/virt.

import (
	"context"
	"fmt"

	"github.com/labbuild/labbuild/targets/virt"
)

// virtMachines is the production ClusterMachines: it powers the domains libvirt/vm/<node>
// defined (named <cluster>-<node>) through go-libvirt (targets/virt), on the lab's
// libvirt.uri. First boot installs from the VM's own media (the domain carries its Ignition
// through fw_cfg), so Install is a start.
// TODO(libvirt family): run coreos-installer with the node's Ignition on a live-ISO boot
// (spec target-graph 3.10) once RHCOS media is fetched.
type virtMachines struct{ uri, cluster string }

func (v virtMachines) domain(node string) string { return v.cluster + "-" + node }

// with runs fn on a fresh connection: phases poll for minutes and a libvirtd restart must not
// leave them holding a dead connection.
func (v virtMachines) with(fn func(c *virt.Conn) error) error {
	c, err := virt.Connect(v.uri)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(c)
}

func (v virtMachines) state(node string) (st virt.DomainState, found bool, err error) {
	err = v.with(func(c *virt.Conn) error {
		_, st, found, err = c.Domain(v.domain(node))
		return err
	})
	return st, found, err
}

func (v virtMachines) Install(ctx context.Context, node string) error { return v.Start(ctx, node) }

func (v virtMachines) Installed(ctx context.Context, node string) (bool, error) {
	_, found, err := v.state(node)
	return found, err
}

func (v virtMachines) Running(ctx context.Context, node string) (bool, error) {
	st, found, err := v.state(node)
	if err != nil {
		return false, err
	}
	if !found {
		return false, fmt.Errorf("domain %s is not defined on %s (run labbuild libvirt/vm/%s)", v.domain(node), v.uri, node)
	}
	return st == virt.DomainRunning, nil
}

func (v virtMachines) Start(ctx context.Context, node string) error {
	if on, err := v.Running(ctx, node); err != nil || on {
		return err
	}
	return v.with(func(c *virt.Conn) error { return c.StartDomain(v.domain(node), false) })
}

func (v virtMachines) Stop(ctx context.Context, node string) error {
	return v.with(func(c *virt.Conn) error { return c.StopDomain(v.domain(node)) }) // a missing or stopped domain is fine
}
