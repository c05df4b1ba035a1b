package ledger

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrLocked is wrapped when another writer holds a ledger: a live run is
// writing it, and neither a second run nor a resume may touch it.
var ErrLocked = errors.New("ledger is being written by another run")

// LockError says which ledger is locked and, when /proc/locks says, by whom.
type LockError struct {
	Path string
	Pid  int // the holder; 0 when unknown
}

func (e *LockError) Error() string {
	who := "another process"
	if e.Pid > 0 {
		who = "pid " + strconv.Itoa(e.Pid)
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", e.Pid)); err == nil {
			who += " (" + strings.TrimSpace(string(comm)) + ")"
		}
	}
	return fmt.Sprintf("ledger %s is being written by %s: wait for that run to end, or stop it and resume", e.Path, who)
}

// Unwrap makes errors.Is(err, ErrLocked) hold.
func (e *LockError) Unwrap() error { return ErrLocked }

// lock takes the writer's exclusive lock on f without waiting: a ledger has
// one writer. The lock is flock(2)'s, held by the open file and so released
// when the file is closed or the process dies, however it dies.
func lock(f *os.File, path string) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return &LockError{Path: path, Pid: holder(f)}
	}
	if err != nil {
		return fmt.Errorf("ledger %s: lock: %w", path, err)
	}
	return nil
}

// CheckUnlocked returns a *LockError (wrapping ErrLocked) when a writer holds
// the ledger at path, and nil when none does, changing nothing: a resume
// calls it before it reaps or reverts anything on the ledger's behalf. The
// answer can change as soon as it is given; the resume's own Append takes the
// lock for good.
func CheckUnlocked(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return &LockError{Path: path, Pid: holder(f)}
	}
	if err != nil {
		return fmt.Errorf("ledger %s: lock: %w", path, err)
	}
	return nil // closing f drops the shared lock
}

// holder returns the pid /proc/locks gives for the exclusive flock on f's
// file, or 0 if it names none.
func holder(f *os.File) int {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return 0
	}
	pl, err := os.Open("/proc/locks")
	if err != nil {
		return 0
	}
	defer pl.Close()
	return flockHolder(bufio.NewScanner(pl), st.Dev, st.Ino)
}

// flockHolder scans /proc/locks lines ("1: FLOCK  ADVISORY  WRITE 1234
// 08:01:5678 0 EOF") for the exclusive flock on the file dev:ino.
func flockHolder(sc *bufio.Scanner, dev, ino uint64) int {
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[3] != "WRITE" || f[5] != want {
			continue
		}
		if pid, err := strconv.Atoi(f[4]); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}
