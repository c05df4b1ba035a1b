package analyze

import (
	"io"
	"testing"

	"temper.codes/temper-train/observe"
)

// sliceReader is an observe.Reader over events built in a test.
type sliceReader struct {
	evs []observe.Event
	i   int
}

func (r *sliceReader) Next(ev *observe.Event) error {
	if r.i >= len(r.evs) {
		return io.EOF
	}
	*ev = r.evs[r.i]
	r.i++
	return nil
}
func (r *sliceReader) Info() observe.TraceInfo {
	return observe.TraceInfo{Format: "test", KernelRelease: "6.18.0"}
}
func (r *sliceReader) Stats() observe.ReadStats { return observe.ReadStats{Events: int64(r.i)} }
func (r *sliceReader) Close() error             { return nil }

// trace builds an event stream. Times are in microseconds from 1 s.
type trace struct {
	evs  []observe.Event
	comm map[int32]string
}

func newTrace() *trace { return &trace{comm: map[int32]string{0: "swapper"}} }

func us(t int64) int64 { return 1e9 + t*1000 }

// thread declares a thread's identity (as a process tree would).
func (b *trace) thread(tid, tgid int32, comm string) *trace {
	b.comm[tid] = comm
	b.evs = append(b.evs, observe.Event{TS: us(0), Kind: observe.KindThreadInfo, CPU: -1, Pid: -1, Tid: tid, Tgid: tgid, Comm: comm})
	return b
}

// process declares a process with its parent.
func (b *trace) process(pid, ppid int32) *trace {
	b.evs = append(b.evs, observe.Event{TS: us(0), Kind: observe.KindProcessInfo, CPU: -1, Pid: -1, Tid: pid, PrevTid: ppid})
	return b
}

// sw is a sched_switch on cpu at t µs: prev leaves in state st, next runs.
func (b *trace) sw(t int64, cpu int32, prev int32, st observe.TaskState, next int32) *trace {
	b.evs = append(b.evs, observe.Event{TS: us(t), Kind: observe.KindSwitch, CPU: cpu, Pid: prev,
		PrevTid: prev, PrevComm: b.comm[prev], PrevPrio: 120, PrevState: st,
		Tid: next, Comm: b.comm[next], Prio: 120})
	return b
}

// wake is a sched_waking on cpu at t µs: current task waker wakes wakee.
func (b *trace) wake(t int64, cpu int32, waker, wakee int32, irq observe.IRQContext) *trace {
	b.evs = append(b.evs, observe.Event{TS: us(t), Kind: observe.KindWaking, CPU: cpu, Pid: waker,
		Tid: wakee, Comm: b.comm[wakee], Prio: 120, TargetCPU: cpu, IRQ: irq})
	return b
}

// fork is a sched_process_fork: parent creates child.
func (b *trace) fork(t int64, cpu int32, parent, child int32, comm string) *trace {
	b.comm[child] = comm
	b.evs = append(b.evs, observe.Event{TS: us(t), Kind: observe.KindFork, CPU: cpu, Pid: parent,
		PrevTid: parent, PrevComm: b.comm[parent], Tid: child, Comm: comm})
	return b
}

func (b *trace) reader() observe.Reader { return &sliceReader{evs: b.evs} }

func (b *trace) analyze(t *testing.T, opts Options) *Analysis {
	t.Helper()
	if opts.Path == "" {
		opts.Path = t.Name()
	}
	a, err := Trace(b.reader(), opts)
	if err != nil {
		t.Fatalf("Analyze: %v", err)
	}
	return a
}

func threadByTid(t *testing.T, a *Analysis, tid int32) *Thread {
	t.Helper()
	for i := range a.Threads {
		if a.Threads[i].Tid == tid {
			return &a.Threads[i]
		}
	}
	t.Fatalf("tid %d not among the analysed threads", tid)
	return nil
}

const (
	stR  = observe.StateRunnable
	stRp = observe.StateRunnable | observe.StatePreempted
	stS  = observe.StateSleeping
	stD  = observe.StateUninterruptible
	stI  = observe.StateIdle
)
