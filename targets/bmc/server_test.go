package bmc

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"
	"libvirt.org/go/libvirtxml"
)

const (
	testUser = "admin"
	testPass = "s3cret-pass"
	uuidW0   = "6f1c7a52-0c0e-4e57-9a53-3b2f5d0e0001"
	uuidW1   = "6f1c7a52-0c0e-4e57-9a53-3b2f5d0e0002"
	uuidOtr  = "6f1c7a52-0c0e-4e57-9a53-3b2f5d0e0099"
)

// testCert returns a self-signed server certificate for 127.0.0.1 and a pool trusting it.
func testCert(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bmc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, pool
}

// bmc is a Server under test, serving TLS on 127.0.0.1 through ServeTLS.
type bmc struct {
	srv    *Server
	url    string
	client *http.Client
	log    *syncBuf
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func startBMC(t *testing.T, hv Hypervisor, domains []string, mediaDir string) *bmc {
	t.Helper()
	log := &syncBuf{}
	s, err := New(Config{Hypervisor: hv, Domains: domains, MediaDir: mediaDir, Username: testUser, Password: testPass,
		GracefulTimeout: 5 * time.Second, PollInterval: 20 * time.Millisecond, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	cert, pool := testCert(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeTLS(ctx, ln, cert, s) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeTLS: %v", err)
		}
		s.Wait()
	})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 60 * time.Second}
	return &bmc{srv: s, url: "https://" + ln.Addr().String(), client: client, log: log}
}

func (b *bmc) gofish(t testing.TB, user, pass string) *gofish.APIClient {
	t.Helper()
	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.url, Username: user, Password: pass, BasicAuth: true, HTTPClient: b.client})
	if err != nil {
		t.Fatalf("gofish connect: %v", err)
	}
	t.Cleanup(c.Logout)
	return c
}

// do sends a raw request and returns the status and decoded body.
func (b *bmc) do(t testing.TB, method, path, user, pass, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: body is not JSON: %v\n%s", method, path, err, raw)
		}
	}
	return resp.StatusCode, m, resp.Header
}

// isoServer serves a small "ISO" over plain HTTP on loopback, as Ironic's image server does.
func isoServer(t testing.TB, content []byte) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/images/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/missing.iso") {
			http.NotFound(w, r)
			return
		}
		w.Write(content)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

// ironicVirtualMediaBoot performs, with gofish, the requests Ironic's redfish-virtualmedia
// boot interface makes to boot a node from an ISO, in its order
// (ironic/drivers/modules/redfish/boot.py RedfishVirtualMediaBoot.prepare_ramdisk:
// _eject_all (eject every inserted medium of every manager), _insert_vmedia (the first
// virtual media whose MediaTypes has CD: InsertMedia with inserted and write-protected),
// manager_utils.node_set_boot_device(CDROM, persistent=False) → management.py
// set_boot_device → set_system_boot_options(target=Cd, enabled=Once); then power.py reboot:
// ForceRestart when the system is On, On otherwise) and reads the system back.
func ironicVirtualMediaBoot(t testing.TB, c *gofish.APIClient, uuid, iso string) *redfish.ComputerSystem {
	t.Helper()
	sys, err := redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+uuid)
	if err != nil {
		t.Fatalf("get system: %v", err)
	}
	managers, err := sys.ManagedBy()
	if err != nil || len(managers) == 0 {
		t.Fatalf("system's managers: %v (%d)", err, len(managers))
	}
	// _eject_all
	for _, m := range managers {
		vms, err := m.VirtualMedia()
		if err != nil {
			t.Fatalf("virtual media: %v", err)
		}
		for _, vm := range vms {
			if vm.Inserted {
				if err := vm.EjectMedia(); err != nil {
					t.Fatalf("eject: %v", err)
				}
			}
		}
	}
	// _insert_vmedia
	inserted := false
	for _, m := range managers {
		vms, _ := m.VirtualMedia()
		for _, vm := range vms {
			if !slices.Contains(vm.MediaTypes, redfish.CDMediaType) {
				continue
			}
			if err := vm.InsertMedia(iso, true, true); err != nil {
				t.Fatalf("insert %s: %v", iso, err)
			}
			inserted = true
			break
		}
		if inserted {
			break
		}
	}
	if !inserted {
		t.Fatal("no virtual CD")
	}
	// set_boot_device(CDROM, persistent=False)
	if err := sys.SetBoot(redfish.Boot{BootSourceOverrideTarget: redfish.CdBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled}); err != nil {
		t.Fatalf("set boot: %v", err)
	}
	// power.reboot
	sys, err = redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+uuid)
	if err != nil {
		t.Fatal(err)
	}
	rt := redfish.OnResetType
	if sys.PowerState == redfish.OnPowerState {
		rt = redfish.ForceRestartResetType
	}
	if err := sys.Reset(rt); err != nil {
		t.Fatalf("reset %s: %v", rt, err)
	}
	// read back
	sys, err = redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+uuid)
	if err != nil {
		t.Fatal(err)
	}
	return sys
}

func mediaOf(t testing.TB, c *gofish.APIClient, uuid string) *redfish.VirtualMedia {
	t.Helper()
	vm, err := redfish.GetVirtualMedia(c, "/redfish/v1/Managers/"+uuid+"/VirtualMedia/Cd")
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func liveDomain(t testing.TB, x string) *libvirtxml.Domain {
	t.Helper()
	d := &libvirtxml.Domain{}
	if err := d.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestIronicSequenceFake runs Ironic's virtual-media boot against the fake hypervisor, from
// power off and again from power on: the live definition boots the ISO's copy from the CD-ROM
// first, the Once override is spent (the persistent order is the disk again, Boot reads
// Disabled), the image is the URL given, and an eject empties the tray and deletes the copy.
func TestIronicSequenceFake(t *testing.T) {
	hv := newFakeHV()
	hv.add(uuidW0, "lab-worker-0")
	media := t.TempDir()
	b := startBMC(t, hv, []string{"lab-worker-0"}, media)
	isoBase := isoServer(t, []byte("ISO-9660 stand-in"))
	c := b.gofish(t, testUser, testPass)
	for i, start := range []string{"off", "on"} {
		iso := fmt.Sprintf("%s/images/ironic-python-agent-%d.iso", isoBase, i)
		sys := ironicVirtualMediaBoot(t, c, uuidW0, iso)
		if sys.PowerState != redfish.OnPowerState {
			t.Errorf("from %s: PowerState %s, want On", start, sys.PowerState)
		}
		if sys.Boot.BootSourceOverrideEnabled != "Disabled" {
			t.Errorf("from %s: after the boot, BootSourceOverrideEnabled %q, want Disabled (Once spent)", start, sys.Boot.BootSourceOverrideEnabled)
		}
		pers, live, on, _ := hv.Get(uuidW0)
		if !on {
			t.Fatalf("from %s: the domain is not running", start)
		}
		ld := liveDomain(t, live)
		if got := bootOrder(ld); !slices.Equal(got, []string{"cdrom", "hd"}) {
			t.Errorf("from %s: live boot order %v, want [cdrom hd]", start, got)
		}
		f := diskFile(cdrom(ld))
		if b, err := os.ReadFile(f); err != nil || string(b) != "ISO-9660 stand-in" || filepath.Dir(f) != media {
			t.Errorf("from %s: live CD-ROM %q: %v %q, want the downloaded image in %s", start, f, err, b, media)
		}
		if got := bootOrder(liveDomain(t, pers)); !slices.Equal(got, []string{"hd"}) {
			t.Errorf("from %s: persistent boot order %v after the Once boot, want [hd]", start, got)
		}
		vm := mediaOf(t, c, uuidW0)
		if !vm.Inserted || vm.Image != iso || !vm.WriteProtected {
			t.Errorf("from %s: virtual media %+v, want Inserted %s write-protected", start, vm, iso)
		}
	}
	if n, _ := os.ReadDir(media); len(n) != 1 {
		t.Errorf("media dir holds %d files, want 1 (the replaced image deleted)", len(n))
	}
	if err := mediaOf(t, c, uuidW0).EjectMedia(); err != nil {
		t.Fatal(err)
	}
	_, live, _, _ := hv.Get(uuidW0)
	if f := diskFile(cdrom(liveDomain(t, live))); f != "" {
		t.Errorf("after eject the live CD-ROM holds %q", f)
	}
	if vm := mediaOf(t, c, uuidW0); vm.Inserted || vm.Image != "" {
		t.Errorf("after eject: %+v", vm)
	}
	if n, _ := os.ReadDir(media); len(n) != 0 {
		t.Errorf("after eject the media dir holds %v", n)
	}
}

// TestPower checks each reset type's effect on the fake and what PowerState reads after it.
func TestPower(t *testing.T) {
	hv := newFakeHV()
	hv.add(uuidW0, "lab-worker-0")
	b := startBMC(t, hv, nil, t.TempDir())
	c := b.gofish(t, testUser, testPass)
	for _, tc := range []struct {
		reset redfish.ResetType
		want  redfish.PowerState
	}{
		{"On", "On"}, {"On", "On"}, {"ForceOff", "Off"}, {"ForceOff", "Off"}, {"PushPowerButton", "On"},
		{"PushPowerButton", "Off"}, {"ForceRestart", "On"}, {"GracefulShutdown", "Off"}, {"GracefulRestart", "On"},
		{"GracefulRestart", "On"},
	} {
		sys, err := redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+uuidW0)
		if err != nil {
			t.Fatal(err)
		}
		if err := sys.Reset(tc.reset); err != nil {
			t.Fatalf("%s: %v", tc.reset, err)
		}
		b.srv.Wait() // GracefulRestart's restart
		sys, _ = redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+uuidW0)
		if sys.PowerState != tc.want {
			t.Errorf("after %s: %s, want %s", tc.reset, sys.PowerState, tc.want)
		}
	}
}

func errBody(t *testing.T, m map[string]any) (code, msg string, args []any) {
	t.Helper()
	e, _ := m["error"].(map[string]any)
	if e == nil {
		t.Fatalf("no Redfish error body: %v", m)
	}
	info, _ := e["@Message.ExtendedInfo"].([]any)
	if len(info) != 1 {
		t.Fatalf("@Message.ExtendedInfo %v", e)
	}
	m0 := info[0].(map[string]any)
	if m0["MessageId"] != e["code"] || m0["@odata.type"] != "#Message.v1_1_1.Message" {
		t.Errorf("message %v does not match code %v", m0, e["code"])
	}
	args, _ = m0["MessageArgs"].([]any)
	return e["code"].(string), e["message"].(string), args
}

// TestErrors: the error statuses and Redfish error bodies, with raw requests.
func TestErrors(t *testing.T) {
	hv := newFakeHV()
	hv.add(uuidW0, "lab-worker-0")
	hv.add(uuidOtr, "other-lab-worker-0")
	b := startBMC(t, hv, []string{"lab-worker-0"}, t.TempDir())
	iso := isoServer(t, []byte("x"))
	sysP := "/redfish/v1/Systems/" + uuidW0
	for _, tc := range []struct {
		name, method, path, user, pass, body string
		status                               int
		code                                 string
		msgHas                               []string
	}{
		{"wrong password", "GET", sysP, testUser, "wrong", "", 401, "Base.1.8.NoValidSession", nil},
		{"wrong user", "GET", sysP, "root", testPass, "", 401, "Base.1.8.NoValidSession", nil},
		{"no credentials", "GET", "/redfish/v1/Systems", "", "", "", 401, "Base.1.8.NoValidSession", nil},
		{"unknown system", "GET", "/redfish/v1/Systems/00000000-0000-0000-0000-000000000000", testUser, testPass, "", 404, "Base.1.8.ResourceMissingAtURI", []string{"/redfish/v1/Systems/00000000-0000-0000-0000-000000000000"}},
		{"another lab's domain", "GET", "/redfish/v1/Systems/" + uuidOtr, testUser, testPass, "", 404, "Base.1.8.ResourceMissingAtURI", nil},
		{"another lab's domain reset", "POST", "/redfish/v1/Systems/" + uuidOtr + "/Actions/ComputerSystem.Reset", testUser, testPass, `{"ResetType":"ForceOff"}`, 404, "Base.1.8.ResourceMissingAtURI", nil},
		{"unknown path", "GET", "/redfish/v1/Chassis", testUser, testPass, "", 404, "Base.1.8.ResourceMissingAtURI", nil},
		{"bad boot target", "PATCH", sysP, testUser, testPass, `{"Boot":{"BootSourceOverrideTarget":"Floppy","BootSourceOverrideEnabled":"Once"}}`, 400, "Base.1.8.PropertyValueNotInList",
			[]string{"Floppy", "Boot/BootSourceOverrideTarget", "AllowableValues: None, Pxe, Cd, Hdd"}},
		{"bad boot enabled", "PATCH", sysP, testUser, testPass, `{"Boot":{"BootSourceOverrideEnabled":"Twice"}}`, 400, "Base.1.8.PropertyValueNotInList", []string{"AllowableValues: Disabled, Once, Continuous"}},
		{"bad boot mode", "PATCH", sysP, testUser, testPass, `{"Boot":{"BootSourceOverrideMode":"BIOS"}}`, 400, "Base.1.8.PropertyValueNotInList", []string{"AllowableValues: UEFI, Legacy"}},
		{"read-only property", "PATCH", sysP, testUser, testPass, `{"PowerState":"Off"}`, 400, "Base.1.8.PropertyNotWritable", []string{"PowerState"}},
		{"malformed JSON", "PATCH", sysP, testUser, testPass, `{"Boot":`, 400, "Base.1.8.MalformedJSON", nil},
		{"bad reset type", "POST", sysP + "/Actions/ComputerSystem.Reset", testUser, testPass, `{"ResetType":"Hibernate"}`, 400, "Base.1.8.PropertyValueNotInList", []string{"AllowableValues: On, ForceOff, GracefulShutdown, GracefulRestart, ForceRestart, PushPowerButton"}},
		{"no reset type", "POST", sysP + "/Actions/ComputerSystem.Reset", testUser, testPass, `{}`, 400, "Base.1.8.ActionParameterMissing", nil},
		{"GET on an action", "GET", sysP + "/Actions/ComputerSystem.Reset", testUser, testPass, "", 405, "Base.1.8.OperationNotAllowed", nil},
		{"image not http", "POST", "/redfish/v1/Managers/" + uuidW0 + "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", testUser, testPass, `{"Image":"file:///etc/shadow"}`, 400, "Base.1.8.ActionParameterValueFormatError", nil},
		{"image missing", "POST", "/redfish/v1/Managers/" + uuidW0 + "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", testUser, testPass, `{"Image":"` + iso + `/images/missing.iso"}`, 400, "Base.1.8.ResourceAtUriUnauthorized", []string{"404 Not Found"}},
		{"writable media", "POST", "/redfish/v1/Managers/" + uuidW0 + "/VirtualMedia/Cd/Actions/VirtualMedia.InsertMedia", testUser, testPass, `{"Image":"` + iso + `/images/a.iso","WriteProtected":false}`, 400, "Base.1.8.ActionParameterValueNotInList", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, h := b.do(t, tc.method, tc.path, tc.user, tc.pass, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %v", status, tc.status, body)
			}
			code, msg, args := errBody(t, body)
			if code != tc.code {
				t.Errorf("code %s, want %s", code, tc.code)
			}
			for _, s := range tc.msgHas {
				if !strings.Contains(msg, s) && !slices.Contains(args, any(s)) {
					t.Errorf("message %q (args %v) does not name %q", msg, args, s)
				}
			}
			if status == 401 && h.Get("WWW-Authenticate") != `Basic realm="labbuild BMC"` {
				t.Errorf("WWW-Authenticate %q", h.Get("WWW-Authenticate"))
			}
			if strings.Contains(msg, testPass) || strings.Contains(b.log.String(), testPass) {
				t.Error("the password appears in a message or the log")
			}
		})
	}
	// Nothing of the refused requests changed the domain.
	if hv.calls["Define"] != 0 || hv.calls["ForceOff"] != 0 {
		t.Errorf("refused requests changed domains: %v", hv.calls)
	}
	// The ServiceRoot is open, as the Redfish spec has it (gofish and sushy read it first).
	if status, body, _ := b.do(t, "GET", "/redfish/v1/", "", "", ""); status != 200 || body["@odata.id"] != "/redfish/v1" || body["@odata.type"] != "#ServiceRoot.v1_5_0.ServiceRoot" {
		t.Errorf("ServiceRoot without credentials: %d %v", status, body)
	}
	// The collection lists this lab's domain only.
	_, body, _ := b.do(t, "GET", "/redfish/v1/Systems", testUser, testPass, "")
	if body["Members@odata.count"] != float64(1) || !strings.Contains(fmt.Sprint(body["Members"]), uuidW0) {
		t.Errorf("Systems: %v", body)
	}
	// gofish reads the error as a Redfish error.
	c := b.gofish(t, testUser, testPass)
	_, err := redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+uuidOtr)
	var ce *common.Error
	if !errors.As(err, &ce) || ce.HTTPReturnedStatusCode != 404 || ce.Code != "Base.1.8.ResourceMissingAtURI" {
		t.Errorf("gofish error %#v", err)
	}
}

// TestSystemShape checks the resources' @odata fields and the Boot annotations Ironic reads.
func TestSystemShape(t *testing.T) {
	hv := newFakeHV()
	hv.add(uuidW0, "lab-worker-0")
	b := startBMC(t, hv, nil, t.TempDir())
	_, s, _ := b.do(t, "GET", "/redfish/v1/Systems/"+uuidW0, testUser, testPass, "")
	boot := s["Boot"].(map[string]any)
	for k, want := range map[string]string{
		"@odata.id": "/redfish/v1/Systems/" + uuidW0, "@odata.type": "#ComputerSystem.v1_10_0.ComputerSystem", "Id": uuidW0,
		"UUID": uuidW0, "Name": "lab-worker-0", "PowerState": "Off",
	} {
		if s[k] != want {
			t.Errorf("%s = %v, want %s", k, s[k], want)
		}
	}
	for k, want := range map[string]string{
		"BootSourceOverrideTarget": "None", "BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideMode": "Legacy",
		"BootSourceOverrideTarget@Redfish.AllowableValues":  "[None Pxe Cd Hdd]",
		"BootSourceOverrideEnabled@Redfish.AllowableValues": "[Disabled Once Continuous]",
		"BootSourceOverrideMode@Redfish.AllowableValues":    "[UEFI Legacy]",
	} {
		if fmt.Sprint(boot[k]) != want {
			t.Errorf("Boot.%s = %v, want %s", k, boot[k], want)
		}
	}
	if s["MemorySummary"].(map[string]any)["TotalSystemMemoryGiB"] != float64(8) || s["ProcessorSummary"].(map[string]any)["Count"] != float64(2) {
		t.Errorf("summaries: %v %v", s["MemorySummary"], s["ProcessorSummary"])
	}
	// Continuous Pxe in UEFI mode: persistent order and firmware; Disabled restores the order.
	if st, body, _ := b.do(t, "PATCH", "/redfish/v1/Systems/"+uuidW0, testUser, testPass, `{"Boot":{"BootSourceOverrideTarget":"Pxe","BootSourceOverrideEnabled":"Continuous","BootSourceOverrideMode":"UEFI"}}`); st != 204 {
		t.Fatalf("PATCH: %d %v", st, body)
	}
	pers, _, _, _ := hv.Get(uuidW0)
	d := liveDomain(t, pers)
	if !slices.Equal(bootOrder(d), []string{"network", "hd"}) || d.OS.Firmware != "efi" {
		t.Errorf("persistent after Pxe Continuous UEFI: boot %v firmware %q", bootOrder(d), d.OS.Firmware)
	}
	_, s, _ = b.do(t, "GET", "/redfish/v1/Systems/"+uuidW0, testUser, testPass, "")
	boot = s["Boot"].(map[string]any)
	if boot["BootSourceOverrideTarget"] != "Pxe" || boot["BootSourceOverrideEnabled"] != "Continuous" || boot["BootSourceOverrideMode"] != "UEFI" {
		t.Errorf("Boot after PATCH: %v", boot)
	}
	// Continuous survives a power-on.
	b.do(t, "POST", "/redfish/v1/Systems/"+uuidW0+"/Actions/ComputerSystem.Reset", testUser, testPass, `{"ResetType":"On"}`)
	pers, _, _, _ = hv.Get(uuidW0)
	if got := bootOrder(liveDomain(t, pers)); !slices.Equal(got, []string{"network", "hd"}) {
		t.Errorf("Continuous after power-on: %v", got)
	}
	b.do(t, "PATCH", "/redfish/v1/Systems/"+uuidW0, testUser, testPass, `{"Boot":{"BootSourceOverrideEnabled":"Disabled"}}`)
	pers, _, _, _ = hv.Get(uuidW0)
	if got := bootOrder(liveDomain(t, pers)); !slices.Equal(got, []string{"hd"}) {
		t.Errorf("Disabled: boot order %v, want the domain's own [hd]", got)
	}
	_, m, _ := b.do(t, "GET", "/redfish/v1/Managers/"+uuidW0, testUser, testPass, "")
	if m["@odata.type"] != "#Manager.v1_3_1.Manager" || m["ManagerType"] != "BMC" || fmt.Sprint(m["VirtualMedia"]) != "map[@odata.id:/redfish/v1/Managers/"+uuidW0+"/VirtualMedia]" {
		t.Errorf("Manager: %v", m)
	}
}

// TestConcurrentClients: 20 gofish clients at once insert, eject, set boot overrides and
// power-cycle the same two systems; afterwards each system's state is whole: one CD-ROM, whose
// file is the one the metadata names (or none), the only file of that system in the media
// directory, a boot order that is the one the reported override sets, and every request
// answered with success.
func TestConcurrentClients(t *testing.T) {
	hv := newFakeHV()
	hv.add(uuidW0, "lab-worker-0")
	hv.add(uuidW1, "lab-worker-1")
	hv.delay = time.Millisecond
	media := t.TempDir()
	b := startBMC(t, hv, nil, media)
	isoBase := isoServer(t, bytes.Repeat([]byte("iso"), 100000))
	concurrentClients(t, b, []string{uuidW0, uuidW1}, isoBase)
	for _, u := range []string{uuidW0, uuidW1} {
		pers, live, on, _ := hv.Get(u)
		checkWhole(t, b, u, pers, live, on, media)
	}
}

// concurrentClients runs 20 clients, each doing a mix of the BMC's mutating requests.
func concurrentClients(t *testing.T, b *bmc, uuids []string, isoBase string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	targets := []redfish.BootSourceOverrideTarget{"Cd", "Hdd", "Pxe"}
	enabled := []redfish.BootSourceOverrideEnabled{"Once", "Continuous"}
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.url, Username: testUser, Password: testPass, BasicAuth: true, HTTPClient: b.client})
			if err != nil {
				errs <- err
				return
			}
			u := uuids[i%len(uuids)]
			for j := 0; j < 4; j++ {
				sys, err := redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+u)
				if err != nil {
					errs <- err
					return
				}
				vm, err := redfish.GetVirtualMedia(c, "/redfish/v1/Managers/"+u+"/VirtualMedia/Cd")
				if err != nil {
					errs <- err
					return
				}
				var op error
				switch (i + j) % 4 {
				case 0:
					op = vm.InsertMedia(fmt.Sprintf("%s/images/c%d-%d.iso", isoBase, i, j), true, true)
				case 1:
					op = sys.SetBoot(redfish.Boot{BootSourceOverrideTarget: targets[(i+j)%3], BootSourceOverrideEnabled: enabled[(i+j)%2]})
				case 2:
					op = sys.Reset([]redfish.ResetType{"ForceRestart", "On", "ForceOff"}[(i+j)%3])
				case 3:
					op = vm.EjectMedia()
				}
				if op != nil {
					errs <- fmt.Errorf("client %d op %d: %w", i, j, op)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// checkWhole asserts that one system's state is consistent (see TestConcurrentClients).
func checkWhole(t *testing.T, b *bmc, uuid, pers, live string, on bool, media string) {
	t.Helper()
	p := liveDomain(t, pers)
	n := 0
	for _, d := range p.Devices.Disks {
		if d.Device == "cdrom" {
			n++
		}
	}
	if n > 1 {
		t.Errorf("%s: %d CD-ROMs", uuid, n)
	}
	_, s, _ := b.do(t, "GET", "/redfish/v1/Systems/"+uuid, testUser, testPass, "")
	boot := s["Boot"].(map[string]any)
	want := []string{"hd"}
	if boot["BootSourceOverrideEnabled"] != "Disabled" {
		want = BootDevs(boot["BootSourceOverrideTarget"].(string))
	}
	if got := bootOrder(p); !slices.Equal(got, want) {
		t.Errorf("%s: persistent boot order %v, but Boot reads %v (want %v)", uuid, got, boot, want)
	}
	_, vm, _ := b.do(t, "GET", "/redfish/v1/Managers/"+uuid+"/VirtualMedia/Cd", testUser, testPass, "")
	f := diskFile(cdrom(p))
	var files []string
	ents, _ := os.ReadDir(media)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), uuid) {
			files = append(files, filepath.Join(media, e.Name()))
		}
	}
	if vm["Inserted"] == true {
		if !slices.Equal(files, []string{f}) || !strings.HasPrefix(vm["Image"].(string), "http") {
			t.Errorf("%s: inserted %v, CD-ROM %q, files %v", uuid, vm["Image"], f, files)
		}
		if on {
			// A running domain's live CD-ROM is the inserted file, or it has none yet (added
			// while running: it appears at the next start).
			if lf := diskFile(cdrom(liveDomain(t, live))); lf != f && cdrom(liveDomain(t, live)) != nil {
				t.Errorf("%s: live CD-ROM %q, persistent %q", uuid, lf, f)
			}
		}
	} else if f != "" || len(files) != 0 {
		t.Errorf("%s: not inserted, but CD-ROM %q and files %v", uuid, f, files)
	}
}

// TestPlainHTTPRefused: the BMC port speaks TLS only; a plain-HTTP request is answered by
// net/http's TLS listener with 400 and never reaches the handler (no request log line).
func TestPlainHTTPRefused(t *testing.T) {
	hv := newFakeHV()
	hv.add(uuidW0, "lab-worker-0")
	b := startBMC(t, hv, nil, t.TempDir())
	plain := strings.Replace(b.url, "https://", "http://", 1)
	req, _ := http.NewRequest("POST", plain+"/redfish/v1/Systems/"+uuidW0+"/Actions/ComputerSystem.Reset", strings.NewReader(`{"ResetType":"On"}`))
	req.SetBasicAuth(testUser, testPass)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), "HTTP request to an HTTPS server") {
			t.Errorf("plain HTTP: %d %s", resp.StatusCode, body)
		}
	}
	if hv.calls["Start"] != 0 || strings.Contains(b.log.String(), "Reset") {
		t.Errorf("a plain-HTTP request was served: calls %v, log %s", hv.calls, b.log.String())
	}
	if _, err := New(Config{Hypervisor: hv, MediaDir: t.TempDir()}); err == nil {
		t.Error("New without credentials: no error")
	}
}

// TestInsertMediaTLS: Ironic serves virtual media over TLS with a CA of its own
// (cluster-baremetal-operator provisioning/baremetal_crypto.go generateTlsCertificate,
// "metal3-ironic"; VMEDIA_TLS_PORT in baremetal_pod.go), which nobody else trusts. A real BMC,
// and sushy-tools (emulator/resources/vmedia.py insert_image: SUSHY_EMULATOR_VMEDIA_VERIFY_SSL
// False, "it's de facto standard for Redfish to default to no certificate validation"), fetch it
// without verifying; so does labbuild's BMC. VerifyCertificate: true on the VirtualMedia (PATCH,
// as sushy-tools' virtual_media_patch takes it) turns verification on, and the same image is
// refused; a non-boolean is refused.
func TestInsertMediaTLS(t *testing.T) {
	hv := newFakeHV()
	hv.add(uuidW0, "lab-worker-0")
	b := startBMC(t, hv, []string{"lab-worker-0"}, t.TempDir())
	ironic := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ISO")) }))
	t.Cleanup(ironic.Close)
	vm := "/redfish/v1/Managers/" + uuidW0 + "/VirtualMedia/Cd"
	insert := `{"Image":"` + ironic.URL + `/redfish/boot-` + uuidW0 + `.iso","Inserted":true,"WriteProtected":true}`

	if status, body, _ := b.do(t, "POST", vm+"/Actions/VirtualMedia.InsertMedia", testUser, testPass, insert); status != 204 {
		t.Fatalf("InsertMedia from a TLS server with an unknown CA: %d %v, want 204 (a BMC does not verify media by default)", status, body)
	}
	if _, body, _ := b.do(t, "GET", vm, testUser, testPass, ""); body["Inserted"] != true || body["VerifyCertificate"] != false {
		t.Errorf("VirtualMedia after the insert: %v; want Inserted and VerifyCertificate false", body)
	}
	if status, body, _ := b.do(t, "PATCH", vm, testUser, testPass, `{"VerifyCertificate":"yes"}`); status != 400 {
		t.Errorf("PATCH VerifyCertificate \"yes\": %d %v, want 400", status, body)
	}
	if status, body, _ := b.do(t, "PATCH", vm, testUser, testPass, `{"VerifyCertificate":true}`); status != 204 {
		t.Fatalf("PATCH VerifyCertificate true: %d %v", status, body)
	}
	if _, body, _ := b.do(t, "GET", vm, testUser, testPass, ""); body["VerifyCertificate"] != true {
		t.Errorf("VerifyCertificate after the PATCH: %v", body["VerifyCertificate"])
	}
	status, body, _ := b.do(t, "POST", vm+"/Actions/VirtualMedia.InsertMedia", testUser, testPass, insert)
	if status != 400 {
		t.Fatalf("InsertMedia with VerifyCertificate from a TLS server with an unknown CA: %d %v, want 400", status, body)
	}
	if code, msg, _ := errBody(t, body); code != "Base.1.8.ResourceAtUriUnauthorized" || !strings.Contains(msg, "certificate") {
		t.Errorf("refusal %s %q, want ResourceAtUriUnauthorized naming the certificate", code, msg)
	}
}
