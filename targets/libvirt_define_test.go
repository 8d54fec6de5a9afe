package targets

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
)

// lvTeeOnce is a log writer that calls f once, at the first write that starts with s.
type lvTeeOnce struct {
	s    string
	f    func()
	done bool
}

func (w *lvTeeOnce) Write(b []byte) (int, error) {
	if !w.done && strings.HasPrefix(string(b), w.s) {
		w.done = true
		w.f()
	}
	return len(b), nil
}

// TestLibvirtDomainDefinedMeanwhile: a domain that is absent when libvirt/vm/<node> looks it up
// and defined before its own define (what a killed labbuild's define still in flight in
// libvirtd does: TestRehearsalTwoHostFlow's run after the kill failed with "domain
// 'rehearsal-bootstrap' already exists with uuid …") is looked at again and taken over: the
// build succeeds, the domain keeps the UUID it was defined with, and has labbuild's definition.
// libvirt's test driver, in a real libvirtd.
func TestLibvirtDomainDefinedMeanwhile(t *testing.T) {
	conn, c := lvTestDriver(t)
	ctx := context.Background()
	out := t.TempDir()
	lvBuilder(ctx, t, out, "libvirt")(c, false)
	const name = "lbt-master-0"
	dom, _, found, err := conn.Domain(name)
	if err != nil || !found {
		t.Fatalf("domain %s: found %v, %v", name, found, err)
	}
	wantMemory := dom.Memory.Value
	if err := conn.DeleteDomain(name); err != nil {
		t.Fatal(err)
	}
	// The other define: another UUID, another size.
	other := *dom
	mem := *dom.Memory
	mem.Value = wantMemory / 2
	other.UUID, other.Memory, other.CurrentMemory = "", &mem, nil
	var defineErr error
	var meanwhile string // its UUID, which libvirt chose
	// At the Run's own "create: domain … does not exist" line, between its look and its define
	// (not at the engine's "probe: create: …" line before the Run looks).
	tee := &lvTeeOnce{s: "create: domain " + name + " does not exist", f: func() {
		if defineErr = conn.DefineDomain(&other); defineErr == nil {
			if got, _, _, err := conn.Domain(name); err == nil {
				meanwhile = got.UUID
			}
		}
	}}
	var log strings.Builder
	_, err = engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"libvirt"}, Jobs: 1,
		Now: func() time.Time { return lvNow }, Stdout: &log, Stderr: &log,
		LogTee: func(n string) io.Writer {
			if n == "libvirt/vm/master-0" {
				return tee
			}
			return nil
		}})
	if !tee.done || defineErr != nil {
		t.Fatalf("the define meanwhile did not happen (%v, %v):\n%s", tee.done, defineErr, log.String())
	}
	if err != nil {
		t.Fatalf("a domain defined meanwhile failed the build: %v\n%s", err, log.String())
	}
	now, _, found, err := conn.Domain(name)
	if err != nil || !found {
		t.Fatalf("domain %s after the build: found %v, %v", name, found, err)
	}
	if now.UUID != meanwhile || now.UUID == dom.UUID {
		t.Errorf("domain UUID %s, want the one defined meanwhile (not the deleted %s)", now.UUID, dom.UUID)
	}
	if now.Memory.Value != wantMemory {
		t.Errorf("domain memory %d, want labbuild's %d", now.Memory.Value, wantMemory)
	}
}
