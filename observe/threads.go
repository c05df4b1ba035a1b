package observe

import "unsafe"

// Thread is one thread over the span of a trace. A tid the kernel reuses after
// the thread was freed, or that task_newtask creates again, is a new Thread:
// threads are identified by UTID, as in trace_processor.
type Thread struct {
	UTID    int   // index in Threads.All; 0 is the idle task ("swapper")
	Tid     int32 // kernel task id
	Tgid    int32 // thread-group (process) id; 0 when the trace never said
	Name    string
	Names   []NameChange // every comm the thread had, oldest first
	Cmdline []string     // the process's command line, on its main thread, when recorded
	StartTS int64        // creation time when created inside the trace, else 0
	EndTS   int64        // when the kernel freed the task (sched_process_free), else 0
	ExitTS  int64        // when it exited (sched_process_exit), else 0
}

// NameChange is one comm a thread had from TS on.
type NameChange struct {
	TS   int64
	Name string
}

// Threads assigns UTIDs to tids the way trace_processor does: in order of
// first reference, utid 0 reserved for the idle task, and a fresh utid when a
// tid is created anew.
//
// Every event resolves one to three tids, so the live tid → UTID table is a
// paged array rather than a map: a lookup is two indexed loads. Kernel tids
// are below PID_MAX_LIMIT (2^22); pages are allocated as tids in their range
// appear, so memory follows the threads seen (at most one 4 KiB page per
// thread, 16 MiB in all), not the events. Tids outside that range (only damaged
// input has them) go to a map.
type Threads struct {
	all   []*Thread
	names []string         // by UTID: Name as setName last set it, beside all for locality
	pages []*tidPage       // by tid / tidPageLen
	far   map[int32]uint32 // tids outside [0, maxDenseTid)
	// gen counts changes to which thread a tid names: a UTID resolved
	// from a tid is still what Get would return while gen is unchanged.
	gen uint64
}

const (
	tidPageLen  = 1024
	maxDenseTid = 1 << 22 // PID_MAX_LIMIT on 64-bit kernels
)

// tidPage holds UTID+1 of the live thread for each tid of a range, 0 for none.
type tidPage [tidPageLen]uint32

// NewThreads returns a table holding only the idle task.
func NewThreads() *Threads {
	t := &Threads{all: []*Thread{{UTID: 0, Tid: 0, Name: "swapper"}}, names: []string{"swapper"}}
	t.setLive(0, 0)
	return t
}

// live returns the UTID of the live thread with this tid.
func (t *Threads) live(tid int32) (int, bool) {
	if uint32(tid) < maxDenseTid {
		if p := uint32(tid) / tidPageLen; p < uint32(len(t.pages)) {
			if pg := t.pages[p]; pg != nil {
				v := pg[uint32(tid)%tidPageLen]
				return int(v) - 1, v != 0
			}
		}
		return 0, false
	}
	v, ok := t.far[tid]
	return int(v) - 1, ok
}

// setLive makes u the live thread of tid; u < 0 removes it.
func (t *Threads) setLive(tid int32, u int) {
	t.gen++
	v := uint32(u + 1)
	if uint32(tid) >= maxDenseTid {
		if t.far == nil {
			t.far = map[int32]uint32{}
		}
		if u < 0 {
			delete(t.far, tid)
		} else {
			t.far[tid] = v
		}
		return
	}
	p := int(uint32(tid) / tidPageLen)
	if p >= len(t.pages) {
		if u < 0 {
			return
		}
		t.pages = append(t.pages, make([]*tidPage, p+1-len(t.pages))...)
	}
	if t.pages[p] == nil {
		if u < 0 {
			return
		}
		t.pages[p] = new(tidPage)
	}
	t.pages[p][uint32(tid)%tidPageLen] = v
}

// All returns every thread, indexed by UTID.
func (t *Threads) All() []*Thread { return t.all }

// Len is the number of UTIDs assigned so far.
func (t *Threads) Len() int { return len(t.all) }

// Lookup returns the live thread with this tid, or nil.
func (t *Threads) Lookup(tid int32) *Thread {
	if u, ok := t.live(tid); ok {
		return t.all[u]
	}
	return nil
}

// Get returns the UTID of the live thread with this tid, creating it on first
// reference.
func (t *Threads) Get(tid int32) int {
	// len(t.pages) ≤ maxDenseTid/tidPageLen, so p is in range only for
	// dense tids (a negative tid converts to a huge p).
	if p := uint32(tid) / tidPageLen; p < uint32(len(t.pages)) {
		if pg := t.pages[p]; pg != nil {
			if v := pg[uint32(tid)%tidPageLen]; v != 0 {
				return int(v) - 1
			}
		}
	}
	return t.getSlow(tid)
}

func (t *Threads) getSlow(tid int32) int {
	if u, ok := t.live(tid); ok {
		return u
	}
	return t.start(0, tid)
}

func (t *Threads) start(ts int64, tid int32) int {
	u := len(t.all)
	t.all = append(t.all, &Thread{UTID: u, Tid: tid, StartTS: ts})
	t.names = append(t.names, "")
	t.setLive(tid, u)
	return u
}

// end marks the thread with this tid freed; a later reference to the tid is a
// new thread.
func (t *Threads) end(ts int64, tid int32) {
	u, ok := t.live(tid)
	if !ok || u == 0 {
		return
	}
	t.all[u].EndTS = ts
	t.setLive(tid, -1)
}

// setName records a comm. The idle task keeps its name: every CPU's idle task
// calls itself swapper/N, but they are one thread here. Nearly every event
// names a thread it already has, so the check reads the dense names slice
// rather than the Thread.
func (t *Threads) setName(u int, ts int64, name string) {
	// Readers intern comms, so an unchanged name is usually the same string:
	// comparing the pointers first, in a check small enough to be inlined,
	// saves a call on every event.
	// The idle task is checked here too: every switch to or from it would
	// otherwise make the call.
	if old := t.names[u]; u == 0 || len(old) == len(name) && unsafe.StringData(old) == unsafe.StringData(name) {
		return
	}
	t.rename(u, ts, name)
}

func (t *Threads) rename(u int, ts int64, name string) {
	if u == 0 || t.names[u] == name || name == "" || name == "<...>" {
		return
	}
	th := t.all[u]
	th.Name = name
	th.Names = append(th.Names, NameChange{TS: ts, Name: name})
	t.names[u] = name
}

// NameAt returns the comm the thread had at ts (its first known name for
// times before any was recorded).
func (th *Thread) NameAt(ts int64) string {
	name := th.Name
	for i := len(th.Names) - 1; i >= 0; i-- {
		name = th.Names[i].Name
		if th.Names[i].TS <= ts {
			break
		}
	}
	return name
}
