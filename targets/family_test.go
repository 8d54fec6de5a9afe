package targets

import (
	"context"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// TestConfigEditedBetweenBuilds: a Config kept across builds and edited in place is read
// afresh by the next build (Lookup reads the typed field; nothing outlives a build), so the
// reader rebuilds.
func TestConfigEditedBetweenBuilds(t *testing.T) {
	cfg := testLabConfig()
	var seen []string
	ts := []*engine.Target{{Name: "x/vip", Reads: []string{"network.apiVIP"}, Run: func(ctx context.Context, s *engine.Step) error {
		v, err := s.String("network.apiVIP")
		seen = append(seen, v)
		if err != nil {
			return err
		}
		return s.WriteFile("vip", []byte(v), 0o644)
	}}}
	out := t.TempDir()
	for _, vip := range []string{"192.168.126.10", "192.168.126.10", "192.168.126.9"} {
		cfg.Network.APIVIP = vip
		if _, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: cfg}, OutDir: out, Targets: ts}); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(seen, ",") != "192.168.126.10,192.168.126.9" {
		t.Errorf("the target saw %v, want one build per distinct VIP", seen)
	}
}

// TestFamilyFileSets: one family, one file set. Every target a registered family declares,
// for labs that switch on every optional part (platform baremetal, in-cluster VIPs, the
// mirror, an external bridge), is named <family>/… and its Run is defined in the family's
// own files (<family>.go, <family>_*.go): no family file declares another family's targets,
// and what families share lives in shared_*.go, which declares none.
func TestFamilyFileSets(t *testing.T) {
	labs := map[string]string{
		"default":   "",
		"baremetal": "platform: baremetal\nnetwork: {loadBalancer: in-cluster, externalBridge: baremetal}\nmirror: {enabled: true}\n",
		"host vips": "mirror: {enabled: true}\nrhcos: {imageURL: \"https://example.com/rhcos.qcow2.gz\", imageSHA256: \"" + strings.Repeat("a", 64) + "\"}\n",
	}
	checked := 0
	for name, y := range labs {
		c, err := lab.ParseConfig([]byte(y), "lab.yaml")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, f := range families {
			for _, tg := range f.Targets(Lab{Config: c}) {
				if !strings.HasPrefix(tg.Name, f.Name+"/") {
					t.Errorf("%s: family %s declares %s", name, f.Name, tg.Name)
				}
				file, _ := runtime.FuncForPC(reflect.ValueOf(tg.Run).Pointer()).FileLine(reflect.ValueOf(tg.Run).Pointer())
				base := strings.TrimSuffix(filepath.Base(file), ".go")
				if base != f.Name && !strings.HasPrefix(base, f.Name+"_") {
					t.Errorf("%s: %s's Run is in %s, not in the %s family's files", name, tg.Name, filepath.Base(file), f.Name)
				}
				checked++
			}
		}
	}
	if checked < 300 {
		t.Fatalf("checked %d targets, want every family's for every lab", checked)
	}
}
