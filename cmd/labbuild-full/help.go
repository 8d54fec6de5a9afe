package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/labbuild/labbuild/engine"
	"github.com/labbuild/labbuild/lab"
)

func printHelp(w io.Writer, name string, fs *pflag.FlagSet) {
	if v, ok := verbs[name]; ok && name != "" {
		fmt.Fprintf(w, "Usage: %s\n\n", v.usage)
		if v.long != "" {
			fmt.Fprintf(w, "%s\n\n", v.long)
		} else {
			fmt.Fprintf(w, "%s\n\n", v.short)
		}
		if len(v.examples) > 0 {
			fmt.Fprintf(w, "Examples:\n")
			for _, e := range v.examples {
				fmt.Fprintf(w, "  %s\n", e)
			}
			fmt.Fprintln(w)
		}
		printVerbFlags(w, fs, name)
		return
	}
	b := verbs["build"]
	fmt.Fprintf(w, "labbuild builds an OpenShift 4 lab on libvirt the hard way, as content-hashed targets.\n\n")
	fmt.Fprintf(w, "Usage: %s\n       labbuild VERB [flags] [args]\n\n%s\n\nVerbs:\n", b.usage, b.long)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, n := range verbNames() {
		fmt.Fprintf(tw, "  %s\t%s\n", n, verbs[n].short)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nExamples:\n")
	for _, e := range b.examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
	fmt.Fprintf(w, "\nFlags:\n%s\nRun 'labbuild help VERB' for a verb's help. Exit status: 0 ok, 1 a target failed, 2 bad usage or lab config.\n", fs.FlagUsages())
}

// globalFlags apply to every verb: where to work, which lab, where outputs go, how much to say.
var globalFlags = []string{"directory", "file", "out", "json", "quiet", "verbose", "help", "version"}

// splitFlags returns the verb's own flags (its entry in verbs) and the global flags of fs as
// two sets, in the order of the names given.
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
	return pick(verbs[verb].flags), pick(globalFlags)
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
