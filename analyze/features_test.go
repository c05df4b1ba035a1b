package analyze

import (
	"slices"
	"testing"

	"temper.codes/temper-train/observe"
)

// featureTrace is a hand-made two-CPU trace with known answers (times in µs):
//
//	cpu0: 0 idle→A | 1000 A(R)→B | 4500 B wakes A | 4600 B(S)→idle |
//	      8800 IRQ wakes A | 9000 idle→A | 12000 A wakes B | 13000 A(R+)→B |
//	      15000 B(S)→idle | 20000 IRQ wakes C
//	cpu1: 2000 idle→A | 4000 A(S)→idle | 5000 idle→A | 8000 A(D)→idle
//
// A runs 1000, 2000, 3000, 4000 µs (cpu0, cpu1, cpu1, cpu0: 2 migrations),
// leaving in R, S, D, R+; it is woken by B (latency 500 µs) and by an
// interrupt (200 µs). B runs 3600 and 2000 µs, woken once by A (1000 µs).
// C is woken by an interrupt at the very end and never runs.
func featureTrace() *trace {
	const A, B, C = 101, 102, 103
	return newTrace().
		thread(A, 100, "app-main").thread(B, 100, "app-worker-1").thread(C, 100, "app-worker-2").
		sw(0, 0, 0, stR, A).
		sw(1000, 0, A, stR, B).
		sw(2000, 1, 0, stR, A).
		sw(4000, 1, A, stS, 0).
		wake(4500, 0, B, A, observe.IRQNone).
		sw(4600, 0, B, stS, 0).
		sw(5000, 1, 0, stR, A).
		sw(8000, 1, A, stD, 0).
		wake(8800, 0, 0, A, observe.IRQHard).
		sw(9000, 0, 0, stR, A).
		wake(12000, 0, A, B, observe.IRQNone).
		sw(13000, 0, A, stRp, B).
		sw(15000, 0, B, stS, 0).
		wake(20000, 0, 0, C, observe.IRQSoft)
}

func TestFeaturesExact(t *testing.T) {
	a := featureTrace().analyze(t, Options{Pids: []int{100}})
	if a.Trace.WindowNs != 20_000_000 {
		t.Fatalf("window %d ns, want 20 ms", a.Trace.WindowNs)
	}
	A := threadByTid(t, a, 101).Features
	type check struct {
		name      string
		got, want any
	}
	ms := func(x int64) int64 { return x * 1e6 }
	usn := func(x int64) int64 { return x * 1e3 }
	for _, c := range []check{
		{"A run n", A.Run.N, int64(4)},
		{"A run p50", A.Run.P50, ms(2)},
		{"A run p90", A.Run.P90, ms(4)},
		{"A run p99", A.Run.P99, ms(4)},
		{"A run mean", A.Run.Mean, 2.5e6},
		{"A run exact", A.Run.Exact, true},
		{"A time-weighted p50", A.RunTimeP50, ms(3)},
		{"A run ns", A.RunNs, ms(10)},
		{"A cpu share", A.CPUShare, 0.5},
		{"A wakeups", A.Wakeups, int64(2)},
		{"A wake rate", A.WakeRate, 100.0},
		{"A wake latency n", A.WakeLatency.N, int64(2)},
		{"A wake latency p50", A.WakeLatency.P50, usn(200)},
		{"A wake latency p90", A.WakeLatency.P90, usn(500)},
		{"A switch-outs", A.SwitchOuts, int64(4)},
		{"A preempted", A.Preempted, int64(2)},
		{"A sleep", A.Sleep, int64(1)},
		{"A disk", A.Disk, int64(1)},
		{"A preempt share", A.PreemptShare, 0.5},
		{"A sleep share", A.SleepShare, 0.25},
		{"A disk share", A.DiskShare, 0.25},
		{"A runnable after wakeup", A.RunnableNs, usn(700)},
		{"A waiting after preemption", A.PreemptNs, usn(1000 + 7000)},
		{"A sleep ns", A.SleepNs, usn(500)},
		{"A disk ns", A.DiskNs, usn(800)},
		{"A migrations", A.Migrations, int64(2)},
		{"A wakes out", A.WakesOut, int64(1)},
		{"A untimed runs", A.UntimedRuns, int64(0)},
		{"A open runs", A.OpenRuns, int64(0)},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !slices.Equal(A.CPUs, []int{0, 1}) {
		t.Errorf("A cpus %v, want [0 1]", A.CPUs)
	}

	B := threadByTid(t, a, 102).Features
	if B.Run.N != 2 || B.Run.P50 != ms(2) || B.Run.P99 != usn(3600) || B.RunNs != usn(5600) {
		t.Errorf("B runs: %+v, run ns %d; want 2000 µs and 3600 µs", B.Run, B.RunNs)
	}
	if B.Wakeups != 1 || B.WakeLatency.P50 != ms(1) || B.Migrations != 0 || B.SleepShare != 1 {
		t.Errorf("B: wakeups %d latency %d migrations %d sleep share %v; want 1, 1 ms, 0, 1",
			B.Wakeups, B.WakeLatency.P50, B.Migrations, B.SleepShare)
	}
	C := threadByTid(t, a, 103)
	if !C.NeverRan || C.Features.Wakeups != 1 || C.Features.Run.N != 0 || C.Class != ClassSporadic {
		t.Errorf("C: never ran %v, wakeups %d, runs %d, class %s; want true, 1, 0, sporadic",
			C.NeverRan, C.Features.Wakeups, C.Features.Run.N, C.Class)
	}

	// Waker → wakee counts, as edges and as each thread's view.
	wantEdges := map[[2]string]int64{
		{"app-worker-1/102", "app-main/101"}: 1,
		{"hardirq", "app-main/101"}:          1,
		{"app-main/101", "app-worker-1/102"}: 1,
		{"softirq", "app-worker-2/103"}:      1,
	}
	if len(a.Graph.Edges) != len(wantEdges) {
		t.Errorf("edges %+v, want %v", a.Graph.Edges, wantEdges)
	}
	for _, e := range a.Graph.Edges {
		if wantEdges[[2]string{e.From, e.To}] != e.Count {
			t.Errorf("edge %s → %s: %d, want %d", e.From, e.To, e.Count, wantEdges[[2]string{e.From, e.To}])
		}
	}
	byA := threadByTid(t, a, 101).WokenBy
	if len(byA) != 2 || byA[0].Share != 0.5 || byA[1].Share != 0.5 {
		t.Errorf("A woken by %+v, want B and hardirq, half each", byA)
	}
	// A's wakings: the interrupt ended its D wait (I/O), B's ended an S wait,
	// and A and B wake each other once each (mutual: peers).
	if f := threadByTid(t, a, 101).Features; f.External != 0.5 || f.IOWake != 0.5 || f.Peer != 0.5 || f.Source != 0 || f.Chain != 0 {
		t.Errorf("A: external %v, io %v, peer %v, source %v, chain %v; want 0.5, 0.5, 0.5, 0, 0",
			f.External, f.IOWake, f.Peer, f.Source, f.Chain)
	}
}

// TestUntimedRuns: a switch-out whose switch-in the trace missed counts as
// a switch-out (its prev_state is known) but not as a run of known length.
func TestUntimedRuns(t *testing.T) {
	const A, X = 201, 202
	b := newTrace().thread(A, 200, "svc").thread(X, 300, "other").
		sw(0, 0, 0, stR, X).
		// X → A missing from the trace.
		sw(500, 0, A, stS, 0).
		sw(1000, 0, 0, stR, A).
		sw(1300, 0, A, stS, 0)
	a := b.analyze(t, Options{Pids: []int{200}})
	f := threadByTid(t, a, A).Features
	if f.SwitchOuts != 2 || f.Run.N != 1 || f.UntimedRuns != 1 || f.RunNs != 300_000 {
		t.Errorf("switch-outs %d, runs %d, untimed %d, run ns %d; want 2, 1, 1, 300000", f.SwitchOuts, f.Run.N, f.UntimedRuns, f.RunNs)
	}
	if a.Trace.Mismatched != 1 {
		t.Errorf("mismatched %d, want 1", a.Trace.Mismatched)
	}
}
