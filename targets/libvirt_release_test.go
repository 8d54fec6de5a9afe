package targets

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
	"github.com/labbuild/labbuild/targets/virt"
)

// TestLibvirtReleaseSwitchRefused switches release.version on a lab whose disks and VMs exist
// (libvirt's test driver): the plan (-n) and the build both refuse at the disks, naming both
// versions and the way on, before anything runs: no volume or domain is deleted, replaced or
// redefined (a node kept with a new release's Ignition would half-apply the switch, issue 37).
// The same lab switched back changes nothing in libvirt; destroyed, it builds on the new release.
func TestLibvirtReleaseSwitchRefused(t *testing.T) {
	conn, c := lvTestDriver(t)
	ctx := context.Background()
	out := t.TempDir()
	build := lvBuilder(ctx, t, out, "libvirt")
	if got := lvOwn(build(c, false).Built); len(got) != 3+2*len(c.Nodes) {
		t.Fatalf("first build executed %v", got)
	}
	// What libvirt holds, to compare after the refused builds.
	snapshot := func() []string {
		var s []string
		for _, n := range c.Nodes {
			dom, _, found, err := conn.Domain("lbt-" + n.Name)
			if err != nil || !found {
				t.Fatalf("domain lbt-%s: found %v, %v", n.Name, found, err)
			}
			s = append(s, dom.UUID)
		}
		names, err := conn.VolumeNames("lbt")
		if err != nil || len(names) < len(c.Nodes) {
			t.Fatalf("volumes %v, %v", names, err)
		}
		for _, name := range names {
			vol, _, err := conn.Volume("lbt", name)
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, name+" "+vol.Key)
		}
		return s
	}
	before := snapshot()
	// A patch release of the same line: its CoreOS image may well be the same, so nothing but
	// the refusal keeps the nodes from half-applying it.
	was := c.Release.Version
	next := bumpPatch(t, was)
	c.Release.Version = next
	for _, dry := range []bool{true, false} {
		r, log, err := lvBuild(ctx, Lab{Config: c}, out, dry, "libvirt")
		if err == nil {
			t.Fatalf("dry %v: the switch was not refused:\n%s", dry, log)
		}
		msg := err.Error() + log
		for _, want := range []string{"libvirt/volume/", "installed with release " + was, "now names " + next, "labbuild destroy", "oc adm upgrade"} {
			if !strings.Contains(msg, want) {
				t.Errorf("dry %v: the refusal does not say %q:\n%s", dry, want, msg)
			}
		}
		if r != nil {
			for _, b := range r.Built {
				if strings.HasPrefix(b, "libvirt/") {
					t.Errorf("dry %v: %s ran", dry, b)
				}
			}
		}
	}
	if after := snapshot(); !slices.Equal(after, before) {
		t.Errorf("libvirt changed under a refused switch:\nbefore %v\nafter  %v", before, after)
	}

	// Switched back: the disks' records come back from the store (the refused build left them
	// failed); libvirt is not touched.
	c.Release.Version = was
	for _, it := range build(c, true).Plan {
		if strings.HasPrefix(it.Target, "libvirt/") && it.Action != engine.Keep && it.Action != engine.ActionRestore {
			t.Errorf("switched back: the plan has %s %s", it.Action, it.Target)
		}
	}
	build(c, false)
	if after := snapshot(); !slices.Equal(after, before) {
		t.Errorf("libvirt changed when switched back:\nbefore %v\nafter  %v", before, after)
	}

	if _, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}); err != nil {
		t.Fatal(err)
	}
	c.Release.Version = next
	if got := lvOwn(build(c, false).Built); len(got) != 3+2*len(c.Nodes) {
		t.Errorf("after destroy, the new release built %v", got)
	}
}

// bumpPatch returns version with its patch number one higher ("4.18.0" → "4.18.1").
func bumpPatch(t *testing.T, version string) string {
	i := strings.LastIndexByte(version, '.')
	p, err := strconv.Atoi(version[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("version %q has no patch number", version)
	}
	return version[:i+1] + strconv.Itoa(p+1)
}

// lvTestDriver starts lvHost and returns a connection to its libvirtd's test driver (open for
// the whole test: the test driver keeps its state only while a connection is) and lvLab on that
// driver.
func lvTestDriver(t *testing.T) (*virt.Conn, *lab.Config) {
	t.Helper()
	d, sr := lvHost(t)
	conn, err := virt.Connect(d.URI("test:///default"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := lvLab(d, sr)
	c.Libvirt.URI, c.Libvirt.DomainType = d.URI("test:///default"), "test"
	return conn, c
}
