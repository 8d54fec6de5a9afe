package targets

// hostIntegrationTargets declares host/dns and host/firewall.
func hostIntegrationTargets(c *Config) []*Target { return nil }
