package lab

import (
	"regexp"
	"sync"
)

// lazyRE is a regular expression compiled on first use. A package-level
// regexp.MustCompile runs at every process start, before main, whether or not the verb
// validates anything (`labbuild version`, completion, help); the config checks' expressions
// cost about as much to compile as the rest of this package's initialization (issue 18,
// docs/performance.md).
type lazyRE struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

// lazyRegexp returns expr to be compiled (and checked: a bad expression panics, as
// regexp.MustCompile does) on first use.
func lazyRegexp(expr string) *lazyRE { return &lazyRE{expr: expr} }

func (l *lazyRE) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.expr) })
	return l.re
}

// MatchString is regexp.Regexp.MatchString.
func (l *lazyRE) MatchString(s string) bool { return l.get().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (l *lazyRE) FindStringSubmatch(s string) []string { return l.get().FindStringSubmatch(s) }
