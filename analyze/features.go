package analyze

import (
	"math"

	"temper.codes/temper-train/observe"
)

// threadAcc accumulates one thread's (one UTID's) behaviour as the trace
// streams by. Its size depends on the range of values seen, never on the
// number of events: two sketches, a CPU bitset and counters.
//
// The counters come first and the sketches (whose first samples are kept
// inline) last, so that one event's updates touch few cache lines.
type threadAcc struct {
	runNs     int64 // time on a CPU, including a run still open at trace end
	openRuns  int64 // runs still open at trace end (censored, not in runs)
	endless   int64 // runs whose switch-out the trace missed (not in runs or runNs)
	wakeups   int64 // wakings that made the thread runnable
	wakesOut  int64 // wakings this thread performed on others (not in IRQ context)
	outs      [numOuts]int64
	waitNs    [numOuts]int64 // time after a switch-out in each state kind (R/R+: waiting for a CPU)
	runnable  int64          // ns waiting for a CPU after a wakeup
	migration int64
	cpus      []uint64 // bitset of CPUs it ran on
	lastCPU   int32
	prio      int32
	sawIdle   bool   // switched out in state I (idle kernel thread)
	lastOutD  bool   // the latest switch-out left it in D: its next wakeup ends an I/O wait
	runs      Sketch // completed on-CPU runs (switch-in to switch-out), ns
	wakeLat   Sketch // waking → running, ns, for wakings that led to a run
}

// Switch-out kinds, by prev_state.
const (
	outPreempt = iota // R or R+: involuntary
	outSleep          // S: voluntary sleep
	outDisk           // D: uninterruptible (usually I/O)
	outOther          // anything else (T, I, X, Z, P, ...)
	numOuts
)

// outKind sorts a switch-out by its prev_state.
func outKind(st observe.TaskState) int {
	switch {
	case st.Runnable():
		return outPreempt
	case st&^observe.StatePreempted == observe.StateSleeping:
		return outSleep
	case st&observe.StateUninterruptible != 0 && st&observe.StateIdle == 0:
		return outDisk
	}
	return outOther
}

// wakeKey identifies a waker→wakee pair; irq is the interrupt context of
// the waking, when in one, whose "waker" is then only the task the interrupt
// landed on; fromD
// marks wakings that ended an uninterruptible (D) wait — I/O completions
// and kernel-lock hand-overs rather than requests.
type wakeKey struct {
	waker, wakee int32 // UTIDs
	irq          observe.IRQContext
	fromD        bool
}

// forkRec is one sched_process_fork: parent UTID created child tid.
type forkRec struct {
	ts     int64
	parent int
	child  int
}

// collector consumes the event stream: observe.Sched reconstructs thread
// states and the collector folds slices and state rows into per-thread
// accumulators, the wake edges, the fork tree and (with a topology) SMT
// co-scheduling. All of it is indexed by UTID.
type collector struct {
	threads *observe.Threads
	sched   *observe.Sched
	acc     []threadAcc
	edges   map[wakeKey]int64 // filled from wakes by finish
	wakes   edgeCounts
	forks   []forkRec
	ppid    map[int32]int32 // process → parent, from process records
	smt     *smtTracker     // nil without SMT topology

	firstTS, lastTS int64 // of the events on a CPU; firstTS is MaxInt64 until one
	events          int64
	finished        bool
	cpusLow         uint64   // CPUs 0-63 seen, kept apart so that the per-event update is one OR
	cpusSeen        []uint64 // every CPU seen, complete once finished
}

// newCollector returns a collector; smt may be nil (no SMT topology).
func newCollector(smt *smtTracker) *collector {
	c := &collector{
		threads: observe.NewThreads(),
		edges:   map[wakeKey]int64{},
		ppid:    map[int32]int32{},
		smt:     smt,
		firstTS: math.MaxInt64,
	}
	c.sched = observe.NewSched(c.threads)
	c.sched.Rows = c
	c.sched.SkipRunning = true // Slice counts the running
	c.sched.SkipIdle = true    // and not the idle task
	return c
}

// grow returns the accumulator of UTID u, extending the table as needed.
func (c *collector) grow(u int) *threadAcc {
	for u >= len(c.acc) {
		c.acc = append(c.acc, threadAcc{lastCPU: -1})
	}
	return &c.acc[u]
}

// read adds every event of r, decoding ahead on a second CPU when there is one.
func (c *collector) read(r observe.Reader) error {
	return observe.ReadAhead(r, func(evs []observe.Event) {
		for i := range evs {
			c.add(&evs[i])
		}
	})
}

// add applies one event.
func (c *collector) add(ev *observe.Event) {
	c.events++
	if ev.CPU >= 0 {
		c.firstTS, c.lastTS = min(c.firstTS, ev.TS), max(c.lastTS, ev.TS)
		if ev.CPU < 64 {
			c.cpusLow |= 1 << ev.CPU
		} else {
			setBit(&c.cpusSeen, int(ev.CPU))
		}
	}
	switch ev.Kind {
	case observe.KindProcessInfo:
		if ev.PrevTid > 0 {
			c.ppid[ev.Tid] = ev.PrevTid
		}
	case observe.KindFork:
		c.sched.Add(ev)
		if ev.PrevTid > 0 && ev.Tid > 0 {
			c.forks = append(c.forks, forkRec{ts: ev.TS, parent: c.threads.Get(ev.PrevTid), child: c.threads.Get(ev.Tid)})
		}
		return
	case observe.KindSwitch:
		if c.smt != nil {
			c.smt.advance(ev.TS)
		}
		c.sched.Add(ev)
		prev, next := c.sched.LastSwitch()
		// Switch-outs are counted from the event, not from the slice: the
		// prev_state is known even when the trace missed the switch-in.
		if ev.PrevTid != 0 {
			a := c.grow(prev)
			k := outKind(ev.PrevState)
			a.outs[k]++
			a.lastOutD = k == outDisk
			if ev.PrevState&observe.StateIdle != 0 {
				a.sawIdle = true
			}
		}
		if c.smt != nil && ev.CPU >= 0 {
			c.smt.set(ev.CPU, next)
		}
		return
	}
	c.sched.Add(ev)
}

// Slice folds one CPU slice: a run of a thread on a CPU.
func (c *collector) Slice(r observe.SliceRow) {
	if r.UTID == 0 {
		return
	}
	a := c.grow(r.UTID)
	a.prio = r.Prio
	if a.lastCPU >= 0 && a.lastCPU != r.CPU {
		a.migration++
	}
	a.lastCPU = r.CPU
	setBit(&a.cpus, int(r.CPU))
	dur := r.Dur
	if dur < 0 {
		if !c.finished {
			a.endless++ // ended by a switch that did not match it: data loss
			return
		}
		a.openRuns++
		a.runNs += max(c.lastTS-r.TS, 0)
		return
	}
	a.runNs += dur
	a.runs.Add(dur)
}

// State folds one thread-state interval.
func (c *collector) State(r observe.StateRow) {
	if r.UTID == 0 || r.State == observe.StateRunning {
		return // slices count the running (finish extends acc to every thread)
	}
	a := c.grow(r.UTID)
	woken := r.State == observe.StateRunnable && r.Waker >= 0
	if woken {
		// The waking happened whether or not the trace saw the run it led
		// to, so it counts even when the interval's end is unknown.
		a.wakeups++
		if r.Dur >= 0 {
			a.wakeLat.Add(r.Dur)
		}
		// The R row is emitted when the thread next runs, before its next
		// switch-out: lastOutD is still the state this waking ended.
		c.wakes.add(wakeKey{waker: int32(r.Waker), wakee: int32(r.UTID), irq: r.IRQ, fromD: a.lastOutD}, c.edges)
		if r.IRQ == observe.IRQNone && r.Waker > 0 {
			c.grow(r.Waker).wakesOut++
		}
	}
	dur := r.Dur
	if dur < 0 {
		if !c.finished {
			return // ended by data loss: its length is unknown
		}
		dur = max(c.lastTS-r.TS, 0)
	}
	switch {
	case r.State == observe.StateRunning:
	case woken:
		a.runnable += dur
	case r.State.Runnable():
		// R or R+ after a switch-out: waiting for a CPU after preemption.
		a.waitNs[outPreempt] += dur
	default:
		a.waitNs[outKind(r.State)] += dur
	}
}

// finish closes what is still open at the end of the trace.
func (c *collector) finish() {
	c.finished = true
	if c.firstTS == math.MaxInt64 { // no event on a CPU
		c.firstTS = 0
	}
	if c.cpusLow != 0 {
		if len(c.cpusSeen) == 0 {
			c.cpusSeen = []uint64{0}
		}
		c.cpusSeen[0] |= c.cpusLow
	}
	if c.smt != nil {
		c.smt.advance(c.lastTS)
	}
	c.sched.Finish()
	c.grow(c.threads.Len() - 1)
	c.wakes.flush(c.edges)
}

// setBit sets bit i of a growable bitset.
func setBit(bits *[]uint64, i int) {
	if i < 0 {
		return
	}
	w, m := i/64, uint64(1)<<(i%64)
	if w < len(*bits) && (*bits)[w]&m != 0 {
		return // usually set already: no store on the per-event path
	}
	for w >= len(*bits) {
		*bits = append(*bits, 0)
	}
	(*bits)[w] |= m
}

// bitList returns the set bits in increasing order.
func bitList(bits []uint64) []int {
	var out []int
	for w, b := range bits {
		for i := 0; i < 64; i++ {
			if b&(1<<i) != 0 {
				out = append(out, w*64+i)
			}
		}
	}
	return out
}

// edgeCounts counts wakings per wakeKey: one increment per waking that led
// to a run, the hottest table of the analysis. Go's map hashes a struct key
// with the generic hasher; this open-addressing table packs the key into one
// word and hashes it with a multiply. finish moves the counts into
// collector.edges, where the graph reads them.
type edgeCounts struct {
	keys   []uint64 // packed key, 0 for an empty slot
	counts []int64
	used   int
}

// pack returns k as one non-zero word, or false for UTIDs too large for it
// (over 2^29 threads: those go to the map directly).
func (k wakeKey) pack() (uint64, bool) {
	if k.waker < 0 || k.wakee <= 0 || k.wakee >= 1<<29 || k.irq > 3 {
		return 0, false
	}
	p := uint64(k.waker)<<32 | uint64(k.wakee)<<3 | uint64(k.irq)<<1
	if k.fromD {
		p |= 1
	}
	return p, true
}

func unpack(p uint64) wakeKey {
	return wakeKey{waker: int32(p >> 32), wakee: int32(p>>3) & (1<<29 - 1),
		irq: observe.IRQContext(p>>1) & 3, fromD: p&1 != 0}
}

// add counts one waking of k; keys that do not pack are counted in overflow.
func (e *edgeCounts) add(k wakeKey, overflow map[wakeKey]int64) {
	p, ok := k.pack()
	if !ok {
		overflow[k]++
		return
	}
	if e.used*2 >= len(e.keys) {
		e.grow()
	}
	mask := uint64(len(e.keys) - 1)
	for i := hashEdge(p) & mask; ; i = (i + 1) & mask {
		switch e.keys[i] {
		case p:
			e.counts[i]++
			return
		case 0:
			e.keys[i], e.counts[i] = p, 1
			e.used++
			return
		}
	}
}

// hashEdge spreads a packed key over the table (Fibonacci hashing; the
// table takes the low bits, so fold the high ones in).
func hashEdge(p uint64) uint64 {
	h := p * 0x9e3779b97f4a7c15
	return h ^ h>>32
}

// grow doubles the table (to 256 slots at first) and reinserts.
func (e *edgeCounts) grow() {
	keys, counts := e.keys, e.counts
	n := max(256, 2*len(keys))
	e.keys, e.counts = make([]uint64, n), make([]int64, n)
	mask := uint64(n - 1)
	for j, p := range keys {
		if p == 0 {
			continue
		}
		i := hashEdge(p) & mask
		for e.keys[i] != 0 {
			i = (i + 1) & mask
		}
		e.keys[i], e.counts[i] = p, counts[j]
	}
}

// flush adds the counts to m and empties the table.
func (e *edgeCounts) flush(m map[wakeKey]int64) {
	for i, p := range e.keys {
		if p != 0 {
			m[unpack(p)] += e.counts[i]
		}
	}
	*e = edgeCounts{}
}
