package analyze

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"

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
// thread-state reconstruction, features, graph, clustering) and reports
// events/s. Target: ≥ 10 M events/s per core; measured, not asserted.
func BenchmarkAnalyze(b *testing.B) {
	for _, threads := range []int{300, 3000} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			data := synthPerfetto(b, 1_000_000, threads)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var events int64
			for b.Loop() {
				r, err := observe.NewReader(bytes.NewReader(data), "bench")
				if err != nil {
					b.Fatal(err)
				}
				a, err := Analyze(r, Options{Path: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				events = a.Trace.Events
			}
			b.ReportMetric(float64(events)/(b.Elapsed().Seconds()/float64(b.N)), "events/s")
		})
	}
}

// BenchmarkAnalyzeEvents measures the analysis alone, on events already
// decoded, to separate it from the decoder's cost.
func BenchmarkAnalyzeEvents(b *testing.B) {
	var evs []observe.Event
	synthWorkload(300_000, 8, 300, func(ev *observe.Event) { evs = append(evs, *ev) })
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Analyze(&sliceReader{evs: evs}, Options{Path: "bench"}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(evs))/(b.Elapsed().Seconds()/float64(b.N)), "events/s")
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
				if _, err := Analyze(hr, Options{Path: "stream"}); err != nil {
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
