// Package background runs CPU spinners that stand for BestEffort pods: busy
// loops in a cgroup of their own with the lowest CPU weight the kernel takes
// (cpu.shares 2 on cgroup v1, cpu.weight 1 on v2), as the kubelet gives the
// BestEffort QoS class. refine runs the same number of them in every arm of
// a comparison, to measure a profile under contention.
//
// Nothing started here outlives its owner: Stop kills the spinners and
// removes the cgroup; each spinner is also signalled by the kernel if the
// owner dies (PR_SET_PDEATHSIG); and Reap kills what a crashed run left
// behind, given the pids it recorded, after checking each is a spinner of a
// run that is gone — a pid reused by another process is never killed.
package background

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"syscall"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/internal/procfs"
)

const (
	// spinnerName is the spinners' argv[0]: the mark Reap looks for.
	spinnerName = "temper-bg-spinner"
	// spinScript is a pure user-space busy loop.
	spinScript = "while :; do :; done"
	// cgroupPrefix starts the name of every cgroup made here; the name goes
	// on with the owner's pid and start time, so that Reap can tell whether
	// the run that made it is alive: temper-bg.PID.START.SEQ.
	cgroupPrefix = "temper-bg."
	shell        = "/bin/sh"
)

// Spinners is a running set of CPU spinners.
type Spinners struct {
	pids []int
	dir  cgroup.Dir // their cgroup; zero when n == 0

	stop    chan struct{} // closed by Stop: the keeper kills the spinners
	done    chan error    // the keeper's result, once they are reaped
	once    sync.Once
	stopErr error
}

// owner identifies this process across pid reuse.
func owner() (pid int, start uint64, err error) {
	st, err := procfs.New("/proc").Stat(os.Getpid())
	if err != nil {
		return 0, 0, fmt.Errorf("background: %w", err)
	}
	return st.PID, st.StartTime, nil
}

var seq struct {
	sync.Mutex
	n int
}

// Start starts n CPU spinners (n == 0: none, and no cgroup) in a new cgroup
// with the lowest CPU weight at the top of the cpu hierarchy, and returns
// once every one of them is in it.
func Start(n int) (*Spinners, error) {
	h, err := cgroup.Find()
	if err != nil {
		if n == 0 {
			return start(cgroup.Dir{}, 0, true)
		}
		return nil, fmt.Errorf("background: %w", err)
	}
	return start(h.Top(), n, true)
}

// StartIn starts n spinners as one BestEffort pod below parent: the node
// rig's besteffort cgroup.
func StartIn(parent cgroup.Dir, n int) (*Spinners, error) { return start(parent, n, true) }

func start(parent cgroup.Dir, n int, pdeathsig bool) (*Spinners, error) {
	if n < 0 {
		return nil, fmt.Errorf("background: %d spinners", n)
	}
	s := &Spinners{stop: make(chan struct{}), done: make(chan error, 1)}
	if n == 0 {
		s.done <- nil
		return s, nil
	}
	pid, st, err := owner()
	if err != nil {
		return nil, err
	}
	seq.Lock()
	seq.n++
	name := fmt.Sprintf("%s%d.%d.%d", cgroupPrefix, pid, st, seq.n)
	seq.Unlock()
	dir, err := parent.Make(name)
	if err != nil {
		return nil, fmt.Errorf("background: %w", err)
	}
	if err := dir.Set(dir.Hierarchy().WeightFile(), dir.Hierarchy().Weight(0)); err != nil {
		return nil, errors.Join(fmt.Errorf("background: %w", err), dir.Remove())
	}
	s.dir = dir
	ready := make(chan error, 1)
	go s.keep(n, pdeathsig, ready)
	if err := <-ready; err != nil {
		<-s.done
		return nil, errors.Join(err, s.dir.Remove())
	}
	return s, nil
}

// keep starts the spinners and, after Stop, kills and reaps them. It runs on
// a thread of its own for the spinners' lifetime: the kernel sends
// PR_SET_PDEATHSIG when the thread that forked a child exits, not its
// process, and Go ends a thread when a goroutine locked to it returns without
// unlocking. Locked here, the thread lives until the spinners are reaped, so
// the signal comes only when this process dies.
func (s *Spinners) keep(n int, pdeathsig bool, ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cmds []*exec.Cmd
	err := func() error {
		for range n {
			cmd := &exec.Cmd{Path: shell, Args: []string{spinnerName, "-c", spinScript}}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if pdeathsig {
				cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
			}
			if err := s.dir.Start(cmd); err != nil {
				return fmt.Errorf("background: starting a spinner: %w", err)
			}
			cmds = append(cmds, cmd)
			s.pids = append(s.pids, cmd.Process.Pid)
		}
		return nil
	}()
	if err == nil {
		ready <- nil
		<-s.stop
	} else {
		ready <- err
	}
	for _, c := range cmds {
		c.Process.Kill()
	}
	var errs []error
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) { // killed, as it should be
				errs = append(errs, err)
			}
		}
	}
	s.done <- errors.Join(errs...)
}

// Pids returns the spinners' process ids, for the ledger: after a crash,
// Reap(pids) kills what is left.
func (s *Spinners) Pids() []int { return slices.Clone(s.pids) }

// Cgroup returns the spinners' cgroup directory ("" when there are none).
func (s *Spinners) Cgroup() string { return s.dir.CPU }

// Stop kills the spinners, waits for them and removes their cgroup. It may
// be called any number of times; each call returns the first one's result.
func (s *Spinners) Stop() error {
	s.once.Do(func() {
		close(s.stop)
		s.stopErr = errors.Join(<-s.done, s.dir.Remove())
	})
	return s.stopErr
}
