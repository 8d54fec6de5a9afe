package targets

// The Run, Probe and Destroy every libvirt target shares: observe once, act on the plan,
// delete what the record names (libvirt.go declares the targets).

import (
	"context"
	"fmt"
	"slices"

	"github.com/labbuild/labbuild/engine"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/virt"
	"libvirt.org/go/libvirtxml"
)

// lvPlan is one libvirt object observed once against what the config wants: the action and
// reason a Probe reports, and what Run carries out.
type lvPlan struct {
	rec     lvRecord // the object as it is recorded for destroy
	xml     []byte   // the wanted definition, written as an output
	xmlName string
	action  engine.Action
	reason  string
	// apply brings the object to the wanted state; nil when nothing is to do. It may fill
	// in rec (a volume's path).
	apply func(c *virt.Conn, rec *lvRecord) error
}

// lvObserve builds the plan of one object on an open connection.
type lvObserve func(s *engine.Step, c *virt.Conn) (lvPlan, error)

// lvRun is the Run of every libvirt target: observe, remove an object the config no longer
// names, apply the plan, record what exists.
func lvRun(s *engine.Step, observe lvObserve) error {
	c, host, err := lvConnect(s)
	if err != nil {
		return err
	}
	defer c.Close()
	p, err := observe(s, c)
	if err != nil {
		return err
	}
	p.rec.Host = host
	lvPlaced(s, &p)
	if err := lvForgetMoved(s, p.rec); err != nil {
		return err
	}
	if p.action != engine.Keep {
		s.Logf("%s: %s", p.action, p.reason)
	}
	if p.apply != nil {
		if err := p.apply(c, &p.rec); err != nil {
			return err
		}
	}
	return lvWrite(s, p.xml, p.xmlName, p.rec)
}

// lvProbe is the Probe of every libvirt target: the same observation, nothing changed.
func lvProbe(s *engine.Step, observe lvObserve) (engine.ProbeResult, error) {
	c, host, err := lvConnect(s)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	defer c.Close()
	p, err := observe(s, c)
	if err != nil {
		return engine.ProbeResult{}, err
	}
	p.rec.Host = host
	lvPlaced(s, &p)
	return engine.ProbeResult{Action: p.action, Reason: p.reason}, nil
}

// lvPlaced says, on a lab spread over several hosts, where the object lands ("on host hv2"),
// and makes an object the config moved to another host a replace: the old one is removed
// there (lvForgetMoved) and a new one made here, so the plan says both.
func lvPlaced(s *engine.Step, p *lvPlan) {
	if prev, ok, _ := lvPrev(s); ok && prev.URI != p.rec.URI && p.rec.Host != "" {
		from := prev.URI
		if prev.Host != "" {
			from = "host " + prev.Host + " (" + prev.URI + ")"
		}
		p.action = engine.Replace
		p.reason = fmt.Sprintf("%s %s moves from %s to host %s (%s): removed there, made here", prev.Kind, prev.Name, from, p.rec.Host, p.rec.URI)
		return
	}
	if p.rec.Host != "" && p.action != engine.Keep {
		p.reason += " (on host " + p.rec.Host + ")"
	}
}

// lvDelete removes a recorded object by its kind; a missing one is not an error.
func lvDelete(c *virt.Conn, r lvRecord) error {
	switch r.Kind {
	case "network":
		return c.DeleteNetwork(r.Name)
	case "records":
		return nil // they go with their network
	case "pool":
		// The RHCOS image a remote lab uploaded into its pool (lvVolume: one per image,
		// shared by the disks, recorded by none of them) goes with the pool: the disks over it
		// are gone by now (they are downstream, destroyed first), and a pool left with it could
		// not be removed (rmdir of a non-empty directory). A local pool holds no such image:
		// the image stays in this machine's cache (~/.cache/labbuild), shared by every lab.
		names, err := c.VolumeNames(r.Name)
		if err != nil {
			return err
		}
		for _, v := range names {
			if lvUploadedImage.MatchString(v) {
				if err := c.DeleteVolume(r.Name, v); err != nil {
					return err
				}
			}
		}
		return c.DeletePool(r.Name)
	case "volume":
		return c.DeleteVolume(r.Pool, r.Name)
	case "domain":
		if err := c.DeleteDomain(r.Name); err != nil || r.Ignition == "" {
			return err
		}
		return c.DeleteVolume(r.Pool, r.Ignition)
	}
	return fmt.Errorf("recorded object %s of unknown kind %q", r.Name, r.Kind)
}

// lvDestroy is the Destroy of every libvirt target: it connects to the recorded URI (not the
// configured one, which may have changed), looks the recorded object up and removes it. No
// record means nothing was made; an object not found is AlreadyAbsent; a libvirtd it cannot
// reach is an error, so the record stays.
func lvDestroy(ctx context.Context, s *engine.Step) (engine.DestroyOutcome, error) {
	r, ok, err := lvPrev(s)
	if err != nil {
		return 0, err
	}
	if !ok {
		return engine.AlreadyAbsent, nil
	}
	c, err := virt.Connect(r.URI)
	if err != nil {
		if r.Host != "" { // a host that is down is named; the record stays for the next destroy
			return 0, fmt.Errorf("%s: host %s is unreachable, %s %s stays recorded: %w", s.Target().Name, r.Host, r.Kind, r.Name, err)
		}
		return 0, err
	}
	defer c.Close()
	exists, err := lvExists(c, r)
	if err != nil {
		return 0, err
	}
	if r.Kind == "records" {
		if !exists {
			return engine.AlreadyAbsent, nil
		}
		return lvDeleteRecords(c, r, s)
	}
	if err := lvDelete(c, r); err != nil {
		return 0, err
	}
	if !exists {
		return engine.AlreadyAbsent, nil
	}
	return engine.Destroyed, nil
}

// lvExists reports whether the recorded object is still there: for libvirt/dns, whether its
// network is.
func lvExists(c *virt.Conn, r lvRecord) (bool, error) {
	switch r.Kind {
	case "network", "records":
		_, _, found, err := c.Network(r.Name)
		return found, err
	case "pool":
		_, _, found, err := c.Pool(r.Name)
		return found, err
	case "volume":
		_, found, err := c.Volume(r.Pool, r.Name)
		return found, err
	case "domain":
		_, _, found, err := c.Domain(r.Name)
		return found, err
	}
	return false, fmt.Errorf("recorded object %s of unknown kind %q", r.Name, r.Kind)
}

// lvForgetMoved removes the previously recorded object when the config now names another one
// (a renamed network, another URI): otherwise it would be left behind, unknown to destroy.
func lvForgetMoved(s *engine.Step, now lvRecord) error {
	prev, ok, err := lvPrev(s)
	if err != nil || !ok || (prev.URI == now.URI && prev.Name == now.Name && prev.Pool == now.Pool) {
		return err
	}
	s.Logf("%s %s moved to %s; removing the old one", prev.Kind, prev.Name, now.Name)
	c, err := virt.Connect(prev.URI)
	if err != nil {
		return fmt.Errorf("remove previous %s %s at %s: %w", prev.Kind, prev.Name, prev.URI, err)
	}
	defer c.Close()
	return lvDelete(c, prev)
}

// lvDeleteRecords removes from the running network the records libvirt/dns added (its
// recorded network.xml), and only those: records added by hand stay. None left is
// AlreadyAbsent. Destroying the network afterwards takes the rest with it.
func lvDeleteRecords(c *virt.Conn, r lvRecord, s *engine.Step) (engine.DestroyOutcome, error) {
	b, err := s.Prev("network.xml")
	if err != nil {
		return 0, fmt.Errorf("%s: recorded network.xml: %w", s.Target().Name, err)
	}
	var mine libvirtxml.Network
	if err := mine.Unmarshal(string(b)); err != nil {
		return 0, fmt.Errorf("%s: recorded network.xml: %w", s.Target().Name, err)
	}
	got, _, found, err := c.Network(r.Name)
	if err != nil || !found {
		return engine.AlreadyAbsent, err
	}
	bare := *got
	if got.DNS != nil {
		dns := *got.DNS
		dns.Host, dns.SRVs = nil, nil
		bare.DNS = &dns
	}
	bare.IPs = slices.Clone(got.IPs)
	for i := range bare.IPs {
		if d := bare.IPs[i].DHCP; d != nil {
			dd := *d
			dd.Hosts = nil
			bare.IPs[i].DHCP = &dd
		}
	}
	opts := rl.DiffOptions{IgnoreDnsmasqOptions: true}
	recorded, _ := rl.NetworkChanges(&bare, &mine, opts)
	ours := map[string]bool{}
	for _, e := range recorded {
		ours[e.Section+" "+e.Key] = true
	}
	present, _ := rl.NetworkChanges(&bare, got, opts)
	var dels []rl.NetworkEdit
	for _, e := range present {
		if e.Command == rl.EditDelete && ours[e.Section+" "+e.Key] {
			dels = append(dels, e)
		}
	}
	if len(dels) == 0 {
		return engine.AlreadyAbsent, nil
	}
	return engine.Destroyed, c.UpdateNetwork(r.Name, dels)
}
