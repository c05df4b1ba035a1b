//go:build linux

package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"temper.codes/temper-train/bpf"
	"temper.codes/temper-train/observe"
)

// The user-space half of the BPF recorder, without the kernel: raw ring
// buffer records, laid out as bpf/tracer.h's struct tt_event, go through
// recorder.handle into an observe.PerfettoWriter exactly as Run's read loop feeds
// them. What is left out is the ring buffer read itself (cilium's
// ringbuf.Reader) and the epoll wakeups; scripts/bench.sh puts the figure
// next to the end-to-end user-space cost per event measured on a live
// recording, so the difference is that part.

// rawStreamEvent is what the stream generator says about each record, for
// the check that decoding gives it back.
type rawStreamEvent struct {
	ts       int64
	kind     observe.Kind
	cpu      int32
	pid, tid int32
}

// rawSchedStream builds n raw tt_event records (concatenated, 80 bytes each)
// of a busy two-CPU machine: 20 threads in 5 processes waking each other over
// pipes, switching in and out, sometimes preempted, sometimes woken from an
// interrupt, and the idle task filling the gaps. Timestamps grow per CPU, the
// CPUs' records interleave the way the shared ring buffer delivers them.
func rawSchedStream(n int) ([]byte, []rawStreamEvent) {
	const cpus, threads = 2, 20
	rng := rand.New(rand.NewPCG(1, 2))
	comms := []string{"sched-pipe", "redis-server", "io_thread", "worker", "kworker/u4:2"}
	type task struct {
		tid, tgid, prio int32
		comm            string
		runnable        bool
	}
	tasks := make([]task, threads)
	for i := range tasks {
		g := i / 4
		tasks[i] = task{tid: int32(4000 + i), tgid: int32(4000 + g*4), prio: 120, comm: comms[g%len(comms)]}
		if i%7 == 6 {
			tasks[i].prio = 100
		}
	}
	idle := task{comm: "swapper/0", prio: 120}
	cur := make([]int, cpus) // index into tasks, -1 idle
	runq := make([][]int, cpus)
	for c := range cur {
		cur[c] = -1
	}
	taskOf := func(i int, cpu int) *task {
		if i < 0 {
			t := idle
			t.comm = "swapper/" + string(rune('0'+cpu))
			return &t
		}
		return &tasks[i]
	}
	out := make([]byte, 0, n*80)
	evs := make([]rawStreamEvent, 0, n)
	ts := int64(5_000_000_000)
	var rec bpf.TracerTtEvent
	setComm := func(dst *[16]int8, s string) {
		*dst = [16]int8{}
		for i := 0; i < len(s) && i < 15; i++ {
			dst[i] = int8(s[i])
		}
	}
	for len(evs) < n {
		cpu := rng.IntN(cpus)
		ts += 300 + rng.Int64N(2500)
		rec = bpf.TracerTtEvent{Ts: uint64(ts), Cpu: uint16(cpu), TargetCpu: 0}
		prev := taskOf(cur[cpu], cpu)
		sleeping := make([]int, 0, threads)
		for i := range tasks {
			if !tasks[i].runnable {
				sleeping = append(sleeping, i)
			}
		}
		if len(sleeping) > 0 && (rng.IntN(5) < 2 || len(runq[cpu]) == 0 && cur[cpu] < 0) {
			// A waking: the current task (or an interrupt on it) wakes a
			// sleeper onto one of the CPUs.
			w := sleeping[rng.IntN(len(sleeping))]
			tc := rng.IntN(cpus)
			wt := &tasks[w]
			wt.runnable = true
			runq[tc] = append(runq[tc], w)
			rec.Kind = uint8(bpf.TracerTtKindTT_WAKING)
			rec.Pid, rec.PrevTgid = prev.tid, prev.tgid
			setComm(&rec.PrevComm, prev.comm)
			rec.Tid, rec.Tgid, rec.Prio = wt.tid, wt.tgid, wt.prio
			setComm(&rec.Comm, wt.comm)
			rec.TargetCpu = int32(tc)
			if cur[cpu] < 0 || rng.IntN(50) == 0 {
				rec.Irq = uint8(bpf.TracerTtIrqTT_IRQ_HARD)
			}
			evs = append(evs, rawStreamEvent{ts: ts, kind: observe.KindWaking, cpu: int32(cpu), pid: prev.tid, tid: wt.tid})
		} else {
			// A switch: the current task blocks (or is preempted) and the
			// next runnable one, or idle, takes the CPU.
			next := -1
			if len(runq[cpu]) > 0 {
				next = runq[cpu][0]
				runq[cpu] = runq[cpu][1:]
			}
			rec.PrevState = 1 // S
			if cur[cpu] >= 0 {
				if rng.IntN(4) == 0 {
					rec.PrevState = 0x100 // preempted: stays runnable
					runq[cpu] = append(runq[cpu], cur[cpu])
				} else {
					tasks[cur[cpu]].runnable = false
				}
			} else {
				rec.PrevState = 0
			}
			nt := taskOf(next, cpu)
			rec.Kind = uint8(bpf.TracerTtKindTT_SWITCH)
			rec.Pid, rec.PrevTgid, rec.PrevPrio = prev.tid, prev.tgid, prev.prio
			setComm(&rec.PrevComm, prev.comm)
			rec.Tid, rec.Tgid, rec.Prio = nt.tid, nt.tgid, nt.prio
			setComm(&rec.Comm, nt.comm)
			cur[cpu] = next
			evs = append(evs, rawStreamEvent{ts: ts, kind: observe.KindSwitch, cpu: int32(cpu), pid: prev.tid, tid: nt.tid})
		}
		var err error
		if out, err = binary.Append(out, binary.LittleEndian, &rec); err != nil {
			panic(err)
		}
	}
	return out, evs
}

// newBenchRecorder builds a recorder the way Run does, minus the tracer:
// handle never touches it for switches and wakings. Run fills the struct
// inline; rather than repeat its bookkeeping fields here (and break when
// they change), every nil map field is made empty.
func newBenchRecorder(w io.Writer) *recorder {
	r := &recorder{res: &Result{}}
	v := reflect.ValueOf(r).Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Map && f.IsNil() {
			reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.MakeMap(f.Type()))
		}
	}
	r.cw = &countingWriter{w: w}
	r.pw = observe.NewPerfettoWriter(r.cw, observe.TraceInfo{Format: observe.FormatPerfetto, KernelRelease: "6.18.0", NumCPUs: 2})
	r.pw.BundleEvents = 4096
	return r
}

func feedRecorder(tb testing.TB, r *recorder, raw []byte) {
	const size = 80
	if got := binary.Size(bpf.TracerTtEvent{}); got != size {
		tb.Fatalf("bpf.TracerTtEvent is %d bytes, the stream assumes %d: update rawSchedStream", got, size)
	}
	for off := 0; off+size <= len(raw); off += size {
		r.handle(raw[off : off+size])
	}
	if err := r.pw.Flush(); err != nil {
		tb.Fatal(err)
	}
	r.res.Bytes = r.cw.n
	if len(r.res.Warnings) > 0 {
		tb.Fatalf("recorder warnings: %q", r.res.Warnings)
	}
}

// TestRecordDecodeStream checks that the benchmark's stream is what it claims
// to be: every record decodes and reads back from the trace as generated.
func TestRecordDecodeStream(t *testing.T) {
	raw, want := rawSchedStream(20_000)
	var buf bytes.Buffer
	r := newBenchRecorder(&buf)
	feedRecorder(t, r, raw)
	if r.res.Events != int64(len(want)) || r.res.Clamped != 0 {
		t.Fatalf("recorder wrote %d events (%d clamped), want %d", r.res.Events, r.res.Clamped, len(want))
	}
	rd, err := observe.NewReader(&buf, "bench")
	if err != nil {
		t.Fatal(err)
	}
	perCPU := map[int32][]rawStreamEvent{}
	for _, e := range want {
		perCPU[e.cpu] = append(perCPU[e.cpu], e)
	}
	var ev observe.Event
	n := 0
	for {
		err := rd.Next(&ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind != observe.KindSwitch && ev.Kind != observe.KindWaking {
			continue
		}
		q := perCPU[ev.CPU]
		if len(q) == 0 {
			t.Fatalf("extra event %v", &ev)
		}
		w := q[0]
		perCPU[ev.CPU] = q[1:]
		pid := ev.Pid
		if ev.Kind == observe.KindSwitch {
			pid = ev.PrevTid
		}
		if ev.TS != w.ts || ev.Kind != w.kind || pid != w.pid || ev.Tid != w.tid {
			t.Fatalf("event %d on cpu %d: got %v, want %+v", n, ev.CPU, &ev, w)
		}
		n++
	}
	if n != len(want) {
		t.Fatalf("read back %d switches and wakings, want %d", n, len(want))
	}
}

// BenchmarkRecordDecode measures the recorder's user-space cost per event:
// decode one raw ring buffer record, intern comms, describe new threads,
// encode into compact_sched bundles, write. Reported per event: ns, heap
// allocations and bytes on disk.
func BenchmarkRecordDecode(b *testing.B) {
	const n = 200_000
	raw, _ := rawSchedStream(n)
	var ms0, ms1 runtime.MemStats
	var bytesPerEvent float64
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for b.Loop() {
		r := newBenchRecorder(io.Discard)
		feedRecorder(b, r, raw)
		if r.res.Events != n {
			b.Fatalf("recorder wrote %d events, want %d", r.res.Events, n)
		}
		bytesPerEvent = float64(r.res.Bytes) / float64(r.res.Events)
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	events := float64(b.N) * n
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/events, "allocs/event")
	b.ReportMetric(bytesPerEvent, "bytes/event")
}
