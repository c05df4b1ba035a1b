// Package recordtest records testdata/workload over an exact window and
// checks the recording against the kernel's own bookkeeping: observe's tests
// record with tracefs, observe/record's with the BPF tracer.
//
// The bookkeeping is the voluntary/nonvoluntary context-switch counters /proc kept for the same
// threads over the same window. Every context switch increments exactly one
// of the two counters of the task switched out, and the kernel emits
// sched_switch at the same spot (__schedule, in the same rq-locked,
// IRQs-off section), so the number of sched_switch events with prev_pid ==
// tid must equal the sum of the two deltas exactly.
//
// The window is made exact by recording a stopped process: the workload is
// SIGSTOPped and every thread is off its CPU in state T (see waitStopped)
// before the start counters are read and tracing starts; then SIGCONT, a run,
// SIGSTOP, and again every thread off-CPU in T before tracing stops and the
// end counters are read. No thread can switch between a counter read and the
// start or stop of tracing, and the SIGCONT wakeups and the switches into T
// are inside the traced window.
package recordtest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"temper.codes/temper-train/observe"
)

// switchTolerance is the allowed |switch-outs - (voluntary+nonvoluntary
// delta)| per thread. Zero: see the package comment.
const switchTolerance = 0

// Meta is what /proc said about the workload's threads over a recorded
// window (testdata/traces/workload-tracefs.json is one).
type Meta struct {
	RecordedAt string `json:"recorded_at"`
	Kernel     string `json:"kernel"` // uname -r
	// DurationNS is the time the workload ran: SIGCONT to SIGSTOP.
	DurationNS   int64    `json:"duration_ns"`
	PID          int32    `json:"pid"`
	WorkloadArgs []string `json:"workload_args"`
	Events       []string `json:"events"`
	Threads      []Thread `json:"threads"`
	// Overruns is the recorder's per-CPU loss count at the end of the
	// recording (tracefs: overrun + commit overrun + dropped events).
	Overruns map[int]int64 `json:"overruns"`
}

// Thread is one of the workload's threads and its context-switch counts
// over the window.
type Thread struct {
	Tid               int32  `json:"tid"`
	Comm              string `json:"comm"`
	VoluntaryDelta    int64  `json:"voluntary_delta"`
	NonvoluntaryDelta int64  `json:"nonvoluntary_delta"`
}

// Check reads the trace at path, a recording of the window RecordWorkload
// describes, and compares it with /proc's account of that window in meta.
func Check(t testing.TB, path string, meta *Meta) {
	t.Helper()
	for cpu, n := range meta.Overruns {
		if n != 0 {
			t.Errorf("tracefs lost %d events on cpu%d during the recording", n, cpu)
		}
	}
	r, err := observe.Open(path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer r.Close()

	type perThread struct {
		out     int64                       // switch-outs
		in      int64                       // switch-ins (logged only; see below)
		byState map[observe.TaskState]int64 // switch-outs by prev_state
		first   *observe.Event              // first event naming the thread
		last    observe.TaskState           // prev_state of the last switch-out
	}
	want := map[int32]*perThread{}
	for _, th := range meta.Threads {
		want[th.Tid] = &perThread{byState: map[observe.TaskState]int64{}}
	}
	threads := observe.NewThreads()
	sched := observe.NewSched(threads)
	kinds := map[observe.Kind]int64{}
	err = observe.ForEach(r, func(ev *observe.Event) error {
		kinds[ev.Kind]++
		sched.Add(ev)
		for _, tid := range []int32{ev.Tid, ev.PrevTid} {
			if p := want[tid]; p != nil && p.first == nil && ev.Kind != observe.KindThreadInfo && ev.Kind != observe.KindProcessInfo {
				e := *ev
				p.first = &e
			}
		}
		if ev.Kind == observe.KindSwitch {
			if p := want[ev.Tid]; p != nil {
				p.in++
			}
			if p := want[ev.PrevTid]; p != nil {
				p.out++
				p.byState[ev.PrevState]++
				p.last = ev.PrevState
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	sched.Finish()

	st := r.Stats()
	if lost, gaps := st.TotalLost(); lost != 0 || gaps != 0 || len(st.LostEvents) != 0 {
		t.Errorf("trace reports lost events: %v (gaps %v)", st.LostEvents, st.LostGaps)
	}
	if st.OutOfOrder != 0 {
		t.Errorf("%d events out of timestamp order", st.OutOfOrder)
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(ks)
	t.Logf("%s: %d events (%s); skipped %v; sched %+v", filepath.Base(path), st.Events, strings.Join(ks, " "), st.Skipped, sched.Stats())

	// Switch-ins are logged, not checked. Over this window they should equal
	// the switch-outs, but a switch-in is recorded as the switch-out of the
	// CPU's previous task, and on some kernels those are not all recorded: on
	// the 6.18.44-fc Firecracker VM kernel the committed trace comes from, no
	// sched_switch whose prev is CPU 1's idle task is ever recorded (nor any
	// task-context event of a few threads outside the workload), with zero
	// overruns, so every switch-in from idle on CPU 1 is missing. Switch-outs
	// of the workload's threads are complete there; they are what is checked.
	t.Logf("%7s %-13s %8s %6s %6s %6s %6s  %s", "tid", "comm", "switches", "vol", "nonvol", "diff", "ins", "switch-outs by prev_state")
	for _, want1 := range meta.Threads {
		tid := want1.Tid
		p := want[tid]
		th := threads.Lookup(tid)
		switch {
		case th == nil:
			t.Errorf("tid %d (%s): not in the trace", tid, want1.Comm)
		case th.Name != want1.Comm:
			t.Errorf("tid %d: comm %q, want %q", tid, th.Name, want1.Comm)
		case len(th.Names) != 1:
			t.Errorf("tid %d: comms %v, want only %q", tid, th.Names, want1.Comm)
		case th.Tgid != meta.PID:
			t.Errorf("tid %d (%s): tgid %d, want %d", tid, want1.Comm, th.Tgid, meta.PID)
		}
		procTotal := want1.VoluntaryDelta + want1.NonvoluntaryDelta
		diff := p.out - procTotal
		var states []string
		var blocked, preempted int64
		for s, n := range p.byState {
			states = append(states, fmt.Sprintf("%s:%d", s, n))
			switch {
			case s == observe.StatePreempted:
				preempted += n
			case s != observe.StateRunnable:
				blocked += n
			}
		}
		slices.Sort(states)
		t.Logf("%7d %-13s %8d %6d %6d %+6d %6d  %s", tid, want1.Comm, p.out, want1.VoluntaryDelta, want1.NonvoluntaryDelta, diff, p.in, strings.Join(states, " "))
		if diff < -switchTolerance || diff > switchTolerance {
			t.Errorf("tid %d (%s): %d sched_switch switch-outs, /proc counted %d (voluntary %d + nonvoluntary %d)",
				tid, want1.Comm, p.out, procTotal, want1.VoluntaryDelta, want1.NonvoluntaryDelta)
		}
		// Finer, one-sided checks: a switch-out in a sleeping state (S, D, T)
		// is always voluntary, a preemption (R+) never is. A switch-out in
		// plain R can be either (a sleep cancelled by a pending signal is
		// voluntary; a reschedule on return to user space is not).
		if blocked > want1.VoluntaryDelta {
			t.Errorf("tid %d (%s): %d switch-outs asleep, but only %d voluntary switches", tid, want1.Comm, blocked, want1.VoluntaryDelta)
		}
		if preempted > want1.NonvoluntaryDelta {
			t.Errorf("tid %d (%s): %d preemptions (R+), but only %d nonvoluntary switches", tid, want1.Comm, preempted, want1.NonvoluntaryDelta)
		}
		// The window opens with the thread stopped (its first event is the
		// SIGCONT wakeup) and closes with it switched out stopped.
		if p.first == nil || p.first.Kind != observe.KindWaking || p.first.Tid != tid {
			t.Errorf("tid %d (%s): first event %v, want the sched_waking of SIGCONT", tid, want1.Comm, p.first)
		}
		if p.out > 0 && p.last != observe.StateStopped {
			t.Errorf("tid %d (%s): last switch-out in %s, want T (SIGSTOP)", tid, want1.Comm, p.last)
		}
	}
}
