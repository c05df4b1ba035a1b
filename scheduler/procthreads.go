package scheduler

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"temper.codes/temper-train/profiles"
)

// ErrThreadGone marks a thread or process that exited while it was being
// read. Listing functions leave such threads out; single-thread readers
// return it (test with errors.Is).
var ErrThreadGone = errors.New("thread exited")

// ThreadsOf returns a Plan.Threads function for a target whose processes
// change over time: tgids gives the current processes (observe/target's
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
// leader's comm, Cmdline from /proc/TGID/cmdline with NUL bytes as spaces,
// and Cgroup from /proc/TGID/task/TID/cgroup (see ParseCgroup). Processes and
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

// ProcessThreads reads every thread of one process. A process that has
// exited yields ErrThreadGone; threads that exit during the walk are left
// out.
func ProcessThreads(tgid int) ([]profiles.Thread, error) {
	dir := "/proc/" + strconv.Itoa(tgid)
	pcomm, err := readProc(dir + "/comm")
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", tgid, err)
	}
	cmdline, err := readProc(dir + "/cmdline")
	if err != nil {
		return nil, fmt.Errorf("process %d: %w", tgid, err)
	}
	ents, err := os.ReadDir(dir + "/task")
	if err != nil {
		if IsGone(err) {
			return nil, fmt.Errorf("process %d: %w", tgid, ErrThreadGone)
		}
		return nil, fmt.Errorf("list threads of process %d: %w", tgid, err)
	}
	base := profiles.Thread{Tgid: tgid, Pcomm: trimComm(pcomm), Cmdline: CmdlineString(cmdline)}
	var out []profiles.Thread
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		t, err := readTask(base, tid)
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
	dir := "/proc/" + strconv.Itoa(tgid)
	pcomm, err := readProc(dir + "/comm")
	if err != nil {
		return profiles.Thread{}, fmt.Errorf("process %d: %w", tgid, err)
	}
	cmdline, err := readProc(dir + "/cmdline")
	if err != nil {
		return profiles.Thread{}, fmt.Errorf("process %d: %w", tgid, err)
	}
	return readTask(profiles.Thread{Tgid: tgid, Pcomm: trimComm(pcomm), Cmdline: CmdlineString(cmdline)}, tid)
}

// readTask fills in base's thread-level fields for thread tid.
func readTask(base profiles.Thread, tid int) (profiles.Thread, error) {
	dir := "/proc/" + strconv.Itoa(base.Tgid) + "/task/" + strconv.Itoa(tid)
	comm, err := readProc(dir + "/comm")
	if err != nil {
		return profiles.Thread{}, fmt.Errorf("thread %d: %w", tid, err)
	}
	cg, err := readProc(dir + "/cgroup")
	if err != nil {
		return profiles.Thread{}, fmt.Errorf("thread %d: %w", tid, err)
	}
	if len(comm) == 0 {
		// A task being reaped can give empty files.
		return profiles.Thread{}, fmt.Errorf("thread %d: %w", tid, ErrThreadGone)
	}
	path, err := ParseCgroup(cg)
	if err != nil {
		return profiles.Thread{}, fmt.Errorf("read %s/cgroup: %w", dir, err)
	}
	t := base
	t.Tid = tid
	t.Comm = trimComm(comm)
	t.Cgroup = path
	return t, nil
}

// ParseCgroup returns the cgroup path a matcher's cgroup_prefix is checked
// against, from the contents of /proc/PID/cgroup: the path in the v1
// hierarchy holding the cpu controller when there is one (on a v1 or hybrid
// host that is where the kubelet's CPU settings live), else the v2 ("0::")
// path. Paths are relative to the hierarchy root and start with "/"; a
// thread in neither gives "".
func ParseCgroup(data []byte) (string, error) {
	var v2 string
	haveV2 := false
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		id, rest, ok := strings.Cut(line, ":")
		ctrls, path, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 {
			return "", fmt.Errorf("cgroup line %q: want id:controllers:path", line)
		}
		if id == "0" && ctrls == "" {
			v2, haveV2 = path, true
			continue
		}
		if slices.Contains(strings.Split(ctrls, ","), "cpu") {
			return path, nil
		}
	}
	if haveV2 {
		return v2, nil
	}
	return "", nil
}

// CmdlineString turns /proc/PID/cmdline into one string: NUL separators
// become spaces and trailing ones are trimmed, so "postgres: walwriter"
// reads as the process shows itself in ps.
func CmdlineString(b []byte) string {
	return strings.TrimRight(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), " ")
}

// TaskStartTime returns field 22 of /proc/TID/stat: when the thread started,
// in clock ticks after boot. With the tid it identifies a thread, so a tid
// the kernel has handed to another thread since is told apart. A thread
// that has exited — gone, or a zombie (Z, X) waiting to be reaped — yields
// ErrThreadGone.
func TaskStartTime(tid int) (uint64, error) {
	b, err := readProc("/proc/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("thread %d: %w", tid, err)
	}
	f, err := StatFields(b)
	if err != nil {
		return 0, fmt.Errorf("read /proc/%d/stat: %w", tid, err)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, fmt.Errorf("thread %d: %w", tid, ErrThreadGone)
	}
	start, err := strconv.ParseUint(f[22-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read /proc/%d/stat: starttime %q: %w", tid, f[22-3], err)
	}
	return start, nil
}

// StatFields splits a /proc/PID/stat line after the command name (which may
// hold spaces and parentheses, so fields are counted from the last ')'):
// field N of proc(5) is the result's [N-3]. At least the 22 fields up to
// starttime must be there.
func StatFields(b []byte) ([]string, error) {
	end := bytes.LastIndexByte(b, ')')
	if end < 0 {
		return nil, fmt.Errorf("malformed stat line %q", b)
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 22-2 {
		return nil, fmt.Errorf("stat line has %d fields after the comm, want at least 20", len(f))
	}
	return f, nil
}

// readProc reads a /proc file; a vanished process or thread is
// ErrThreadGone.
func readProc(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if IsGone(err) {
			return nil, ErrThreadGone
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// IsGone reports whether err is what reading a vanished /proc entry
// returns (ENOENT, or ESRCH when the task exits while the file is being
// read), or ErrThreadGone.
func IsGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) || errors.Is(err, ErrThreadGone)
}

func trimComm(b []byte) string { return strings.TrimSuffix(string(b), "\n") }
