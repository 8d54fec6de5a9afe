package targets

// What the families share about a lab spread over several libvirt hosts (lab.yaml hosts:):
// the reads a target adds only on such a lab, so that a one-host lab's targets keep their keys
// and their outputs byte for byte, and the values read back through the Step.

import (
	"fmt"
	"slices"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// multiHostReads returns paths on a lab spread over several hosts, none on a one-host lab.
func multiHostReads(c *lab.Config, paths ...string) []string {
	if !c.MultiHost() {
		return nil
	}
	return paths
}

// stepInt reads the integer field p when the target declares it, else 0 (a one-host lab's
// MTUs: derived.machineMTU and derived.ovnMTU are read only on a lab spread over hosts).
func stepInt(s *engine.Step, p string) (int, error) {
	if !slices.Contains(s.Target().Reads, p) {
		return 0, nil
	}
	var v int
	err := s.Value(p, &v)
	return v, err
}

// nodeHostReads are the config fields that place node n on a multi-host lab: its host: (when
// set) and that host's URI (hosts.<host>.uri) or, on the first host, libvirt.uri. On a
// one-host lab it is libvirt.uri alone, as before.
func nodeHostReads(c *lab.Config, n lab.Node) []string {
	if !c.MultiHost() {
		return []string{lab.LibvirtURI}
	}
	return hostReads(c, c.HostOf(n), n)
}

// hostReads are the fields naming host h's libvirt URI (and, for node n when it is not the
// zero Node, its host: field): libvirt.uri for the first host, hosts.<name>.uri for another,
// and hosts.<name>.name, which records and plans show.
func hostReads(c *lab.Config, h lab.Host, n lab.Node) []string {
	var out []string
	if c.IsFirstHost(h) {
		out = append(out, lab.LibvirtURI)
	} else {
		out = append(out, lab.HostPath(h.Name, lab.HostURI))
	}
	out = append(out, lab.HostPath(h.Name, lab.HostName))
	if n.Host != "" {
		out = append(out, lab.NodePath(n.Name, lab.NodeHost))
	}
	return out
}

// stepHost returns the libvirt URI and the host name a target's Reads place it at: a
// hosts.<name>.uri (another host), else libvirt.uri with the hosts.<name>.name it declares (the
// first host of a multi-host lab; "" on a one-host lab).
func stepHost(s *engine.Step) (uri, host string, err error) {
	for _, r := range s.Target().Reads {
		name, f, ok := lab.SplitHostPath(r)
		if !ok {
			continue
		}
		switch f {
		case lab.HostURI:
			uri, err = s.String(r)
			return uri, name, err
		case lab.HostName:
			host = name
		}
	}
	uri, err = s.String(lab.LibvirtURI)
	return uri, host, err
}

// mtuReads are the fields mtuSummary reads, on a lab spread over hosts only.
func mtuReads(c *lab.Config) []string {
	return multiHostReads(c, lab.VXLANUnderlayMTU, lab.DerivedMachineMTU, lab.DerivedOVNMTU)
}

// mtuSummary is the plan's statement of the MTUs on a lab spread over hosts ("" on a one-host
// lab): the machine network's by computation from the underlay's, and OVN-Kubernetes' from that.
func mtuSummary(s *engine.Step) (string, error) {
	var v [3]int
	for i, p := range []string{lab.VXLANUnderlayMTU, lab.DerivedMachineMTU, lab.DerivedOVNMTU} {
		var err error
		if v[i], err = stepInt(s, p); err != nil {
			return "", err
		}
	}
	if v[1] == 0 {
		return "", nil
	}
	return fmt.Sprintf("machine network MTU %d = underlay %d − %d (VXLAN), OVN-Kubernetes MTU %d = %d − %d (Geneve)",
		v[1], v[0], lab.VXLANOverhead, v[2], v[1], lab.GeneveOverhead), nil
}
