package observe

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"temper.codes/temper-train/internal/tpcheck"
	"temper.codes/temper-train/internal/tpcheck/tpchecktest"
	pb "temper.codes/temper-train/observe/perfettopb"
)

// workloadTracePath is the committed tracefs recording of testdata/workload.
const workloadTracePath = "../testdata/traces/workload-tracefs.txt.gz"

// TestImporterRules checks every trace this repository writes or commits:
// the writer's golden stream written afresh, the committed goldens, the
// committed ftrace-text recording converted, and the real-server recordings.
func TestImporterRules(t *testing.T) {
	t.Run("writer/golden-events", func(t *testing.T) {
		tpchecktest.Check(t, "golden events", writeEvents(t, goldenInfo, goldenEvents()))
	})
	t.Run("convert/workload-tracefs", func(t *testing.T) {
		data, err := os.ReadFile(workloadTracePath)
		if err != nil {
			t.Fatal(err)
		}
		evs, r := readAll(t, workloadTracePath, data)
		rep := tpchecktest.Check(t, "converted "+workloadTracePath, writeEvents(t, r.Info(), evs))
		if rep.Filtered {
			t.Error("a converted tracefs recording says it is filtered")
		}
	})
	paths := []string{filepath.Join("..", "testdata", "golden", "roundtrip.pftrace")}
	servers, _ := filepath.Glob(filepath.Join("..", "testdata", "traces", "servers", "*", "trace.pftrace.gz"))
	if len(servers) == 0 {
		t.Fatal("no committed server traces found")
	}
	for _, p := range append(paths, servers...) {
		t.Run("committed/"+filepath.Base(filepath.Dir(p))+"/"+filepath.Base(p), func(t *testing.T) {
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			tpchecktest.Check(t, p, data)
		})
	}
}

// TestBundleWithoutCPU: a bundle with no cpu field is skipped and counted, as
// trace_processor skips it, not read as CPU 0 (the writer's old proto3 bug
// left cpu 0 off the wire, and reading it as CPU 0 hid the bug).
func TestBundleWithoutCPU(t *testing.T) {
	bundle := func(cpu *uint32, ts uint64, tid int32) []byte {
		pkt := &pb.TracePacket{TrustedPacketSequenceId: 1, Data: &pb.TracePacket_FtraceEvents{FtraceEvents: &pb.FtraceEventBundle{
			Cpu: cpu,
			Event: []*pb.FtraceEvent{{Timestamp: ts, Pid: 1, Event: &pb.FtraceEvent_SchedWaking{SchedWaking: &pb.SchedWakingFtraceEvent{
				Comm: []byte("w"), Pid: tid, Prio: 120, TargetCpu: 0}}}},
		}}}
		b, err := proto.Marshal(pkt)
		if err != nil {
			t.Fatal(err)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), b)
	}
	data := append(bundle(proto.Uint32(1), 1000, 10), bundle(nil, 2000, 20)...)
	data = append(data, bundle(proto.Uint32(0), 3000, 30)...)
	evs, r := readAll(t, "nocpu", data)
	if len(evs) != 2 || evs[0].Tid != 10 || evs[0].CPU != 1 || evs[1].Tid != 30 || evs[1].CPU != 0 {
		t.Errorf("read %+v, want the wakings of tids 10 (cpu 1) and 30 (cpu 0) only", evs)
	}
	if st := r.Stats(); st.NoCPUBundles != 1 || st.NoCPUEvents != 1 {
		t.Errorf("stats: %d bundles, %d events without cpu; want 1, 1", st.NoCPUBundles, st.NoCPUEvents)
	}
	rep, err := tpcheck.Check(data)
	if err != nil {
		t.Fatal(err)
	}
	if rep.NoCPU != 1 || rep.Bundles != 3 || rep.Err() == nil {
		t.Errorf("tpcheck: %s; err %v", rep, rep.Err())
	}
}
