package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// TestStatusJSON: `status --json` is data, per target: state, short key, build time, the next
// build's action and the changed fields, compared with testdata/status.golden.json (keys and
// times checked for shape, then masked; -update rewrites it). Built, then an edit of pki.caDays
// makes pki/ca/root stale with the change named; pki/ca/kubernetes is missing.
func TestStatusJSON(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	dir := t.TempDir()
	lab := filepath.Join(dir, "my-lab.yaml")
	write := func(s string) {
		if err := os.WriteFile(lab, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(args ...string) []byte {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"-C", dir, "-f", "my-lab.yaml"}, args...), &out, &errb)
		os.Chdir(wd)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errb.String())
		}
		return out.Bytes()
	}
	write("pki: {keyAlgorithm: ECDSA-P256}\n")
	start := time.Now().Add(-time.Second)
	cli("-q", "pki/ca/root")
	end := time.Now().Add(time.Second)
	keyRe := regexp.MustCompile(`^[0-9a-f]{12}$`)
	mask := func(b []byte) any {
		t.Helper()
		var rep statusReport
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatalf("status --json: %v\n%s", err, b)
		}
		for i := range rep.Targets {
			ts := &rep.Targets[i]
			if ts.Key != "" {
				if !keyRe.MatchString(ts.Key) {
					t.Errorf("%s: key %q is not 12 hex digits", ts.Name, ts.Key)
				}
				ts.Key = "<key>"
			}
			if ts.BuiltAt != "" {
				at, err := time.Parse(time.RFC3339, ts.BuiltAt)
				if err != nil || at.Before(start.Truncate(time.Second)) || at.After(end) {
					t.Errorf("%s: builtAt %q not within the build (%v)", ts.Name, ts.BuiltAt, err)
				}
				ts.BuiltAt = "<time>"
			}
		}
		return rep
	}
	got := []any{mask(cli("status", "--json", "pki/ca/root", "pki/ca/kubernetes"))}
	write("pki: {keyAlgorithm: ECDSA-P256, caDays: 3000}\n")
	got = append(got, mask(cli("status", "--json", "pki/ca/root")))
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(got); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	golden := filepath.Join("testdata", "status.golden.json")
	if *update {
		if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(b, '\n'), want) {
		t.Errorf("status --json differs from %s (-update rewrites it):\n%s", golden, b)
	}
}
