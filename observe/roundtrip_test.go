package observe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"temper.codes/temper-train/internal/testkit"
)

// goldenEvents is a hand-made stream that exercises every event kind and every
// corner of the compact encoding: a CPU's first switch (no known prev, so a full
// event), compact switches and wakings, a waking by a task other than the CPU's
// current one (full event), wakings from interrupts, equal timestamps across
// compact and full streams, every prev_state, identity packets and a task
// created, renamed, exiting and freed.
func goldenEvents() []Event {
	return []Event{
		{TS: 1000, Kind: KindProcessInfo, CPU: -1, Pid: -1, Tid: 100, Tgid: 100, PrevTid: 1, Args: []string{"/usr/sbin/mysqld", "--user=mysql"}},
		{TS: 1000, Kind: KindThreadInfo, CPU: -1, Pid: -1, Tid: 100, Tgid: 100, Comm: "mysqld"},
		{TS: 1000, Kind: KindThreadInfo, CPU: -1, Pid: -1, Tid: 101, Tgid: 100, Comm: "ib_io_rd-1"},
		{TS: 2000, Kind: KindSwitch, CPU: 0, Pid: 0, PrevTid: 0, PrevComm: "swapper/0", PrevPrio: 120, PrevState: StateRunnable, Tid: 100, Comm: "mysqld", Prio: 120},
		{TS: 2100, Kind: KindSwitch, CPU: 1, Pid: 0, PrevTid: 0, PrevComm: "swapper/1", PrevPrio: 120, PrevState: StateRunnable, Tid: 101, Comm: "ib_io_rd-1", Prio: 120},
		{TS: 2500, Kind: KindWaking, CPU: 0, Pid: 100, Tid: 102, Comm: "one_connection", Prio: 120, TargetCPU: 1},
		{TS: 2600, Kind: KindWaking, CPU: 1, Pid: 101, Tid: 103, Comm: "kworker/1:2", Prio: 100, TargetCPU: 1, IRQ: IRQSoft},
		{TS: 2700, Kind: KindWaking, CPU: 1, Pid: 7, Tid: 104, Comm: "ib_pg_flush", Prio: 120, TargetCPU: 0},
		{TS: 3000, Kind: KindSwitch, CPU: 1, Pid: 101, PrevTid: 101, PrevComm: "ib_io_rd-1", PrevPrio: 120, PrevState: StateUninterruptible, Tid: 102, Comm: "one_connection", Prio: 120},
		{TS: 3000, Kind: KindBlockedReason, CPU: 1, Pid: 102, Tid: 101, IOWait: true},
		{TS: 3500, Kind: KindNewTask, CPU: 0, Pid: 100, Tid: 105, Comm: "mysqld", CloneFlags: 0x3d0f00},
		{TS: 3600, Kind: KindWakeupNew, CPU: 0, Pid: 100, Tid: 105, Comm: "mysqld", Prio: 120, TargetCPU: 1},
		{TS: 3700, Kind: KindRename, CPU: 1, Pid: 105, Tid: 105, PrevComm: "mysqld", Comm: "ib_srv_wkr"},
		{TS: 4000, Kind: KindSwitch, CPU: 0, Pid: 100, PrevTid: 100, PrevComm: "mysqld", PrevPrio: 120, PrevState: StateRunnable | StatePreempted, Tid: 104, Comm: "ib_pg_flush", Prio: 120},
		{TS: 4000, Kind: KindWaking, CPU: 0, Pid: 104, Tid: 100, Comm: "mysqld", Prio: 120, TargetCPU: 0},
		{TS: 4100, Kind: KindWakeup, CPU: 0, Pid: 104, Tid: 100, Comm: "mysqld", Prio: 120, TargetCPU: 0, IRQ: IRQHard},
		{TS: 4200, Kind: KindFork, CPU: 0, Pid: 104, PrevTid: 104, PrevComm: "ib_pg_flush", Tid: 106, Comm: "sh"},
		{TS: 4300, Kind: KindSwitch, CPU: 1, Pid: 102, PrevTid: 102, PrevComm: "one_connection", PrevPrio: 120, PrevState: StateSleeping, Tid: 0, Comm: "swapper/1", Prio: 120},
		{TS: 4400, Kind: KindSwitch, CPU: 0, Pid: 104, PrevTid: 104, PrevComm: "ib_pg_flush", PrevPrio: 120, PrevState: StateIdle, Tid: 103, Comm: "kworker/1:2", Prio: 100},
		{TS: 4500, Kind: KindSwitch, CPU: 0, Pid: 103, PrevTid: 103, PrevComm: "kworker/1:2", PrevPrio: 100, PrevState: StateStopped | StateTraced, Tid: 106, Comm: "sh", Prio: 120},
		{TS: 4600, Kind: KindExit, CPU: 0, Pid: 106, Tid: 106, Tgid: 106, Comm: "sh", Prio: 120},
		{TS: 4700, Kind: KindSwitch, CPU: 0, Pid: 106, PrevTid: 106, PrevComm: "sh", PrevPrio: 120, PrevState: StateZombie, Tid: 0, Comm: "swapper/0", Prio: 120},
		{TS: 4800, Kind: KindFree, CPU: 1, Pid: 0, Tid: 106, Comm: "sh", Prio: 120},
		{TS: 4900, Kind: KindSwitch, CPU: 0, Pid: 0, PrevTid: 0, PrevComm: "swapper/0", PrevPrio: 120, PrevState: StateRunnable, Tid: 100, Comm: "mysqld", Prio: 120},
	}
}

var goldenInfo = TraceInfo{Sysname: "Linux", KernelRelease: "6.18.44-fc-v769", KernelVersion: "#1 SMP", Machine: "x86_64", NumCPUs: 2}

func writeEvents(t testing.TB, info TraceInfo, evs []Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewPerfettoWriter(&buf, info)
	w.BundleEvents = 5 // several bundles per CPU, so bundle boundaries are crossed
	for i := range evs {
		if err := w.Write(&evs[i]); err != nil {
			t.Fatalf("write %v: %v", &evs[i], err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readAll(t testing.TB, name string, data []byte) ([]Event, Reader) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	var out []Event
	for {
		var ev Event
		err := r.Next(&ev)
		if errors.Is(err, io.EOF) {
			return out, r
		}
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		out = append(out, ev)
	}
}

// canonical orders events by time, then CPU (identity events first), keeping
// each CPU's own order: the one order a merged multi-CPU stream can promise.
func canonical(evs []Event) []Event {
	out := append([]Event(nil), evs...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].TS != out[j].TS {
			return out[i].TS < out[j].TS
		}
		return out[i].CPU < out[j].CPU
	})
	return out
}

func dump(evs []Event) string {
	var b strings.Builder
	for i := range evs {
		fmt.Fprintf(&b, "%+v\n", evs[i])
	}
	return b.String()
}

func diffEvents(t *testing.T, want, got []Event) {
	t.Helper()
	want, got = canonical(want), canonical(got)
	if len(want) != len(got) {
		t.Errorf("read back %d events, wrote %d", len(got), len(want))
	}
	for i := range min(len(want), len(got)) {
		if fmt.Sprintf("%+v", want[i]) != fmt.Sprintf("%+v", got[i]) {
			t.Fatalf("event %d differs:\nwrote %+v\nread  %+v", i, want[i], got[i])
		}
	}
}

func TestRoundTripGolden(t *testing.T) {
	evs := goldenEvents()
	data := writeEvents(t, goldenInfo, evs)
	got, r := readAll(t, "roundtrip", data)
	diffEvents(t, evs, got)
	if info := r.Info(); info.KernelRelease != goldenInfo.KernelRelease || info.NumCPUs != 2 {
		t.Errorf("info read back as %+v", info)
	}

	golden := filepath.Join("..", "testdata", "golden", "roundtrip.pftrace")
	goldenDump := filepath.Join("..", "testdata", "golden", "roundtrip.events.txt")
	testkit.Golden(t, golden, data)
	// The golden file also reads back to the golden event dump, so a reader
	// change cannot hide behind a matching writer change.
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	fromGolden, _ := readAll(t, golden, want)
	testkit.Golden(t, goldenDump, []byte(dump(canonical(fromGolden))))
}

// TestRoundTripRealTraces re-encodes real traces (ftrace text recorded on this
// machine, and Perfetto's own test traces) and checks every event survives.
func TestRoundTripRealTraces(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "*"))
	servers, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "servers", "*", "trace.*"))
	paths = append(paths, servers...)
	if d := conformanceDirOrEmpty(); d != "" {
		more, _ := filepath.Glob(filepath.Join(d, "*", "trace.*"))
		for _, p := range more {
			if !strings.HasSuffix(p, ".textproto") {
				paths = append(paths, p)
			}
		}
	}
	n := 0
	for _, p := range paths {
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() || strings.HasSuffix(p, ".json") {
			continue
		}
		n++
		t.Run(filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p), func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			evs, r := readAll(t, p, data)
			out := writeEvents(t, r.Info(), evs)
			got, _ := readAll(t, p+" (rewritten)", out)
			diffEvents(t, evs, got)
			// Read in batches (as ReadAhead and ForEach do), the events
			// are those Next returns one at a time, in the same order,
			// and no field of an earlier event survives in reused memory.
			for _, size := range []int{1, 7, 256} {
				batched := readBatched(t, p, data, size)
				if len(batched) != len(evs) {
					t.Fatalf("batches of %d: %d events, Next: %d", size, len(batched), len(evs))
				}
				for i := range evs {
					if !reflect.DeepEqual(evs[i], batched[i]) {
						t.Fatalf("batches of %d: event %d is\n%+v\nNext returned\n%+v", size, i, batched[i], evs[i])
					}
				}
			}
		})
	}
	if n == 0 {
		t.Fatal("no real traces found to round-trip")
	}
}

// readBatched reads data through fill in batches of size events, into memory
// that holds a poisoned event (every field set) before each batch.
func readBatched(t *testing.T, name string, data []byte, size int) []Event {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	poison := Event{TS: -7, Kind: KindExit, CPU: 99, Pid: 99, Tid: 99, Tgid: 99, Comm: "poison", Prio: 99,
		PrevTid: 99, PrevComm: "poison", PrevPrio: 99, PrevState: StateUninterruptible, IRQ: IRQHard, TargetCPU: 99,
		CloneFlags: 99, IOWait: true, Args: []string{"poison"}}
	batch := make([]Event, size)
	var out []Event
	for {
		for i := range batch {
			batch[i] = poison
		}
		got, end, err := fill(r, batch)
		out = append(out, got...)
		if end {
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			return out
		}
	}
}

func conformanceDirOrEmpty() string {
	if d := os.Getenv("TEMPER_CONFORMANCE_DIR"); d != "" {
		return d
	}
	// The cases sit in shared/ beside the repository checkout.
	dir, _ := filepath.Abs("..")
	for range 4 {
		c := filepath.Join(dir, "..", "shared", "conformance", "perfetto")
		if _, err := os.Stat(filepath.Join(c, "index.json")); err == nil {
			return c
		}
		dir = filepath.Dir(dir)
	}
	return ""
}
