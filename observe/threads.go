package observe

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
type Threads struct {
	all  []*Thread
	live map[int32]int
}

// NewThreads returns a table holding only the idle task.
func NewThreads() *Threads {
	return &Threads{
		all:  []*Thread{{UTID: 0, Tid: 0, Name: "swapper"}},
		live: map[int32]int{0: 0},
	}
}

// All returns every thread, indexed by UTID.
func (t *Threads) All() []*Thread { return t.all }

// Len is the number of UTIDs assigned so far.
func (t *Threads) Len() int { return len(t.all) }

// Lookup returns the live thread with this tid, or nil.
func (t *Threads) Lookup(tid int32) *Thread {
	if u, ok := t.live[tid]; ok {
		return t.all[u]
	}
	return nil
}

// Get returns the UTID of the live thread with this tid, creating it on first
// reference.
func (t *Threads) Get(tid int32) int {
	if u, ok := t.live[tid]; ok {
		return u
	}
	return t.start(0, tid)
}

func (t *Threads) start(ts int64, tid int32) int {
	u := len(t.all)
	t.all = append(t.all, &Thread{UTID: u, Tid: tid, StartTS: ts})
	t.live[tid] = u
	return u
}

// end marks the thread with this tid freed; a later reference to the tid is a
// new thread.
func (t *Threads) end(ts int64, tid int32) {
	u, ok := t.live[tid]
	if !ok || u == 0 {
		return
	}
	t.all[u].EndTS = ts
	delete(t.live, tid)
}

// setName records a comm. The idle task keeps its name: every CPU's idle task
// calls itself swapper/N, but they are one thread here.
func (t *Threads) setName(u int, ts int64, name string) {
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
