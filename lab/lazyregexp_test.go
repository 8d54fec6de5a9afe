package lab

import (
	"regexp"
	"testing"
)

// TestLazyRegexps compiles every lazily compiled config expression (a typo panics here, not
// in a user's first validation) and checks it agrees with regexp on samples.
func TestLazyRegexps(t *testing.T) {
	for _, tt := range []struct {
		re      *lazyRE
		samples []string
	}{
		{dnsLabel, []string{"ocp4", "a", "-a", "a-", "A", "master-0", ""}},
		{macRE, []string{"52:54:00:aa:bb:cc", "52:54:00:aa:bb", "52-54-00-aa-bb-cc"}},
		{netName, []string{"labbuild", "lab.net-1", ".x", ""}},
		{versionRE, []string{"4.18.0", "4.18.0-rc.1", "4.18", "4.18.0+meta"}},
		{rhcosSHA256, []string{"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "abc"}},
		{yamlLineRE, []string{"line 3: cannot unmarshal", "no line"}},
	} {
		want := regexp.MustCompile(tt.re.expr)
		for _, s := range tt.samples {
			if got := tt.re.MatchString(s); got != want.MatchString(s) {
				t.Errorf("%s on %q = %v", tt.re.expr, s, got)
			}
		}
	}
	if m := yamlLineRE.FindStringSubmatch("line 12: bad"); len(m) != 3 || m[1] != "12" || m[2] != "bad" {
		t.Errorf("yamlLineRE submatch = %q", m)
	}
}
