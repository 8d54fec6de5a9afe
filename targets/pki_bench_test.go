package targets

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/labbuild/labbuild/engine"
)

// BenchmarkPKICold measures a cold `labbuild pki kubeconfig` (53 targets: 22 RSA-2048 keys,
// 21 certificates, 9 kubeconfigs, sa.pub) into an empty output directory, at -j1 and -j2.
// Key generation dominates; the keys are independent targets, so -j spreads them over cores.
func BenchmarkPKICold(b *testing.B) {
	for _, j := range []int{1, 2} {
		b.Run(fmt.Sprintf("j%d", j), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				out := b.TempDir()
				r, err := engine.Build(context.Background(), engine.Options{Config: Lab{Config: testLabConfig()}, OutDir: out,
					Goals: []string{"pki", "kubeconfig"}, Jobs: j, Now: func() time.Time { return pkiT0 },
					Stdout: io.Discard, Stderr: io.Discard})
				if err != nil || len(r.Built) != 53 {
					b.Fatalf("built %d: %v", len(r.Built), err)
				}
			}
		})
	}
}
