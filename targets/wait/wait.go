// Package wait turns "wait until the cluster reaches some state" into a step a target can run:
// it polls a condition on an injectable clock, tells the user what it checks and what it saw
// last, and on timeout fails with the last error and the command a user would run to look
// closer (`oc get csr`, `oc get co`). A timeout fails only the waiting target; the build engine
// keeps every target finished before it, so a rerun continues from there.
//
// OpenShift's own installer waits the same way (openshift-install wait-for bootstrap-complete
// polls the API and the kube-system/bootstrap ConfigMap); openshift-the-hard-way's wait-*.sh
// scripts poll every 5–15 s with fixed timeouts (spec stages 10–13).
package wait

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Clock is the time source of a wait: the current time and a channel that fires after d.
// RealClock in production; a FakeClock in tests, so no test sleeps for its timing.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// RealClock is the wall clock.
type RealClock struct{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (RealClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// FakeClock is a Clock for tests: After advances the clock by d at once and returns a channel
// that has already fired, so a poll loop runs through its whole timeout instantly and
// deterministically. Safe for concurrent use.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start} }

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After advances the fake time by d and returns a fired channel.
func (c *FakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	c.now = c.now.Add(d)
	t := c.now
	c.mu.Unlock()
	ch := make(chan time.Time, 1)
	ch <- t
	return ch
}

// Condition is one poll: done reports that the awaited state is reached; status is a short
// human summary of what was seen ("2/3 masters Ready"), shown as progress and in a timeout
// error; err is a transient failure (API unreachable), remembered and retried — a condition
// that can never succeed should return a *Permanent error to stop at once.
type Condition func(ctx context.Context) (done bool, status string, err error)

// Permanent wraps an error that retrying cannot fix (a refused configuration, a malformed
// kubeconfig); Until returns it at once instead of polling until the timeout.
type Permanent struct{ Err error }

func (p *Permanent) Error() string { return p.Err.Error() }
func (p *Permanent) Unwrap() error { return p.Err }

// Spec describes one wait.
type Spec struct {
	// What is what is being waited for, as a phrase: "3 master nodes Ready".
	What string
	// Inspect is the command a user runs to look closer: "oc get nodes", "oc get csr".
	Inspect string
	// Gather, when set, is the command that collects the nodes' logs for a failed wait
	// ("labbuild gather", as openshift-install names "openshift-install gather bootstrap").
	Gather string
	// Timeout bounds the wait; 0 means no bound other than ctx.
	Timeout time.Duration
	// Interval is the time between polls; 0 means 5 s (openshift-the-hard-way's helper
	// retries every 5 s; its node and operator waits every 15 s).
	Interval time.Duration
	// Clock is the time source; RealClock when nil.
	Clock Clock
	// Log receives one line when the wait starts and one whenever the status changes
	// (not one per poll: a 30-minute wait would drown the log); nil discards.
	Log io.Writer
	// OnPoll, when set, is called after every poll with its outcome (tests, progress display).
	OnPoll func(p Poll)
}

// Poll is the outcome of one poll.
type Poll struct {
	N       int           // 1-based poll number
	Elapsed time.Duration // since the wait started, on the Spec's clock
	Done    bool
	Status  string
	Err     error
}

// Result is what a finished wait observed.
type Result struct {
	Polls   int
	Elapsed time.Duration
	Status  string // the last status
	Started time.Time
	Ended   time.Time
}

// TimeoutError is returned when the condition did not hold within Spec.Timeout. Its message
// names what was awaited, for how long, the last status and error, and the command to run.
type TimeoutError struct {
	What       string
	Timeout    time.Duration
	Polls      int
	LastStatus string
	LastErr    error
	Inspect    string
	Gather     string
}

func (e *TimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "timed out after %v waiting for %s (%d checks)", e.Timeout, e.What, e.Polls)
	if e.LastStatus != "" {
		fmt.Fprintf(&b, "; last seen: %s", e.LastStatus)
	}
	if e.LastErr != nil {
		fmt.Fprintf(&b, "; last error: %v", e.LastErr)
	}
	if e.Inspect != "" {
		fmt.Fprintf(&b, "; look closer with: %s", e.Inspect)
	}
	if e.Gather != "" {
		fmt.Fprintf(&b, "; collect the nodes' logs with: %s", e.Gather)
	}
	b.WriteString("; everything built so far is kept: rerun to continue")
	return b.String()
}

// Unwrap returns the last error seen, so errors.Is can look through a timeout.
func (e *TimeoutError) Unwrap() error { return e.LastErr }

// Until polls cond until it reports done (nil error), the timeout passes (*TimeoutError), cond
// returns a *Permanent error (returned as is), or ctx ends (ctx.Err() wrapped with what was
// awaited, so errors.Is(err, context.Canceled) holds). The first poll happens at once.
func Until(ctx context.Context, s Spec, cond Condition) (Result, error) {
	clk := s.Clock
	if clk == nil {
		clk = RealClock{}
	}
	interval := s.Interval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	log := s.Log
	if log == nil {
		log = io.Discard
	}
	start := clk.Now()
	res := Result{Started: start}
	if s.Timeout > 0 {
		fmt.Fprintf(log, "waiting up to %v for %s (check: %s)\n", s.Timeout, s.What, s.Inspect)
	} else {
		fmt.Fprintf(log, "waiting for %s (check: %s)\n", s.What, s.Inspect)
	}
	var lastErr error
	lastLine := ""
	for {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("stopped waiting for %s: %w", s.What, err)
		}
		done, status, err := cond(ctx)
		res.Polls++
		now := clk.Now()
		res.Elapsed = now.Sub(start)
		if status != "" {
			res.Status = status
		}
		if err != nil {
			lastErr = err
		}
		if s.OnPoll != nil {
			s.OnPoll(Poll{N: res.Polls, Elapsed: res.Elapsed, Done: done && err == nil, Status: status, Err: err})
		}
		line := status
		if err != nil {
			line = status + " (error: " + err.Error() + ")"
		}
		if line != lastLine {
			fmt.Fprintf(log, "[%v] %s\n", res.Elapsed.Round(time.Second), line)
			lastLine = line
		}
		var perm *Permanent
		if errors.As(err, &perm) {
			res.Ended = now
			return res, perm
		}
		if done && err == nil {
			res.Ended = now
			fmt.Fprintf(log, "done after %v: %s\n", res.Elapsed.Round(time.Second), s.What)
			return res, nil
		}
		if s.Timeout > 0 && res.Elapsed >= s.Timeout {
			res.Ended = now
			return res, &TimeoutError{What: s.What, Timeout: s.Timeout, Polls: res.Polls, LastStatus: res.Status, LastErr: lastErr, Inspect: s.Inspect, Gather: s.Gather}
		}
		wait := interval
		if s.Timeout > 0 && s.Timeout-res.Elapsed < wait {
			wait = s.Timeout - res.Elapsed // one last poll exactly at the deadline
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("stopped waiting for %s: %w", s.What, ctx.Err())
		case <-clk.After(wait):
		}
	}
}
