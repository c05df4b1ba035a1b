package procfs

import (
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fake is the tree in testdata/proc: process 100 ("web server", threads
// 100 and 107, the latter named "a) R 1 (b"), the kernel thread 2 on a
// hybrid cgroup host, process 300 being torn down (empty stat and comm, no
// task directory), and non-numeric entries (sys, uptime).
var fake = New("testdata/proc")

func TestRoot(t *testing.T) {
	if got := (FS{}).Root(); got != "/proc" {
		t.Errorf("zero FS reads %q, want /proc", got)
	}
	if got := New("").Root(); got != "/proc" {
		t.Errorf(`New("") reads %q, want /proc`, got)
	}
	if got := fake.Path(100, "stat"); got != "testdata/proc/100/stat" {
		t.Errorf("Path = %q", got)
	}
	if got := fake.TaskPath(100, 107, "comm"); got != "testdata/proc/100/task/107/comm" {
		t.Errorf("TaskPath = %q", got)
	}
}

func TestFakeListing(t *testing.T) {
	pids, err := fake.Pids()
	if err != nil || !slices.Equal(pids, []int{2, 100, 300}) {
		t.Errorf("Pids = %v, %v; want [2 100 300]", pids, err)
	}
	for _, tt := range []struct {
		pid  int
		want []int
		gone bool
	}{
		{100, []int{100, 107}, false},
		{2, []int{2}, false},
		{300, nil, true},
		{999, nil, true},
	} {
		got, err := fake.Tasks(tt.pid)
		if !slices.Equal(got, tt.want) || IsGone(err) != tt.gone {
			t.Errorf("Tasks(%d) = %v, %v; want %v, gone %v", tt.pid, got, err, tt.want, tt.gone)
		}
	}
	if _, err := New(filepath.Join(t.TempDir(), "none")).Pids(); err == nil {
		t.Error("Pids of a missing root: no error")
	}
}

func TestFakeFiles(t *testing.T) {
	tail := Stat{State: 'S', PPID: 1, Utime: 250, Stime: 75, StartTime: 98765, Processor: 3}
	web := tail
	web.PID, web.Comm = 100, "web server"
	odd := Stat{PID: 107, Comm: "a) R 1 (b", State: 'R', PPID: 1, Utime: 7, Stime: 3, Nice: -5, StartTime: 98800, Processor: 2, RTPriority: 50, Policy: 2}
	kthreadd := Stat{PID: 2, Comm: "kthreadd", State: 'S', Stime: 1, StartTime: 3}

	check := func(what string, got, want any, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		} else if !equal(got, want) {
			t.Errorf("%s = %+v, want %+v", what, got, want)
		}
	}
	st, err := fake.Stat(100)
	check("Stat(100)", st, web, err)
	st, err = fake.TaskStat(100, 100)
	check("TaskStat(100, 100)", st, web, err)
	st, err = fake.TaskStat(100, 107)
	check("TaskStat(100, 107)", st, odd, err)
	st, err = fake.Stat(2)
	check("Stat(2)", st, kthreadd, err)

	status, err := fake.Status(100)
	check("Status(100)", status, Status{Tgid: 100, CPUsAllowedList: "0-3", VoluntaryCtxtSwitches: 310, NonvoluntaryCtxtSwitches: 12, CapEff: 0x1ffffffffff,
		Present: StatusTgid | StatusCPUsAllowedList | StatusVoluntaryCtxtSwitches | StatusNonvoluntaryCtxtSwitches | StatusCapEff}, err)
	status, err = fake.TaskStatus(100, 107)
	check("TaskStatus(100, 107)", status, Status{Tgid: 100, CPUsAllowedList: "2", VoluntaryCtxtSwitches: 5, NonvoluntaryCtxtSwitches: 900,
		Present: StatusTgid | StatusCPUsAllowedList | StatusVoluntaryCtxtSwitches | StatusNonvoluntaryCtxtSwitches}, err)

	comm, err := fake.Comm(100)
	check("Comm(100)", comm, "web server", err)
	comm, err = fake.TaskComm(100, 107)
	check("TaskComm(100, 107)", comm, "a) R 1 (b", err)

	cmd, err := fake.Cmdline(100)
	check("Cmdline(100).Args", cmd.Args(), []string{"nginx: master process", "-g", "daemon off;"}, err)
	check("Cmdline(100).String", cmd.String(), "nginx: master process -g daemon off;", err)
	cmd, err = fake.Cmdline(2)
	check("Cmdline(2).Args", cmd.Args(), []string(nil), err)

	cg, err := fake.Cgroup(100)
	check("Cgroup(100)", cg, Cgroups{V2: "/kubepods.slice/pod-a.slice/cri-1.scope"}, err)
	cg, err = fake.TaskCgroup(2, 2)
	check("TaskCgroup(2, 2)", cg, Cgroups{V2: "/", V1: map[string]string{"cpu": "/", "cpuacct": "/", "memory": "/", "name=systemd": "/"}}, err)

	ss, err := fake.Schedstat(100)
	check("Schedstat(100)", ss, Schedstat{RunNs: 5000000, WaitNs: 120000, Timeslices: 42}, err)
}

func equal(a, b any) bool {
	if x, ok := a.(Cgroups); ok {
		y := b.(Cgroups)
		return x.V2 == y.V2 && maps.Equal(x.V1, y.V1)
	}
	if x, ok := a.([]string); ok {
		return slices.Equal(x, b.([]string))
	}
	return a == b
}

// TestFakeGone: a process that is gone or being torn down gives errors
// that IsGone recognises and that name the file; other failures do not
// count as gone.
func TestFakeGone(t *testing.T) {
	broken := t.TempDir()
	if err := os.MkdirAll(filepath.Join(broken, "6", "comm"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(broken, "5"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"stat": "5 (x) R 1\n", "status": "Tgid:\tfive\n", "cgroup": "nonsense\n", "schedstat": "1\n"} {
		if err := os.WriteFile(filepath.Join(broken, "5", name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bad := New(broken)
	for _, tt := range []struct {
		name    string
		err     error
		gone    bool
		mention string
	}{
		{"empty stat", second(fake.Stat(300)), true, "testdata/proc/300/stat: process or thread exited: empty file"},
		{"empty comm", second(fake.Comm(300)), true, "testdata/proc/300/comm"},
		{"no status", second(fake.Status(300)), true, "read testdata/proc/300/status: process or thread exited: no such file or directory"},
		{"no task directory", second(fake.Tasks(300)), true, "list testdata/proc/300/task"},
		{"no process", second(fake.TaskStat(999, 999)), true, "testdata/proc/999/task/999/stat"},
		{"no cmdline", second(fake.Cmdline(999)), true, "testdata/proc/999/cmdline"},
		{"no cgroup", second(fake.TaskCgroup(100, 108)), true, "testdata/proc/100/task/108/cgroup"},
		{"no schedstat", second(fake.Schedstat(2)), true, "testdata/proc/2/schedstat"},
		{"truncated stat", second(bad.Stat(5)), false, "5/stat: stat line has 4 fields"},
		{"malformed status", second(bad.Status(5)), false, "5/status: status Tgid"},
		{"malformed cgroup", second(bad.Cgroup(5)), false, "5/cgroup: cgroup line"},
		{"malformed schedstat", second(bad.Schedstat(5)), false, "5/schedstat: schedstat line has 1 fields"},
		{"a directory for a file", second(bad.Comm(6)), false, "read " + filepath.Join(broken, "6/comm") + ": is a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("no error")
			}
			if IsGone(tt.err) != tt.gone || errors.Is(tt.err, ErrGone) != tt.gone {
				t.Errorf("%v: IsGone = %v, want %v", tt.err, IsGone(tt.err), tt.gone)
			}
			if !strings.Contains(tt.err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", tt.err, tt.mention)
			}
		})
	}
}

func second[T any](_ T, err error) error { return err }

// TestLive reads this test's own process and a child, and checks them
// against what the kernel and the runtime say directly.
func TestLive(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var proc FS
	pid, tid := os.Getpid(), unix.Gettid()

	pids, err := proc.Pids()
	if err != nil || !slices.Contains(pids, pid) || slices.Contains(pids, 0) || !slices.IsSorted(pids) {
		t.Errorf("Pids: %d processes, %v; want this one (%d), sorted", len(pids), err, pid)
	}
	tids, err := proc.Tasks(pid)
	if err != nil || !slices.Contains(tids, pid) || !slices.Contains(tids, tid) || !slices.IsSorted(tids) {
		t.Errorf("Tasks = %v, %v; want the leader %d and this thread %d, sorted", tids, err, pid, tid)
	}

	st, err := proc.TaskStat(pid, tid)
	if err != nil || st.PID != tid || st.State != 'R' || st.PPID != os.Getppid() || st.StartTime == 0 || st.Policy != unix.SCHED_NORMAL {
		t.Errorf("TaskStat = %+v, %v; want tid %d running under SCHED_OTHER, parent %d", st, err, tid, os.Getppid())
	}
	leader, err := proc.Stat(pid)
	if err != nil || leader.PID != pid || leader.Exited() {
		t.Errorf("Stat = %+v, %v", leader, err)
	}
	// A thread id works at the root too.
	if byTid, err := proc.Stat(tid); err != nil || byTid.PID != tid || byTid.StartTime != st.StartTime {
		t.Errorf("Stat(tid) = %+v, %v; want start time %d", byTid, err, st.StartTime)
	}
	status, err := proc.TaskStatus(pid, tid)
	if err != nil || status.Tgid != pid || status.Require(StatusTgid|StatusCPUsAllowedList|StatusVoluntaryCtxtSwitches|StatusNonvoluntaryCtxtSwitches|StatusCapEff) != nil {
		t.Errorf("TaskStatus = %+v, %v", status, err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil && set.Count() == 1 && status.CPUsAllowedList != strconv.Itoa(firstCPU(&set)) {
		t.Errorf("Cpus_allowed_list %q, affinity %v", status.CPUsAllowedList, set)
	}
	comm, _ := os.ReadFile("/proc/self/comm")
	if got, err := proc.Comm(pid); err != nil || got != strings.TrimSpace(string(comm)) {
		t.Errorf("Comm = %q, %v; want %q", got, err, comm)
	}
	if cmd, err := proc.Cmdline(pid); err != nil || !slices.Equal(cmd.Args(), os.Args) {
		t.Errorf("Cmdline = %q, %v; want %q", cmd.Args(), err, os.Args)
	}
	if _, err := proc.TaskCgroup(pid, tid); err != nil {
		t.Errorf("TaskCgroup: %v", err)
	}

	// A child that exited but is not reaped yet is a zombie; once reaped it
	// is gone.
	child := exec.Command("true")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	cpid := child.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, err := proc.Stat(cpid)
		if err != nil {
			t.Fatal(err)
		}
		if st.Exited() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("true did not exit in 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = child.Wait()
	if _, err := proc.Stat(cpid); !IsGone(err) || !errors.Is(err, ErrGone) {
		t.Errorf("Stat of a reaped process: %v, want it gone", err)
	}
	if _, err := proc.Tasks(cpid); !IsGone(err) {
		t.Errorf("Tasks of a reaped process: %v, want it gone", err)
	}
}

func firstCPU(s *unix.CPUSet) int {
	for i := range 1024 {
		if s.IsSet(i) {
			return i
		}
	}
	return -1
}
