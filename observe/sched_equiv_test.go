package observe

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// The fast tracker (sched.go, threads.go) must report exactly what the
// reference one (schedref_test.go: the code before it was tuned) reports, row
// for row and in the same order, and leave the same thread table behind, on
// any event stream: well-formed traces, and the damaged ones real recordings
// have (missed switches, tids reused, unknown wakers, odd states).

// equivTids are the tids the generator draws from: few, so that threads meet,
// get freed and reused; and some outside the dense tid table's range.
var equivTids = []int32{0, 1, 2, 3, 4, 5, 6, 7, 1023, 1024, 4194303, 4194304, 1 << 30, -7}

var equivStates = []TaskState{StateRunnable, StateRunnable | StatePreempted, StateSleeping, StateSleeping,
	StateUninterruptible, StateUninterruptible | StateWakeKill, StateIdle, StateZombie, StateExitDead,
	StateStopped, StateParked, StateInvalid, StateRunning}

var equivComms = []string{"", "<...>", "worker", "io", "java", "GC Thread#0"}

// genEvents produces n events from the choices pick makes: pick(k) returns a
// number in [0, k). CPUs' current tasks are tracked so most switches are
// consistent and some are not.
func genEvents(n int, pick func(int) int) []Event {
	const cpus = 4
	cur := make([]int32, cpus)
	tid := func() int32 { return equivTids[pick(len(equivTids))] }
	comm := func() string { return equivComms[pick(len(equivComms))] }
	ts := int64(1000)
	evs := make([]Event, 0, n)
	for range n {
		ts += int64(pick(3)) * 100 // equal timestamps happen
		cpu := int32(pick(cpus))
		ev := Event{TS: ts, CPU: cpu, Pid: cur[cpu]}
		if pick(8) == 0 {
			ev.Pid = -1
		}
		switch k := pick(20); {
		case k < 8:
			ev.Kind, ev.Pid = KindSwitch, 0
			ev.PrevTid = cur[cpu]
			if pick(10) == 0 {
				ev.PrevTid = tid() // a switch-out of a task the CPU was not known to run
			}
			ev.PrevComm, ev.PrevPrio, ev.PrevState = comm(), 120, equivStates[pick(len(equivStates))]
			ev.Tid, ev.Comm, ev.Prio = tid(), comm(), int32(100+pick(40))
			cur[cpu] = ev.Tid
		case k < 13:
			ev.Kind, ev.Tid, ev.Comm, ev.TargetCPU = KindWaking, tid(), comm(), int32(pick(cpus))
			ev.IRQ = IRQContext(pick(3))
		case k == 13:
			ev.Kind, ev.Tid, ev.Comm = KindNewTask, tid(), comm()
			if pick(2) == 0 {
				ev.CloneFlags = cloneThread
			}
		case k == 14:
			ev.Kind, ev.IOWait = KindBlockedReason, pick(2) == 0
			ev.Tid = tid()
		case k == 15:
			ev.Kind = []Kind{KindWakeup, KindWakeupNew, KindFork}[pick(3)]
			ev.Tid, ev.Comm, ev.PrevTid = tid(), comm(), tid()
		case k == 16:
			ev.Kind, ev.Tid, ev.Comm, ev.PrevComm = KindRename, tid(), comm(), comm()
		case k == 17:
			ev.Kind, ev.Tid, ev.Tgid = []Kind{KindExit, KindFree}[pick(2)], tid(), tid()
		case k == 18:
			ev.Kind, ev.CPU, ev.Pid, ev.Tid, ev.Tgid, ev.Comm = KindThreadInfo, -1, -1, tid(), tid(), comm()
		default:
			ev.Kind, ev.CPU, ev.Pid, ev.Tid, ev.PrevTid = KindProcessInfo, -1, -1, tid(), tid()
			if pick(2) == 0 {
				ev.Args = []string{"/bin/svc", fmt.Sprint(pick(9))}
			}
		}
		evs = append(evs, ev)
	}
	return evs
}

// schedLog is everything a tracker reports, in order.
type schedLog struct {
	rows    []any // SliceRow and StateRow values as they were emitted
	stats   SchedStats
	threads []Thread
	live    map[int32]int // tid → UTID of the live threads of equivTids
}

func runFast(evs []Event) schedLog {
	var l schedLog
	t := NewThreads()
	s := NewSched(t)
	s.Rows = RowFuncs{
		OnSlice: func(r SliceRow) { l.rows = append(l.rows, r) },
		OnState: func(r StateRow) { l.rows = append(l.rows, r) },
	}
	for i := range evs {
		s.Add(&evs[i])
	}
	s.Finish()
	l.stats = s.Stats()
	for _, th := range t.All() {
		l.threads = append(l.threads, *th)
	}
	l.live = map[int32]int{}
	for _, tid := range equivTids {
		if th := t.Lookup(tid); th != nil {
			l.live[tid] = th.UTID
		}
	}
	return l
}

func runRef(evs []Event) schedLog {
	var l schedLog
	t := newRefThreads()
	s := newRefSched(t)
	s.OnSlice = func(r SliceRow) { l.rows = append(l.rows, r) }
	s.OnState = func(r StateRow) { l.rows = append(l.rows, r) }
	for i := range evs {
		s.Add(&evs[i])
	}
	s.Finish()
	l.stats = s.Stats()
	for _, th := range t.All() {
		l.threads = append(l.threads, *th)
	}
	l.live = map[int32]int{}
	for _, tid := range equivTids {
		if th := t.Lookup(tid); th != nil {
			l.live[tid] = th.UTID
		}
	}
	return l
}

// compareLogs fails t at the first difference.
func compareLogs(t *testing.T, evs []Event, got, want schedLog) {
	t.Helper()
	for i := range min(len(got.rows), len(want.rows)) {
		if got.rows[i] != want.rows[i] {
			t.Fatalf("row %d: got %+v, want %+v (%d events)", i, got.rows[i], want.rows[i], len(evs))
		}
	}
	if len(got.rows) != len(want.rows) {
		t.Fatalf("got %d rows, want %d", len(got.rows), len(want.rows))
	}
	if got.stats != want.stats {
		t.Fatalf("stats: got %+v, want %+v", got.stats, want.stats)
	}
	if !reflect.DeepEqual(got.threads, want.threads) {
		t.Fatalf("threads differ:\ngot  %+v\nwant %+v", got.threads, want.threads)
	}
	if !reflect.DeepEqual(got.live, want.live) {
		t.Fatalf("live tids: got %v, want %v", got.live, want.live)
	}
}

// runFastSkipping runs the fast tracker with SkipRunning and SkipIdle set.
func runFastSkipping(evs []Event) []any {
	var rows []any
	s := NewSched(NewThreads())
	s.SkipRunning, s.SkipIdle = true, true
	s.Rows = RowFuncs{
		OnSlice: func(r SliceRow) { rows = append(rows, r) },
		OnState: func(r StateRow) { rows = append(rows, r) },
	}
	for i := range evs {
		s.Add(&evs[i])
	}
	s.Finish()
	return rows
}

// withoutRunning is rows less the Running state rows and the idle task's
// slices.
func withoutRunning(rows []any) []any {
	var out []any
	for _, r := range rows {
		if st, ok := r.(StateRow); ok && st.State == StateRunning {
			continue
		}
		if sl, ok := r.(SliceRow); ok && sl.UTID == 0 {
			continue
		}
		out = append(out, r)
	}
	return out
}

func TestSchedMatchesReference(t *testing.T) {
	tests := []struct {
		name   string
		seeds  int
		events int
	}{
		{"short streams", 500, 50},
		{"long streams", 40, 5000},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rows := 0
			for seed := range tc.seeds {
				rng := rand.New(rand.NewPCG(uint64(seed), 0x5ced))
				evs := genEvents(tc.events, rng.IntN)
				want := runRef(evs)
				compareLogs(t, evs, runFast(evs), want)
				if got, want := runFastSkipping(evs), withoutRunning(want.rows); !reflect.DeepEqual(got, want) {
					t.Fatalf("SkipRunning, SkipIdle: %d rows, want the %d that are neither Running nor idle slices", len(got), len(want))
				}
				rows += len(want.rows)
			}
			// The streams must exercise the tracker, not just pass through it.
			if rows < tc.seeds*tc.events/2 {
				t.Fatalf("only %d rows from %d events", rows, tc.seeds*tc.events)
			}
		})
	}
}

// FuzzSchedMatchesReference lets the fuzzer choose the event stream.
func FuzzSchedMatchesReference(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})
	f.Add([]byte("switch waking newtask blocked_reason free exit rename"))
	f.Fuzz(func(t *testing.T, choices []byte) {
		i := 0
		pick := func(k int) int {
			if i >= len(choices) {
				return 0
			}
			i++
			return int(choices[i-1]) % k
		}
		evs := genEvents(len(choices)/4+1, pick)
		compareLogs(t, evs, runFast(evs), runRef(evs))
	})
}
