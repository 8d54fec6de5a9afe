package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"sigs.k8s.io/yaml"

	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/virt"
)

// TestDestroyScripts runs testdata/destroy: `labbuild destroy`'s lines and exit status against
// a real libvirtd (in a network namespace of its own) hosting libvirt's test driver, where the
// lab's network, pool, volumes and domains are real libvirt objects that run nothing. The
// scripts remove objects by hand (`virt undefine NAME`) and make one unreachable (its record
// names a dead socket) to see destroy tell destroyed from already absent from NOT destroyed.
func TestDestroyScripts(t *testing.T) {
	d := testenv.StartLibvirtd(t)
	sr := testenv.StartSampleRelease(t, true)
	uri := d.URI("test:///default")
	// The test driver keeps its objects only while a connection is open.
	conn, err := virt.Connect(uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() }) // not defer: testscript's scripts run after this function returns
	c := lab.DefaultConfig()
	c.Release.Image, c.Release.Version, c.Release.Mirrors = sr.Image, sr.Version, sr.Mirrors
	c.Access.PullSecretFile, c.Access.SSHKeyFile = sr.PullSecretFile, sr.SSHKeyFile
	c.Cluster.Name, c.Cluster.BaseDomain = "lbt", "example.test"
	c.Network.MachineNetwork, c.Network.Gateway, c.Network.DNS = "198.18.0.0/24", "198.18.0.1", "198.18.0.1"
	c.Network.APIVIP, c.Network.IngressVIP = "198.18.0.10", "198.18.0.11"
	c.Network.DHCPStart, c.Network.DHCPEnd = "198.18.0.200", "198.18.0.254"
	for i := range c.Nodes {
		c.Nodes[i].IP = strings.Replace(c.Nodes[i].IP, "192.168.126.", "198.18.0.", 1)
	}
	c.Libvirt.URI, c.Libvirt.DomainType, c.Libvirt.Network, c.Libvirt.Pool = uri, "test", "lbt", "lbt"
	c.Libvirt.PoolPath = filepath.Join(d.Dir, "pool")
	c.PKI.KeyAlgorithm = "ECDSA-P256" // fast keys; not under test
	lab, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "lab.yaml")
	if err := os.WriteFile(path, lab, 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/destroy",
		UpdateScripts: *update,
		Setup: func(e *testscript.Env) error {
			e.Setenv("HOME", e.WorkDir)
			e.Setenv("LAB", path)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// virt undefine NAME: remove a domain behind labbuild's back.
			"virt": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 2 || args[0] != "undefine" {
					ts.Fatalf("usage: virt undefine NAME")
				}
				_, _, found, err := conn.Domain(args[1])
				ts.Check(err)
				if !found {
					ts.Fatalf("domain %s does not exist", args[1])
				}
				ts.Check(conn.DeleteDomain(args[1]))
			},
			// target NAME FIELD=VALUE...: the last command's status --json lists NAME with
			// these fields (VALUE as fmt prints it; "-" for absent).
			"target": func(ts *testscript.TestScript, neg bool, args []string) {
				var rep struct{ Targets []map[string]any }
				ts.Check(json.Unmarshal([]byte(ts.ReadFile("stdout")), &rep))
				for _, tg := range rep.Targets {
					if tg["name"] != args[0] {
						continue
					}
					for _, kv := range args[1:] {
						k, want, _ := strings.Cut(kv, "=")
						got := "-"
						if v, ok := tg[k]; ok {
							got = fmt.Sprint(v)
						}
						if got != want {
							ts.Fatalf("%s: %s is %s, want %s", args[0], k, got, want)
						}
					}
					return
				}
				ts.Fatalf("status --json does not list %s", args[0])
			},
			// unreachable FILE: point a libvirt record at a socket nobody listens on.
			"unreachable": func(ts *testscript.TestScript, neg bool, args []string) {
				p := ts.MkAbs(args[0])
				b, err := os.ReadFile(p)
				ts.Check(err)
				s := strings.Replace(string(b), "socket="+d.Socket, "socket=/nonexistent/libvirt-sock", 1)
				if s == string(b) {
					ts.Fatalf("%s names no socket %s", p, d.Socket)
				}
				ts.Check(os.WriteFile(p, []byte(s), 0o644))
			},
		},
	})
}
