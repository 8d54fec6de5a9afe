package ignition

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v35 "github.com/coreos/ignition/v2/config/v3_5"
)

// mc35 is testdata/rendered-<pool>.json as a 4.20+ MCO renders it: spec.config at 3.5.0.
func mc35(t *testing.T, pool string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rendered-"+pool+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	obj["spec"].(map[string]any)["config"].(map[string]any)["ignition"].(map[string]any)["version"] = Version35
	b, err = json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParse35LikeIgnition holds parse (for a 3.5.0 config, parse35) to Ignition's own
// v3_5.Parse on good and bad 3.5.0 configs: the same report and error, and the same config
// once carried over (3.5 only adds luks cex, which down35 refuses).
func TestParse35LikeIgnition(t *testing.T) {
	cases := map[string]string{
		"valid":          `{"ignition":{"version":"3.5.0"}}`,
		"unknown key":    `{"ignition":{"version":"3.5.0"},"storag":{}}`,
		"duplicate path": `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/a"},{"path":"/a"}]}}`,
		"relative path":  `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"a"}]}}`,
		"type deep":      `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/a","mode":"420"}]}}`,
	}
	mc, err := ParseMachineConfig(mc35(t, "master"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := mc.ConfigJSON()
	if err != nil {
		t.Fatal(err)
	}
	cases["rendered-master 3.5.0"] = string(b)
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, rpt, err := parse([]byte(raw))
			wcfg, wrpt, werr := v35.Parse([]byte(raw))
			if rpt.String() != wrpt.String() {
				t.Errorf("report:\n%s\nv3_5.Parse's:\n%s", rpt, wrpt)
			}
			if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
				t.Errorf("error %v, v3_5.Parse's %v", err, werr)
			}
			if err == nil {
				a, _ := json.Marshal(cfg)
				w, _ := json.Marshal(wcfg)
				if string(a) != string(w) {
					t.Errorf("config differs from v3_5.Parse's:\n%s\n%s", a, w)
				}
				if cfg.Ignition.Version != Version35 {
					t.Errorf("version %q, want 3.5.0 kept", cfg.Ignition.Version)
				}
			}
			if verr := Validate([]byte(raw)); (verr == nil) != (werr == nil && len(wrpt.Entries) == 0) {
				t.Errorf("Validate: %v", verr)
			}
		})
	}
	cex := `{"ignition":{"version":"3.5.0"},"storage":{"luks":[{"name":"root","device":"/dev/sda","cex":{"enabled":true}}]}}`
	if _, err := Parse([]byte(cex)); err == nil || !strings.Contains(err.Error(), "cex") {
		t.Errorf("a luks cex: %v, want an error naming it", err)
	}
}

// TestNode35: a node on a 4.20+ rendered config is a 3.5.0 config that Ignition's v3_5 parser
// takes with an empty report, whose encapsulated MC declares 3.5.0 as the MCS writes it, and
// which holds the same files as the 3.4.0 node config of the same MachineConfig.
func TestNode35(t *testing.T) {
	in := testNode(t, "worker-0", "192.168.126.110")
	old, err := Node(in)
	if err != nil {
		t.Fatal(err)
	}
	in.RenderedMachineConfig = mc35(t, "worker")
	res, err := Node(in)
	if err != nil {
		t.Fatal(err)
	}
	cfg, rpt, err := v35.Parse(res.JSON)
	if err != nil || len(rpt.Entries) > 0 || cfg.Ignition.Version != Version35 {
		t.Fatalf("v3_5.Parse: version %q, %v\n%s", cfg.Ignition.Version, err, rpt)
	}
	c34, err := Parse(res.JSON)
	if err != nil {
		t.Fatal(err)
	}
	o34, err := Parse(old.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(Paths(c34), Paths(o34)) {
		t.Errorf("paths differ from the 3.4.0 node's")
	}
	var enc struct {
		Spec struct {
			Config struct {
				Ignition struct{ Version string }
			}
		}
	}
	if err := json.Unmarshal([]byte(mustContents(t, c34, PathEncapsulatedMC)), &enc); err != nil || enc.Spec.Config.Ignition.Version != Version35 {
		t.Errorf("encapsulated MC version %q (%v), want 3.5.0", enc.Spec.Config.Ignition.Version, err)
	}
}
