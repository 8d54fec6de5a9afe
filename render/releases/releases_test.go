package releases

import (
	"fmt"
	"strings"
	"testing"
)

// TestLookup: each supported payload finds its row; an unsupported one is refused naming its
// version and every supported release; 4.22 refuses a version that is not strict semver, as its
// CVO's render does.
func TestLookup(t *testing.T) {
	for _, tc := range []struct {
		version string
		okd     bool
		want    string // row, or "" for an error
		errHas  string
	}{
		{"4.18.0", false, "4.18", ""},
		{"4.18.30", false, "4.18", ""},
		{"4.20.8", false, "4.20", ""},
		{"4.22.0", false, "4.22", ""},
		{"4.22.1-rc.2", false, "4.22", ""},
		{"4.22.0-okd-scos.1", true, "okd-4.22", ""},
		{"4.16.3", false, "", "OpenShift 4.16.3"},
		{"4.19.2", false, "", "OpenShift 4.19.2"},
		{"4.20.0-okd-scos.3", true, "", "OKD 4.20.0-okd-scos.3"},
		{"5.0.0", false, "", "OpenShift 5.0.0"},
		{"4.22", false, "", "not strict semver"},
		{"4.22.01", false, "", "not strict semver"},
		{"v4.22.0", false, "", "not strict semver"},
		{"4.20", false, "4.20", ""}, // the 4.20 CVO never parses it
		{"banana", false, "", "banana"},
	} {
		r, err := Lookup(tc.version, tc.okd)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("Lookup(%q, %v) = %s, want an error", tc.version, tc.okd, r.Name)
		case tc.want == "" && (!strings.Contains(err.Error(), tc.errHas)):
			t.Errorf("Lookup(%q, %v): %v, want it to say %q", tc.version, tc.okd, err, tc.errHas)
		case tc.want == "" && tc.errHas != "not strict semver" && !strings.Contains(err.Error(), SupportedText()):
			t.Errorf("Lookup(%q, %v): %v, want it to name the supported releases", tc.version, tc.okd, err)
		case tc.want != "" && (err != nil || r.Name != tc.want):
			t.Errorf("Lookup(%q, %v) = %q, %v; want %s", tc.version, tc.okd, r.Name, err, tc.want)
		}
	}
	if got, want := SupportedText(), "OpenShift 4.22, 4.20 and 4.18, and OKD 4.22"; got != want {
		t.Errorf("SupportedText() = %q, want %q", got, want)
	}
}

// TestStrictSemver follows blang/semver v4 Parse on the cases that matter: leading zeros, a
// missing patch, pre-release and build identifiers.
func TestStrictSemver(t *testing.T) {
	for v, want := range map[string]bool{
		"4.22.0": true, "4.22.0-okd-scos.1": true, "4.22.0-0.nightly-2026-05-01-000000": true,
		"1.0.0+build.1": true, "1.0.0-rc.1+b": true,
		"4.22": false, "4.22.0.1": false, "04.22.0": false, "4.22.0-": false, "4.22.0-01": false,
		"4.22.0-a..b": false, "4.22.0+": false, "v4.22.0": false, "": false,
	} {
		if got := StrictSemver(v); got != want {
			t.Errorf("StrictSemver(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestRows: the table's invariants — names follow RowName, rows are newest first with the
// newest OCP row Newest, and the handover facts change where the upstream code changed (MCS CA
// from 4.19, docker-registry at 4.22, the OKD-only facts only on the OKD row).
func TestRows(t *testing.T) {
	if n := Supported[1].Name; n != Newest || Supported[1].OKD {
		t.Errorf("Supported[1] = %s, want the newest OCP row %s", n, Newest)
	}
	for i, r := range Supported {
		if got := RowName(fmt.Sprintf("%d.%d.0", r.Major, r.Minor), r.OKD); got != r.Name {
			t.Errorf("row %s: RowName gives %s", r.Name, got)
		}
		if i > 0 && Supported[i-1].Minor < r.Minor {
			t.Errorf("row %s is newer than the row before it", r.Name)
		}
		if r.MCSCA != (r.Minor >= 19) || r.MCSTLSSecretTLS != r.MCSCA {
			t.Errorf("row %s: MCS CA handover %v/%v, want it from 4.19 on", r.Name, r.MCSCA, r.MCSTLSSecretTLS)
		}
		hasReg := false
		for _, tag := range r.MCORequiredTags {
			hasReg = hasReg || tag == "docker-registry"
		}
		if hasReg != (r.Minor >= 22) {
			t.Errorf("row %s: docker-registry required %v", r.Name, hasReg)
		}
		okdOnly := r.SupportSecret || r.FakePullSecret != "" || r.DefaultFeatureSet != "" || r.CVOUpstream != "" || r.BaseOSTag == "stream-coreos"
		if okdOnly != r.OKD {
			t.Errorf("row %s: OKD facts %v on a row whose OKD is %v", r.Name, okdOnly, r.OKD)
		}
	}
}
