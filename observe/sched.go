package observe

// Sched reconstructs what trace_processor puts in its `sched` and
// `thread_state` tables, as a stream: feed it events in timestamp order with
// Add, and it calls OnSlice for every CPU slice and OnState for every thread
// state interval once they are complete; Finish reports the ones still open
// with Dur -1.
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
	// OnSlice receives each CPU slice: a thread's stay on a CPU.
	OnSlice func(SliceRow)
	// OnState receives each thread state interval.
	OnState func(StateRow)

	cpus  []pendingSlice
	state []threadRow // by utid: the open interval
	stats SchedStats
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

type pendingSlice struct {
	valid bool
	tid   int32
	row   SliceRow
}

type threadRow struct {
	open bool
	row  StateRow
	// held is the last closed blocked interval, kept back until the thread
	// blocks again because sched_blocked_reason may still annotate it.
	held    bool
	heldRow StateRow
}

// NewSched returns a tracker that resolves threads in t.
func NewSched(t *Threads) *Sched { return &Sched{threads: t} }

// Threads returns the thread table the tracker fills.
func (s *Sched) Threads() *Threads { return s.threads }

// Stats returns what the tracker counted.
func (s *Sched) Stats() SchedStats { return s.stats }

func (s *Sched) utid(tid int32) int {
	u := s.threads.Get(tid)
	for u >= len(s.state) {
		s.state = append(s.state, threadRow{})
	}
	return u
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
		waker = s.utid(ev.Pid) // the current task is resolved first, as trace_processor does
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
		for u >= len(s.state) {
			s.state = append(s.state, threadRow{})
		}
		t.all[u].Tgid = tgid
		t.setName(u, ev.TS, ev.Comm)
		if waker >= 0 {
			s.open(u, StateRow{TS: ev.TS, State: StateRunnable, CPU: -1, Waker: waker, IOWait: -1})
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
		case st.open && blocked(st.row.State):
			st.row.IOWait = io
		case st.held:
			st.heldRow.IOWait = io
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
	next := s.utid(ev.Tid)
	prev := s.utid(ev.PrevTid)
	t.setName(next, ev.TS, ev.Comm)
	t.setName(prev, ev.TS, ev.PrevComm)

	for int(ev.CPU) >= len(s.cpus) {
		s.cpus = append(s.cpus, pendingSlice{})
	}
	p := &s.cpus[ev.CPU]
	if p.valid {
		if p.tid == ev.PrevTid {
			p.row.Dur = ev.TS - p.row.TS
			p.row.EndState, p.row.Ended = ev.PrevState, true
		} else {
			s.stats.MismatchedSwitch++
		}
		s.emitSlice(p.row)
	}
	*p = pendingSlice{valid: true, tid: ev.Tid,
		row: SliceRow{TS: ev.TS, Dur: -1, CPU: ev.CPU, UTID: next, Prio: ev.Prio}}

	if prev != 0 {
		st := &s.state[prev]
		if st.open && st.row.State != StateRunning {
			s.stats.UnclosedRunning++
			s.emitState(st.row) // data loss: leave its end unknown
			st.open = false
		}
		s.open(prev, StateRow{TS: ev.TS, State: ev.PrevState, CPU: -1, Waker: -1, IOWait: -1})
	}
	if next != 0 {
		s.open(next, StateRow{TS: ev.TS, State: StateRunning, CPU: ev.CPU, Waker: -1, IOWait: -1})
	}
}

func (s *Sched) waking(ts int64, u, waker int, irq IRQContext) {
	if u == 0 {
		return
	}
	st := &s.state[u]
	if st.open && !blocked(st.row.State) {
		s.stats.SpuriousWakings++
		return
	}
	s.open(u, StateRow{TS: ts, State: StateRunnable, CPU: -1, Waker: waker, IRQ: irq, IOWait: -1})
}

// open closes the thread's current interval at row.TS and opens row.
func (s *Sched) open(u int, row StateRow) {
	st := &s.state[u]
	if st.open {
		st.row.Dur = row.TS - st.row.TS
		if blocked(st.row.State) {
			s.hold(st)
		} else {
			s.emitState(st.row)
		}
	}
	if blocked(row.State) && st.held {
		s.emitState(st.heldRow)
		st.held = false
	}
	row.UTID, row.Dur = u, -1
	st.open, st.row = true, row
}

func (s *Sched) hold(st *threadRow) {
	if st.held {
		s.emitState(st.heldRow)
	}
	st.held, st.heldRow = true, st.row
}

func (s *Sched) emitSlice(r SliceRow) {
	if s.OnSlice != nil {
		s.OnSlice(r)
	}
}

func (s *Sched) emitState(r StateRow) {
	if s.OnState != nil {
		s.OnState(r)
	}
}

// Finish reports every interval and slice still open, with Dur -1.
func (s *Sched) Finish() {
	for i := range s.cpus {
		if p := &s.cpus[i]; p.valid {
			s.emitSlice(p.row)
			p.valid = false
		}
	}
	for u := range s.state {
		st := &s.state[u]
		if st.held {
			s.emitState(st.heldRow)
			st.held = false
		}
		if st.open {
			s.emitState(st.row)
			st.open = false
		}
	}
}
