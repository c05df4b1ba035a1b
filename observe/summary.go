package observe

import "sort"

// Summary is what a trace says at a glance: its span, event counts, losses,
// and per thread how its time divided between states.
type Summary struct {
	Info      TraceInfo
	Read      ReadStats
	Sched     SchedStats
	FirstTS   int64
	LastTS    int64
	Events    map[Kind]int64
	CPUs      int // CPUs that recorded events
	Threads   []ThreadSummary
	Processes int
}

// ThreadSummary is one thread's share of the trace.
type ThreadSummary struct {
	UTID      int
	Tid, Tgid int32
	Name      string
	Running   int64 // ns on a CPU
	Runnable  int64 // ns waiting for a CPU after a wakeup (R)
	Preempted int64 // ns waiting for a CPU after being preempted (R+)
	Sleeping  int64 // ns in S
	DiskWait  int64 // ns in D
	Other     int64 // ns in any other state (T, I, P, ...)
	// SwitchOuts counts the thread's sched_switch-outs; Preemptions those that
	// left it runnable (R or R+): involuntary switches. Recent kernels report a
	// preemption at return to user space as plain R; only in-kernel preemption
	// sets the R+ bit.
	SwitchOuts, Preemptions int64
	Wakeups                 int64 // wakings that made it runnable (not spurious)
	CPUsUsed                int   // distinct CPUs it ran on
}

// Summarize reads a whole trace and summarises it. Intervals still open when
// the trace ends are counted up to the last event.
func Summarize(r Reader) (*Summary, error) {
	sum := &Summary{Events: map[Kind]int64{}}
	threads := NewThreads()
	s := NewSched(threads)
	var per []ThreadSummary
	cpusOf := map[int]map[int32]bool{}
	grow := func(u int) *ThreadSummary {
		for u >= len(per) {
			per = append(per, ThreadSummary{UTID: len(per)})
		}
		return &per[u]
	}
	finished := false
	add := func(r StateRow) {
		if r.Dur < 0 {
			if !finished {
				// Left open after data loss: its end is unknown, so count none of it.
				return
			}
			r.Dur = sum.LastTS - r.TS
		}
		t := grow(r.UTID)
		switch r.State {
		case StateRunning:
			t.Running += r.Dur
			if cpusOf[r.UTID] == nil {
				cpusOf[r.UTID] = map[int32]bool{}
			}
			cpusOf[r.UTID][r.CPU] = true
		case StateRunnable:
			t.Runnable += r.Dur
			if r.Waker >= 0 {
				t.Wakeups++
			}
		case StateRunnable | StatePreempted:
			t.Preempted += r.Dur
		case StateSleeping:
			t.Sleeping += r.Dur
		case StateUninterruptible:
			t.DiskWait += r.Dur
		default:
			t.Other += r.Dur
		}
	}
	s.Rows = RowFuncs{OnState: add}
	cpus := map[int32]bool{}
	err := ForEach(r, func(ev *Event) error {
		if sum.FirstTS == 0 || ev.TS < sum.FirstTS {
			sum.FirstTS = ev.TS
		}
		if ev.TS > sum.LastTS {
			sum.LastTS = ev.TS
		}
		sum.Events[ev.Kind]++
		if ev.CPU >= 0 {
			cpus[ev.CPU] = true
		}
		if ev.Kind == KindSwitch && ev.PrevTid != 0 {
			u := threads.Get(ev.PrevTid)
			t := grow(u)
			t.SwitchOuts++
			if ev.PrevState.Runnable() {
				t.Preemptions++
			}
		}
		s.Add(ev)
		return nil
	})
	if err != nil {
		return nil, err
	}
	finished = true
	s.Finish()
	sum.Info, sum.Read, sum.Sched, sum.CPUs = r.Info(), r.Stats(), s.Stats(), len(cpus)
	tgids := map[int32]bool{}
	for _, th := range threads.All() {
		if th.UTID == 0 {
			continue
		}
		t := grow(th.UTID)
		t.Tid, t.Tgid, t.Name = th.Tid, th.Tgid, th.Name
		t.CPUsUsed = len(cpusOf[th.UTID])
		if th.Tgid != 0 {
			tgids[th.Tgid] = true
		}
		sum.Threads = append(sum.Threads, *t)
	}
	sum.Processes = len(tgids)
	sort.SliceStable(sum.Threads, func(i, j int) bool {
		a, b := sum.Threads[i], sum.Threads[j]
		if a.Running != b.Running {
			return a.Running > b.Running
		}
		return a.UTID < b.UTID
	})
	return sum, nil
}
