package observe

// The thread-state tracker as it was before it was tuned for speed (a map
// from tid to UTID, whole rows kept per thread and per CPU), kept verbatim as
// the reference the fast one must match row for row: see sched_equiv_test.go.

type refThreads struct {
	all  []*Thread
	live map[int32]int
}

// newRefThreads returns a table holding only the idle task.
func newRefThreads() *refThreads {
	return &refThreads{
		all:  []*Thread{{UTID: 0, Tid: 0, Name: "swapper"}},
		live: map[int32]int{0: 0},
	}
}

// All returns every thread, indexed by UTID.
func (t *refThreads) All() []*Thread { return t.all }

// Len is the number of UTIDs assigned so far.
func (t *refThreads) Len() int { return len(t.all) }

// Lookup returns the live thread with this tid, or nil.
func (t *refThreads) Lookup(tid int32) *Thread {
	if u, ok := t.live[tid]; ok {
		return t.all[u]
	}
	return nil
}

// Get returns the UTID of the live thread with this tid, creating it on first
// reference.
func (t *refThreads) Get(tid int32) int {
	if u, ok := t.live[tid]; ok {
		return u
	}
	return t.start(0, tid)
}

func (t *refThreads) start(ts int64, tid int32) int {
	u := len(t.all)
	t.all = append(t.all, &Thread{UTID: u, Tid: tid, StartTS: ts})
	t.live[tid] = u
	return u
}

// end marks the thread with this tid freed; a later reference to the tid is a
// new thread.
func (t *refThreads) end(ts int64, tid int32) {
	u, ok := t.live[tid]
	if !ok || u == 0 {
		return
	}
	t.all[u].EndTS = ts
	delete(t.live, tid)
}

// setName records a comm. The idle task keeps its name: every CPU's idle task
// calls itself swapper/N, but they are one thread here.
func (t *refThreads) setName(u int, ts int64, name string) {
	if u == 0 || name == "" || name == "<...>" {
		return
	}
	th := t.all[u]
	if th.Name == name {
		return
	}
	th.Name = name
	th.Names = append(th.Names, NameChange{TS: ts, Name: name})
}

type refSched struct {
	threads *refThreads
	// OnSlice receives each CPU slice: a thread's stay on a CPU.
	OnSlice func(SliceRow)
	// OnState receives each thread state interval.
	OnState func(StateRow)

	cpus  []refPendingSlice
	state []refThreadRow // by utid: the open interval
	stats SchedStats
}

type refPendingSlice struct {
	valid bool
	tid   int32
	row   SliceRow
}

type refThreadRow struct {
	open bool
	row  StateRow
	// held is the last closed blocked interval, kept back until the thread
	// blocks again because sched_blocked_reason may still annotate it.
	held    bool
	heldRow StateRow
}

// newRefSched returns a reference tracker that resolves threads in t.
func newRefSched(t *refThreads) *refSched { return &refSched{threads: t} }

// Threads returns the thread table the tracker fills.
func (s *refSched) Threads() *refThreads { return s.threads }

// Stats returns what the tracker counted.
func (s *refSched) Stats() SchedStats { return s.stats }

func (s *refSched) utid(tid int32) int {
	u := s.threads.Get(tid)
	for u >= len(s.state) {
		s.state = append(s.state, refThreadRow{})
	}
	return u
}

// Add applies one event.
func (s *refSched) Add(ev *Event) {
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
			s.state = append(s.state, refThreadRow{})
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

func (s *refSched) switchEvent(ev *Event) {
	t := s.threads
	next := s.utid(ev.Tid)
	prev := s.utid(ev.PrevTid)
	t.setName(next, ev.TS, ev.Comm)
	t.setName(prev, ev.TS, ev.PrevComm)

	for int(ev.CPU) >= len(s.cpus) {
		s.cpus = append(s.cpus, refPendingSlice{})
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
	*p = refPendingSlice{valid: true, tid: ev.Tid,
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

func (s *refSched) waking(ts int64, u, waker int, irq IRQContext) {
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
func (s *refSched) open(u int, row StateRow) {
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

func (s *refSched) hold(st *refThreadRow) {
	if st.held {
		s.emitState(st.heldRow)
	}
	st.held, st.heldRow = true, st.row
}

func (s *refSched) emitSlice(r SliceRow) {
	if s.OnSlice != nil {
		s.OnSlice(r)
	}
}

func (s *refSched) emitState(r StateRow) {
	if s.OnState != nil {
		s.OnState(r)
	}
}

// Finish reports every interval and slice still open, with Dur -1.
func (s *refSched) Finish() {
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
