package observe

// Sched reconstructs what trace_processor puts in its `sched` and
// `thread_state` tables, as a stream: feed it events in timestamp order with
// Add, and it hands Rows every CPU slice and every thread state interval once
// they are complete; Finish reports the ones still open with Dur -1.
//
// The rules are trace_processor's (src/trace_processor/importers/common/
// thread_state_tracker.cc and friends), so numbers agree with what a user sees
// in ui.perfetto.dev:
//   - a thread is Running from its switch-in to its switch-out and then in the
//     switch's prev_state (R+ when preempted, S, D, ...);
//   - sched_waking of a thread that is not already R or Running closes its
//     blocked interval and opens R, with the task current on the waking CPU as
//     waker; a waking of an R or Running thread is spurious and changes nothing;
//   - task_newtask opens R with the creating task as waker;
//   - sched_wakeup and sched_wakeup_new do not change states (sched_waking
//     already did);
//   - sched_blocked_reason sets IOWait on the thread's last blocked interval;
//   - the idle task (utid 0) has slices but no state intervals.
type Sched struct {
	threads *Threads
	// Rows receives the rows; nil drops them.
	Rows Rows
	// SkipRunning leaves Running intervals out of Rows.State: a consumer
	// that takes time on CPU from slices saves a call on every switch.
	SkipRunning bool
	// SkipIdle leaves the idle task's slices out of Rows.Slice: a consumer of
	// threads' own time saves a call on every other switch of a CPU that
	// idles between tasks.
	SkipIdle bool

	cpus  []pendingSlice
	state []threadState // by utid
	stats SchedStats

	lastPrev, lastNext int // UTIDs of the last switch's outgoing and incoming tasks
}

// Rows consumes what Sched reconstructs. It is an interface, not func
// fields, for speed: a call through it reaches the consumer's method
// directly, where a method value stored in a func goes through a wrapper that
// spills and reloads every field of the row.
type Rows interface {
	// Slice receives a CPU slice: a thread's stay on a CPU.
	Slice(SliceRow)
	// State receives a thread state interval.
	State(StateRow)
}

// RowFuncs adapts two funcs to Rows; a nil func drops its rows.
type RowFuncs struct {
	OnSlice func(SliceRow)
	OnState func(StateRow)
}

// Slice calls f.OnSlice when set.
func (f RowFuncs) Slice(r SliceRow) {
	if f.OnSlice != nil {
		f.OnSlice(r)
	}
}

// State calls f.OnState when set.
func (f RowFuncs) State(r StateRow) {
	if f.OnState != nil {
		f.OnState(r)
	}
}

// SliceRow is one row of trace_processor's sched table.
type SliceRow struct {
	TS       int64
	Dur      int64 // -1 when the trace ended first
	CPU      int32
	UTID     int
	Prio     int32
	EndState TaskState // prev_state of the switch that ended it
	Ended    bool      // EndState is known
}

// StateRow is one row of trace_processor's thread_state table.
type StateRow struct {
	TS     int64
	Dur    int64 // -1 when the trace ended first (or, after data loss, never ended)
	UTID   int
	State  TaskState  // StateRunning, StateRunnable (R), R+, S, D, ...
	CPU    int32      // for Running rows; -1 otherwise
	Waker  int        // for R rows opened by a waking or task creation: the waker's UTID, else -1
	IRQ    IRQContext // for R rows: the waking happened in interrupt context
	IOWait int8       // for blocked rows: 1 or 0 when sched_blocked_reason said, else -1
}

// SchedStats counts events the tracker could not use as they came.
type SchedStats struct {
	SpuriousWakings   int64 // wakings of threads already R or Running
	MismatchedSwitch  int64 // switch whose prev was not the task the CPU was running
	UnclosedRunning   int64 // switch-out of a thread not known to be Running (data loss)
	LateBlockedReason int64 // sched_blocked_reason with no blocked interval to annotate
}

// pendingSlice is the slice a CPU is running: what SliceRow needs besides
// its end. It and threadState are kept small because every event touches one
// or two of them, and their size decides how many threads fit in the cache.
type pendingSlice struct {
	ts    int64
	gen   uint64 // Threads.gen when utid was resolved from tid
	utid  int32
	tid   int32
	prio  int32
	valid bool
}

// current returns the UTID of tid when it is the task p runs, without a
// lookup, as long as no thread was created or ended since p resolved it.
// Switches and wakings name the task current on their CPU, so most lookups
// end here.
func (s *Sched) current(p *pendingSlice, tid int32) int {
	if p.valid && p.tid == tid && p.gen == s.threads.gen {
		return int(p.utid)
	}
	return s.utid(tid)
}

// threadState is a thread's open state interval and its held one, without the
// fields a StateRow can be rebuilt from (the UTID is its index, Dur is -1
// while open).
type threadState struct {
	ts    int64 // start of the open interval
	cpu   int32 // CPU of a Running interval, else -1
	waker int32 // waker UTID of an R interval opened by a waking, else -1
	state TaskState
	irq   IRQContext
	io    int8 // IOWait of the open interval
	open  bool

	// held is the last closed blocked interval, kept back until the thread
	// blocks again because sched_blocked_reason may still annotate it. Only
	// a switch-out opens a blocked interval, so a held one always has CPU
	// and Waker -1 and no IRQ context: only these fields vary.
	held      bool
	heldIO    int8
	heldState TaskState
	heldTS    int64
	heldDur   int64
}

// NewSched returns a tracker that resolves threads in t.
func NewSched(t *Threads) *Sched { return &Sched{threads: t} }

// Threads returns the thread table the tracker fills.
func (s *Sched) Threads() *Threads { return s.threads }

// LastSwitch returns the UTIDs of the outgoing and incoming task of the last
// switch Add applied, so a caller that follows a switch with its own
// per-thread accounting need not resolve the tids again.
func (s *Sched) LastSwitch() (prev, next int) { return s.lastPrev, s.lastNext }

// Stats returns what the tracker counted.
func (s *Sched) Stats() SchedStats { return s.stats }

// utid resolves tid, creating the thread and its state on first reference.
func (s *Sched) utid(tid int32) int {
	u := s.threads.Get(tid)
	if u >= len(s.state) {
		s.growState(u)
	}
	return u
}

// cpu returns the slice CPU cpu is running (a zero one before its first
// switch).
func (s *Sched) cpu(cpu int32) *pendingSlice {
	if int(cpu) >= len(s.cpus) {
		s.cpus = append(s.cpus, make([]pendingSlice, int(cpu)+1-len(s.cpus))...)
	}
	return &s.cpus[cpu]
}

func (s *Sched) growState(u int) {
	for u >= len(s.state) {
		s.state = append(s.state, threadState{cpu: -1, waker: -1, io: -1})
	}
}

// Add applies one event.
func (s *Sched) Add(ev *Event) {
	t := s.threads
	switch ev.Kind {
	case KindSwitch:
		s.switchEvent(ev)
		return
	case KindThreadInfo:
		u := s.utid(ev.Tid)
		if ev.Tgid != 0 {
			t.all[u].Tgid = ev.Tgid
		}
		t.setName(u, ev.TS, ev.Comm)
		return
	case KindProcessInfo:
		u := s.utid(ev.Tid)
		t.all[u].Tgid = ev.Tid
		if len(ev.Args) > 0 {
			t.all[u].Cmdline = ev.Args
		}
		return
	}
	waker := -1
	if ev.Pid >= 0 {
		// The current task is resolved first, as trace_processor does.
		if ev.CPU >= 0 {
			waker = s.current(s.cpu(ev.CPU), ev.Pid)
		} else {
			waker = s.utid(ev.Pid)
		}
	}
	switch ev.Kind {
	case KindWaking:
		u := s.utid(ev.Tid)
		t.setName(u, ev.TS, ev.Comm)
		s.waking(ev.TS, u, waker, ev.IRQ)
	case KindNewTask:
		if ev.Tid == 0 {
			return // boot tracing: init "creates" the idle task
		}
		var tgid int32
		if ev.CloneFlags&cloneThread != 0 {
			if waker >= 0 {
				tgid = t.all[waker].Tgid
			}
		} else {
			tgid = ev.Tid
		}
		u := t.start(ev.TS, ev.Tid)
		s.growState(u)
		t.all[u].Tgid = tgid
		t.setName(u, ev.TS, ev.Comm)
		if waker >= 0 {
			s.open(u, ev.TS, StateRunnable, -1, int32(waker), IRQNone)
		}
	case KindRename:
		t.setName(s.utid(ev.Tid), ev.TS, ev.Comm)
	case KindExit:
		u := s.utid(ev.Tid)
		t.all[u].ExitTS = ev.TS
		if ev.Tgid != 0 {
			t.all[u].Tgid = ev.Tgid
		}
	case KindFree:
		t.end(ev.TS, ev.Tid)
	case KindBlockedReason:
		u := s.utid(ev.Tid)
		st := &s.state[u]
		var io int8
		if ev.IOWait {
			io = 1
		}
		switch {
		case st.open && blocked(st.state):
			st.io = io
		case st.held:
			st.heldIO = io
		default:
			s.stats.LateBlockedReason++
		}
	case KindWakeup, KindWakeupNew, KindFork:
		// Recorded for analysis; they do not change thread states.
		if ev.Kind != KindFork {
			s.utid(ev.Tid)
		}
	}
}

const cloneThread = 0x10000 // CLONE_THREAD

// blocked is trace_processor's IsBlocked: everything but R and Running.
func blocked(st TaskState) bool { return st != StateRunnable && st != StateRunning }

func (s *Sched) switchEvent(ev *Event) {
	t := s.threads
	p := s.cpu(ev.CPU)
	next := s.utid(ev.Tid)
	prev := s.current(p, ev.PrevTid)
	s.lastPrev, s.lastNext = prev, next
	t.setName(next, ev.TS, ev.Comm)
	t.setName(prev, ev.TS, ev.PrevComm)

	if p.valid {
		// The row is built in the call, from scalars. Built first and then
		// amended, it was copied into the call by wide loads of fields just
		// stored narrower: a store-forwarding stall.
		dur, end, ended := int64(-1), TaskState(0), false
		if p.tid == ev.PrevTid {
			dur, end, ended = ev.TS-p.ts, ev.PrevState, true
		} else {
			s.stats.MismatchedSwitch++
		}
		if s.wantsSlice(p.utid) {
			s.Rows.Slice(SliceRow{TS: p.ts, Dur: dur, CPU: ev.CPU, UTID: int(p.utid), Prio: p.prio, EndState: end, Ended: ended})
		}
	}
	p.ts, p.utid, p.tid, p.prio, p.valid, p.gen = ev.TS, int32(next), ev.Tid, ev.Prio, true, t.gen

	if prev != 0 {
		st := &s.state[prev]
		if st.open && st.state != StateRunning {
			s.stats.UnclosedRunning++
			s.emitOpen(prev, st, -1) // data loss: leave its end unknown
			st.open = false
		}
		s.open(prev, ev.TS, ev.PrevState, -1, -1, IRQNone)
	}
	if next != 0 {
		s.open(next, ev.TS, StateRunning, ev.CPU, -1, IRQNone)
	}
}

func (s *Sched) waking(ts int64, u, waker int, irq IRQContext) {
	if u == 0 {
		return
	}
	st := &s.state[u]
	if st.open && !blocked(st.state) {
		s.stats.SpuriousWakings++
		return
	}
	s.open(u, ts, StateRunnable, -1, int32(waker), irq)
}

// open closes the thread's current interval at ts and opens one in state
// (its IOWait unknown until sched_blocked_reason says).
func (s *Sched) open(u int, ts int64, state TaskState, cpu, waker int32, irq IRQContext) {
	st := &s.state[u]
	if st.open {
		if blocked(st.state) {
			if st.held {
				s.emitHeld(u, st)
			}
			st.held, st.heldIO, st.heldState = true, st.io, st.state
			st.heldTS, st.heldDur = st.ts, ts-st.ts
		} else if s.wantsOpen(st) { // checked before the call: most closed intervals are Running
			s.emitOpen(u, st, ts-st.ts)
		}
	}
	if st.held && blocked(state) {
		s.emitHeld(u, st)
		st.held = false
	}
	st.ts, st.cpu, st.waker, st.state, st.irq, st.io, st.open = ts, cpu, waker, state, irq, -1, true
}

// wantsSlice says whether Rows takes a slice of UTID u: not the idle task's
// when SkipIdle is set.
func (s *Sched) wantsSlice(u int32) bool {
	return s.Rows != nil && !(s.SkipIdle && u == 0)
}

// wantsOpen says whether Rows takes the open interval st.
func (s *Sched) wantsOpen(st *threadState) bool {
	return s.Rows != nil && !(s.SkipRunning && st.state == StateRunning)
}

// emitOpen reports the open interval of thread u with length dur.
func (s *Sched) emitOpen(u int, st *threadState, dur int64) {
	if s.wantsOpen(st) {
		s.Rows.State(StateRow{TS: st.ts, Dur: dur, UTID: u, State: st.state, CPU: st.cpu,
			Waker: int(st.waker), IRQ: st.irq, IOWait: st.io})
	}
}

// emitHeld reports the held blocked interval of thread u.
func (s *Sched) emitHeld(u int, st *threadState) {
	if s.Rows != nil {
		s.Rows.State(StateRow{TS: st.heldTS, Dur: st.heldDur, UTID: u, State: st.heldState, CPU: -1,
			Waker: -1, IOWait: st.heldIO})
	}
}

// Finish reports every interval and slice still open, with Dur -1.
func (s *Sched) Finish() {
	for i := range s.cpus {
		if p := &s.cpus[i]; p.valid {
			if s.wantsSlice(p.utid) {
				s.Rows.Slice(SliceRow{TS: p.ts, Dur: -1, CPU: int32(i), UTID: int(p.utid), Prio: p.prio})
			}
			p.valid = false
		}
	}
	for u := range s.state {
		st := &s.state[u]
		if st.held {
			s.emitHeld(u, st)
			st.held = false
		}
		if st.open {
			s.emitOpen(u, st, -1)
			st.open = false
		}
	}
}
