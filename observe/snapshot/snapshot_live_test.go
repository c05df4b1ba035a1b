package snapshot

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/procfs"
)

// TestBeginEndLiveProcess snapshots a real multi-threaded child around a
// short "trace" during which one thread is created and one exits.
func TestBeginEndLiveProcess(t *testing.T) {
	c := startChild(t, "threads")
	ctx := context.Background()
	s, err := Begin(ctx, Options{Tgids: []int{c.pid, c.pid}, Target: "test child", Trace: TraceParams{Attach: "tp_btf"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Target.Tgids; !slices.Equal(got, []int{c.pid}) {
		t.Errorf("tgids %v, want the duplicate dropped: [%d]", got, c.pid)
	}
	lateTid := c.command(t, "spawn", "late")
	exitTid := c.command(t, "exit", "exited")
	time.Sleep(100 * time.Millisecond) // let the sleepers switch many times
	before := listTasks(t, c.pid)
	if err := s.End(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.End(ctx); err == nil {
		t.Error("second End succeeded")
	}

	topo := s.Topology
	online := map[int]bool{}
	for _, cpu := range topo.Online {
		online[cpu] = true
	}
	byTid := map[int]*Thread{}
	for i := range s.Threads {
		th := &s.Threads[i]
		if _, dup := byTid[th.Tid]; dup {
			t.Errorf("tid %d recorded twice", th.Tid)
		}
		byTid[th.Tid] = th
		if th.Tgid != c.pid {
			t.Errorf("tid %d: tgid %d, want %d", th.Tid, th.Tgid, c.pid)
		}
		for _, st := range []*ThreadState{th.Begin, th.End} {
			if st == nil {
				continue
			}
			if len(st.State) != 1 {
				t.Errorf("tid %d: state %q, want one letter", th.Tid, st.State)
			}
			if len(st.CPUsAllowed) == 0 {
				t.Errorf("tid %d: empty affinity", th.Tid)
			}
			for _, cpu := range st.CPUsAllowed {
				if !online[cpu] {
					t.Errorf("tid %d: affinity %v has CPU %d, not online (%v)", th.Tid, st.CPUsAllowed, cpu, topo.Online)
				}
			}
			if !online[st.CPU] {
				t.Errorf("tid %d: last CPU %d not online", th.Tid, st.CPU)
			}
			if st.Policy != "SCHED_OTHER" || st.PolicyNum != 0 {
				t.Errorf("tid %d: policy %s (%d), want SCHED_OTHER", th.Tid, st.Policy, st.PolicyNum)
			}
			if !strings.Contains(st.Cmdline, "-test.run") {
				t.Errorf("tid %d: cmdline %q is not the child's (a test binary started with -test.run)", th.Tid, st.Cmdline)
			}
			if st.Cgroup.V2 == "" && st.Cgroup.V1CPU == "" {
				t.Errorf("tid %d: no cgroup", th.Tid)
			}
		}
		if d, ok := th.Delta(); ok && (d.VoluntaryCtxtSwitches < 0 || d.NonvoluntaryCtxtSwitches < 0 || d.UtimeNs < 0 || d.StimeNs < 0) {
			t.Errorf("tid %d: counters went backwards: %+v", th.Tid, d)
		}
	}

	// Every thread listed just before End is there, present at end unless
	// it exited in between.
	for _, tid := range before {
		th, ok := byTid[tid]
		if !ok {
			t.Errorf("tid %d (in /proc before End) missing from the snapshot", tid)
			continue
		}
		if !th.PresentAtEnd && taskExists(c.pid, tid) {
			t.Errorf("tid %d: not present at end but still alive", tid)
		}
	}

	for _, name := range []string{sleeperA, sleeperB, oddName} {
		th := byTid[c.tids[name]]
		if th == nil {
			t.Fatalf("thread %q (tid %d) missing", name, c.tids[name])
		}
		if !th.PresentAtBegin || !th.PresentAtEnd {
			t.Errorf("%q: present at begin %v, end %v; want both", name, th.PresentAtBegin, th.PresentAtEnd)
			continue
		}
		if th.Comm != name || th.Begin.Comm != name || th.End.Comm != name {
			t.Errorf("comm %q / begin %q / end %q, want %q", th.Comm, th.Begin.Comm, th.End.Comm, name)
		}
		d, _ := th.Delta()
		if d.VoluntaryCtxtSwitches <= 0 {
			t.Errorf("%q sleeps in a loop but has %d voluntary switches over the trace (begin %d, end %d)",
				name, d.VoluntaryCtxtSwitches, th.Begin.VoluntaryCtxtSwitches, th.End.VoluntaryCtxtSwitches)
		}
	}

	// nice: the niced thread has what it set; another has the process's.
	if th := byTid[c.tids[sleeperB]]; th.Begin.Nice != niceValue || th.End.Nice != niceValue {
		t.Errorf("%q nice begin %d end %d, want %d", sleeperB, th.Begin.Nice, th.End.Nice, niceValue)
	}
	if th, main := byTid[c.tids[sleeperA]], byTid[c.pid]; th.Begin.Nice != main.Begin.Nice || th.Begin.Nice == niceValue {
		t.Errorf("%q nice %d, want the main thread's %d", sleeperA, th.Begin.Nice, main.Begin.Nice)
	}

	late := byTid[lateTid]
	if late == nil || late.PresentAtBegin || !late.PresentAtEnd || late.Begin != nil || late.Comm != lateName {
		t.Errorf("thread created during the trace: %+v, want present only at end, comm %q", late, lateName)
	}
	gone := byTid[exitTid]
	if gone == nil || !gone.PresentAtBegin || gone.PresentAtEnd || gone.End != nil || gone.Comm != exitName {
		t.Errorf("thread that exited during the trace: %+v, want present only at begin, comm %q", gone, exitName)
	}

	// The thread's cgroup is what /proc says for the process.
	pc, err := os.ReadFile("/proc/" + strconv.Itoa(c.pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	cg, err := procfs.ParseCgroup(pc)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := byTid[c.pid].Begin.Cgroup, threadCgroup(cg); got != want {
		t.Errorf("main thread cgroup %+v, want %+v", got, want)
	}

	// Host and clocks.
	var u unix.Utsname
	unix.Uname(&u)
	if s.Host.KernelRelease != unix.ByteSliceToString(u.Release[:]) || s.Host.Hostname == "" || len(s.Host.BootID) != 36 {
		t.Errorf("host %+v", s.Host)
	}
	if s.Host.NumCPU != len(topo.Online) || s.Host.ClockTicks <= 0 {
		t.Errorf("host num_cpu %d clock ticks %d; online %v", s.Host.NumCPU, s.Host.ClockTicks, topo.Online)
	}
	b, e := s.Taken.Begin, s.Taken.End
	if b.Clock != "CLOCK_MONOTONIC" || e == nil || !(b.MonotonicNs <= b.DoneMonotonicNs && b.DoneMonotonicNs < e.MonotonicNs && e.MonotonicNs <= e.DoneMonotonicNs) {
		t.Errorf("stamps begin %+v end %+v: want ordered CLOCK_MONOTONIC readings", b, e)
	}
	if span := e.MonotonicNs - b.MonotonicNs; span < int64(100*time.Millisecond) || span > int64(time.Minute) {
		t.Errorf("monotonic span %v, want about the test's sleep", time.Duration(span))
	}
	var now unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &now)
	if e.DoneMonotonicNs > now.Nano() {
		t.Errorf("end stamp %d is after now %d: not CLOCK_MONOTONIC", e.DoneMonotonicNs, now.Nano())
	}
	// The trace's clock: ordered, at or ahead of CLOCK_MONOTONIC (by the time
	// suspended), and not ahead of CLOCK_BOOTTIME read now.
	var boot unix.Timespec
	unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot)
	if !(b.BoottimeNs >= b.MonotonicNs && b.BoottimeNs <= b.DoneBoottimeNs && b.DoneBoottimeNs < e.BoottimeNs &&
		e.BoottimeNs <= e.DoneBoottimeNs && e.DoneBoottimeNs <= boot.Nano()) {
		t.Errorf("boottime stamps begin %+v end %+v (now %d): want ordered CLOCK_BOOTTIME readings", b, e, boot.Nano())
	}
	if len(s.Cgroups) == 0 {
		t.Errorf("no cgroup recorded for the process; warnings %q", s.Warnings)
	}
	for _, r := range s.Cgroups {
		if r.Source != "process" || r.Begin == nil || r.End == nil {
			t.Errorf("cgroup %+v: want source process with both readings", r)
		}
	}
	t.Logf("%d threads, cgroups %d, warnings %q", len(s.Threads), len(s.Cgroups), s.Warnings)

	// What was written is what is loaded.
	path := filepath.Join(t.TempDir(), "snapshot.json")
	if err := s.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var w1, w2 bytes.Buffer
	s.Write(&w1)
	loaded.Write(&w2)
	if !bytes.Equal(w1.Bytes(), w2.Bytes()) {
		t.Error("Load(WriteFile(s)) differs from s")
	}
	if err := loaded.End(ctx); err == nil || !strings.Contains(err.Error(), "not begun") {
		t.Errorf("End on a loaded snapshot: %v", err)
	}
}

func TestBeginErrors(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	// A tid of a non-leader thread of this process.
	var other int
	for _, tid := range listTasks(t, os.Getpid()) {
		if tid != os.Getpid() {
			other = tid
		}
	}
	tests := []struct {
		name string
		ctx  context.Context
		opts Options
		want string
	}{
		{"no tgids", ctx, Options{}, "no tgids"},
		{"negative", ctx, Options{Tgids: []int{-1}}, "not a process id"},
		{"no such process", ctx, Options{Tgids: []int{1 << 30}}, "exited"},
		{"thread not process", ctx, Options{Tgids: []int{other}}, "is a thread of process"},
		{"relative cgroup", ctx, Options{Tgids: []int{os.Getpid()}, Cgroup: "cpu/x"}, "not an absolute path"},
		{"not a cgroup", ctx, Options{Tgids: []int{os.Getpid()}, Cgroup: "/tmp"}, "not under a mounted cgroup hierarchy"},
		{"cancelled", cancelled, Options{Tgids: []int{os.Getpid()}}, "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "thread not process" && other == 0 {
				t.Fatal("test process has a single thread")
			}
			_, err := Begin(tt.ctx, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

// TestEndProcessGone: a target that exits during the trace is a warning,
// and its threads are marked as gone, not guessed at.
func TestEndProcessGone(t *testing.T) {
	c := startChild(t, "threads")
	s, err := Begin(context.Background(), Options{Tgids: []int{c.pid}})
	if err != nil {
		t.Fatal(err)
	}
	c.in.Close() // the child exits at EOF on stdin
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if err := s.End(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, th := range s.Threads {
		if th.PresentAtEnd || th.End != nil || !th.PresentAtBegin {
			t.Errorf("tid %d: present at begin %v, at end %v after the process was reaped", th.Tid, th.PresentAtBegin, th.PresentAtEnd)
		}
	}
	if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, "exited during the trace") }) {
		t.Errorf("warnings %q do not say the process exited", s.Warnings)
	}
	t.Logf("warnings: %q", s.Warnings)
}

func listTasks(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func taskExists(pid, tid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid))
	return err == nil
}

// TestNumCPUConsistent ties Host.NumCPU to what Go sees.
func TestNumCPUConsistent(t *testing.T) {
	s, err := Begin(context.Background(), Options{Tgids: []int{os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Host.NumCPU < runtime.NumCPU() {
		t.Errorf("num_cpu %d < runtime.NumCPU %d", s.Host.NumCPU, runtime.NumCPU())
	}
}
