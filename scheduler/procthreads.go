package scheduler

import (
	"errors"
	"fmt"
	"slices"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/profiles"
)

// ErrThreadGone marks a thread or process that exited before or while it
// was read or changed: the one sentinel for that, shared with
// internal/procfs (its ErrGone) and the backends. Listing functions leave
// such threads out; single-thread readers and changers return it (test
// with errors.Is, or IsGone for raw kernel errors too).
var ErrThreadGone = procfs.ErrGone

// ThreadsOf returns a Plan.Threads function for a target whose processes
// change over time: tgids gives the current processes (target's
// Target.Refresh), and every thread of each is listed with ListThreads.
func ThreadsOf(tgids func() ([]int, error)) func() ([]profiles.Thread, error) {
	return func() ([]profiles.Thread, error) {
		ids, err := tgids()
		if err != nil {
			return nil, err
		}
		return ListThreads(ids)
	}
}

// ListThreads reads every thread of the processes tgids from /proc, as the
// matchers see them: Comm from /proc/TGID/task/TID/comm, Pcomm from the
// leader's comm, Cmdline from /proc/TGID/cmdline with NUL bytes as spaces
// (procfs.Cmdline.String), and Cgroup from /proc/TGID/task/TID/cgroup (the
// v1 cpu cgroup, else the v2 one: procfs.Cgroups.CPU). Processes and
// threads that exit while being read are left out. The result is sorted by
// tid.
func ListThreads(tgids []int) ([]profiles.Thread, error) {
	var out []profiles.Thread
	for _, tgid := range tgids {
		ts, err := ProcessThreads(tgid)
		if errors.Is(err, ErrThreadGone) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	slices.SortFunc(out, func(a, b profiles.Thread) int { return a.Tid - b.Tid })
	return out, nil
}

// ProcessThreads reads every thread of one process, sorted by tid. A
// process that has exited yields ErrThreadGone; threads that exit during
// the walk are left out.
func ProcessThreads(tgid int) ([]profiles.Thread, error) {
	var proc procfs.FS
	base, err := readProcess(proc, tgid)
	if err != nil {
		return nil, err
	}
	tids, err := proc.Tasks(tgid)
	if err != nil {
		if procfs.IsGone(err) {
			return nil, fmt.Errorf("process %d: %w", tgid, ErrThreadGone)
		}
		return nil, fmt.Errorf("list threads of process %d: %w", tgid, err)
	}
	var out []profiles.Thread
	for _, tid := range tids {
		t, err := readTask(proc, base, tid)
		if errors.Is(err, ErrThreadGone) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("process %d: %w", tgid, ErrThreadGone)
	}
	return out, nil
}

// ReadThread reads one thread of process tgid.
func ReadThread(tgid, tid int) (profiles.Thread, error) {
	var proc procfs.FS
	base, err := readProcess(proc, tgid)
	if err != nil {
		return profiles.Thread{}, err
	}
	return readTask(proc, base, tid)
}

// readProcess reads the process-level fields of process tgid's threads.
func readProcess(proc procfs.FS, tgid int) (profiles.Thread, error) {
	pcomm, err := proc.Comm(tgid)
	if err != nil {
		return profiles.Thread{}, fmt.Errorf("process %d: %w", tgid, gone(err))
	}
	cmdline, err := proc.Cmdline(tgid)
	if err != nil {
		return profiles.Thread{}, fmt.Errorf("process %d: %w", tgid, gone(err))
	}
	return profiles.Thread{Tgid: tgid, Pcomm: pcomm, Cmdline: cmdline.String()}, nil
}

// readTask fills in base's thread-level fields for thread tid.
func readTask(proc procfs.FS, base profiles.Thread, tid int) (profiles.Thread, error) {
	comm, err := proc.TaskComm(base.Tgid, tid)
	if err != nil {
		return profiles.Thread{}, fmt.Errorf("thread %d: %w", tid, gone(err))
	}
	cg, err := proc.TaskCgroup(base.Tgid, tid)
	if err != nil {
		return profiles.Thread{}, fmt.Errorf("thread %d: %w", tid, gone(err))
	}
	t := base
	t.Tid = tid
	t.Comm = comm
	t.Cgroup = cg.CPU()
	return t, nil
}

// TaskStartTime returns field 22 of /proc/TID/stat: when the thread started,
// in clock ticks after boot. With the tid it identifies a thread, so a tid
// the kernel has handed to another thread since is told apart. A thread
// that has exited — gone, or a zombie (Z, X) waiting to be reaped — yields
// ErrThreadGone.
func TaskStartTime(tid int) (uint64, error) {
	st, err := procfs.FS{}.Stat(tid)
	if err != nil {
		return 0, fmt.Errorf("thread %d: %w", tid, gone(err))
	}
	if st.Exited() {
		return 0, fmt.Errorf("thread %d: %w", tid, ErrThreadGone)
	}
	return st.StartTime, nil
}

// gone turns the error of a process or thread that exited into
// ErrThreadGone.
func gone(err error) error {
	if procfs.IsGone(err) {
		return ErrThreadGone
	}
	return err
}

// IsGone reports whether err is what reading a vanished /proc entry
// returns (ENOENT, or ESRCH when the task exits while the file is being
// read), or ErrThreadGone.
func IsGone(err error) bool {
	return procfs.IsGone(err) || errors.Is(err, ErrThreadGone)
}
