//go:build scos

package main

// The OKD build (MCO pkg/version/version_scos.go: SCOS = true under the scos build tag, which
// the MCO Dockerfile sets with TAGS=scos for OKD payloads).
func init() { scos = true }
