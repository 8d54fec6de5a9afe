// Package daemon starts, finds, probes and stops the long-running host processes External
// targets own (the mirror's registry, labbuild's own Redfish BMC): a program in the foreground,
// in a session of its own so it outlives the labbuild that started it, its output in a log
// file, found again in a later run by its Record.
package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Record is what a target keeps of its daemon. A daemon is a long-running host process that an External target starts, records, probes and
// stops: a program that stays in the foreground (a registry, labbuild's own Redfish BMC), run
// in a session of its own so that it outlives the labbuild that started it, with its output in
// a log file. haproxy/service supervises haproxy its own way, because haproxy daemonizes itself
// (-D) and reloads softly (-sf).
//
// The record is what the target keeps in its output (record.json), so Probe and Destroy find
// the process again in a later run. A pid alone is not enough: after a reboot or a long time
// the pid may belong to another program, so the record also holds the process's start time
// in clock ticks since boot (/proc/PID/stat field 22, proc(5)) and the program's base name.
type Record struct {
	// PID is the daemon's process id.
	PID int `json:"pid"`
	// StartTicks is /proc/PID/stat's starttime (clock ticks since boot) when it was started.
	StartTicks uint64 `json:"startTicks"`
	// Program is the base name of argv[0] ("registry", "labbuild-full").
	Program string `json:"program"`
	// Log is the file that receives the daemon's stdout and stderr.
	Log string `json:"log"`
}

// Spec says how to start a daemon.
type Spec struct {
	// Argv is the program and its arguments; Argv[0] is looked up in PATH.
	Argv []string
	// Env is added to labbuild's own environment (KEY=value).
	Env []string
	// Dir is the working directory ("" for labbuild's).
	Dir string
	// Log is the log file, created 0600 (a daemon may log a request's headers) and appended to.
	Log string
	// Ready, when set, is polled every 50 ms until it returns nil (the daemon serves), the
	// daemon exits (an error with the log's last lines), or Timeout passes.
	Ready func(ctx context.Context) error
	// Timeout bounds the wait for Ready; 10 s when zero.
	Timeout time.Duration
}

// Start starts sp's program detached (a new session, stdin from /dev/null, output to
// sp.Log) and waits until it is ready. On any failure the process is stopped and the error
// holds the last lines of its log.
func Start(ctx context.Context, sp Spec) (Record, error) {
	var rec Record
	if len(sp.Argv) == 0 {
		return rec, errors.New("daemon: no program")
	}
	if err := os.MkdirAll(filepath.Dir(sp.Log), 0o755); err != nil {
		return rec, err
	}
	logf, err := os.OpenFile(sp.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return rec, err
	}
	defer logf.Close()
	cmd := exec.Command(sp.Argv[0], sp.Argv[1:]...)
	cmd.Env = append(os.Environ(), sp.Env...)
	cmd.Dir = sp.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return rec, fmt.Errorf("start %s: %w", sp.Argv[0], err)
	}
	// Reap it in the background while labbuild runs, so a daemon that dies is not left a
	// zombie that still looks alive; once labbuild exits, init adopts it.
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	rec = Record{PID: cmd.Process.Pid, Program: filepath.Base(sp.Argv[0]), Log: sp.Log}
	rec.StartTicks, _ = procStartTicks(rec.PID)
	if sp.Ready == nil {
		return rec, nil
	}
	timeout := sp.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		rerr := sp.Ready(wctx)
		if rerr == nil {
			return rec, nil
		}
		select {
		case <-exited:
			return rec, fmt.Errorf("%s exited before it served: %w%s", rec.Program, rerr, logTail(sp.Log))
		case <-wctx.Done():
			rec.Stop(2 * time.Second)
			return rec, fmt.Errorf("%s did not serve within %s: %w%s", rec.Program, timeout, rerr, logTail(sp.Log))
		case <-tick.C:
		}
	}
}

// Alive reports whether the recorded process still runs: the same pid, start time and program,
// and not a zombie.
func (r Record) Alive() bool {
	if r.PID <= 0 || !procIsProgram(r.PID, r.Program) {
		return false
	}
	st, err := procStat(r.PID)
	if err != nil || st.state == 'Z' {
		return false
	}
	return r.StartTicks == 0 || st.startTicks == r.StartTicks
}

// Stop ends the recorded process: SIGTERM, then SIGKILL after grace. It reports whether the
// process was running. A record whose process is gone (or whose pid now belongs to another
// program) is not an error: nothing is signalled.
func (r Record) Stop(grace time.Duration) (existed bool, err error) {
	if !r.Alive() {
		return false, nil
	}
	if err := syscall.Kill(r.PID, syscall.SIGTERM); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return false, nil
		}
		return false, fmt.Errorf("stop %s pid %d: %w", r.Program, r.PID, err)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !r.Alive() {
			return true, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := syscall.Kill(r.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return true, fmt.Errorf("kill %s pid %d: %w", r.Program, r.PID, err)
	}
	return true, nil
}

// procIsProgram reports whether pid runs a program whose argv[0] has base name name
// (/proc/PID/cmdline), so that a reused pid of another program is never signalled.
func procIsProgram(pid int, name string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	return filepath.Base(string(argv0)) == name
}

type procStatFields struct {
	state      byte
	startTicks uint64
}

// procStat reads the state (field 3) and starttime (field 22) of /proc/PID/stat. The command
// name (field 2) is in parentheses and may hold spaces, so fields are counted after its last ')'.
func procStat(pid int) (procStatFields, error) {
	var st procStatFields
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return st, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return st, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return st, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	st.state = f[0][0]
	st.startTicks, err = strconv.ParseUint(f[19], 10, 64)
	return st, err
}

func procStartTicks(pid int) (uint64, error) {
	st, err := procStat(pid)
	return st.startTicks, err
}

// logTail returns the last lines of a daemon's log, indented on new lines, for an error.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return "\n  " + strings.Join(lines, "\n  ")
}
