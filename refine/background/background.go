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
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"temper.codes/temper-train/internal/mountinfo"
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
	pids   []int
	cgroup string // the cgroup's directory; "" when n == 0
	cpuset string // its twin in the v1 cpuset hierarchy; "" when none

	stop    chan struct{} // closed by Stop: the keeper kills the spinners
	done    chan error    // the keeper's result, once they are reaped
	once    sync.Once
	stopErr error
}

// Hierarchy is where spinner cgroups are made.
type hierarchy struct {
	root    string // the mount point
	version int    // 1 or 2
	// cpuset is the v1 cpuset hierarchy's mount point ("" when it is not
	// mounted apart). Spinners get a cpuset cgroup there too, so that a
	// backend that keeps exclusive cores free by narrowing every other
	// cgroup's cpuset (as the kubelet's static CPU manager does) can narrow
	// theirs; in the root cpuset they could not be narrowed.
	cpuset string
}

// weightFile and weight are the lowest CPU weight of each cgroup version.
func (h hierarchy) weightFile() (string, string) {
	if h.version == 1 {
		return "cpu.shares", "2"
	}
	return "cpu.weight", "1"
}

// findHierarchy returns the hierarchy holding the cpu controller: the v1 one
// when mounted (a hybrid host keeps the controllers there), else v2.
func findHierarchy() (hierarchy, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return hierarchy{}, fmt.Errorf("background: %w", err)
	}
	var v2, cpuset string
	for _, m := range mounts {
		if m.FSType == "cgroup" && slices.Contains(m.SuperOptions, "cpuset") && !slices.Contains(m.SuperOptions, "cpu") {
			cpuset = m.MountPoint
		}
	}
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup":
			if slices.Contains(m.SuperOptions, "cpu") {
				return hierarchy{root: m.MountPoint, version: 1, cpuset: cpuset}, nil
			}
		case "cgroup2":
			if v2 == "" {
				v2 = m.MountPoint
			}
		}
	}
	if v2 != "" {
		ctrls, err := os.ReadFile(filepath.Join(v2, "cgroup.controllers"))
		if err == nil && slices.Contains(strings.Fields(string(ctrls)), "cpu") {
			return hierarchy{root: v2, version: 2}, nil
		}
	}
	return hierarchy{}, errors.New("background: no cgroup hierarchy with the cpu controller is mounted")
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
// with the lowest CPU weight, and returns once every one of them is in it.
func Start(n int) (*Spinners, error) { return start(n, true) }

func start(n int, pdeathsig bool) (*Spinners, error) {
	if n < 0 {
		return nil, fmt.Errorf("background: %d spinners", n)
	}
	s := &Spinners{stop: make(chan struct{}), done: make(chan error, 1)}
	if n == 0 {
		s.done <- nil
		return s, nil
	}
	h, err := findHierarchy()
	if err != nil {
		return nil, err
	}
	pid, st, err := owner()
	if err != nil {
		return nil, err
	}
	seq.Lock()
	seq.n++
	name := fmt.Sprintf("%s%d.%d.%d", cgroupPrefix, pid, st, seq.n)
	seq.Unlock()
	dir := filepath.Join(h.root, name)
	if err := makeCgroup(h, dir); err != nil {
		return nil, err
	}
	s.cgroup = dir
	if h.cpuset != "" {
		s.cpuset = filepath.Join(h.cpuset, name)
		if err := makeCpuset(h.cpuset, s.cpuset); err != nil {
			return nil, errors.Join(err, removeCgroup(dir))
		}
	}
	ready := make(chan error, 1)
	go s.keep(h, n, pdeathsig, ready)
	if err := <-ready; err != nil {
		<-s.done
		return nil, errors.Join(err, s.removeCgroups())
	}
	return s, nil
}

// makeCpuset makes a v1 cpuset cgroup allowed everything its parent (the
// hierarchy's root) is: a new v1 cpuset starts with no CPUs and no memory
// nodes, and takes no task until both are set.
func makeCpuset(root, dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("background: %w", err)
	}
	for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f), b, 0)
		}
		if err != nil {
			return errors.Join(fmt.Errorf("background: %s: %w", f, err), removeCgroup(dir))
		}
	}
	return nil
}

// removeCgroups removes the spinners' cgroups.
func (s *Spinners) removeCgroups() error {
	var errs []error
	for _, dir := range []string{s.cgroup, s.cpuset} {
		if dir != "" {
			errs = append(errs, removeCgroup(dir))
		}
	}
	return errors.Join(errs...)
}

func makeCgroup(h hierarchy, dir string) error {
	if h.version == 2 {
		// The parent must hand the cpu controller down to its children.
		ctl := filepath.Join(filepath.Dir(dir), "cgroup.subtree_control")
		b, err := os.ReadFile(ctl)
		if err != nil {
			return fmt.Errorf("background: %w", err)
		}
		if !slices.Contains(strings.Fields(string(b)), "cpu") {
			if err := os.WriteFile(ctl, []byte("+cpu"), 0); err != nil {
				return fmt.Errorf("background: enabling the cpu controller: %w", err)
			}
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("background: %w", err)
	}
	file, value := h.weightFile()
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
		return errors.Join(fmt.Errorf("background: %w", err), removeCgroup(dir))
	}
	return nil
}

// keep starts the spinners and, after Stop, kills and reaps them. It runs on
// a thread of its own for the spinners' lifetime: the kernel sends
// PR_SET_PDEATHSIG when the thread that forked a child exits, not its
// process, and Go ends a thread when a goroutine locked to it returns without
// unlocking. Locked here, the thread lives until the spinners are reaped, so
// the signal comes only when this process dies.
func (s *Spinners) keep(h hierarchy, n int, pdeathsig bool, ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cmds []*exec.Cmd
	err := func() error {
		var fd *os.File
		if h.version == 2 {
			var err error
			if fd, err = os.Open(s.cgroup); err != nil {
				return fmt.Errorf("background: %w", err)
			}
			defer fd.Close()
		}
		for range n {
			cmd := &exec.Cmd{Path: shell, Args: []string{spinnerName, "-c", spinScript}}
			attr := &syscall.SysProcAttr{Setpgid: true}
			if pdeathsig {
				attr.Pdeathsig = syscall.SIGKILL
			}
			if fd != nil {
				// v2: born in the cgroup (clone3 CLONE_INTO_CGROUP).
				attr.UseCgroupFD, attr.CgroupFD = true, int(fd.Fd())
			}
			cmd.SysProcAttr = attr
			if err := cmd.Start(); err != nil {
				return fmt.Errorf("background: starting a spinner: %w", err)
			}
			cmds = append(cmds, cmd)
			s.pids = append(s.pids, cmd.Process.Pid)
			if h.version == 1 {
				// v1 has no way to be born in a cgroup: the spinner moves
				// in while the shell starts, before its loop.
				for _, dir := range []string{s.cgroup, s.cpuset} {
					if dir == "" {
						continue
					}
					procs := filepath.Join(dir, "cgroup.procs")
					if err := os.WriteFile(procs, []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
						return fmt.Errorf("background: moving spinner %d into %s: %w", cmd.Process.Pid, dir, err)
					}
				}
			}
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
func (s *Spinners) Cgroup() string { return s.cgroup }

// Stop kills the spinners, waits for them and removes their cgroup. It may
// be called any number of times; each call returns the first one's result.
func (s *Spinners) Stop() error {
	s.once.Do(func() {
		close(s.stop)
		s.stopErr = errors.Join(<-s.done, s.removeCgroups())
	})
	return s.stopErr
}

// removeCgroup removes an empty cgroup directory. The kernel may report it
// busy for a moment after its last task exits.
func removeCgroup(dir string) error {
	var err error
	for range 100 {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("background: removing cgroup %s: %w", dir, err)
}
