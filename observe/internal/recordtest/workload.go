//go:build linux

package recordtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/tracefs"
)

// recordWindow is how long the workload runs between SIGCONT and SIGSTOP.
const recordWindow = 1500 * time.Millisecond

// Switches is one thread's context-switch counters.
type Switches struct{ Vol, Nonvol int64 }

// RecordWorkload runs the workload bin, records the exact window described in
// the package comment with rec into tracePath, and returns /proc's account of
// it.
func RecordWorkload(t *testing.T, bin, dir, tracePath string, rec Recorder) *Meta {
	t.Helper()
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(dir, &sfs); err == nil && sfs.Type == 0x01021994 { // TMPFS_MAGIC
		t.Logf("note: %s is tmpfs, so the syncer's fdatasync never sleeps in D", dir)
	}
	args := []string{"--dir", dir} // defaults otherwise: rate 1000, 4 workers, 2 compute, 2 idle
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	finished := false
	t.Cleanup(func() {
		if !finished {
			cmd.Process.Kill()
			for range lines {
			}
			<-exited
		}
	})

	// Thread list, then "ready".
	meta := &Meta{PID: int32(pid), WorkloadArgs: args, Events: rec.Events()}
	deadline := time.After(10 * time.Second)
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("workload exited before ready: %s", stderr.String())
			}
			if l == "ready" {
				ready = true
				break
			}
			f := strings.Fields(l)
			if len(f) != 3 || f[0] != "thread" {
				t.Fatalf("unexpected workload output %q", l)
			}
			tid, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("unexpected workload output %q", l)
			}
			meta.Threads = append(meta.Threads, Thread{Tid: int32(tid), Comm: f[2]})
		case <-deadline:
			t.Fatal("workload not ready after 10 s")
		}
	}
	if len(meta.Threads) != 13 || meta.Threads[0].Tid != int32(pid) {
		t.Fatalf("thread list %+v: want 13 threads, wl-main first with tid %d", meta.Threads, pid)
	}
	tids := make([]int32, len(meta.Threads))
	for i, th := range meta.Threads {
		tids[i] = th.Tid
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/comm", pid, th.Tid))
		if err != nil || strings.TrimSpace(string(comm)) != th.Comm {
			t.Fatalf("/proc says tid %d is %q (%v), workload said %q", th.Tid, comm, err, th.Comm)
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid)); err != nil || len(ents) != len(tids) {
		t.Fatalf("/proc/%d/task has %d entries (%v), want %d", pid, len(ents), err, len(tids))
	}
	time.Sleep(200 * time.Millisecond) // past start-up

	signal := func(sig syscall.Signal) {
		t.Helper()
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatalf("kill %v: %v", sig, err)
		}
	}
	signal(syscall.SIGSTOP)
	start := WaitStopped(t, pid, tids)

	rec.Start(t, pid)
	t0 := time.Now()
	signal(syscall.SIGCONT)
	time.Sleep(recordWindow)
	signal(syscall.SIGSTOP)
	meta.DurationNS = time.Since(t0).Nanoseconds()
	stopped := WaitStopped(t, pid, tids)
	rec.Stop(t)
	end := ReadSwitches(t, pid, tids)
	for i, tid := range tids {
		if end[i] != stopped[i] {
			t.Fatalf("tid %d switched while stopped: %+v then %+v", tid, stopped[i], end[i])
		}
		meta.Threads[i].VoluntaryDelta = end[i].Vol - start[i].Vol
		meta.Threads[i].NonvoluntaryDelta = end[i].Nonvol - start[i].Nonvol
	}

	// Let the workload finish cleanly while the trace is copied out.
	signal(syscall.SIGTERM)
	signal(syscall.SIGCONT)
	meta.Overruns = rec.Write(t, tracePath)
	var last string
	for l := range lines {
		last = l
	}
	werr := <-exited
	finished = true
	if werr != nil || !strings.HasPrefix(last, "done ") {
		t.Errorf("workload did not shut down cleanly: %v, last line %q, stderr %q", werr, last, stderr.String())
	}
	osrel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	meta.Kernel = strings.TrimSpace(string(osrel))
	meta.RecordedAt = time.Now().UTC().Format(time.RFC3339)
	fi, _ := os.Stat(tracePath)
	t.Logf("recorded %v (%d bytes of text) of pid %d on %s: %s; overruns %v",
		time.Duration(meta.DurationNS), fi.Size(), pid, meta.Kernel, last, meta.Overruns)
	return meta
}

// Recorder is a way to record the workload: tracefs (the reference) or
// observe/record's BPF tracer.
type Recorder interface {
	// Events names the kernel events recorded.
	Events() []string
	// Start begins recording pid's events; when it returns, recording is on.
	Start(t *testing.T, pid int)
	// Stop ends recording: nothing after it is recorded.
	Stop(t *testing.T)
	// Write puts the trace at path and returns the per-CPU loss counts.
	Write(t *testing.T, path string) map[int]int64
}

// Tracefs records through a private tracefs instance.
type Tracefs struct{ sess *tracefs.Session }

func (r *Tracefs) Events() []string { return tracefs.DefaultEvents }

func (r *Tracefs) Start(t *testing.T, pid int) {
	t.Helper()
	sess, err := tracefs.Start(tracefs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	r.sess = sess
}

func (r *Tracefs) Stop(t *testing.T) {
	t.Helper()
	if err := r.sess.Stop(); err != nil {
		t.Fatal(err)
	}
}

func (r *Tracefs) Write(t *testing.T, path string) map[int]int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.sess.WriteTrace(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	overruns, err := r.sess.Overruns()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.sess.Close(); err != nil {
		t.Fatal(err)
	}
	return overruns
}

// WaitStopped waits until every thread is in state T and off its CPU, with
// counters that no longer change, and returns those counters.
//
// State T alone is not enough: a thread sets TASK_STOPPED in do_signal_stop
// and only then calls schedule(), and it may be preempted in between (a
// nonvoluntary switch, after which it is queued to run again). /proc's wchan
// is non-zero only for a task that is not on a run queue (get_wchan checks
// !on_rq), i.e. one that has completed its switch into T and will not run
// before SIGCONT; the switch counter and the sched_switch event are written
// together in __schedule, so once wchan shows it, both are final. Two equal
// readings of the counters, one poll apart, confirm it.
func WaitStopped(t *testing.T, pid int, tids []int32) []Switches {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var prev []Switches
	for {
		settled := true
		var why string
		for _, tid := range tids {
			state, wchan := taskState(t, pid, tid)
			if state != "T" || wchan == "" || wchan == "0" {
				settled, why = false, fmt.Sprintf("tid %d: state %s, wchan %q", tid, state, wchan)
				break
			}
		}
		cur := ReadSwitches(t, pid, tids)
		if settled && prev != nil && slices.Equal(prev, cur) {
			return cur
		}
		if !settled {
			cur = nil
		}
		prev = cur
		if time.Now().After(deadline) {
			t.Fatalf("workload not stopped after 10 s: %s", why)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// taskState returns a thread's state letter and wchan.
func taskState(t *testing.T, pid int, tid int32) (string, string) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task/%d/", pid, tid)
	stat, err := os.ReadFile(dir + "stat")
	if err != nil {
		t.Fatal(err)
	}
	// "tid (comm) S ...": the comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(f) == 0 {
		t.Fatalf("%sstat: %q", dir, stat)
	}
	wchan, err := os.ReadFile(dir + "wchan")
	if err != nil {
		t.Fatal(err)
	}
	return f[0], strings.TrimSpace(string(wchan))
}

// ReadSwitches reads voluntary_ctxt_switches and nonvoluntary_ctxt_switches
// of each thread from /proc/PID/task/TID/status.
func ReadSwitches(t *testing.T, pid int, tids []int32) []Switches {
	t.Helper()
	out := make([]Switches, len(tids))
	for i, tid := range tids {
		p := fmt.Sprintf("/proc/%d/task/%d/status", pid, tid)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for line := range strings.SplitSeq(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			var dst *int64
			switch k {
			case "voluntary_ctxt_switches":
				dst = &out[i].Vol
			case "nonvoluntary_ctxt_switches":
				dst = &out[i].Nonvol
			default:
				continue
			}
			if *dst, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil {
				t.Fatalf("%s: %s: %v", p, line, err)
			}
			found++
		}
		if found != 2 {
			t.Fatalf("%s: no ctxt_switches lines", p)
		}
	}
	return out
}
