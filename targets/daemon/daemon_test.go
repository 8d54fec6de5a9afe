package daemon

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDaemon: a started daemon is alive by its record, is not mistaken for another program on
// the same pid, stops on SIGTERM (or SIGKILL after the grace), and one that exits before it
// serves fails with its log's last lines.
func TestDaemon(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ready := func(ctx context.Context) error {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	}
	tests := []struct {
		name    string
		argv    []string
		ready   func(context.Context) error
		wantErr string
		env     []string
	}{
		{name: "serves", argv: []string{os.Args[0], "-test.run=^TestDaemonHelper$"}, env: []string{"LABBUILD_DAEMON_HELPER=" + addr}, ready: ready},
		{name: "no-ready", argv: []string{"sleep", "60"}},
		{name: "ignores-term", argv: []string{"sh", "-c", "trap '' TERM; echo started; while :; do sleep 1; done"}},
		{name: "exits", argv: []string{"sh", "-c", "echo 'listen: address already in use' >&2; exit 3"}, ready: func(context.Context) error { return errors.New("connection refused") }, wantErr: "address already in use"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := filepath.Join(dir, tc.name+".log")
			rec, err := Start(context.Background(), Spec{Argv: tc.argv, Env: tc.env, Log: log, Ready: tc.ready, Timeout: 5 * time.Second})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				if rec.Alive() {
					t.Fatal("a daemon that failed is still alive")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !rec.Alive() {
				t.Fatal("started daemon is not alive")
			}
			if fi, err := os.Stat(log); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("log %v, %v; want 0600", fi, err)
			}
			other := rec
			other.Program = "registry"
			if other.Alive() {
				t.Fatal("a record for another program matches this pid")
			}
			other = rec
			other.StartTicks++
			if other.Alive() {
				t.Fatal("a record with another start time matches this pid (a reused pid)")
			}
			if existed, err := other.Stop(time.Second); existed || err != nil {
				t.Fatalf("stop of a stale record: existed %v, err %v; want nothing signalled", existed, err)
			}
			existed, err := rec.Stop(300 * time.Millisecond)
			if !existed || err != nil {
				t.Fatalf("stop: existed %v, err %v", existed, err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for rec.Alive() && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if rec.Alive() {
				t.Fatal("still alive after stop")
			}
			if existed, err := rec.Stop(time.Second); existed || err != nil {
				t.Fatalf("second stop: existed %v, err %v; want nothing", existed, err)
			}
		})
	}
}

// TestDaemonHelper is TestDaemon's daemon when LABBUILD_DAEMON_HELPER names an address: it
// serves TCP there until it is killed.
func TestDaemonHelper(t *testing.T) {
	addr := os.Getenv("LABBUILD_DAEMON_HELPER")
	if addr == "" {
		t.Skip("run by TestDaemon")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}
