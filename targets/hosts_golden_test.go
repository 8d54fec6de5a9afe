package targets

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/lab"
)

var updateGraph = flag.Bool("update-onehost", false, "rewrite testdata/onehost-graph.golden")

// oneHostLabs are one-host labs of every shape the families branch on.
func oneHostLabs() map[string]*lab.Config {
	def := lab.DefaultConfig()
	inCluster := lab.DefaultConfig()
	inCluster.Network.LoadBalancer = lab.LoadBalancerInCluster
	bm := lab.DefaultConfig()
	bm.Network.LoadBalancer, bm.Platform = lab.LoadBalancerInCluster, lab.PlatformBaremetal
	remote := lab.DefaultConfig()
	remote.Network.LoadBalancer, remote.Libvirt.URI = lab.LoadBalancerInCluster, "qemu+ssh://root@lab1/system"
	mirror := lab.DefaultConfig()
	mirror.Mirror = &lab.MirrorConfig{Enabled: true, Storage: lab.DefaultMirrorStorage, Port: lab.DefaultMirrorPort}
	return map[string]*lab.Config{"default": def, "in-cluster": inCluster, "baremetal": bm, "remote": remote, "mirror": mirror}
}

// graphText is every declared target of c with what feeds its key (deps, config reads, files,
// version) and whether it is External, one line each in name order.
func graphText(c *lab.Config) string {
	var lines []string
	for _, t := range (Lab{Config: c}).Declare() {
		lines = append(lines, fmt.Sprintf("%s v%d ext=%v\n  deps %s\n  reads %s\n  files %s", t.Name, t.Version, t.External,
			strings.Join(t.Deps, " "), strings.Join(t.Reads, " "), strings.Join(t.Files, " ")))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestOneHostGraphUnchanged: for one-host labs of every shape, the declared graph — targets,
// their deps, config reads, files, versions — is byte for byte the one before hosts: existed
// (testdata/onehost-graph.golden was written by this test on ab5f8d2, the commit before
// hosts: existed), so no action key of a one-host lab changes and nothing is rebuilt.
func TestOneHostGraphUnchanged(t *testing.T) {
	var b bytes.Buffer
	labs := oneHostLabs()
	names := make([]string, 0, len(labs))
	for n := range labs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "=== %s\n%s", n, graphText(labs[n]))
	}
	p := filepath.Join("testdata", "onehost-graph.golden")
	if *updateGraph {
		if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		gl, wl := strings.Split(b.String(), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("the one-host graph changed at line %d:\n got  %s\n want %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("the one-host graph changed: %d lines, want %d", len(gl), len(wl))
	}
}
