package rehearsal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	"libvirt.org/go/libvirtxml"

	"github.com/labbuild/labbuild/render/ignition"
)

// A node booted from the MCO's pointer config (issue 38, stall 5): its user data holds no file,
// only ignition.config.merge of the machine-config-server's URL and the root CA to trust it
// with (PointerConfig). Ignition fetches that config and merges it (github.com/coreos/ignition/v2
// internal/exec/engine.go renderConfig: the fetched config merged onto the pointer, v3_4.Merge);
// the node's address and name come from DHCP, as NetworkManager takes them from the lab
// network's dnsmasq: the reservation of the domain's MAC (libvirt <host mac name ip>), whose
// name is the short node name (option 12) — no /etc/hostname says otherwise.

// ignitionAccept is the Accept header Ignition 2.x sends for a config (spec 3.4.0 first).
const ignitionAccept = "application/vnd.coreos.ignition+json;version=3.4.0, */*;q=0.1"

// ResolvePointer returns raw with its ignition.config.merge sources fetched and merged, as
// Ignition does at boot: each source over HTTPS, trusting only the config's
// security.tls.certificateAuthorities (data URLs), dialled with dial; raw unchanged when it
// merges nothing. A remote source's own merges are refused (a pointer nests no further here).
func ResolvePointer(ctx context.Context, raw []byte, dial func(ctx context.Context, network, addr string) (net.Conn, error)) ([]byte, bool, error) {
	cfg, err := ignition.Parse(raw)
	if err != nil {
		return nil, false, err
	}
	if len(cfg.Ignition.Config.Merge) == 0 {
		return raw, false, nil
	}
	roots := x509.NewCertPool()
	for _, ca := range cfg.Ignition.Security.TLS.CertificateAuthorities {
		if ca.Source == nil {
			continue
		}
		b, err := ignition.DecodeSource(*ca.Source, ca.Compression)
		if err != nil {
			return nil, false, fmt.Errorf("rehearsal: pointer config: certificate authority: %w", err)
		}
		if !roots.AppendCertsFromPEM(b) {
			return nil, false, fmt.Errorf("rehearsal: pointer config: a certificate authority holds no PEM certificate")
		}
	}
	client := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: dial,
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	merged := cfg
	merged.Ignition.Config.Merge = nil
	for _, m := range cfg.Ignition.Config.Merge {
		if m.Source == nil {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, *m.Source, nil)
		if err != nil {
			return nil, false, err
		}
		req.Header.Set("Accept", ignitionAccept)
		resp, err := client.Do(req)
		if err != nil {
			return nil, false, fmt.Errorf("rehearsal: Ignition: GET %s: %w", *m.Source, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, false, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, false, fmt.Errorf("rehearsal: Ignition: GET %s: %s: %s", *m.Source, resp.Status, strings.TrimSpace(string(body)))
		}
		child, err := ignition.Parse(body)
		if err != nil {
			return nil, false, fmt.Errorf("rehearsal: Ignition: the config at %s: %w", *m.Source, err)
		}
		if len(child.Ignition.Config.Merge) > 0 || child.Ignition.Config.Replace.Source != nil {
			return nil, false, fmt.Errorf("rehearsal: Ignition: the config at %s merges or replaces further", *m.Source)
		}
		merged = v34.Merge(merged, child)
	}
	out, err := ignition.Encode(merged)
	return out, true, err
}

// DHCPLease is the lease the lab network's dnsmasq gives mac: the reservation libvirt holds for
// it in network n (<ip><dhcp><host mac name ip>), with the network's gateway, prefix and
// domain, as NetworkManager applies it (address, default route, DNS server and search domain,
// and the transient host name from option 12). An unreserved MAC is an error: the rehearsal
// does not play the dynamic range.
func DHCPLease(n *libvirtxml.Network, mac string) (k *KeyfileNet, hostname string, err error) {
	for _, ip := range n.IPs {
		if ip.DHCP == nil {
			continue
		}
		for _, h := range ip.DHCP.Hosts {
			if !strings.EqualFold(h.MAC, mac) {
				continue
			}
			if _, err := netip.ParseAddr(h.IP); err != nil {
				return nil, "", fmt.Errorf("rehearsal: DHCP reservation of %s: %w", mac, err)
			}
			k := &KeyfileNet{IP: h.IP, Prefix: int(ip.Prefix), Gateway: ip.Address, DNS: []string{ip.Address}}
			if n.Domain != nil && n.Domain.Name != "" {
				k.Search = []string{n.Domain.Name}
			}
			return k, h.Name, nil
		}
	}
	return nil, "", fmt.Errorf("rehearsal: network %s has no DHCP reservation for %s", n.Name, mac)
}
