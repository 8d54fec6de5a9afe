package engine_test

import (
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
)

// TestDisplayValue: values are shown as their canonical JSON, except secrets: a field named
// like a secret (not a path to one) and the user:password part of a URL.
func TestDisplayValue(t *testing.T) {
	long := `"` + strings.Repeat("0123456789", 30) + `"`
	tests := []struct{ field, raw, want string }{
		{"network.apiVIP", `"192.168.126.10"`, `"192.168.126.10"`},
		{"pki.certDays", `365`, `365`},
		{"access.pullSecretFile", `"~/.pull-secret.json"`, `"~/.pull-secret.json"`},
		{"access.kubeadminPassword", `"hunter2"`, `<redacted>`},
		{"registry.token", `"abc"`, `<redacted>`},
		{"release.mirrors", `{"quay.io/x":"https://puller:hunter2@mirror.lab/x"}`, `{"quay.io/x":"https://<redacted>@mirror.lab/x"}`},
		{"release.mirrors", `{"quay.io/x":"mirror.lab:5000/x"}`, `{"quay.io/x":"mirror.lab:5000/x"}`},
		{"unset.field", ``, `null`},
		{"syn.long", long, long[:200] + "…"},
	}
	for _, tt := range tests {
		if got := engine.DisplayValue(tt.field, []byte(tt.raw)); got != tt.want {
			t.Errorf("DisplayValue(%s, %s) = %s, want %s", tt.field, tt.raw, got, tt.want)
		}
	}
}
