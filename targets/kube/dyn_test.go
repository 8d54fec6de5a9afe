package kube

import "k8s.io/client-go/rest"

// testConfig is kubedyn.Config for this package's own tests (kubedyn imports kube): the
// kube.RESTConfig of internal/rig/testenv's rest.Config.
func testConfig(c *rest.Config) *RESTConfig {
	return &RESTConfig{Host: c.Host, ServerName: c.TLSClientConfig.ServerName, CAData: c.TLSClientConfig.CAData,
		CertData: c.TLSClientConfig.CertData, KeyData: c.TLSClientConfig.KeyData, BearerToken: c.BearerToken, Timeout: c.Timeout}
}
