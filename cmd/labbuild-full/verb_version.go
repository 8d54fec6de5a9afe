package main

import (
	"context"
	"fmt"

	"github.com/labbuild/labbuild/internal/front"
)

// runVersion prints the version: "labbuild VERSION", or {"version": ...} with --json; the
// front prints the same bytes (versionString).
func runVersion(ctx context.Context, c *cli, args []string) error {
	if c.json {
		return encodeJSON(c.stdout, map[string]string{"version": versionString()})
	}
	fmt.Fprintln(c.stdout, "labbuild", versionString())
	return nil
}

// versionString is what `labbuild version` prints; the front prints the same (one function, so
// the two binaries cannot drift).
func versionString() string { return front.VersionString(version, commit) }
