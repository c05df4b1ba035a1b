package observe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// synthEvents generates a busy machine's sched stream: cpus CPUs, threads
// threads switching and waking each other, comms drawn from a small set the
// way a real workload's are.
func synthEvents(n, cpus, threads int, emit func(*Event)) {
	comms := []string{"mysqld", "ib_io_rd-1", "ib_io_wr-2", "one_connection", "kworker/0:1", "redis-server", "postgres", "java"}
	cur := make([]int32, cpus)
	ts := int64(1e9)
	for i := 0; i < n; i++ {
		cpu := int32(i % cpus)
		ts += 997
		tid := int32(1000 + (i*7919)%threads)
		if (i/cpus)%2 == 0 || cur[cpu] == 0 {
			ev := Event{TS: ts, Kind: KindSwitch, CPU: cpu, Pid: cur[cpu], PrevTid: cur[cpu],
				PrevComm: comms[int(cur[cpu])%len(comms)], PrevPrio: 120, PrevState: StateSleeping,
				Tid: tid, Comm: comms[int(tid)%len(comms)], Prio: 120}
			if cur[cpu] == 0 {
				ev.PrevComm = "swapper"
			}
			emit(&ev)
			cur[cpu] = tid
		} else {
			ev := Event{TS: ts, Kind: KindWaking, CPU: cpu, Pid: cur[cpu], Tid: tid,
				Comm: comms[int(tid)%len(comms)], Prio: 120, TargetCPU: (cpu + 1) % int32(cpus)}
			emit(&ev)
		}
	}
}

func synthPerfetto(tb testing.TB, n int) []byte {
	var buf bytes.Buffer
	w := NewPerfettoWriter(&buf, TraceInfo{KernelRelease: "6.18.0", NumCPUs: 8})
	synthEvents(n, 8, 300, func(ev *Event) {
		if err := w.Write(ev); err != nil {
			tb.Fatal(err)
		}
	})
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func synthText(n int) []byte {
	var buf bytes.Buffer
	buf.WriteString("# tracer: nop\n#\n")
	synthEvents(n, 8, 300, func(ev *Event) {
		sec, usec := ev.TS/1e9, (ev.TS%1e9)/1e3
		switch ev.Kind {
		case KindSwitch:
			fmt.Fprintf(&buf, "%16s-%-7d (%7d) [%03d] d..2. %5d.%06d: sched_switch: prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s ==> next_comm=%s next_pid=%d next_prio=%d\n",
				ev.PrevComm, ev.PrevTid, ev.PrevTid, ev.CPU, sec, usec, ev.PrevComm, ev.PrevTid, ev.PrevPrio, ev.PrevState, ev.Comm, ev.Tid, ev.Prio)
		case KindWaking:
			fmt.Fprintf(&buf, "%16s-%-7d (%7d) [%03d] d..2. %5d.%06d: sched_waking: comm=%s pid=%d prio=%d target_cpu=%03d\n",
				"x", ev.Pid, ev.Pid, ev.CPU, sec, usec, ev.Comm, ev.Tid, ev.Prio, ev.TargetCPU)
		}
	})
	return buf.Bytes()
}

func decodeAll(b *testing.B, data []byte) int {
	r, err := NewReader(bytes.NewReader(data), "bench")
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	var ev Event
	for {
		err := r.Next(&ev)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
		n++
	}
}

func benchDecode(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var events int
	b.ResetTimer()
	for b.Loop() {
		events = decodeAll(b, data)
	}
	b.StopTimer()
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(events)/perOp, "events/s")
	b.ReportMetric(float64(len(data))/float64(events), "bytes/event")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
}

// BenchmarkDecodeCompactSched measures Perfetto decode of compact_sched
// bundles, the form observe writes. Target: ≥ 20 M events/s per core.
func BenchmarkDecodeCompactSched(b *testing.B) {
	benchDecode(b, synthPerfetto(b, 1_000_000))
}

// BenchmarkDecodeFtraceText measures decode of /sys/kernel/tracing/trace text.
func BenchmarkDecodeFtraceText(b *testing.B) {
	benchDecode(b, synthText(200_000))
}

// BenchmarkDecodeMemory decodes traces 1× and 10× as long from a stream (the
// trace is generated as it is read, so only the decoder's memory counts) and
// reports the peak live heap: flat means streaming works.
func BenchmarkDecodeMemory(b *testing.B) {
	for _, n := range []int{500_000, 5_000_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			var peak uint64
			for b.Loop() {
				peak = max(peak, streamPeakHeap(b, n))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
		})
	}
}

func streamPeakHeap(b *testing.B, n int) uint64 {
	pr, pw := io.Pipe()
	go func() {
		w := NewPerfettoWriter(pw, TraceInfo{KernelRelease: "6.18.0", NumCPUs: 8})
		synthEvents(n, 8, 300, func(ev *Event) { w.Write(ev) })
		pw.CloseWithError(w.Close())
	}()
	r, err := NewReader(pr, "stream")
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var peak uint64
	var ms runtime.MemStats
	var ev Event
	for i := 0; ; i++ {
		err := r.Next(&ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if i%250_000 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
	}
	return peak
}
