package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// globalFlags apply to every verb: where to work, which lab, where outputs go, how much to say.
var globalFlags = []string{"directory", "file", "out", "json", "quiet", "verbose", "help", "version"}

// verbFlags are each verb's own flags, shown first in `labbuild help VERB` (then the global
// flags). Completion offers the same sets.
var verbFlags = map[string][]string{
	"build":      {"jobs", "keep-going", "dry-run", "always-make", "explain", "debug", "regenerate", "restart"},
	"graph":      {"format", "by", "all-edges", "output", "all"},
	"list":       {"all"},
	"explain":    {},
	"log":        {},
	"clean":      {"cache", "trim"},
	"destroy":    {"dry-run"},
	"init":       {},
	"config":     {},
	"certs":      {},
	"status":     {},
	"ssh":        {},
	"gather":     {},
	"console":    {},
	"completion": {},
	"version":    {},
	"help":       {},
}

// splitFlags returns the verb's own flags and the global flags of fs as two sets, in the order
// of the names given.
func splitFlags(fs *pflag.FlagSet, verb string) (own, global *pflag.FlagSet) {
	pick := func(names []string) *pflag.FlagSet {
		s := pflag.NewFlagSet(verb, pflag.ContinueOnError)
		s.SortFlags = false
		for _, n := range names {
			if f := fs.Lookup(n); f != nil {
				s.AddFlag(f)
			}
		}
		return s
	}
	return pick(verbFlags[verb]), pick(globalFlags)
}

// printVerbFlags prints a verb's own flags, then the global flags.
func printVerbFlags(w io.Writer, fs *pflag.FlagSet, verb string) {
	own, global := splitFlags(fs, verb)
	if u := own.FlagUsages(); u != "" {
		fmt.Fprintf(w, "Flags:\n%s\n", u)
	}
	fmt.Fprintf(w, "Global flags:\n%s", global.FlagUsages())
}
