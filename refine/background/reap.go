package background

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/internal/procfs"
)

// Reap kills the spinners a crashed run left behind and removes its empty
// cgroups. A pid is killed only if it is still a spinner — its command line
// is a spinner's and it sits in a spinner cgroup — and the run that started
// it is gone (the cgroup's name records the owner's pid and start time). Any
// other pid is left alone: it exited and was reused, or belongs to a live
// run. Reap then removes every empty spinner cgroup whose owner is gone.
//
// One Reap runs at a time on a machine (reapLock): a second one would find
// the first one's killed spinners still in their cgroups and report those
// cgroups as holding pids that are not spinners.
func Reap(pids []int) error {
	fsys := procfs.New("/proc")
	h, err := cgroup.Find()
	if err != nil {
		return fmt.Errorf("background: %w", err)
	}
	unlock, err := lockReaping(reapLock, time.Minute)
	if err != nil {
		return err
	}
	defer unlock()
	// The tasks of a dead run's spinner cgroups are candidates too: a pid
	// the ledger did not get (the run died while starting spinners).
	leftovers, errs := deadRunTasks(h)
	var killed []int
	for _, pid := range append(slices.Clone(pids), leftovers...) {
		if slices.Contains(killed, pid) {
			continue
		}
		ok, err := isOrphanSpinner(fsys, pid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !ok {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("background: killing spinner %d: %w", pid, err))
			continue
		}
		killed = append(killed, pid)
	}
	for _, pid := range killed {
		if err := waitGone(fsys, pid); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, sweep(fsys, h.Root))
	if h.Cpuset != "" {
		errs = append(errs, sweep(fsys, h.Cpuset))
	}
	return errors.Join(errs...)
}

// reapLock is the file whose flock(2) Reap holds. /run/lock is a tmpfs
// anyone may write on Debian; the lock needs no content.
const reapLock = "/run/lock/temper-train-reap.lock"

// lockReaping takes the exclusive flock on path, waiting up to wait for
// another holder. The kernel drops the lock when its holder dies, however
// it dies; unlock drops it before that, and may be called again.
func lockReaping(path string, wait time.Duration) (unlock func(), err error) {
	// A minimal system (the test VM's) may have no /run/lock yet.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("background: reaper lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("background: reaper lock: %w", err)
	}
	for deadline := time.Now().Add(wait); ; {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return sync.OnceFunc(func() { f.Close() }), nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("background: another process has held the reaper lock %s for over %v: find it with lsof %s, and let it finish or stop it", path, wait, path)
			}
			return nil, fmt.Errorf("background: reaper lock %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// RemoveLeftovers removes what dead runs left of their spinners: it kills
// every spinner in a dead run's cgroup and then removes every such cgroup,
// as Reap does without pids from a ledger. A live run's spinners and cgroups
// are left alone. apply --revert calls it, so that a run killed by SIGKILL
// (whose spinners die with it, PR_SET_PDEATHSIG, but whose cgroups stay)
// leaves nothing behind without a resume. Where no hierarchy has the cpu
// controller no spinner cgroup can have been made, and there is nothing to do.
func RemoveLeftovers() error {
	if _, err := cgroup.Find(); err != nil {
		return nil
	}
	return Reap(nil)
}

// isOrphanSpinner reports whether pid is a spinner whose owner is gone.
func isOrphanSpinner(fsys procfs.FS, pid int) (bool, error) {
	if pid <= 0 {
		return false, nil
	}
	cmdline, err := fsys.Cmdline(pid)
	if procfs.IsGone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("background: %w", err)
	}
	if !slices.Equal(cmdline.Args(), []string{spinnerName, "-c", spinScript}) {
		return false, nil
	}
	cg, err := fsys.Cgroup(pid)
	if procfs.IsGone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("background: %w", err)
	}
	ownerPid, ownerStart, ok := parseCgroupName(filepath.Base(cg.CPU()))
	if !ok {
		return false, nil
	}
	return !alive(fsys, ownerPid, ownerStart), nil
}

// parseCgroupName parses temper-bg.PID.START.SEQ.
func parseCgroupName(name string) (pid int, start uint64, ok bool) {
	rest, ok := strings.CutPrefix(name, cgroupPrefix)
	if !ok {
		return 0, 0, false
	}
	f := strings.Split(rest, ".")
	if len(f) != 3 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	_, err3 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || pid <= 0 {
		return 0, 0, false
	}
	return pid, start, true
}

// alive reports whether the process pid that started at start still runs.
func alive(fsys procfs.FS, pid int, start uint64) bool {
	st, err := fsys.Stat(pid)
	return err == nil && st.StartTime == start && !st.Exited()
}

// waitGone waits until a killed process has exited.
func waitGone(fsys procfs.FS, pid int) error {
	for range 500 {
		st, err := fsys.Stat(pid)
		if procfs.IsGone(err) || (err == nil && st.Exited()) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("background: spinner %d still runs 5s after SIGKILL", pid)
}

// deadRunTasks lists the tasks in the spinner cgroups of runs that are gone.
func deadRunTasks(h cgroup.Hierarchy) ([]int, []error) {
	fsys := procfs.New("/proc")
	entries, err := os.ReadDir(h.Root)
	if err != nil {
		return nil, []error{fmt.Errorf("background: %w", err)}
	}
	var pids []int
	var errs []error
	for _, e := range entries {
		pid, start, ok := parseCgroupName(e.Name())
		if !ok || !e.IsDir() || alive(fsys, pid, start) {
			continue
		}
		procs, err := os.ReadFile(filepath.Join(h.Root, e.Name(), "cgroup.procs"))
		if err != nil {
			errs = append(errs, fmt.Errorf("background: %w", err))
			continue
		}
		for _, f := range strings.Fields(string(procs)) {
			if p, err := strconv.Atoi(f); err == nil {
				pids = append(pids, p)
			}
		}
	}
	return pids, errs
}

// sweep removes the spinner cgroups of runs that are gone. One that still
// holds a task (not a spinner: Reap has killed those) is left and reported.
func sweep(fsys procfs.FS, root string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("background: %w", err)
	}
	var errs []error
	for _, e := range entries {
		pid, start, ok := parseCgroupName(e.Name())
		if !ok || !e.IsDir() || alive(fsys, pid, start) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			errs = append(errs, fmt.Errorf("background: %w", err))
			continue
		}
		if len(strings.TrimSpace(string(procs))) > 0 {
			errs = append(errs, fmt.Errorf("background: cgroup %s of a dead run still holds pids %s, which are not spinners: left alone", dir, strings.Join(strings.Fields(string(procs)), ",")))
			continue
		}
		if err := (cgroup.Dir{CPU: dir}).Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
