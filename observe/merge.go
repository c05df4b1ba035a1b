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

func (q *eventQueue) push(ev *Event) {
	if q.head > 0 && q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, *ev)
}

func newMerger(window int64) *merger {
	return &merger{window: window}
}

func (m *merger) push(ev *Event) {
	i := int(ev.CPU) + 1
	if ev.CPU < 0 {
		i = 0
	}
	for i >= len(m.queues) {
		m.queues = append(m.queues, eventQueue{})
	}
	q := &m.queues[i]
	if i > 0 {
		if !q.seen {
			q.seen = true
			m.active++
		}
		if q.len() == 0 {
			m.nonEmpty++
		}
	}
	q.push(ev)
	if ev.TS > m.maxTS {
		m.maxTS = ev.TS
	}
}

// pop moves the next event into ev, reporting false when none can be released
// yet (or, after finish, when all are out).
func (m *merger) pop(ev *Event) bool {
	best := -1
	var bestTS int64
	for i := range m.queues {
		q := &m.queues[i]
		if q.len() == 0 {
			continue
		}
		ts := q.buf[q.head].TS
		if best < 0 || ts < bestTS {
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
	q.buf[q.head] = Event{}
	q.head++
	if best > 0 && q.len() == 0 {
		m.nonEmpty--
	}
	if ev.TS < m.lastOut {
		m.late++
	} else {
		m.lastOut = ev.TS
	}
	return true
}

func (m *merger) finish() { m.eof = true }
