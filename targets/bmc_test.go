package targets

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/internal/rig/testenv"
	"github.com/labbuild/labbuild/lab"
	rl "github.com/labbuild/labbuild/render/libvirt"
	"github.com/labbuild/labbuild/targets/bmc"
	"github.com/labbuild/labbuild/targets/virt"
)

var (
	bmcBinOnce sync.Once
	bmcBin     string
	bmcBinErr  error
)

// bmcBinary builds labbuild-full (./cmd/labbuild-full) once per test process: bmc/service runs it
// as `labbuild-full __bmc-serve CONFIG`.
func bmcBinary(t *testing.T) string {
	t.Helper()
	bmcBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lbbmc")
		if err != nil {
			bmcBinErr = err
			return
		}
		bmcBin = filepath.Join(dir, "labbuild-full")
		out, err := exec.Command("go", "build", "-o", bmcBin, "../cmd/labbuild-full").CombinedOutput()
		if err != nil {
			bmcBinErr = err
			t.Logf("%s", out)
		}
	})
	if bmcBinErr != nil {
		t.Fatalf("build labbuild-full: %v", bmcBinErr)
	}
	return bmcBin
}

// TestBMCService builds bmc/service for a platform: baremetal lab on a real libvirtd in a
// network namespace: the daemon (labbuild-full __bmc-serve, run inside the namespace) serves
// on the bridge address network.gateway:8000 with a certificate from the lab's BMC CA (the
// client verifies it against pki/ca/bmc, by IP SAN) and the generated credentials (0600); the
// lab's VM appears as a System under its derived UUID, another domain does not; a wrong
// password is 401; plain HTTP is refused. A second build keeps it (Probe); a killed daemon is
// planned as create; destroy stops it and removes its state, and a second destroy does nothing.
func TestBMCService(t *testing.T) {
	d := testenv.StartLibvirtd(t)
	useNetnsHost(t, d)
	bin := bmcBinary(t)
	orig := bmcCommand
	bmcCommand = func(cfg string) ([]string, string, error) {
		return []string{"ip", "netns", "exec", d.NetNS, bin, BMCServeVerb, cfg}, "labbuild-full", nil
	}
	t.Cleanup(func() { bmcCommand = orig })
	ctx := context.Background()
	out := t.TempDir()
	c := lvLab(d, testenv.StartSampleRelease(t, false))
	c.Platform, c.Network.LoadBalancer = lab.PlatformBaremetal, lab.LoadBalancerInCluster
	build := func(dry bool) *engine.Result {
		t.Helper()
		var log strings.Builder
		r, err := engine.Build(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"bmc/service"}, DryRun: dry, Jobs: 2, Stdout: &log, Stderr: &log})
		if err != nil {
			t.Fatalf("build: %v\n%s", err, log.String())
		}
		return r
	}
	build(false)
	t.Cleanup(func() { engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out}) })

	// The lab's worker VM (defined here with the UUID libvirt/vm/worker-0 gives it) and
	// another lab's domain.
	conn, err := virt.Connect(c.Libvirt.URI)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	uuid := rl.UUID("lbt", "worker-0")
	for _, dm := range []struct{ name, uuid string }{{"lbt-worker-0", uuid}, {"other-worker-0", rl.UUID("other", "worker-0")}} {
		dom, err := rl.Domain(rl.DomainSpec{Name: dm.name, UUID: dm.uuid, Type: "qemu", VCPUs: 1, MemoryMiB: 128, Disk: "/nonexistent.qcow2", Network: "lbt", MAC: rl.MAC("x", dm.name)})
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.DefineDomain(dom); err != nil {
			t.Fatal(err)
		}
		defer conn.DeleteDomain(dm.name)
	}

	var rec bmcRecord
	b, err := os.ReadFile(filepath.Join(out, "bmc", "service", "record.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &rec)
	if rec.Listen != "198.18.0.1:8000" || !rec.Alive() {
		t.Fatalf("record %+v: want a live BMC on 198.18.0.1:8000", rec)
	}
	credsPath := filepath.Join(out, "bmc", "credentials", "credentials.json")
	if st, err := os.Stat(credsPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v, want 0600", err, st)
	}
	creds, err := bmc.ReadCredentials(credsPath)
	if err != nil {
		t.Fatal(err)
	}
	if logb, _ := os.ReadFile(filepath.Join(rec.StateDir, "bmc.log")); strings.Contains(string(logb), creds.Password) {
		t.Error("the BMC's log holds its password")
	}
	caPEM, err := os.ReadFile(filepath.Join(out, "pki", "ca", "bmc", "tls.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	gc, err := gofish.Connect(gofish.ClientConfig{Endpoint: "https://198.18.0.1:8000", Username: creds.Username, Password: creds.Password, BasicAuth: true, HTTPClient: hc})
	if err != nil {
		t.Fatalf("gofish over the bridge, verifying the BMC CA: %v", err)
	}
	systems, err := gc.Service.Systems()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range systems {
		ids = append(ids, s.ID+" "+s.Name)
	}
	if !slices.Equal(ids, []string{uuid + " lbt-worker-0"}) {
		t.Errorf("Systems %v, want only [%s lbt-worker-0]", ids, uuid)
	}
	sys, err := redfish.GetComputerSystem(gc, "/redfish/v1/Systems/"+uuid)
	if err != nil || sys.PowerState != "Off" {
		t.Errorf("system: %v %+v", err, sys)
	}
	req, _ := http.NewRequest("GET", "https://198.18.0.1:8000/redfish/v1/Systems", nil)
	req.SetBasicAuth(creds.Username, "wrong")
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("wrong password: %v %v", err, resp)
	}
	plain := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	if resp, err := plain.Get("http://198.18.0.1:8000/redfish/v1/Systems"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || strings.Contains(string(body), "Systems") {
			t.Errorf("plain HTTP: %d %s", resp.StatusCode, body)
		}
	}

	// Probe: kept while it runs; a dead daemon is planned as create.
	for _, p := range build(true).Plan {
		if p.Target == "bmc/service" && p.Action != "keep" {
			t.Errorf("second plan: %s %s %v", p.Target, p.Action, p.Reasons)
		}
	}
	if _, err := rec.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range build(true).Plan {
		if p.Target == "bmc/service" {
			found = true
			if p.Action != "create" || !strings.Contains(p.Why(), "not running") {
				t.Errorf("plan after the daemon died: %s %v", p.Action, p.Reasons)
			}
		}
	}
	if !found {
		t.Error("plan after the daemon died does not list bmc/service")
	}
	build(false)
	b, _ = os.ReadFile(filepath.Join(out, "bmc", "service", "record.json"))
	json.Unmarshal(b, &rec)
	if !rec.Alive() {
		t.Fatal("the BMC was not restarted")
	}

	// Destroy stops it and removes its state; a second destroy does nothing.
	rep, err := engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"bmc/service"}})
	if err != nil || !slices.Contains(rep.Destroyed, "bmc/service") {
		t.Fatalf("destroy: %v %+v", err, rep)
	}
	if rec.Alive() {
		t.Error("the BMC runs after destroy")
	}
	if _, err := os.Stat(rec.StateDir); !os.IsNotExist(err) {
		t.Errorf("state dir %s after destroy: %v", rec.StateDir, err)
	}
	rep, err = engine.Destroy(ctx, engine.Options{Config: Lab{Config: c}, OutDir: out, Goals: []string{"bmc/service"}})
	if err != nil || len(rep.Destroyed)+len(rep.Failed) != 0 {
		t.Errorf("second destroy: %v %+v", err, rep)
	}
}
