package targets

import (
	"context"
	"strings"
	"testing"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

// TestConfigEditedBetweenBuilds: a Config kept across builds and edited in place is read
// afresh by the next build (Build refreshes its lookup cache), so the reader rebuilds.
func TestConfigEditedBetweenBuilds(t *testing.T) {
	cfg := lab.DefaultConfig()
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
