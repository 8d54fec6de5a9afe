package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/targets"
)

// TestCertReport: `labbuild certs` marks "(renew)" a certificate past its own renewal point
// (its target's stale time: a year's certificate renews months before its last day, a day's
// bootstrap certificate hours before) and not one with hours left whose renewal point is ahead,
// marks an expired one EXPIRED, shows whole days or hours, lists usages and SANs, and with
// --json writes the infos (an empty list, not null, when nothing is built).
func TestCertReport(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := t0.Add(d); return &x }
	infos := []targets.CertInfo{
		{Target: "pki/cert/kube-apiserver", Subject: "CN=kube-apiserver", Issuer: "CN=kube-apiserver-lb-signer", DNSNames: []string{"api-int.ocp4.example.com"},
			IPs: []string{"192.168.126.10"}, Usages: []string{"serverAuth", "clientAuth"}, NotAfter: t0.Add(364*24*time.Hour + time.Hour), Left: (364*24 + 1) * 3600, RenewAt: at(273 * 24 * time.Hour)},
		{Target: "pki/cert/kubelet-bootstrap", Subject: "CN=system:kubelet-bootstrap", Issuer: "CN=kubelet-bootstrap-kubeconfig-signer", Usages: []string{"clientAuth"},
			NotAfter: t0.Add(90 * time.Minute), Left: 90 * 60, RenewAt: at(-4 * time.Hour)},
		{Target: "pki/cert/short", Subject: "CN=short", Issuer: "CN=short-signer", Usages: []string{"clientAuth"},
			NotAfter: t0.Add(10 * time.Hour), Left: 10 * 3600, RenewAt: at(time.Hour)},
		{Target: "pki/cert/renewing", Subject: "CN=renewing", Issuer: "CN=renewing-signer", Usages: []string{"serverAuth"},
			NotAfter: t0.Add(40 * 24 * time.Hour), Left: 40 * 24 * 3600, RenewAt: at(-time.Hour)},
		{Target: "pki/cert/old", Subject: "CN=old", Issuer: "CN=old", Usages: []string{"serverAuth"}, NotAfter: t0.Add(-time.Hour), Left: -3600},
	}
	var table bytes.Buffer
	if err := writeCertReport(&table, "out", infos, t0, false); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"pki/cert/kube-apiserver ":    {"api-int.ocp4.example.com,192.168.126.10", "serverAuth,clientAuth", "364d"},
		"pki/cert/kubelet-bootstrap ": {"clientAuth", "1h30m (renew)"},
		"pki/cert/short ":             {"10h00m"},
		"pki/cert/renewing ":          {"40d (renew)"},
		"pki/cert/old ":               {"EXPIRED"},
	}
	for _, l := range strings.Split(table.String(), "\n") {
		if (strings.HasPrefix(l, "pki/cert/kube-apiserver ") || strings.HasPrefix(l, "pki/cert/short ")) && strings.Contains(l, "(renew)") {
			t.Errorf("marked (renew) before its renewal point: %q", l)
		}
	}
	for _, line := range strings.Split(table.String(), "\n") {
		for prefix, parts := range want {
			if strings.HasPrefix(line, prefix) {
				for _, p := range parts {
					if !strings.Contains(line, p) {
						t.Errorf("%s line lacks %q: %q", prefix, p, line)
					}
				}
				delete(want, prefix)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("the table lacks %v:\n%s", want, table.String())
	}
	var js bytes.Buffer
	if err := writeCertReport(&js, "out", infos, t0, true); err != nil {
		t.Fatal(err)
	}
	var back []targets.CertInfo
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back) != len(infos) || back[1].Left != 90*60 {
		t.Errorf("--json: %v, %d infos; want %d back:\n%s", err, len(back), len(infos), js.String())
	}
	var empty bytes.Buffer
	if err := writeCertReport(&empty, "out", nil, t0, true); err != nil || strings.TrimSpace(empty.String()) != "[]" {
		t.Errorf("--json with nothing built: %q, %v; want []", empty.String(), err)
	}
	empty.Reset()
	if err := writeCertReport(&empty, "out", nil, t0, false); err != nil || !strings.Contains(empty.String(), "no certificates under out") {
		t.Errorf("table with nothing built: %q, %v", empty.String(), err)
	}
}
