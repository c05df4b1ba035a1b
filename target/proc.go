package target

import (
	"fmt"
	"slices"

	"temper.codes/temper-train/internal/procfs"
)

// procStat is what the target needs from /proc/PID/stat.
type procStat struct {
	comm  string
	state byte
	ppid  int
	start uint64 // start time in clock ticks after boot: with the pid, identifies a process
}

// live reports whether the process still runs threads: a zombie (Z) or dead
// (X) process has exited and only waits to be reaped.
func (s procStat) live() bool { return s.state != 'Z' && s.state != 'X' }

// readStat reads /proc/PID/stat; for a missing process the error satisfies
// procfs.IsGone.
func readStat(pid int) (procStat, error) {
	st, err := procfs.FS{}.Stat(pid)
	if err != nil {
		return procStat{}, err
	}
	return procStat{comm: st.Comm, state: st.State, ppid: st.PPID, start: st.StartTime}, nil
}

// tgidOf returns the thread-group id (process id) of a thread id from
// /proc/TID/status; for a process id it returns the id itself.
func tgidOf(tid int) (int, error) {
	st, err := procfs.FS{}.Status(tid)
	if err != nil {
		return 0, err
	}
	if st.Present&procfs.StatusTgid == 0 {
		return 0, fmt.Errorf("/proc/%d/status has no Tgid line", tid)
	}
	return st.Tgid, nil
}

// scanProcs reads the stat of every process in /proc, keyed by tgid (the
// numeric entries of /proc are processes; threads are not listed). Processes
// that exit during the scan are left out.
func scanProcs() (map[int]procStat, error) {
	pids, err := procfs.FS{}.Pids()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	procs := make(map[int]procStat, len(pids))
	for _, pid := range pids {
		st, err := readStat(pid)
		if procfs.IsGone(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("process %d: %w", pid, err)
		}
		procs[pid] = st
	}
	return procs, nil
}

// resolvePid makes a pid target of the process with the given pid (or of
// the process a thread id belongs to).
func resolvePid(pid int) (*Target, error) {
	tgid, err := tgidOf(pid)
	if procfs.IsGone(err) {
		return nil, newError(ErrNotFound, nil, fmt.Sprintf("no process with pid %d (check the pid, e.g. with ps -p %d)", pid, pid))
	}
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	st, err := readStat(tgid)
	if procfs.IsGone(err) || (err == nil && !st.live()) {
		return nil, newError(ErrNotFound, nil, fmt.Sprintf("no process with pid %d (it exited)", pid))
	}
	if err != nil {
		return nil, fmt.Errorf("pid %d: %w", pid, err)
	}
	desc := fmt.Sprintf("pid %d (%s) and its descendants", tgid, st.comm)
	if tgid != pid {
		desc = fmt.Sprintf("pid %d (%s, the process of thread %d) and its descendants", tgid, st.comm, pid)
	}
	t := &Target{Kind: KindPid, Description: desc, Pid: tgid, tracked: map[int]uint64{tgid: st.start}}
	tgids, err := t.refreshTree()
	if err != nil {
		return nil, err
	}
	if len(tgids) == 0 {
		return nil, newError(ErrNotFound, nil, fmt.Sprintf("no process with pid %d (it exited)", pid))
	}
	t.Tgids = tgids
	return t, nil
}

// refreshTree recomputes the processes of a pid or command target: those
// tracked before that still run (same pid and start time), plus all their
// descendants. t.mu must be held (or t not yet shared).
func (t *Target) refreshTree() ([]int, error) {
	procs, err := scanProcs()
	if err != nil {
		return nil, fmt.Errorf("refresh %s: %w", t.Description, err)
	}
	children := make(map[int][]int, len(procs))
	for pid, st := range procs {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	found := make(map[int]uint64, len(t.tracked))
	var queue []int
	for pid, start := range t.tracked {
		if st, ok := procs[pid]; ok && st.start == start {
			found[pid] = start
			queue = append(queue, pid)
		}
	}
	for len(queue) > 0 {
		pid := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, c := range children[pid] {
			if _, seen := found[c]; !seen {
				found[c] = procs[c].start
				queue = append(queue, c)
			}
		}
	}
	t.tracked = found
	tgids := make([]int, 0, len(found))
	for pid := range found {
		// A zombie has exited and only waits to be reaped: it stays
		// tracked until it is gone but has no threads left to trace.
		if procs[pid].live() {
			tgids = append(tgids, pid)
		}
	}
	slices.Sort(tgids)
	return tgids, nil
}
