package analyze

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/observe"
)

// synthWorkload emits a busy machine's stream: cpus CPUs, threads threads
// in processes of 10, each CPU switching between them and waking others,
// every fourth waking in interrupt context, prev_state cycling S, R, D.
func synthWorkload(n, cpus, threads int, emit func(*observe.Event)) {
	cur := make([]int32, cpus)
	states := []observe.TaskState{observe.StateSleeping, observe.StateRunnable, observe.StateSleeping, observe.StateUninterruptible}
	comm := func(tid int32) string {
		if tid == 0 {
			return "swapper"
		}
		return fmt.Sprintf("svc-%d", tid%16)
	}
	for tid := int32(1000); tid < int32(1000+threads); tid++ {
		emit(&observe.Event{TS: 1e9, Kind: observe.KindThreadInfo, CPU: -1, Pid: -1, Tid: tid, Tgid: 1000 + (tid-1000)/10*10, Comm: comm(tid)})
	}
	ts := int64(1e9)
	for i := 0; i < n; i++ {
		cpu := int32(i % cpus)
		ts += 997
		tid := int32(1000 + (i*7919)%threads)
		if (i/cpus)%2 == 0 || cur[cpu] == 0 {
			emit(&observe.Event{TS: ts, Kind: observe.KindSwitch, CPU: cpu, Pid: cur[cpu], PrevTid: cur[cpu],
				PrevComm: comm(cur[cpu]), PrevPrio: 120, PrevState: states[i%len(states)], Tid: tid, Comm: comm(tid), Prio: 120})
			cur[cpu] = tid
		} else {
			irq := observe.IRQNone
			if i%4 == 1 {
				irq = observe.IRQSoft
			}
			emit(&observe.Event{TS: ts, Kind: observe.KindWaking, CPU: cpu, Pid: cur[cpu], Tid: tid, Comm: comm(tid),
				Prio: 120, TargetCPU: (cpu + 1) % int32(cpus), IRQ: irq})
		}
	}
}

func synthPerfetto(tb testing.TB, n, threads int) []byte {
	var buf bytes.Buffer
	w := observe.NewPerfettoWriter(&buf, observe.TraceInfo{KernelRelease: "6.18.0", NumCPUs: 8})
	synthWorkload(n, 8, threads, func(ev *observe.Event) {
		if err := w.Write(ev); err != nil {
			tb.Fatal(err)
		}
	})
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkAnalyze measures the whole analysis of a Perfetto trace (decode,
// thread-state reconstruction, features, graph, clustering). Target: ≥ 10 M
// events/s per core (run with GOMAXPROCS=1); measured, not asserted. Besides
// wall-clock events/s it reports events per CPU-second of the process, which
// other load on a shared machine disturbs less, and allocations per event.
func BenchmarkAnalyze(b *testing.B) {
	for _, threads := range []int{300, 3000} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			data := synthPerfetto(b, 1_000_000, threads)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			m := startMeter(b)
			var events int64
			for b.Loop() {
				r, err := observe.NewReader(bytes.NewReader(data), "bench")
				if err != nil {
					b.Fatal(err)
				}
				a, err := Trace(r, Options{Path: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				events = a.Trace.Events
				m.ops++
			}
			m.report(b, events)
		})
	}
}

// BenchmarkAnalyzeEvents measures the analysis alone, on events already
// decoded, to separate it from the decoder's cost.
func BenchmarkAnalyzeEvents(b *testing.B) {
	var evs []observe.Event
	synthWorkload(1_000_000, 8, 300, func(ev *observe.Event) { evs = append(evs, *ev) })
	b.ReportAllocs()
	m := startMeter(b)
	for b.Loop() {
		if _, err := Trace(&sliceReader{evs: evs}, Options{Path: "bench"}); err != nil {
			b.Fatal(err)
		}
		m.ops++
	}
	m.report(b, int64(len(evs)))
}

// BenchmarkAnalyzeStream measures the streaming part alone: thread states,
// per-thread features and wake edges over events already decoded, without
// the decoder, the copy a Reader makes or the per-thread work (clustering)
// after the stream. What the analysis itself adds to every event.
func BenchmarkAnalyzeStream(b *testing.B) {
	var evs []observe.Event
	synthWorkload(1_000_000, 8, 300, func(ev *observe.Event) { evs = append(evs, *ev) })
	b.ReportAllocs()
	m := startMeter(b)
	for b.Loop() {
		c := newCollector(nil)
		for i := range evs {
			c.add(&evs[i])
		}
		c.finish()
		m.ops++
	}
	m.report(b, int64(len(evs)))
}

// meter measures a benchmark loop per event: wall time, the process's CPU
// time (user + system, all threads) and heap allocations.
type meter struct {
	wall   time.Time
	cpu    time.Duration
	allocs uint64
	ops    int
}

func startMeter(tb testing.TB) *meter {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &meter{wall: time.Now(), cpu: processCPU(tb), allocs: ms.Mallocs}
}

// report adds events/s, events/cpu-s and allocs/event for ops runs over
// events events each.
func (m *meter) report(b *testing.B, events int64) {
	wall, cpu := time.Since(m.wall), processCPU(b)-m.cpu
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if m.ops == 0 || events == 0 {
		b.Fatal("nothing measured")
	}
	total := float64(events) * float64(m.ops)
	b.ReportMetric(total/wall.Seconds(), "events/s")
	b.ReportMetric(total/cpu.Seconds(), "events/cpu-s")
	b.ReportMetric(float64(ms.Mallocs-m.allocs)/total, "allocs/event")
}

// processCPU is the CPU time this process has used so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAnalyzeMemory analyses traces 1× and 10× as long, generated as
// they are read, and reports the peak live heap: flat means memory grows
// with threads, not events.
func BenchmarkAnalyzeMemory(b *testing.B) {
	for _, n := range []int{500_000, 5_000_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			var peak uint64
			for b.Loop() {
				pr, pw := io.Pipe()
				go func() {
					w := observe.NewPerfettoWriter(pw, observe.TraceInfo{KernelRelease: "6.18.0", NumCPUs: 8})
					synthWorkload(n, 8, 300, func(ev *observe.Event) { w.Write(ev) })
					pw.CloseWithError(w.Close())
				}()
				r, err := observe.NewReader(pr, "stream")
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				hr := &heapReader{Reader: r}
				if _, err := Trace(hr, Options{Path: "stream"}); err != nil {
					b.Fatal(err)
				}
				peak = max(peak, hr.peak)
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

// heapReader samples the live heap every 100 000 events.
type heapReader struct {
	observe.Reader
	n    int
	peak uint64
}

func (r *heapReader) Next(ev *observe.Event) error {
	r.n++
	if r.n%100_000 == 0 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		r.peak = max(r.peak, ms.HeapAlloc)
	}
	return r.Reader.Next(ev)
}
