//go:build bench

package main

// The benchmark build (go build -tags bench, make bench-ninja) has the synthetic graph's flags.
func init() { withSynthetic = true }
