package wait

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestUntil(t *testing.T) {
	transient := errors.New("dial tcp 127.0.0.1:6443: connection refused")
	tests := []struct {
		name      string
		spec      Spec
		doneAt    int // poll number (1-based) at which cond reports done; 0 = never
		errUntil  int // polls before this one return transient
		permAt    int // poll returning a Permanent error; 0 = never
		wantPolls int // polls made
		wantErr   []string
		wantIs    error // errors.Is target
		wantLog   []string
	}{
		{
			name:      "done on first poll",
			spec:      Spec{What: "API /readyz", Inspect: "oc get --raw /readyz", Timeout: time.Minute, Interval: 5 * time.Second},
			doneAt:    1,
			wantPolls: 1,
			wantLog:   []string{"waiting up to 1m0s for API /readyz (check: oc get --raw /readyz)", "done after 0s"},
		},
		{
			name:      "done after transient errors",
			spec:      Spec{What: "API /readyz", Inspect: "oc get --raw /readyz", Timeout: time.Minute, Interval: 5 * time.Second},
			doneAt:    4,
			errUntil:  3,
			wantPolls: 4,
			wantLog:   []string{"connection refused", "done after 15s"},
		},
		{
			name:      "timeout names what, last status, last error and the command",
			spec:      Spec{What: "3 master nodes Ready", Inspect: "oc get nodes; oc get csr", Gather: "labbuild gather", Timeout: 30 * time.Second, Interval: 10 * time.Second},
			errUntil:  100,
			wantPolls: 4, // at 0, 10, 20 and exactly 30 s
			wantErr:   []string{"timed out after 30s waiting for 3 master nodes Ready (4 checks)", "last seen: poll 4", "last error: get nodes: dial tcp", "look closer with: oc get nodes; oc get csr", "collect the nodes' logs with: labbuild gather", "rerun to continue"},
			wantIs:    transient,
		},
		{
			name:      "deadline not a multiple of the interval: last poll at the deadline",
			spec:      Spec{What: "x", Timeout: 25 * time.Second, Interval: 10 * time.Second},
			wantPolls: 4, // 0, 10, 20, 25
			wantErr:   []string{"timed out after 25s"},
		},
		{
			name:      "permanent error stops at once",
			spec:      Spec{What: "x", Timeout: time.Hour},
			permAt:    2,
			wantPolls: 2,
			wantErr:   []string{"kubeconfig has no server"},
		},
		{
			name:      "no timeout: polls until done",
			spec:      Spec{What: "x", Interval: time.Hour},
			doneAt:    50,
			wantPolls: 50,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			clk := NewFakeClock(t0)
			tc.spec.Clock = clk
			tc.spec.Log = &log
			var polls []Poll
			tc.spec.OnPoll = func(p Poll) { polls = append(polls, p) }
			n := 0
			res, err := Until(context.Background(), tc.spec, func(ctx context.Context) (bool, string, error) {
				n++
				status := fmt.Sprintf("poll %d", n)
				switch {
				case tc.permAt == n:
					return false, status, &Permanent{Err: errors.New("kubeconfig has no server")}
				case n < tc.errUntil || (tc.errUntil > 0 && tc.doneAt == 0):
					return false, status, fmt.Errorf("get nodes: %w", transient)
				}
				return tc.doneAt > 0 && n >= tc.doneAt, status, nil
			})
			if n != tc.wantPolls || res.Polls != tc.wantPolls || len(polls) != tc.wantPolls {
				t.Errorf("polls: cond %d, Result %d, OnPoll %d; want %d", n, res.Polls, len(polls), tc.wantPolls)
			}
			if len(tc.wantErr) == 0 && err != nil {
				t.Fatalf("Until: %v", err)
			}
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("Until succeeded; want error %q", tc.wantErr)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.wantIs)
			}
			if got := res.Ended.Sub(res.Started); got != res.Elapsed || res.Started != t0 {
				t.Errorf("Started %v Ended-Started %v Elapsed %v", res.Started, got, res.Elapsed)
			}
			for _, w := range tc.wantLog {
				if !strings.Contains(log.String(), w) {
					t.Errorf("log lacks %q:\n%s", w, log.String())
				}
			}
		})
	}
}

// TestUntilLogsChangesOnly: a long wait logs a line when the status changes, not every poll.
func TestUntilLogsChangesOnly(t *testing.T) {
	var log bytes.Buffer
	n := 0
	_, err := Until(context.Background(), Spec{What: "x", Clock: NewFakeClock(t0), Log: &log, Interval: time.Second}, func(context.Context) (bool, string, error) {
		n++
		if n < 100 {
			return false, "0/3 Ready", nil
		}
		return true, "3/3 Ready", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(log.String(), "0/3 Ready"); got != 1 {
		t.Errorf("status logged %d times, want 1:\n%s", got, log.String())
	}
	if !strings.Contains(log.String(), "[1m39s] 3/3 Ready") {
		t.Errorf("log lacks the final status with its elapsed time:\n%s", log.String())
	}
}

// TestUntilCancel: cancelling the context stops the wait with an error that wraps
// context.Canceled (how labbuild is interrupted mid-wait).
func TestUntilCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := Until(ctx, Spec{What: "masters Ready", Clock: NewFakeClock(t0), Timeout: time.Hour}, func(context.Context) (bool, string, error) {
		n++
		if n == 3 {
			cancel()
		}
		return false, "", nil
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "masters Ready") {
		t.Fatalf("err = %v; want context.Canceled naming what was awaited", err)
	}
	if n != 3 {
		t.Errorf("polled %d times after cancel at 3", n)
	}
}
