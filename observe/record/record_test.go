//go:build linux

package record

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/internal/tpcheck/tpchecktest"
	"temper.codes/temper-train/observe"
	"temper.codes/temper-train/observe/internal/recordtest"
)

// bpfRecorder records the workload with Run, the BPF tracer.
type bpfRecorder struct {
	attach string
	path   string
	cancel context.CancelFunc
	done   chan struct{}
	res    *Result
	err    error
}

func (r *bpfRecorder) Events() []string {
	return []string{"sched_switch", "sched_waking", "sched_wakeup_new", "sched_process_fork", "sched_process_exit", "task_rename"}
}

func (r *bpfRecorder) Start(t *testing.T, pid int) {
	t.Helper()
	r.path = filepath.Join(t.TempDir(), "bpf.pftrace")
	f, err := os.Create(r.path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	attached := make(chan struct{})
	go func() {
		defer close(r.done)
		r.res, r.err = Run(ctx, f, Options{Tgids: []int{pid}, Duration: time.Minute, Attach: r.attach,
			OnAttached: func() { close(attached) }})
		if cerr := f.Close(); r.err == nil {
			r.err = cerr
		}
	}()
	select {
	case <-attached:
	case <-r.done:
		t.Fatalf("Run: %v", r.err)
	}
	t.Cleanup(func() { cancel(); <-r.done })
}

func (r *bpfRecorder) Stop(t *testing.T) {
	t.Helper()
	r.cancel()
	<-r.done
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	if r.res.StopReason != StopInterrupted {
		t.Errorf("stop reason %q, want %q", r.res.StopReason, StopInterrupted)
	}
	t.Logf("Run: attach %s, %d events, %d bytes (%.1f bytes/event), emitted %v, lost %v, clamped %d, discarded %d, warnings %q",
		r.res.Attach, r.res.Events, r.res.Bytes, float64(r.res.Bytes)/float64(max(r.res.Events, 1)),
		r.res.Emitted, r.res.Lost, r.res.Clamped, r.res.Discarded, r.res.Warnings)
}

func (r *bpfRecorder) Write(t *testing.T, path string) map[int]int64 {
	t.Helper()
	if err := os.Rename(r.path, path); err != nil {
		t.Fatal(err)
	}
	lost := map[int]int64{}
	for cpu, n := range r.res.Lost {
		lost[cpu] = int64(n)
	}
	return lost
}

// requireRoot needs root to load BPF, and fails the test if tracing is not
// possible for another reason.
func requireRoot(t *testing.T) {
	t.Helper()
	need.Root(t, "to load BPF")
	if err := CheckTracing(); err != nil {
		t.Fatal(err)
	}
}

// TestRecordWorkload traces testdata/workload with the BPF tracer over an
// exact window (see recordtest) and checks the trace against /proc and
// against the wake structure the program is written to have.
func TestRecordWorkload(t *testing.T) {
	for _, mode := range []string{AttachBTF, AttachRawTP} {
		t.Run(mode, func(t *testing.T) {
			requireRoot(t)
			dir := t.TempDir()
			bin := testkit.Workload(t)
			tracePath := filepath.Join(dir, "trace.pftrace")
			rec := &bpfRecorder{attach: mode}
			meta := recordtest.RecordWorkload(t, bin, dir, tracePath, rec)
			if rec.res.Attach != mode {
				t.Errorf("attached with %s, want %s", rec.res.Attach, mode)
			}
			recordtest.Check(t, tracePath, meta)
			checkWakeEdges(t, tracePath, meta)
			data, err := os.ReadFile(tracePath)
			if err != nil {
				t.Fatal(err)
			}
			if rep := tpchecktest.Check(t, tracePath, data); rep.Filtered {
				t.Error("a default recording says it is filtered")
			}
		})
	}
}

// checkWakeEdges checks that the dominant waker of each thread, among the
// workload's own threads, is the one the program's code makes wake it:
// the acceptor wakes workers, workers wake the logger, the logger wakes
// the syncer.
func checkWakeEdges(t *testing.T, path string, meta *recordtest.Meta) {
	t.Helper()
	comm := map[int32]string{}
	for _, th := range meta.Threads {
		comm[th.Tid] = th.Comm
	}
	r, err := observe.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	edges := map[string]map[string]int{} // wakee -> waker -> count
	err = observe.ForEach(r, func(ev *observe.Event) error {
		if ev.Kind != observe.KindWaking || ev.IRQ != observe.IRQNone {
			return nil
		}
		waker, wakee := comm[ev.Pid], comm[ev.Tid]
		if waker == "" || wakee == "" {
			return nil
		}
		family := func(c string) string {
			if i := strings.LastIndexByte(c, '-'); i > 0 && strings.Trim(c[i+1:], "0123456789") == "" {
				return c[:i]
			}
			return c
		}
		wakee = family(wakee)
		if edges[wakee] == nil {
			edges[wakee] = map[string]int{}
		}
		edges[wakee][family(waker)]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ wakee, waker string }{
		{"wl-worker", "wl-acceptor"},
		{"wl-logger", "wl-worker"},
		{"wl-syncer", "wl-logger"},
	} {
		top, topN := "", 0
		for w, n := range edges[want.wakee] {
			if n > topN || n == topN && w < top {
				top, topN = w, n
			}
		}
		t.Logf("%s woken by %v", want.wakee, edges[want.wakee])
		if top != want.waker {
			t.Errorf("%s: dominant waker %q (%d), want %q; all: %v", want.wakee, top, topN, want.waker, edges[want.wakee])
		}
	}
}

// TestRecordSMTSiblings declares CPUs 0 and 1 hyperthreads of one core (this
// machine has no SMT; the tracer takes the topology it is given), runs the
// target on CPU 0 and an unrelated, frequently switching process on CPU 1,
// and checks that with FilterSwitches CPU 1's switches are recorded while (and
// only because) its declared sibling runs the target, and that by default
// they are all recorded; either way the trace says which it is.
func TestRecordSMTSiblings(t *testing.T) {
	requireRoot(t)
	need.CPUs(t, 2)
	taskset := need.Tool(t, "taskset", "util-linux")
	dir := t.TempDir()
	bin := testkit.Workload(t)
	target := exec.Command(taskset, "-c", "0", bin, "--dir", dir)
	other := exec.Command(taskset, "-c", "1", "sh", "-c", "while :; do sleep 0.002; done")
	for _, c := range []*exec.Cmd{target, other} {
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	time.Sleep(300 * time.Millisecond)
	otherCPU1 := func(siblings [][]int, filter bool) (n int64) {
		var buf bytes.Buffer
		_, err := Run(context.Background(), &buf, Options{Tgids: []int{target.Process.Pid},
			Duration: time.Second, Siblings: siblings, FilterSwitches: filter})
		if err != nil {
			t.Fatal(err)
		}
		rep := tpchecktest.Check(t, fmt.Sprintf("siblings %v, filter %v", siblings, filter), buf.Bytes())
		r, err := observe.NewReader(bytes.NewReader(buf.Bytes()), "smt")
		if err != nil {
			t.Fatal(err)
		}
		threads := observe.NewThreads()
		sched := observe.NewSched(threads)
		err = observe.ForEach(r, func(ev *observe.Event) error {
			sched.Add(ev)
			if ev.Kind != observe.KindSwitch || ev.CPU != 1 {
				return nil
			}
			tg := func(tid int32) int32 {
				if th := threads.Lookup(tid); th != nil {
					return th.Tgid
				}
				return 0
			}
			if tg(ev.Tid) != int32(target.Process.Pid) && tg(ev.PrevTid) != int32(target.Process.Pid) {
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if r.Info().Filtered != filter || rep.Filtered != filter {
			t.Errorf("filter %v: the trace says filtered=%v (reader), %v (attribute on the wire)", filter, r.Info().Filtered, rep.Filtered)
		}
		return n
	}
	with := otherCPU1([][]int{{0, 1}, {0, 1}}, true)
	without := otherCPU1(nil, true)
	all := otherCPU1(nil, false)
	t.Logf("switches on CPU 1 between non-target tasks, filtered: %d with CPU 0 as sibling, %d without; unfiltered: %d", with, without, all)
	if with < 50 {
		t.Errorf("filtered, siblings declared: %d non-target switches on CPU 1, want the sibling's occupancy (≥ 50)", with)
	}
	if without != 0 {
		t.Errorf("filtered, no siblings: %d non-target switches recorded, want 0", without)
	}
	if all < 50 {
		t.Errorf("unfiltered: %d non-target switches on CPU 1, want every switch (≥ 50)", all)
	}
}

// TestRecordLoss overflows a one-page ring buffer: the loss must be counted
// per CPU, flagged in the trace, and the trace must still read cleanly.
func TestRecordLoss(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	bin := testkit.Workload(t)
	wl := exec.Command(bin, "--dir", dir, "--rate", "5000")
	wl.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wl.Process.Kill(); wl.Wait() })
	var buf bytes.Buffer
	res, err := Run(context.Background(), &buf, Options{TraceAll: true, Duration: time.Second,
		BufferBytes: os.Getpagesize()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("events %d, emitted %v, lost %v", res.Events, res.Emitted, res.Lost)
	if res.TotalLost() == 0 {
		t.Fatal("a one-page ring buffer lost nothing; the test load is too light to test loss accounting")
	}
	var emitted uint64
	for _, n := range res.Emitted {
		emitted += n
	}
	if int64(emitted) != res.Events+res.Discarded {
		t.Errorf("kernel emitted %d events, user space wrote %d and discarded %d", emitted, res.Events, res.Discarded)
	}
	r, err := observe.NewReader(bytes.NewReader(buf.Bytes()), "loss")
	if err != nil {
		t.Fatal(err)
	}
	if err := observe.ForEach(r, func(*observe.Event) error { return nil }); err != nil {
		t.Fatalf("trace with losses does not read: %v", err)
	}
	st := r.Stats()
	_, gaps := st.TotalLost()
	if gaps == 0 {
		t.Errorf("the trace carries no lost_events flag although %d events were lost", res.TotalLost())
	}
}

// TestRecordMaxBytes stops at the --max-bytes bound.
func TestRecordMaxBytes(t *testing.T) {
	requireRoot(t)
	var buf bytes.Buffer
	const limit = 64 << 10
	res, err := Run(context.Background(), &buf, Options{TraceAll: true, Duration: 30 * time.Second, MaxBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stop %s after %d events, %d bytes", res.StopReason, res.Events, res.Bytes)
	if res.StopReason != StopMaxBytes {
		t.Errorf("stop reason %q, want %q", res.StopReason, StopMaxBytes)
	}
	// The bound is checked every 1024 events: overshoot by at most that.
	if res.Bytes < limit || res.Bytes > limit+1024*100 {
		t.Errorf("trace is %d bytes, want about %d", res.Bytes, limit)
	}
}

// TestRecordFollowsForks: processes the target forks after attach are traced
// from their first switch (the kernel side adds them to the target set).
func TestRecordFollowsForks(t *testing.T) {
	requireRoot(t)
	sh := exec.Command("sh", "-c", "read go; for i in 1 2 3; do sleep 0.05; done")
	stdin, err := sh.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	sh.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	var buf bytes.Buffer
	res, err := Run(context.Background(), &buf, Options{Tgids: []int{sh.Process.Pid},
		Duration: 10 * time.Second, StopWhenGone: true,
		OnAttached: func() { stdin.Write([]byte("go\n")) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != StopTargetGone {
		t.Errorf("stop reason %q, want %q", res.StopReason, StopTargetGone)
	}
	if len(res.Targets) != 4 {
		t.Errorf("traced thread groups %v, want the shell and its 3 sleeps", res.Targets)
	}
	r, err := observe.NewReader(bytes.NewReader(buf.Bytes()), "forks")
	if err != nil {
		t.Fatal(err)
	}
	// Every switch is recorded, other processes' sleeps too: count those of
	// the shell's children (forks the trace shows).
	children := map[int32]bool{}
	sleeps := map[int32]int{}
	err = observe.ForEach(r, func(ev *observe.Event) error {
		if ev.Kind == observe.KindFork && ev.PrevTid == int32(sh.Process.Pid) {
			children[ev.Tid] = true
		}
		if ev.Kind == observe.KindSwitch && ev.PrevComm == "sleep" && children[ev.PrevTid] {
			sleeps[ev.PrevTid]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sleeps) != 3 {
		t.Errorf("switch-outs of sleep processes: %v, want 3 processes", sleeps)
	}
}
