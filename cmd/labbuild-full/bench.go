//go:build bench

package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// The benchmark build (go build -tags bench, make bench-ninja) has the synthetic graph's flags.
// With $LABBUILD_RSS set it prints, at exit, where the resident memory is: the heap
// (RssAnon) or the binary's and the state file's pages (RssFile). Profiles: profile.go.
func init() {
	withSynthetic = func(fs *pflag.FlagSet) syntheticFlags { return synthetic.Register(fs) }
	if os.Getenv("LABBUILD_RSS") != "" {
		atExit = append(atExit, func() {
			b, _ := os.ReadFile("/proc/self/status")
			for _, l := range strings.Split(string(b), "\n") {
				if strings.HasPrefix(l, "VmHWM") || strings.HasPrefix(l, "Rss") {
					fmt.Fprintln(os.Stderr, l)
				}
			}
		})
	}
}
