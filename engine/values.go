package engine

import (
	"regexp"
	"strings"
)

// FieldChange is a config field whose value differs from the one recorded when the target was
// last built: what `-n` prints as old → new. Values are as DisplayValue shows them.
type FieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old"`
	New   string `json:"new"`
}

// maxShownValue bounds a value recorded for display (a node list can be long): longer values
// are cut with "…".
const maxShownValue = 200

var userinfo = regexp.MustCompile(`://[^/@\s"]+@`)

// DisplayValue is how explanations and plans show the canonical JSON raw of config field: as
// is, except secrets. A field named like a secret (password, token, secret, credential; not a
// path to a file, "…File") shows `<redacted>`, and so does the user:password part of a URL
// (registry mirrors). Values longer than 200 bytes are cut.
func DisplayValue(field string, raw []byte) string {
	last := strings.ToLower(field[strings.LastIndexByte(field, '.')+1:])
	if !strings.HasSuffix(last, "file") {
		for _, w := range []string{"password", "token", "secret", "credential"} {
			if strings.Contains(last, w) {
				return "<redacted>"
			}
		}
	}
	s := userinfo.ReplaceAllString(string(raw), "://<redacted>@")
	if len(s) > maxShownValue {
		s = s[:maxShownValue] + "…"
	}
	if s == "" {
		s = "null"
	}
	return s
}

// Value returns config field's value as DisplayValue shows it, and whether the field exists.
func (p *Project) Value(field string) (string, bool) {
	raw, ok := p.values.Lookup(field)
	if !ok {
		return "", false
	}
	return DisplayValue(field, raw), true
}

// shownValues are the display values of t's config fields, recorded with each build so that a
// later plan can say old → new.
func (b *builder) shownValues(t *Target) map[string]string {
	if len(t.Reads) == 0 {
		return nil
	}
	m := make(map[string]string, len(t.Reads))
	for _, r := range t.Reads {
		raw, _ := b.p.values.Lookup(r)
		m[r] = DisplayValue(r, raw)
	}
	return m
}
