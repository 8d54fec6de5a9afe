package cache

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Lock is a flock on a file in the output directory: exclusive for a build, shared for a
// reader (a dry run). A build writes its PID into the file, for people reading it; who holds the
// lock now is asked of the kernel (Holders), since a shared holder writes nothing and the PID in
// the file may be a process long gone.
type Lock struct{ f *os.File }

// lockPoll is how often a waiting Acquire tries the lock again. A waiter polls (LOCK_NB) rather
// than blocking in flock(2), which Go's signal handlers restart (SA_RESTART), so that a signal
// ends the wait at once: ctx is checked between tries. 50 ms is a twentieth of the one second
// within which SIGTERM must end any wait (issue 39), and costs nothing measurable.
const lockPoll = 50 * time.Millisecond

// Acquire takes the lock at path exclusively. When another process holds it, waiting is called
// once with the holder's PID (Holders; 0 when unknown) and Acquire waits until the lock is free
// or ctx is done (then it returns ctx's error). The lock is released by Release or when the
// process exits, however it exits.
func Acquire(ctx context.Context, path string, waiting func(pid int)) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := wait(ctx, f, syscall.LOCK_EX, path, waiting); err != nil {
		f.Close()
		return nil, err
	}
	// A fixed-width record needs no truncate (which costs half a millisecond on ext4).
	f.WriteAt([]byte(fmt.Sprintf("%-19d\n", os.Getpid())), 0)
	return &Lock{f: f}, nil
}

// wait takes how (LOCK_EX or LOCK_SH) on f, polling until it is free or ctx is done.
func wait(ctx context.Context, f *os.File, how int, path string, waiting func(pid int)) error {
	for first := true; ; first = false {
		err := flock(f, how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if err != syscall.EWOULDBLOCK {
			return fmt.Errorf("lock %s: %w", path, err)
		}
		if first && waiting != nil {
			pid := 0
			if h := Holders(f); len(h) > 0 {
				pid = h[0]
			}
			waiting(pid)
		}
		t := time.NewTimer(lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-t.C:
		}
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// Holders returns the PIDs of the processes that hold a flock on f's file now, from
// /proc/locks (the kernel's own table: FLOCK entries by device and inode, waiters marked
// "->"); when that table cannot be read, the PID the last exclusive
// holder wrote into the file, if that process is still running. Nil: unknown.
func Holders(f *os.File) []int {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil
	}
	if pids, ok := procLocks(st.Dev, st.Ino); ok {
		return pids
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, 0, 64))
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) == syscall.ESRCH {
		return nil
	}
	return []int{pid}
}

// procLocks reads /proc/locks: "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF", the device
// as major:minor in hex and the inode in decimal (fs/locks.c, lock_get_status). Where stat's
// device is not the super block's (btrfs subvolumes), the inode alone decides.
func procLocks(dev, ino uint64) ([]int, bool) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil, false
	}
	defer f.Close()
	major := (dev>>8)&0xfff | (dev>>32)&^0xfff
	minor := dev&0xff | (dev>>12)&^0xff
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, ino)
	suffix := ":" + strconv.FormatUint(ino, 10)
	var exact, byIno []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 6 || fl[1] != "FLOCK" || !strings.HasSuffix(fl[5], suffix) {
			continue // a waiter ("->") has one more field before FLOCK
		}
		pid, err := strconv.Atoi(fl[4])
		if err != nil || pid <= 0 {
			continue
		}
		if fl[5] == want {
			exact = append(exact, pid)
		}
		byIno = append(byIno, pid)
	}
	if len(exact) > 0 {
		return exact, true
	}
	return byIno, true
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
// dry run, explain, graph): they wait for a build to finish (until ctx is done; waiting is
// called as Acquire calls it) but change nothing on disk.
func AcquireShared(ctx context.Context, path string, waiting func(pid int)) (*Lock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := wait(ctx, f, syscall.LOCK_SH, path, waiting); err != nil {
		f.Close()
		return nil, err
	}
	return &Lock{f: f}, nil
}
