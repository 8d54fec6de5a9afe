package main

import (
	"context"
	"fmt"
	"os"

	"github.com/labbuild/labbuild/targets"
	"github.com/labbuild/labbuild/targets/bmc"
)

// bmcServeVerb runs labbuild's virtual Redfish BMC in the foreground: bmc/service starts
// `labbuild-full __bmc-serve CONFIG` as a daemon (targets/daemon). It is not listed in the
// help: users build bmc/service. The same binary avoids a second program to install and find;
// a null build pays nothing for it (targets/bmc has no package initializers).
const bmcServeVerb = targets.BMCServeVerb

// bmcServe runs the BMC of the DaemonConfig at cfgPath until SIGTERM; errors go to stderr
// (the daemon's log) and exit 1.
func bmcServe(ctx context.Context, cfgPath string) int {
	if err := bmc.RunDaemon(ctx, cfgPath, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "labbuild BMC: %v\n", err)
		return exitFailed
	}
	return exitOK
}
