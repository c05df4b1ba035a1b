package observe

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// quietTrace writes a machine of 4 CPUs where CPU 0 switches every 10 µs for
// 2 s, CPU 1 only every 400 ms and CPUs 2 and 3 never: the shape of a traced
// workload on a partly idle machine. It returns the trace and the events.
func quietTrace(t *testing.T) ([]byte, []Event) {
	var evs []Event
	cur := [2]int32{}
	add := func(ts int64, cpu int32, tid int32) {
		evs = append(evs, Event{TS: ts, Kind: KindSwitch, CPU: cpu, Pid: cur[cpu], PrevTid: cur[cpu], PrevComm: "w",
			PrevPrio: 120, PrevState: StateSleeping, Tid: tid, Comm: "w", Prio: 120})
		cur[cpu] = tid
	}
	for ts := int64(1e9); ts < 3e9; ts += 10_000 {
		add(ts, 0, int32(100+(ts/10_000)%7))
		if (ts-1e9)%400e6 == 0 {
			add(ts+5_000, 1, int32(200+ts/400e6))
		}
	}
	var buf bytes.Buffer
	w := NewPerfettoWriter(&buf, TraceInfo{KernelRelease: "6.18.0", NumCPUs: 4})
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), evs
}

// readQueued reads data to the end and returns the events and the most
// events the merger held at once.
func readQueued(t *testing.T, data []byte) ([]Event, int) {
	rd, err := NewReader(bytes.NewReader(data), "quiet")
	if err != nil {
		t.Fatal(err)
	}
	r := rd.(*PerfettoReader)
	var got []Event
	peak := 0
	for {
		var ev Event
		err := r.Next(&ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
		n := 0
		for i := range r.merge.queues {
			n += r.merge.queues[i].len()
		}
		peak = max(peak, n)
	}
	if r.Stats().OutOfOrder != 0 {
		t.Errorf("%d events out of order", r.Stats().OutOfOrder)
	}
	return got, peak
}

// withoutMarks drops the progress marks from a trace, as a trace written
// before they existed.
func withoutMarks(t *testing.T, data []byte) []byte {
	var out []byte
	var d packetDecoder
	for _, p := range tracePackets(t, data) {
		if d.decode(p) && len(d.bundle.swTS)+len(d.bundle.wkTS)+len(d.bundle.full) == 0 && d.hasTS {
			continue
		}
		out = append(out, 0x0a)
		out = appendVarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	return out
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// TestProgressMarks checks that the writer's progress marks let the reader
// release a busy CPU's events without waiting out the sort window for quiet
// CPUs, and that they change nothing in what is read: the same events as
// written, and as read from the same trace without marks.
func TestProgressMarks(t *testing.T) {
	data, evs := quietTrace(t)
	got, peak := readQueued(t, data)
	diffEvents(t, evs, got)
	plain := withoutMarks(t, data)
	if len(plain) >= len(data) {
		t.Fatalf("the trace has no progress marks")
	}
	gotPlain, peakPlain := readQueued(t, plain)
	diffEvents(t, evs, gotPlain)
	// Marks trail the newest event by at most BundleAge/8, and a quiet CPU's
	// by its open bundle (at most BundleAge + BundleAge/4): about 31 000
	// events of CPU 0 here; the 1 s window alone holds 100 000.
	t.Logf("peak queued: %d with marks, %d without", peak, peakPlain)
	if peak > 35_000 || peakPlain < 90_000 {
		t.Errorf("peak queued events %d with marks, %d without", peak, peakPlain)
	}
}
