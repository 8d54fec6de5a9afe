package lab

import (
	"strings"
	"testing"
)

// TestClip: ordinary messages are unchanged; a long quoted value, a long run without spaces and
// a long message are cut to a short prefix that says how long the value was.
func TestClip(t *testing.T) {
	long := strings.Repeat("x", 50_000_000)
	for _, tc := range []struct {
		name, in string
		want     []string
		max      int
	}{
		{"short", `cluster.name: "Bad_Name" is not a DNS label (fix: use lowercase letters)`, []string{`"Bad_Name" is not a DNS label (fix: use lowercase letters)`}, 200},
		{"quoted 50 MB", `lab.yaml:3: cluster.name: "` + long + `" is not a DNS label (fix: use lowercase letters)`,
			[]string{`cluster.name: "xxxxxxxx`, `…" (50000000 bytes) is not a DNS label (fix: use lowercase letters)`}, 300},
		{"run 50 MB", "yaml: line 3: cannot unmarshal `" + long + "` into int", []string{"cannot unmarshal `xxxx", "… (50000002 bytes) into int"}, 300},
		{"multibyte", `"` + strings.Repeat("é", 200) + `"`, []string{`"éé`, `…" (400 bytes)`}, 200},
	} {
		got := Clip(tc.in)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: Clip = %.300q, lacks %q", tc.name, got, w)
			}
		}
		if len(got) > tc.max {
			t.Errorf("%s: %d bytes, want at most %d", tc.name, len(got), tc.max)
		}
	}
	many := strings.Repeat("a short line of an error\n", 10_000)
	if got := Clip(many); len(got) > clipTotal+64 || !strings.HasSuffix(got, "bytes in all)") {
		t.Errorf("a long message: %d bytes, ends %q", len(got), got[len(got)-30:])
	}
}
