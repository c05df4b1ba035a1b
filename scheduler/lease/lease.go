// Package lease gives one run at a time the ownership of a node's
// scheduling state (thread policies, affinities, cpusets, the sched_ext
// tier): apply, refine, train and canary each take the node's lease before
// changing any of it, because two runs changing it at once undo each other
// without noticing (an exclusive arm strips its CPUs from the other run's
// cgroups; two applies hand out the same exclusive CPU).
//
// The lease is a file in the state directory holding its owner's record
// (pid, the pid's start time, command) under an flock(2) that the owner
// holds for as long as it runs. The kernel drops an flock when its holder
// dies, however it dies, so a crashed owner leaves a record with no lock: a
// stale lease. Its record says whose state may still be applied; a new owner
// takes the lease over only once that state has been reverted (Options.OnStale).
// The start time (from /proc/PID/stat) tells the dead owner from an unrelated
// process that was given the same pid later.
package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/procfs"
)

// FileName is the lease file's name in the state directory.
const FileName = "node.lease"

// pollEvery is how often Acquire retries a held lease while it waits.
const pollEvery = 100 * time.Millisecond

// ErrHeld is wrapped by a *HeldError: a live run owns the node's
// scheduling state.
var ErrHeld = errors.New("the node's scheduling state is owned by another run")

// ErrStale is wrapped when a dead owner's lease cannot be taken over: there
// is no OnStale to revert its state, or OnStale failed.
var ErrStale = errors.New("the node's scheduling state was left by a run that died")

// Owner is the record of the process holding (or last holding) the lease.
type Owner struct {
	Pid int `json:"pid"`
	// Start is the pid's start time, clock ticks after boot (field 22 of
	// /proc/PID/stat): a process with this pid and another start time is not
	// the owner.
	Start   uint64    `json:"start"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	// StateFile is where the owner records what it changed (a cfs state
	// file), for whoever takes a stale lease over to revert.
	StateFile string `json:"state_file,omitempty"`
}

func (o Owner) String() string {
	s := "pid " + strconv.Itoa(o.Pid)
	if o.Command != "" {
		s += " (" + o.Command + ")"
	}
	if !o.Since.IsZero() {
		s += " since " + o.Since.Local().Format(time.DateTime)
	}
	return s
}

// HeldError says who holds the lease. The caller adds how to wait (a
// command's flag); the library does not know it.
type HeldError struct {
	Path  string
	Owner Owner // zero Pid when the record could not be read
	// Waited is how long Acquire waited before giving up (0: it did not).
	Waited time.Duration
}

func (e *HeldError) Error() string {
	who := "another process"
	if e.Owner.Pid > 0 {
		who = e.Owner.String()
	}
	s := fmt.Sprintf("%s: %s (lease %s)", ErrHeld, who, e.Path)
	if e.Waited > 0 {
		s += fmt.Sprintf(" (waited %v)", e.Waited)
	}
	return s
}

// Unwrap makes errors.Is(err, ErrHeld) hold.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Options configure Acquire.
type Options struct {
	// Wait is how long to wait for a live owner to release the lease; 0
	// refuses at once.
	Wait time.Duration
	// OnStale is called with the record of an owner that died holding the
	// lease, while the caller holds the lock; it reverts what that owner may
	// have left applied. The lease is taken over only if it returns nil.
	// Nil refuses every stale lease (wrapping ErrStale).
	OnStale func(Owner) error
	// Command is recorded as the owner's command; "" records the process's
	// arguments.
	Command string
	// StateFile is recorded as the owner's state file (Owner.StateFile).
	StateFile string
	// Proc reads the processes' start times; the zero FS reads /proc.
	Proc procfs.FS
}

// Lease is a held lease; Release gives it up.
type Lease struct {
	f     *os.File
	path  string
	owner Owner
}

// Owner is the record this lease wrote.
func (l *Lease) Owner() Owner { return l.owner }

// Path is the lease file.
func (l *Lease) Path() string { return l.path }

// Acquire takes the node's lease in the state directory dir (created if
// missing), waiting up to opt.Wait (or until ctx is done) for a live owner.
// A live owner's lease is a *HeldError naming it; a dead owner's is taken
// over once opt.OnStale has reverted its state. A process holds at most one
// lease: a second Acquire by the holder is an error, not a wait for itself.
func Acquire(ctx context.Context, dir string, opt Options) (*Lease, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	path := filepath.Join(dir, FileName)
	self, err := ownerOf(opt.Proc, os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("lease %s: %w", path, err)
	}
	self.Command, self.StateFile = opt.Command, opt.StateFile
	if self.Command == "" {
		self.Command = strings.Join(os.Args, " ")
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	start := time.Now()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lease %s: lock: %w", path, err)
		}
		owner, _ := readOwner(f)
		if owner.Pid == self.Pid && owner.Start == self.Start {
			f.Close()
			return nil, fmt.Errorf("lease %s: this process (pid %d) holds it already", path, self.Pid)
		}
		waited := time.Since(start)
		if waited >= opt.Wait {
			f.Close()
			return nil, &HeldError{Path: path, Owner: owner, Waited: opt.Wait}
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("%w (waiting for it: %w)", &HeldError{Path: path, Owner: owner, Waited: waited}, context.Cause(ctx))
		case <-time.After(min(pollEvery, opt.Wait-waited)):
		}
	}
	// Locked. A record left in the file is an owner that did not Release.
	prev, err := readOwner(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lease %s: %w", path, err)
	}
	if prev.Pid != 0 {
		if alive(opt.Proc, prev) {
			// Alive but not holding the lock: it cannot be told from an owner,
			// so it is treated as one.
			f.Close()
			return nil, &HeldError{Path: path, Owner: prev}
		}
		if opt.OnStale == nil {
			f.Close()
			return nil, fmt.Errorf("%w: %s, lease %s; its state must be reverted before another run may start", ErrStale, prev, path)
		}
		if err := opt.OnStale(prev); err != nil {
			f.Close()
			return nil, fmt.Errorf("%w: %s, lease %s: revert its state: %w", ErrStale, prev, path, err)
		}
	}
	self.Since = time.Now().UTC()
	if err := writeOwner(f, &self); err != nil {
		f.Close()
		return nil, fmt.Errorf("lease %s: %w", path, err)
	}
	return &Lease{f: f, path: path, owner: self}, nil
}

// Release clears the owner's record and gives the lease up. The file stays:
// removing it would let two runs lock two different files of one name.
func (l *Lease) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Truncate(0)
	if err == nil {
		err = l.f.Sync()
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	l.f = nil
	if err != nil {
		return fmt.Errorf("lease %s: release: %w", l.path, err)
	}
	return nil
}

// ownerOf is the record of the live process pid (without command).
func ownerOf(proc procfs.FS, pid int) (Owner, error) {
	st, err := proc.Stat(pid)
	if err != nil {
		return Owner{}, err
	}
	return Owner{Pid: pid, Start: st.StartTime}, nil
}

// alive reports whether the owner's process is still running: its pid
// exists, started when the record says, and has not exited.
func alive(proc procfs.FS, o Owner) bool {
	st, err := proc.Stat(o.Pid)
	return err == nil && st.StartTime == o.Start && !st.Exited()
}

// maxRecord caps the record read back: a pid, a start time and a command line.
const maxRecord = 64 << 10

// readOwner reads the record in f; an empty file is the zero Owner (free).
func readOwner(f *os.File) (Owner, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxRecord))
	if err != nil {
		return Owner{}, err
	}
	var o Owner
	if len(b) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return Owner{}, fmt.Errorf("owner record: %w", err)
	}
	if o.Pid <= 0 {
		return Owner{}, fmt.Errorf("owner record: pid %d", o.Pid)
	}
	return o, nil
}

func writeOwner(f *os.File, o *Owner) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}
