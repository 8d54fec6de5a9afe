// Command labbuild is the `labbuild` program users run: a small, statically linked
// front (package internal/front) that prints the version and replays a null build from the
// stamp the full binary left, and execs the full binary (cmd/labbuild-full) for everything else:
// the file beside it named as itself plus "-full", or $LABBUILD_FULL. `make build` writes this
// as ./labbuild and cmd/labbuild-full as ./labbuild-full; see docs/how-it-works.md, "The front".
package main

import (
	"os"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/labbuild/labbuild/internal/front"
)

// version and commit are set at link time (-ldflags "-X main.version=... -X main.commit=...",
// the Makefile's), as cmd/labbuild-full's are: front.VersionString.
var version, commit = "", ""

func main() {
	// The front allocates about its stamp's size once and exits: no collection is worth it.
	debug.SetGCPercent(-1)
	self, err := os.Executable()
	if err != nil {
		self = os.Args[0]
	}
	os.Exit(front.Main(front.Env{
		Args: os.Args, Environ: os.Environ(), Stdout: os.Stdout, Stderr: os.Stderr,
		Self: self, Version: version, Commit: commit, Now: time.Now, Exec: syscall.Exec,
	}))
}
