package ignition

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v34 "github.com/coreos/ignition/v2/config/v3_4"
	"github.com/coreos/ignition/v2/config/v3_4/types"
)

// TestParse34LikeIgnition holds parse34 to Ignition's own v3_4.Parse, which it replaces: the
// same config, the same report (every entry, with its JSON path and position) and the same
// error, on the golden configs and on bad ones of every kind Ignition reports: syntax, types,
// version, unknown keys (warnings), fatal rule violations. Validate's error on a bad config is
// therefore the one it gave before.
func TestParse34LikeIgnition(t *testing.T) {
	cases := map[string]string{
		"empty":                ``,
		"syntax":               `{"ignition":{"version":"3.4.0"}`,
		"type":                 `{"ignition":{"version":3}}`,
		"type deep":            `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/a","mode":"420"}]}}`,
		"no version":           `{}`,
		"older version":        `{"ignition":{"version":"3.2.0"}}`,
		"newer version":        `{"ignition":{"version":"3.5.0-experimental"}}`,
		"bad version":          `{"ignition":{"version":"three"}}`,
		"valid":                `{"ignition":{"version":"3.4.0"}}`,
		"unknown key":          `{"ignition":{"version":"3.4.0"},"storag":{}}`,
		"unknown nested key":   `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/a","mdoe":420}]}}`,
		"unit without install": `{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Service]\nExecStart=/bin/true\n"}]}}`,
		"duplicate path":       `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/a"},{"path":"/a"}]}}`,
		"relative path":        `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"a"}]}}`,
		"bad source":           `{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/a","contents":{"source":"data:,x","compression":"xz"}}]}}`,
		"bad unit name":        `{"ignition":{"version":"3.4.0"},"systemd":{"units":[{"name":"a","contents":"[Service]\n"}]}}`,
		"link without target":  `{"ignition":{"version":"3.4.0"},"storage":{"links":[{"path":"/a"}]}}`,
	}
	goldens, err := filepath.Glob(filepath.Join("testdata", "golden", "*.ign"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden configs: %v", err)
	}
	for _, p := range append(goldens, filepath.Join("testdata", "rendered-master.json")) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Ext(p) == ".json" {
			mc, err := ParseMachineConfig(b)
			if err != nil {
				t.Fatal(err)
			}
			if b, err = mc.ConfigJSON(); err != nil {
				t.Fatal(err)
			}
		}
		cases[filepath.Base(p)] = string(b)
	}
	valid := map[string]bool{"valid": true}
	for _, p := range goldens {
		valid[filepath.Base(p)] = true
	}
	valid["rendered-master.json"] = true
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, rpt, err := parse34([]byte(raw))
			wcfg, wrpt, werr := v34.Parse([]byte(raw))
			if !reflect.DeepEqual(cfg, wcfg) {
				t.Errorf("config differs from v3_4.Parse's")
			}
			if rpt.String() != wrpt.String() || !reflect.DeepEqual(rpt, wrpt) {
				t.Errorf("report:\n%s\nv3_4.Parse's:\n%s", rpt, wrpt)
			}
			if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
				t.Errorf("error %v, v3_4.Parse's %v", err, werr)
			}
			// Every bad case fails Validate; the goldens and "valid" pass.
			if err := Validate([]byte(raw)); (err == nil) != valid[name] {
				t.Errorf("Validate: %v, want valid %v", err, valid[name])
			}
		})
	}
}

// TestEncodeValidatesLikeValidate: Encode validates the config it holds instead of parsing its
// own JSON back; it must accept and refuse exactly what Validate does on that JSON, with the
// same error (report entries with their lines and columns). The goldens are accepted and come
// out byte for byte; each bad config fails with Validate's error.
func TestEncodeValidatesLikeValidate(t *testing.T) {
	str := func(s string) *string { return &s }
	yes := true
	mode := 0o644
	bad := map[string]func(c *types.Config){
		"duplicate file": func(c *types.Config) {
			c.Storage.Files = append(c.Storage.Files, types.File{Node: types.Node{Path: "/etc/a"}}, types.File{Node: types.Node{Path: "/etc/a"}})
		},
		"relative path": func(c *types.Config) {
			c.Storage.Files = append(c.Storage.Files, types.File{Node: types.Node{Path: "etc/a"}})
		},
		"bad data url": func(c *types.Config) {
			c.Storage.Files = append(c.Storage.Files, types.File{Node: types.Node{Path: "/etc/b"}, FileEmbedded1: types.FileEmbedded1{Mode: &mode, Contents: types.Resource{Source: str("data:;base64,%%%")}}})
		},
		"unknown compression": func(c *types.Config) {
			c.Storage.Files = append(c.Storage.Files, types.File{Node: types.Node{Path: "/etc/c"}, FileEmbedded1: types.FileEmbedded1{Contents: types.Resource{Source: str("data:,x"), Compression: str("xz")}}})
		},
		"enabled unit without install (warning)": func(c *types.Config) {
			c.Systemd.Units = append(c.Systemd.Units, types.Unit{Name: "a.service", Enabled: &yes, Contents: str("[Service]\nExecStart=/bin/true\n")})
		},
		"bad unit name": func(c *types.Config) {
			c.Systemd.Units = append(c.Systemd.Units, types.Unit{Name: "a", Contents: str("[Service]\n")})
		},
		"older version": func(c *types.Config) { c.Ignition.Version = "3.2.0" },
		"no version":    func(c *types.Config) { c.Ignition.Version = "" },
		"link no target": func(c *types.Config) {
			c.Storage.Links = append(c.Storage.Links, types.Link{Node: types.Node{Path: "/a"}})
		},
	}
	for name, change := range bad {
		t.Run(name, func(t *testing.T) {
			cfg := New()
			change(&cfg)
			raw, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := Validate(raw)
			if want == nil {
				t.Fatalf("the case is valid for Validate: %s", raw)
			}
			if _, err := Encode(cfg); err == nil || err.Error() != want.Error() {
				t.Errorf("Encode: %v\nValidate: %v", err, want)
			}
		})
	}
	goldens, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.ign"))
	for _, p := range goldens {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, b); err != nil { // the goldens are indented
			t.Fatal(err)
		}
		raw, err := Encode(cfg)
		if err != nil || !bytes.Equal(raw, compact.Bytes()) {
			t.Errorf("%s: Encode(Parse(golden)) differs from the golden (err %v)", p, err)
		}
	}
	if len(goldens) == 0 {
		t.Fatal("no golden configs")
	}
}

// BenchmarkBootstrap renders the bootstrap config of the test lab (Encode's validation
// included).
func BenchmarkBootstrap(b *testing.B) {
	in := testBootstrap()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Bootstrap(in); err != nil {
			b.Fatal(err)
		}
	}
}
