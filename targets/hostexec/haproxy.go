package hostexec

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// HAProxyReload starts haproxy on cfgFile, daemonized (-D) with its pid in pidfile and its
// output in pidfile+".log", and lets the processes old finish their connections and exit
// (haproxy -sf): a soft reload that drops no listener. The configuration is checked first
// (haproxy -c), so a bad one never replaces a running one. It returns the new pid.
func (c Command) HAProxyReload(cfgFile, pidfile string, old []int) (int, error) {
	if err := c.Run("haproxy", "-c", "-q", "-f", cfgFile); err != nil {
		return 0, fmt.Errorf("config check: %w", err)
	}
	args := []string{"-D", "-p", pidfile, "-f", cfgFile}
	if len(old) > 0 {
		args = append(args, "-sf")
		for _, p := range old {
			args = append(args, strconv.Itoa(p))
		}
	}
	// The daemon inherits the command's stdout and stderr: a file, not a pipe, or waiting for
	// the pipe's end would wait for the daemon's.
	logf, err := os.Create(pidfile + ".log")
	if err != nil {
		return 0, err
	}
	cmd := c("haproxy", args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Run()
	logf.Close()
	if err != nil {
		out, _ := os.ReadFile(logf.Name())
		return 0, fmt.Errorf("haproxy %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return 0, fmt.Errorf("haproxy wrote no pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0, fmt.Errorf("pid file %q: %w", b, err)
	}
	return pid, nil
}

// HAProxyAlive reports whether pid is a running haproxy (/proc/PID/cmdline names haproxy), not
// a reused pid of another program.
func HAProxyAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(b, []byte("haproxy"))
}

// HAProxyRunningFrom returns the sorted pids of the haproxy processes whose -f configuration
// lies under dir, read from /proc.
func HAProxyRunningFrom(dir string) []int {
	var pids []int
	for pid := range HAProxyRunningConfigs(dir) {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	return pids
}

// HAProxyRunningConfigs maps the pid of each haproxy whose -f configuration lies under dir to
// that configuration file (/proc/PID/cmdline); empty for dir "".
func HAProxyRunningConfigs(dir string) map[int]string {
	out := map[int]string{}
	if dir == "" {
		return out
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "haproxy" {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-f" && strings.HasPrefix(filepath.Clean(args[i+1]), filepath.Clean(dir)+string(filepath.Separator)) {
				out[pid] = filepath.Clean(args[i+1])
				break
			}
		}
	}
	return out
}
