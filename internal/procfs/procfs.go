// Package procfs reads the kernel's per-process and per-thread files under a
// proc file system (proc(5)): stat, status, cgroup, comm, cmdline and
// schedstat of a process (ROOT/PID/...) or of one of its threads
// (ROOT/PID/task/TID/...), the threads of a process and the processes of the
// system.
//
// It is the one reader of those files in this module: target walks
// process trees with it, observe/snapshot records thread states, observe
// names a trace's threads, scheduler lists the threads its matchers see and
// scheduler/cfs tells threads apart by start time. The details — the command
// name in stat that may hold spaces, parentheses and newlines, v1 and v2
// cgroup lines, NUL-separated command lines, and the errors a process that
// exits while being read gives — are handled here once.
//
// An FS names the directory the proc file system is mounted at: the zero FS
// reads /proc, and tests hand New a directory laid out like /proc.
package procfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// DefaultRoot is where the proc file system is mounted on a live system.
const DefaultRoot = "/proc"

// FS reads a proc file system mounted at a directory. The zero FS reads
// DefaultRoot.
type FS struct {
	root string
}

// New returns an FS reading the proc file system at root ("" is
// DefaultRoot). A test passes a directory laid out like /proc.
func New(root string) FS { return FS{root: root} }

// Root returns the directory fsys reads.
func (fsys FS) Root() string {
	if fsys.root == "" {
		return DefaultRoot
	}
	return fsys.root
}

// Path returns the path of a process's file: ROOT/PID/name. A thread id
// works as well as a process id (the kernel serves every thread at ROOT/TID
// too, although only processes are listed).
func (fsys FS) Path(pid int, name string) string {
	return filepath.Join(fsys.Root(), strconv.Itoa(pid), name)
}

// TaskPath returns the path of a thread's file: ROOT/PID/task/TID/name.
func (fsys FS) TaskPath(pid, tid int, name string) string {
	return filepath.Join(fsys.Root(), strconv.Itoa(pid), "task", strconv.Itoa(tid), name)
}

// ErrGone marks a process or thread that exited before or while one of its
// files was read. Test for it with IsGone, which also recognises the raw
// errors the kernel returns.
var ErrGone = errors.New("process or thread exited")

// IsGone reports whether err is what reading a vanished process or thread
// gives: ErrGone, ENOENT, or ESRCH (the task exited while the file was being
// read).
func IsGone(err error) bool {
	return errors.Is(err, ErrGone) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// readFile reads one file. Errors name the file; a vanished task's error
// wraps ErrGone. With nonEmpty, an empty file is taken as a task being torn
// down (the kernel writes at least a newline to stat, status and comm of a
// task that exists) and is ErrGone too.
func readFile(path string, nonEmpty bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, pathError("read", path, err)
	}
	if nonEmpty && len(b) == 0 {
		return nil, fmt.Errorf("read %s: %w: empty file", path, ErrGone)
	}
	return b, nil
}

// listIDs lists the numeric entries of dir (process or thread ids),
// ascending; other entries are skipped.
func listIDs(dir string) ([]int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, pathError("list", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, pathError("list", dir, err)
	}
	ids := make([]int, 0, len(names))
	for _, n := range names {
		if id, err := strconv.Atoi(n); err == nil && id > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// pathError words an error of the file system as "op path: cause", naming
// the path once, and marks a vanished task with ErrGone.
func pathError(op, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("%s %s: %w: %w", op, path, ErrGone, err)
	}
	return fmt.Errorf("%s %s: %w", op, path, err)
}

// Pids lists the processes: the numeric entries of the root, ascending.
// Threads other than a process's leader are not listed there.
func (fsys FS) Pids() ([]int, error) { return listIDs(fsys.Root()) }

// Tasks lists the threads of process pid (ROOT/PID/task), ascending. A
// process that has exited gives an error that satisfies IsGone.
func (fsys FS) Tasks(pid int) ([]int, error) { return listIDs(fsys.Path(pid, "task")) }

// Comm reads a process's command name (ROOT/PID/comm) without its newline.
func (fsys FS) Comm(pid int) (string, error) { return readComm(fsys.Path(pid, "comm")) }

// TaskComm reads a thread's command name (ROOT/PID/task/TID/comm) without
// its newline.
func (fsys FS) TaskComm(pid, tid int) (string, error) {
	return readComm(fsys.TaskPath(pid, tid, "comm"))
}

func readComm(path string) (string, error) {
	b, err := readFile(path, true)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// Cmdline reads a process's command line (ROOT/PID/cmdline). A kernel
// thread's, or an exited process's, is empty.
func (fsys FS) Cmdline(pid int) (Cmdline, error) {
	b, err := readFile(fsys.Path(pid, "cmdline"), false)
	return Cmdline(b), err
}

// Stat reads and parses ROOT/PID/stat.
func (fsys FS) Stat(pid int) (Stat, error) {
	return readParsed(fsys.Path(pid, "stat"), true, ParseStat)
}

// TaskStat reads and parses ROOT/PID/task/TID/stat.
func (fsys FS) TaskStat(pid, tid int) (Stat, error) {
	return readParsed(fsys.TaskPath(pid, tid, "stat"), true, ParseStat)
}

// Status reads and parses ROOT/PID/status.
func (fsys FS) Status(pid int) (Status, error) {
	return readParsed(fsys.Path(pid, "status"), true, ParseStatus)
}

// TaskStatus reads and parses ROOT/PID/task/TID/status.
func (fsys FS) TaskStatus(pid, tid int) (Status, error) {
	return readParsed(fsys.TaskPath(pid, tid, "status"), true, ParseStatus)
}

// Cgroup reads and parses ROOT/PID/cgroup.
func (fsys FS) Cgroup(pid int) (Cgroups, error) {
	return readParsed(fsys.Path(pid, "cgroup"), false, ParseCgroup)
}

// TaskCgroup reads and parses ROOT/PID/task/TID/cgroup.
func (fsys FS) TaskCgroup(pid, tid int) (Cgroups, error) {
	return readParsed(fsys.TaskPath(pid, tid, "cgroup"), false, ParseCgroup)
}

// Schedstat reads and parses ROOT/PID/schedstat (a thread id works too).
// Kernels built without CONFIG_SCHED_INFO have no such file.
func (fsys FS) Schedstat(pid int) (Schedstat, error) {
	return readParsed(fsys.Path(pid, "schedstat"), false, ParseSchedstat)
}

// readParsed reads one file (see readFile) and parses it; a parse error
// names the file.
func readParsed[T any](path string, nonEmpty bool, parse func([]byte) (T, error)) (T, error) {
	var zero T
	b, err := readFile(path, nonEmpty)
	if err != nil {
		return zero, err
	}
	v, err := parse(b)
	if err != nil {
		return zero, fmt.Errorf("read %s: %w", path, err)
	}
	return v, nil
}
