package observe

// merger puts per-CPU event streams back into one timestamp order.
//
// Perfetto writes ftrace data in bundles, one CPU at a time, so a file holds
// stretches of CPU 0 then stretches of CPU 1 covering overlapping time. Each CPU's
// own events are in order. The merger keeps a FIFO per CPU and releases the
// earliest head once it can be sure nothing earlier is still to come: when every
// CPU of the machine (if the trace says how many) has something queued, when
// every CPU with nothing queued has a progress mark past the head (traces
// written by PerfettoWriter say, per CPU, up to when its data is complete), or
// when the head is older than the newest decoded timestamp by more than the
// window (a CPU that went quiet must not hold the others back forever). Memory
// is bounded by the skew between CPUs in the file, not by the trace length.
//
// Queued events are compact records (queued), their strings interned, so a
// waiting event costs about a third of an Event and nothing for the garbage
// collector to scan.
type merger struct {
	queues   []eventQueue // index cpu+1; index 0 holds events tied to no CPU
	heads    []int64      // timestamp of each queue's head, emptyHead when empty
	nonEmpty int          // CPU queues (index ≥ 1) with events
	active   int          // CPU queues that ever had events
	cpus     int          // CPUs the machine has; 0 when the trace does not say
	window   int64
	maxTS    int64
	lastOut  int64
	late     int64 // events released behind one already released
	eof      bool

	strs []string         // interned comms, by id; id 0 is ""
	ids  map[string]int32 // id of each string in strs

	// Progress marks (see PerfettoWriter.progress), for traces that have them:
	// marks[i] is the time before which queue i's CPU has nothing more to come.
	// An event is released once every CPU queue that is empty has a mark past
	// it (bound caches the least such mark; stale says it must be recomputed).
	marks  []int64
	marked bool
	bound  int64
	stale  bool
}

// queued is an Event waiting in the merger: the same fields with comms as ids
// into merger.strs, the CPU implied by the queue, and Args kept aside.
type queued struct {
	ts         int64
	cloneFlags uint64
	pid        int32
	tid        int32
	tgid       int32
	prio       int32
	prevTid    int32
	prevPrio   int32
	targetCPU  int32
	comm       int32
	prevComm   int32
	prevState  TaskState
	kind       Kind
	irq        IRQContext
	ioWait     bool
	hasArgs    bool // the event's Args are next in its queue's args
}

// eventQueue is one CPU's FIFO: a ring buffer whose capacity is a power of
// two, grown by doubling when full and never compacted, so an event is copied
// once in and once out however long it waits and the memory held follows the
// longest the queue has been, not the length of the trace.
type eventQueue struct {
	buf  []queued // len(buf) is the capacity, a power of two (or 0)
	head int      // index of the oldest event
	n    int      // events queued
	seen bool
	args [][]string // Args of queued events that have them, oldest first
}

func (q *eventQueue) len() int { return q.n }

// at returns the i-th queued event, 0 being the oldest.
func (q *eventQueue) at(i int) *queued { return &q.buf[(q.head+i)&(len(q.buf)-1)] }

// slot appends a record to the queue and returns it to be filled in place.
// The record holds stale data: the caller assigns it whole (not zeroing it
// here saves writing every queued event twice).
func (q *eventQueue) slot() *queued {
	if q.n == len(q.buf) {
		buf := make([]queued, max(64, 2*len(q.buf)))
		if q.n > 0 {
			k := copy(buf, q.buf[q.head:])
			copy(buf[k:], q.buf[:q.head])
		}
		q.buf, q.head = buf, 0
	}
	rec := q.at(q.n)
	q.n++
	return rec
}

// grow makes room for queue i.
func (m *merger) grow(i int) {
	for i >= len(m.queues) {
		m.queues = append(m.queues, eventQueue{})
		m.heads = append(m.heads, emptyHead)
		m.marks = append(m.marks, 0)
		m.stale = true
	}
}

// mark records that cpu has no event before ts still to come.
func (m *merger) mark(cpu int32, ts int64) {
	i := int(cpu) + 1
	m.grow(i)
	m.marked = true
	if ts > m.marks[i] {
		m.marks[i] = ts
		m.stale = true
	}
}

// markedBefore reports whether every CPU queue that is empty has a mark past
// ts, the CPUs the trace says the machine has and never showed included.
func (m *merger) markedBefore(ts int64) bool {
	if !m.marked || m.cpus > 1<<16 {
		return false
	}
	if m.stale {
		m.grow(m.cpus)
		m.bound = emptyHead
		for i := 1; i < len(m.queues); i++ {
			if m.heads[i] == emptyHead {
				m.bound = min(m.bound, m.marks[i])
			}
		}
		m.stale = false
	}
	return ts < m.bound
}

const emptyHead = int64(^uint64(0) >> 1)

func newMerger(window int64) *merger {
	return &merger{window: window, strs: []string{""}, ids: map[string]int32{"": 0}}
}

// intern returns the id of s in m.strs.
func (m *merger) intern(s string) int32 {
	id, ok := m.ids[s]
	if !ok {
		id = int32(len(m.strs))
		m.strs = append(m.strs, s)
		m.ids[s] = id
	}
	return id
}

// push queues a copy of ev.
func (m *merger) push(ev *Event) {
	q, rec := m.slot(ev.CPU)
	m.fill(q, rec, ev)
	m.pushed(ev.CPU)
}

// fill writes ev into rec, a slot of q.
func (m *merger) fill(q *eventQueue, rec *queued, ev *Event) {
	*rec = queued{ts: ev.TS, cloneFlags: ev.CloneFlags, pid: ev.Pid, tid: ev.Tid, tgid: ev.Tgid,
		prio: ev.Prio, prevTid: ev.PrevTid, prevPrio: ev.PrevPrio, targetCPU: ev.TargetCPU,
		comm: m.intern(ev.Comm), prevComm: m.intern(ev.PrevComm), prevState: ev.PrevState,
		kind: ev.Kind, irq: ev.IRQ, ioWait: ev.IOWait}
	if ev.Args != nil {
		rec.hasArgs = true
		q.args = append(q.args, ev.Args)
	}
}

// slot returns cpu's queue and space for its next event; the caller fills it
// and then calls pushed, or unslot to take it back.
func (m *merger) slot(cpu int32) (*eventQueue, *queued) {
	i := max(int(cpu)+1, 0)
	m.grow(i)
	q := &m.queues[i]
	return q, q.slot()
}

// unslot takes back the slot slot just gave out for cpu.
func (m *merger) unslot(cpu int32) {
	m.queues[max(int(cpu)+1, 0)].n--
}

// pushed accounts for the event just written into cpu's slot.
func (m *merger) pushed(cpu int32) {
	i := max(int(cpu)+1, 0)
	q := &m.queues[i]
	ts := q.at(q.n - 1).ts
	if i > 0 {
		if !q.seen {
			q.seen = true
			m.active++
		}
		if q.n == 1 {
			m.nonEmpty++
		}
	}
	if q.n == 1 {
		m.heads[i] = ts
	}
	if ts > m.maxTS {
		m.maxTS = ts
	}
}

// pop moves the next event into ev, reporting false when none can be released
// yet (or, after finish, when all are out).
func (m *merger) pop(ev *Event) bool {
	best, bestTS := -1, emptyHead
	for i, ts := range m.heads {
		if ts < bestTS {
			best, bestTS = i, ts
		}
	}
	if best < 0 {
		return false
	}
	allQueued := m.cpus > 0 && m.active >= m.cpus && m.nonEmpty == m.active
	if !m.eof && !allQueued && bestTS > m.maxTS-m.window && !m.markedBefore(bestTS) {
		return false
	}
	q := &m.queues[best]
	rec := q.at(0)
	*ev = Event{TS: rec.ts, Kind: rec.kind, CPU: int32(best) - 1, Pid: rec.pid, Tid: rec.tid, Tgid: rec.tgid,
		Comm: m.strs[rec.comm], Prio: rec.prio, PrevTid: rec.prevTid, PrevComm: m.strs[rec.prevComm],
		PrevPrio: rec.prevPrio, PrevState: rec.prevState, IRQ: rec.irq, TargetCPU: rec.targetCPU,
		CloneFlags: rec.cloneFlags, IOWait: rec.ioWait}
	if rec.hasArgs {
		ev.Args = q.args[0]
		q.args[0] = nil
		q.args = q.args[1:]
		if len(q.args) == 0 {
			q.args = nil
		}
	}
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	if q.n == 0 {
		m.heads[best] = emptyHead
		if best > 0 {
			m.nonEmpty--
			m.stale = true
		}
	} else {
		m.heads[best] = q.at(0).ts
	}
	if ev.TS < m.lastOut {
		m.late++
	} else {
		m.lastOut = ev.TS
	}
	return true
}

func (m *merger) finish() { m.eof = true }
