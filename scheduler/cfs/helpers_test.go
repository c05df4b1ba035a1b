package cfs

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/schedulertest"
)

// proc is a started test program and the threads it announced.
type proc struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
	tids  map[string]int // by name
}

// startWorkload starts testdata/workload (13 named threads) and waits for
// "ready": schedulertest's workload, its threads by name.
func startWorkload(t *testing.T) *proc {
	t.Helper()
	w := schedulertest.StartWorkload(t, testkit.Workload(t))
	p := &proc{cmd: w.Cmd, tids: map[string]int{}}
	for tid, name := range w.Threads {
		p.tids[name] = tid
	}
	return p
}

// start runs a program with stdout piped; it is stopped (SIGTERM, then
// SIGKILL) and reaped when the test ends.
func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return &proc{cmd: cmd, lines: bufio.NewScanner(out), tids: map[string]int{}}
}

// kernelView is a thread's scheduling as the kernel reports it in /proc,
// read independently of the backend's own system calls.
type kernelView struct {
	CPUs        string // Cpus_allowed_list
	Policy      int    // stat field 41
	RTPrio      int    // stat field 40
	Nice        int    // stat field 19
	Slice       uint64 // /proc/TID/sched se.slice (0 where the kernel does not show it)
	ResetOnFork bool   // sched_getattr's flags: /proc does not show it
}

func (k kernelView) String() string {
	return fmt.Sprintf("cpus %s %s prio %d nice %d slice %v reset_on_fork %t", k.CPUs, machine.PolicyName(k.Policy), k.RTPrio, k.Nice, time.Duration(k.Slice), k.ResetOnFork)
}

func readKernel(t *testing.T, tid int) kernelView {
	t.Helper()
	var proc procfs.FS
	st, err := proc.Stat(tid)
	if err != nil {
		t.Fatalf("thread %d: %v", tid, err)
	}
	status, err := proc.Status(tid)
	if err != nil {
		t.Fatalf("thread %d: %v", tid, err)
	}
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Fatalf("thread %d: %v", tid, err)
	}
	return kernelView{CPUs: status.CPUsAllowedList, Policy: st.Policy, RTPrio: st.RTPriority, Nice: st.Nice,
		Slice: procSlice(t, tid), ResetOnFork: attr.Flags&unix.SCHED_FLAG_RESET_ON_FORK != 0}
}

// procSlice reads a thread's se.slice from /proc/TID/sched (kernels with
// EEVDF show it), 0 when the file has no such line.
func procSlice(t *testing.T, tid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/sched", tid))
	if err != nil {
		t.Fatalf("thread %d: %v", tid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "se.slice" {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				t.Fatalf("thread %d: se.slice %q: %v", tid, v, err)
			}
			return n
		}
	}
	return 0
}

// views reads every thread of p.
func (p *proc) views(t *testing.T) map[string]kernelView {
	t.Helper()
	out := map[string]kernelView{}
	for name, tid := range p.tids {
		out[name] = readKernel(t, tid)
	}
	return out
}

// plan builds a plan for the processes pids on this machine.
func plan(t *testing.T, prof *profiles.Profile, pids ...int) scheduler.Plan {
	t.Helper()
	topo, err := machine.ReadTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := scheduler.NewPlan(prof, topo, scheduler.ThreadsOf(func() ([]int, error) { return pids, nil }))
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// needCores needs n physical cores (exclusive groups take whole cores and
// one must stay shared).
func needCores(t *testing.T, n int) {
	t.Helper()
	topo, err := machine.ReadTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	need.Cores(t, n, len(topo.Cores))
}

// applyForTest applies with a state file in a temporary directory and
// reverts when the test ends.
func applyForTest(t *testing.T, ctx context.Context, p scheduler.Plan) (scheduler.Applied, string, *noteLog) {
	t.Helper()
	state := filepath.Join(t.TempDir(), "state.json")
	notes := &noteLog{}
	b := New(Options{StateFile: state, Note: notes.add})
	a, err := b.Apply(ctx, p)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Cleanup(func() { a.Revert() })
	return a, state, notes
}

// noteLog collects a backend's notes; reverts on a cancelled context note
// from another goroutine.
type noteLog struct {
	mu    sync.Mutex
	notes []string
}

func (n *noteLog) add(m string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notes = append(n.notes, m)
}

func (n *noteLog) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return strings.Join(n.notes, "\n")
}

// cpus formats a CPU list as the kernel does.
func cpus(c []int) string { return cpuString(c) }

// minus returns the online CPUs of list that are not in drop.
func minus(t *testing.T, list string, drop []int) string {
	t.Helper()
	all, err := machine.ParseCPUList(list)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, c := range all {
		keep := true
		for _, d := range drop {
			keep = keep && c != d
		}
		if keep {
			out = append(out, c)
		}
	}
	return cpuString(out)
}

func boolp(b bool) *bool { return &b }

func fmtSscan(s, format string, a ...any) (int, error) { return fmt.Sscanf(s, format, a...) }

func itoa(n int) string { return strconv.Itoa(n) }

// exec1 runs a process to its end and returns its (now free) pid.
func exec1(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	testkit.Must(t, cmd.Run())
	return cmd.Process.Pid
}

func parseCPUs(t *testing.T, list string) []int {
	t.Helper()
	c, err := machine.ParseCPUList(list)
	testkit.Must(t, err)
	return c
}

// waitStats refreshes and reads a's stats until moved says they show what
// the test needs, and fails the test if they do not within limit: a loaded
// machine delays the threads, it does not stop them.
func waitStats(t *testing.T, a scheduler.Applied, limit time.Duration, moved func([]scheduler.GroupStats) bool) []scheduler.GroupStats {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if err := a.Refresh(); err != nil {
			t.Fatal(err)
		}
		stats, err := a.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if moved(stats) {
			return stats
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats did not move within %v: %+v", limit, stats)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
