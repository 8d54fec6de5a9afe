package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
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

// verbNames returns the verbs, sorted: the order help lists them and suggestions prefer.
func verbNames() []string {
	names := make([]string, 0, len(verbs))
	for n := range verbs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// unknownVerb is `labbuild help WORD` for a WORD that is no verb: a usage error (exit 2)
// naming it and the nearest verb, as git and go do for a mistyped command.
func unknownVerb(word string) error {
	if v, ok := lab.Nearest(word, verbNames()); ok {
		return usagef("help: unknown verb %q; did you mean %s? (labbuild help lists the verbs)", word, v)
	}
	return usagef("help: unknown verb %q (verbs: %s)", word, strings.Join(verbNames(), ", "))
}

// orVerb adds the nearest verb to the unknown-target error of a build whose first word was
// meant as a verb (`labbuild grpah` is a build of the goal "grpah"): the engine's message
// names the goal, this names the verb. Other errors pass through unchanged.
func orVerb(err error, word string) error {
	var ue *engine.UsageError
	if !errors.As(err, &ue) || !strings.Contains(ue.Msg, fmt.Sprintf("%q", word)) {
		return err
	}
	v, ok := lab.Nearest(word, verbNames())
	if !ok || strings.Contains(word, "/") {
		return err
	}
	return &engine.UsageError{Msg: fmt.Sprintf("%s; or did you mean the verb %s? (labbuild help %s)", ue.Msg, v, v)}
}
