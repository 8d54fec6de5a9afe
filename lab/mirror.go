package lab

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
)

// MirrorConfig is lab.yaml's `mirror:` section: the local release mirror. Absent or
// enabled: false, labbuild pulls from the release's own registries as before.
type MirrorConfig struct {
	// Enabled turns the mirror on: the mirror/* targets exist and the cluster pulls through it.
	Enabled bool `json:"enabled"`
	// Storage is the registry's storage directory (the distribution filesystem driver's
	// rootdirectory), "~/..." or absolute; DefaultMirrorStorage when unset. Every lab of the
	// host that names the same directory shares its blobs.
	Storage string `json:"storage"`
	// Port is the TCP port the registry listens on, on 127.0.0.1 and on network.gateway (the
	// host's address on the lab bridge); DefaultMirrorPort when unset. Labs that run at once
	// need distinct ports.
	Port int `json:"port"`
}

// Defaults of the mirror section.
const (
	DefaultMirrorStorage = "~/.cache/labbuild/mirror"
	DefaultMirrorPort    = 5000
)

// UnmarshalJSON decodes the section over its defaults, rejecting unknown fields.
func (m *MirrorConfig) UnmarshalJSON(b []byte) error {
	type plain MirrorConfig
	p := plain{Storage: DefaultMirrorStorage, Port: DefaultMirrorPort}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	*m = MirrorConfig(p)
	return nil
}

// MirrorOn reports whether the lab runs the local release mirror (mirror.enabled).
func (c *Config) MirrorOn() bool { return c.Mirror != nil && c.Mirror.Enabled }

// validateMirror checks the mirror section when it is enabled.
func (c *Config) validateMirror(bad func(field, msg, fix string)) {
	if !c.MirrorOn() {
		return
	}
	m := c.Mirror
	switch {
	case m.Storage == "":
		bad(MirrorStorage, "is empty", "an absolute directory or ~/..., e.g. "+DefaultMirrorStorage)
	case !filepath.IsAbs(m.Storage) && !strings.HasPrefix(m.Storage, "~/"):
		bad(MirrorStorage, fmt.Sprintf("%q is a relative path", m.Storage), "an absolute directory or ~/... (it is shared by every lab of the host), e.g. "+DefaultMirrorStorage)
	}
	switch p := m.Port; {
	case p < 1 || p > 65535:
		bad(MirrorPort, fmt.Sprintf("%d is not a port", p), "1-65535 (default 5000)")
	case p == 6443 || p == 22623 || p == 80 || p == 443 || p == c.HAProxy.StatsPort:
		bad(MirrorPort, fmt.Sprintf("%d is a port the load balancer binds (api 6443, machine-config 22623, ingress 80/443, haproxy.statsPort)", p), "use another port, e.g. 5000")
	}
	if net.ParseIP(c.Network.Gateway).To4() == nil {
		bad(NetworkGateway, fmt.Sprintf("%q is not an IPv4 address; the mirror listens on it for the nodes", c.Network.Gateway), "the host's address on the lab bridge, e.g. the first address of network.machineNetwork")
	}
}
