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
// A CPU's compact_sched events wait as the columns they were decoded into
// (bundleSeg, about 24 bytes an event), and become Events only as they are
// released: a bundle holds thousands of events, and copying each into a
// record on arrival and out of it on release was a third of the reader's
// time. compact_sched leaves the outgoing task of a switch and the waker of a
// waking implicit (the task the CPU last switched to); the merger fills them
// in as it releases each CPU's events in order. Other events (full ftrace
// events, process and thread records) wait as compact records (queued), their
// strings interned, so a waiting event costs about half an Event and nothing
// for the garbage collector to scan.
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

	spare []*bundleSeg // released bundles, for reuse
	stats *ReadStats   // where compact events dropped on release are counted

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

// eventQueue is one CPU's FIFO: its bundles in arrival order, and a ring
// buffer of records whose capacity is a power of two, grown by doubling when
// full and never compacted, so a record is copied once in and once out however
// long it waits and the memory held follows the longest the queue has been,
// not the length of the trace. A Perfetto trace's CPU queues hold bundles and
// the no-CPU queue records; were both queued on one CPU, they would be merged
// by timestamp.
type eventQueue struct {
	buf  []queued // len(buf) is the capacity, a power of two (or 0)
	head int      // index of the oldest event
	n    int      // events queued
	seen bool
	args [][]string // Args of queued events that have them, oldest first

	segs []*bundleSeg // bundles not yet fully released, oldest first; none is empty
	cur  cpuCursor    // the task the CPU runs, as of the last switch released
}

// len returns the number of events queued.
func (q *eventQueue) len() int {
	n := q.n
	for _, s := range q.segs {
		n += s.left()
	}
	return n
}

func (q *eventQueue) empty() bool { return q.n == 0 && len(q.segs) == 0 }

// headTS returns the timestamp of the queue's next event, emptyHead when empty.
func (q *eventQueue) headTS() int64 {
	t := emptyHead
	if q.n > 0 {
		t = q.at(0).ts
	}
	if len(q.segs) > 0 {
		t = min(t, q.segs[0].at)
	}
	return t
}

// bundleSeg is one CPU's ftrace bundle as it waits in the merger: the
// compact_sched columns with timestamps made absolute, comms as ids of the
// merger's strings and prev_state decoded, and the bundle's full events as
// records. Its events are released by timestamp, ties going to full events
// first, then switches, then wakings.
type bundleSeg struct {
	swTS    []int64
	swState []TaskState
	swTid   []int32
	swPrio  []int32
	swComm  []int32
	wkTS    []int64
	wkTid   []int32
	wkCPU   []int32
	wkPrio  []int32
	wkComm  []int32
	wkIRQ   []IRQContext
	full    []queued
	i, j, k int   // next switch, waking and full event
	lastTS  int64 // the bundle's newest timestamp

	// The next event to release (see advance): its column, 0 when none is
	// left, and its timestamp (emptyHead when none).
	which int
	at    int64
}

// left returns the number of events not yet released.
func (s *bundleSeg) left() int { return len(s.swTS) - s.i + len(s.wkTS) - s.j + len(s.full) - s.k }

// advance finds the next event to release: the column that holds it (1
// switch, 2 waking, 3 full event, 0 none left) and its timestamp.
func (s *bundleSeg) advance() {
	which, t := 0, emptyHead
	if s.k < len(s.full) {
		which, t = 3, s.full[s.k].ts
	}
	if s.i < len(s.swTS) && (which == 0 || s.swTS[s.i] < t) {
		which, t = 1, s.swTS[s.i]
	}
	if s.j < len(s.wkTS) && (which == 0 || s.wkTS[s.j] < t) {
		which, t = 2, s.wkTS[s.j]
	}
	s.which, s.at = which, t
}

// at returns the i-th queued event, 0 being the oldest.
func (q *eventQueue) at(i int) *queued { return &q.buf[(q.head+i)&(len(q.buf)-1)] }

// slot appends a record to the queue and returns it to be filled in place.
// The record holds stale data: the caller assigns it whole.
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

func newMerger(window int64, stats *ReadStats) *merger {
	return &merger{window: window, stats: stats, strs: []string{""}, ids: map[string]int32{"": 0}}
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

// newBundle returns an empty bundle to fill and hand to pushBundle (or
// dropBundle).
func (m *merger) newBundle() *bundleSeg {
	if n := len(m.spare); n > 0 {
		s := m.spare[n-1]
		m.spare = m.spare[:n-1]
		return s
	}
	return &bundleSeg{}
}

// dropBundle takes back a bundle from newBundle, empty or released.
func (m *merger) dropBundle(s *bundleSeg) {
	s.swTS, s.swState, s.swTid, s.swPrio, s.swComm = s.swTS[:0], s.swState[:0], s.swTid[:0], s.swPrio[:0], s.swComm[:0]
	s.wkTS, s.wkTid, s.wkCPU, s.wkPrio, s.wkComm, s.wkIRQ = s.wkTS[:0], s.wkTid[:0], s.wkCPU[:0], s.wkPrio[:0], s.wkComm[:0], s.wkIRQ[:0]
	s.full = s.full[:0]
	s.i, s.j, s.k, s.lastTS, s.which, s.at = 0, 0, 0, 0, 0, emptyHead
	m.spare = append(m.spare, s)
}

// pushBundle queues a filled bundle of cpu's events; an empty one is dropped.
func (m *merger) pushBundle(cpu int32, s *bundleSeg) {
	if s.left() == 0 {
		m.dropBundle(s)
		return
	}
	s.advance()
	i := int(cpu) + 1
	m.grow(i)
	q := &m.queues[i]
	if !q.seen {
		q.seen = true
		m.active++
	}
	if q.empty() {
		m.nonEmpty++
	}
	q.segs = append(q.segs, s)
	m.heads[i] = q.headTS()
	m.maxTS = max(m.maxTS, s.lastTS)
}

// push queues a copy of ev as a record.
func (m *merger) push(ev *Event) {
	i := max(int(ev.CPU)+1, 0)
	m.grow(i)
	q := &m.queues[i]
	if i > 0 {
		if !q.seen {
			q.seen = true
			m.active++
		}
		if q.empty() {
			m.nonEmpty++
		}
	}
	rec := q.slot()
	*rec = m.record(ev)
	if ev.Args != nil {
		rec.hasArgs = true
		q.args = append(q.args, ev.Args)
	}
	m.heads[i] = q.headTS()
	m.maxTS = max(m.maxTS, ev.TS)
}

// record returns ev as a record (without its Args).
func (m *merger) record(ev *Event) queued {
	return queued{ts: ev.TS, cloneFlags: ev.CloneFlags, pid: ev.Pid, tid: ev.Tid, tgid: ev.Tgid,
		prio: ev.Prio, prevTid: ev.PrevTid, prevPrio: ev.PrevPrio, targetCPU: ev.TargetCPU,
		comm: m.intern(ev.Comm), prevComm: m.intern(ev.PrevComm), prevState: ev.PrevState,
		kind: ev.Kind, irq: ev.IRQ, ioWait: ev.IOWait}
}

// event writes rec, an event of cpu, into ev (without its Args).
func (m *merger) event(rec *queued, cpu int32, ev *Event) {
	*ev = Event{TS: rec.ts, Kind: rec.kind, CPU: cpu, Pid: rec.pid, Tid: rec.tid, Tgid: rec.tgid,
		Comm: m.strs[rec.comm], Prio: rec.prio, PrevTid: rec.prevTid, PrevComm: m.strs[rec.prevComm],
		PrevPrio: rec.prevPrio, PrevState: rec.prevState, IRQ: rec.irq, TargetCPU: rec.targetCPU,
		CloneFlags: rec.cloneFlags, IOWait: rec.ioWait}
}

// popRun moves the events that can be released next into evs, as many as fit,
// and returns how many: none when nothing can be released yet (or, after
// finish, when all are out). The events and their order are those of the
// queues' heads taken one at a time, earliest first (ties to the lower queue),
// but a CPU's bundle is released in runs: one look at every queue's head tells
// how far the bundle may go before another queue's head comes first, and its
// events up to there are released in a loop of their own.
func (m *merger) popRun(evs []Event) int {
	n := 0
	for n < len(evs) {
		// The earliest head, and the earliest of the other queues' heads.
		best, bestTS := -1, emptyHead
		other, otherIdx := emptyHead, -1
		for i, ts := range m.heads {
			if ts < bestTS {
				other, otherIdx = bestTS, best
				best, bestTS = i, ts
			} else if ts < other {
				other, otherIdx = ts, i
			}
		}
		if best < 0 {
			break
		}
		// free: everything queued may go, whatever the window and marks say.
		free := m.eof || (m.cpus > 0 && m.active >= m.cpus && m.nonEmpty == m.active)
		marked := !free && m.markedBefore(bestTS)
		if !free && bestTS > m.maxTS-m.window && !marked {
			break
		}
		q := &m.queues[best]
		cpu := int32(best) - 1
		if q.n > 0 && q.at(0).ts == bestTS {
			m.popRecord(q, cpu, &evs[n])
			m.released(&evs[n])
			n++
		} else {
			// The bundle's events may go while they are earlier than limit:
			// before the other queues' heads (or at the same time, when this
			// queue comes first), its own records, and, unless everything is
			// released regardless, the release window and the progress marks.
			limit := other
			if best < otherIdx && other != emptyHead {
				limit++
			}
			if q.n > 0 {
				limit = min(limit, q.at(0).ts)
			}
			if !free {
				c := m.maxTS - m.window + 1
				if marked {
					c = max(c, m.bound)
				}
				limit = min(limit, c)
			}
			s := q.segs[0]
			for n < len(evs) && s.at < limit {
				if m.release(s, &q.cur, cpu, &evs[n]) {
					m.released(&evs[n])
					n++
				}
			}
			if s.which == 0 { // all released
				k := copy(q.segs, q.segs[1:])
				q.segs[k] = nil
				q.segs = q.segs[:k]
				m.dropBundle(s)
			}
		}
		m.heads[best] = q.headTS()
		if best > 0 && q.empty() {
			m.nonEmpty--
			m.stale = true
		}
	}
	return n
}

// released counts an event released behind one released before it.
func (m *merger) released(ev *Event) {
	if ev.TS < m.lastOut {
		m.late++
	} else {
		m.lastOut = ev.TS
	}
}

// popRecord releases q's oldest record.
func (m *merger) popRecord(q *eventQueue, cpu int32, ev *Event) {
	rec := q.at(0)
	m.event(rec, cpu, ev)
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
}

// release moves the next event of bundle s into ev, filling in what
// compact_sched leaves implicit from the CPU's cursor. It reports false for an
// event dropped because nothing yet says who ran on the CPU.
func (m *merger) release(s *bundleSeg, cur *cpuCursor, cpu int32, ev *Event) bool {
	ts := s.at
	keep := true
	switch s.which {
	case 1:
		i := s.i
		s.i++
		known := cur.known
		if known {
			ev.TS, ev.Kind, ev.CPU, ev.Pid = ts, KindSwitch, cpu, cur.tid
			ev.Tid, ev.Tgid, ev.Comm, ev.Prio = s.swTid[i], 0, m.strs[s.swComm[i]], s.swPrio[i]
			ev.PrevTid, ev.PrevComm, ev.PrevPrio, ev.PrevState = cur.tid, m.strs[cur.commID], cur.prio, s.swState[i]
			ev.IRQ, ev.TargetCPU, ev.CloneFlags, ev.IOWait, ev.Args = IRQNone, 0, 0, false, nil
		} else {
			// Nothing says who was switched out: like trace_processor, only
			// remember who came in.
			m.stats.skip("compact sched_switch with unknown prev")
		}
		cur.known, cur.tid, cur.commID, cur.prio = true, s.swTid[i], s.swComm[i], s.swPrio[i]
		keep = known
	case 2:
		j := s.j
		s.j++
		if !cur.known {
			m.stats.skip("compact sched_waking before any switch on its cpu")
			keep = false
			break
		}
		ev.TS, ev.Kind, ev.CPU, ev.Pid = ts, KindWaking, cpu, cur.tid
		ev.Tid, ev.Tgid, ev.Comm, ev.Prio = s.wkTid[j], 0, m.strs[s.wkComm[j]], s.wkPrio[j]
		ev.PrevTid, ev.PrevComm, ev.PrevPrio, ev.PrevState = 0, "", 0, 0
		ev.IRQ, ev.TargetCPU, ev.CloneFlags, ev.IOWait, ev.Args = s.wkIRQ[j], s.wkCPU[j], 0, false, nil
	default:
		rec := &s.full[s.k]
		s.k++
		m.event(rec, cpu, ev)
		if rec.kind == KindSwitch {
			cur.known, cur.tid, cur.commID, cur.prio = true, rec.tid, rec.comm, rec.prio
		}
	}
	s.advance()
	return keep
}

func (m *merger) finish() { m.eof = true }
