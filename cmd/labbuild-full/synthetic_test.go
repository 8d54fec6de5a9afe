package main

import (
	"github.com/spf13/pflag"

	"github.com/labbuild/labbuild/internal/rig/synthetic"
)

// The tests (crash tests, testdata/script/synthetic.txtar) drive the synthetic graph, as the
// benchmark build does. A variable initializer, not init: it must run before crash_test.go's
// init, which runs the child processes the crash tests kill.
var _ = func() bool {
	withSynthetic = func(fs *pflag.FlagSet) syntheticFlags { return synthetic.Register(fs) }
	return true
}()
