package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/labbuild/labbuild/targets"
)

// TestCertReport: `labbuild certs` marks a certificate under a day from expiry "(renew)" and
// an expired one EXPIRED, shows whole days otherwise, lists usages and SANs, and with --json
// writes the infos (an empty list, not null, when nothing is built).
func TestCertReport(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	infos := []targets.CertInfo{
		{Target: "pki/cert/kube-apiserver", Subject: "CN=kube-apiserver", Issuer: "CN=kube-apiserver-lb-signer", DNSNames: []string{"api-int.ocp4.example.com"},
			IPs: []string{"192.168.126.10"}, Usages: []string{"serverAuth", "clientAuth"}, NotAfter: t0.Add(364*24*time.Hour + time.Hour), Left: (364*24 + 1) * 3600},
		{Target: "pki/cert/kubelet-bootstrap", Subject: "CN=system:kubelet-bootstrap", Issuer: "CN=kubelet-bootstrap-kubeconfig-signer", Usages: []string{"clientAuth"},
			NotAfter: t0.Add(90 * time.Minute), Left: 90 * 60},
		{Target: "pki/cert/old", Subject: "CN=old", Issuer: "CN=old", Usages: []string{"serverAuth"}, NotAfter: t0.Add(-time.Hour), Left: -3600},
	}
	var table bytes.Buffer
	if err := writeCertReport(&table, "out", infos, false); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"pki/cert/kube-apiserver ":    {"api-int.ocp4.example.com,192.168.126.10", "serverAuth,clientAuth", "364d"},
		"pki/cert/kubelet-bootstrap ": {"clientAuth", "1h30m (renew)"},
		"pki/cert/old ":               {"EXPIRED"},
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
	if err := writeCertReport(&js, "out", infos, true); err != nil {
		t.Fatal(err)
	}
	var back []targets.CertInfo
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back) != len(infos) || back[1].Left != 90*60 {
		t.Errorf("--json: %v, %d infos; want %d back:\n%s", err, len(back), len(infos), js.String())
	}
	var empty bytes.Buffer
	if err := writeCertReport(&empty, "out", nil, true); err != nil || strings.TrimSpace(empty.String()) != "[]" {
		t.Errorf("--json with nothing built: %q, %v; want []", empty.String(), err)
	}
	empty.Reset()
	if err := writeCertReport(&empty, "out", nil, false); err != nil || !strings.Contains(empty.String(), "no certificates under out") {
		t.Errorf("table with nothing built: %q, %v", empty.String(), err)
	}
}
