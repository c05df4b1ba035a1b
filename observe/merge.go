package observe

// merger puts per-CPU event streams back into one timestamp order.
//
// Perfetto writes ftrace data in bundles, one CPU at a time, so a file holds
// stretches of CPU 0 then stretches of CPU 1 covering overlapping time. Each CPU's
// own events are in order. The merger keeps a FIFO per CPU and releases the
// earliest head once it can be sure nothing earlier is still to come: when every
// CPU of the machine (if the trace says how many) has something queued, or when
// the head is older than the
// newest decoded timestamp by more than the window (a CPU that went quiet must
// not hold the others back forever). Memory is bounded by the skew between CPUs
// in the file, not by the trace length.
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
}

type eventQueue struct {
	buf  []Event
	head int
	seen bool
}

func (q *eventQueue) len() int { return len(q.buf) - q.head }

// slot appends a zero event to the queue and returns it to be filled in place.
func (q *eventQueue) slot() *Event {
	if q.head > 0 && q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	if len(q.buf) < cap(q.buf) {
		q.buf = q.buf[:len(q.buf)+1]
		ev := &q.buf[len(q.buf)-1]
		*ev = Event{}
		return ev
	}
	q.buf = append(q.buf, Event{})
	return &q.buf[len(q.buf)-1]
}

const emptyHead = int64(^uint64(0) >> 1)

func newMerger(window int64) *merger {
	return &merger{window: window}
}

func (m *merger) push(ev *Event) {
	*m.slot(ev.CPU) = *ev
	m.pushed(ev.CPU)
}

// slot returns space for the next event of cpu; the caller fills it and then
// calls pushed.
func (m *merger) slot(cpu int32) *Event {
	i := int(cpu) + 1
	if cpu < 0 {
		i = 0
	}
	for i >= len(m.queues) {
		m.queues = append(m.queues, eventQueue{})
		m.heads = append(m.heads, emptyHead)
	}
	return m.queues[i].slot()
}

// unslot takes back the slot slot just gave out for cpu.
func (m *merger) unslot(cpu int32) {
	q := &m.queues[max(int(cpu)+1, 0)]
	q.buf = q.buf[:len(q.buf)-1]
}

// pushed accounts for the event just written into cpu's slot.
func (m *merger) pushed(cpu int32) {
	i := int(cpu) + 1
	if cpu < 0 {
		i = 0
	}
	q := &m.queues[i]
	ev := &q.buf[len(q.buf)-1]
	if i > 0 {
		if !q.seen {
			q.seen = true
			m.active++
		}
		if q.len() == 1 {
			m.nonEmpty++
		}
	}
	if q.len() == 1 {
		m.heads[i] = ev.TS
	}
	if ev.TS > m.maxTS {
		m.maxTS = ev.TS
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
	if !m.eof && !allQueued && bestTS > m.maxTS-m.window {
		return false
	}
	q := &m.queues[best]
	*ev = q.buf[q.head]
	q.head++
	if q.len() == 0 {
		m.heads[best] = emptyHead
		if best > 0 {
			m.nonEmpty--
		}
	} else {
		m.heads[best] = q.buf[q.head].TS
	}
	if ev.TS < m.lastOut {
		m.late++
	} else {
		m.lastOut = ev.TS
	}
	return true
}

func (m *merger) finish() { m.eof = true }
