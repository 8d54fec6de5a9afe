package cache

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Lock is an exclusive flock on a file in the output directory. The holder's PID is written
// into the file, so a waiting process can say who it waits for.
type Lock struct{ f *os.File }

// Acquire takes the lock at path. When another process holds it, waiting is called once with
// that process's PID (0 when unknown) and Acquire blocks until the lock is free. The lock is
// released by Release or when the process exits, however it exits.
func Acquire(path string, waiting func(pid int)) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if waiting != nil {
			b, _ := io.ReadAll(f)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			waiting(pid)
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
			if err != syscall.EINTR {
				break
			}
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
	}
	// A fixed-width record needs no truncate (which costs half a millisecond on ext4).
	f.WriteAt([]byte(fmt.Sprintf("%-19d\n", os.Getpid())), 0)
	return &Lock{f: f}, nil
}

// Release releases the lock.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor drops the flock
	l.f = nil
	return err
}

// AcquireShared takes a shared lock on path without creating or writing it, for readers (a
// dry run, explain, graph): they wait for a build to finish but change nothing on disk.
func AcquireShared(path string) (*Lock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}
