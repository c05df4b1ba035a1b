package observe

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "temper.codes/temper-train/observe/perfettopb"
)

// checkPacketDecode decodes one TracePacket with the hand-written decoder and
// with the generated code and fails unless they agree: when the fast path
// accepts a packet, the generated code accepts it too and finds the same
// timestamp and the same ftrace bundle; when the generated code rejects a
// packet, the fast path rejects it too. (The fast path may decline packets the
// generated code accepts: those are decoded by the generated code.) It reports
// whether the fast path accepted.
func checkPacketDecode(t *testing.T, d *packetDecoder, data []byte) bool {
	t.Helper()
	var want pb.TracePacket
	werr := proto.UnmarshalOptions{DiscardUnknown: true}.Unmarshal(data, &want)
	ok := d.decode(data)
	if !ok {
		return false
	}
	if werr != nil {
		t.Fatalf("fast path accepted a packet the generated code rejects (%v): %x", werr, data)
	}
	fe, isBundle := want.Data.(*pb.TracePacket_FtraceEvents)
	if !isBundle {
		t.Fatalf("fast path accepted a packet without a bundle (%T): %x", want.Data, data)
	}
	if (want.Timestamp != nil) != d.hasTS || (d.hasTS && *want.Timestamp != d.ts) {
		t.Fatalf("timestamp: fast %v %d, generated %v", d.hasTS, d.ts, want.Timestamp)
	}
	got := bundleFromCols(&d.bundle)
	if !proto.Equal(got, fe.FtraceEvents) {
		t.Fatalf("bundles differ on %x:\nfast      %v\ngenerated %v", data, got, fe.FtraceEvents)
	}
	return true
}

// bundleFromCols rebuilds the generated message the columns stand for.
func bundleFromCols(b *bundleCols) *pb.FtraceEventBundle {
	p := &pb.FtraceEventBundle{LostEvents: b.lost, Event: b.full,
		PreviousBundleEndTimestamp: b.prevEnd, LastReadEventTimestamp: b.lastRead}
	if b.hasCPU {
		p.Cpu = proto.Uint32(b.cpu)
	}
	if b.hasCS {
		p.CompactSched = &pb.FtraceEventBundle_CompactSched{
			InternTable: b.intern, SwitchTimestamp: b.swTS, SwitchPrevState: b.swState,
			SwitchNextPid: b.swPid, SwitchNextPrio: b.swPrio, SwitchNextCommIndex: b.swComm,
			WakingTimestamp: b.wkTS, WakingPid: b.wkPid, WakingTargetCpu: b.wkCPU,
			WakingPrio: b.wkPrio, WakingCommIndex: b.wkComm, WakingCommonFlags: b.wkFlags}
	}
	return p
}

// tracePackets splits a trace into its TracePacket payloads.
func tracePackets(tb testing.TB, data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			tb.Fatalf("bad trace tag")
		}
		data = data[n:]
		n = protowire.ConsumeFieldValue(num, typ, data)
		if n < 0 {
			tb.Fatalf("bad trace field")
		}
		if num == 1 && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(data)
			out = append(out, v)
		}
		data = data[n:]
	}
	return out
}

// handPackets are packets the writer never makes but the format allows:
// unpacked columns, a bundle split over two occurrences, a compact_sched
// merged from two, wrong wire types for known fields, unknown fields and
// groups, another member of the data oneof.
func handPackets() [][]byte {
	var a []byte
	tag := func(b []byte, n protowire.Number, t protowire.Type) []byte { return protowire.AppendTag(b, n, t) }
	// compact_sched with unpacked switch columns and one packed waking column.
	var cs []byte
	cs = tag(cs, 5, protowire.BytesType)
	cs = protowire.AppendString(cs, "bash")
	for f := protowire.Number(1); f <= 4; f++ {
		cs = tag(cs, f, protowire.VarintType)
		cs = protowire.AppendVarint(cs, 300)
	}
	cs = tag(cs, 6, protowire.VarintType)
	cs = protowire.AppendVarint(cs, 0)
	cs = tag(cs, 7, protowire.BytesType)
	cs = protowire.AppendBytes(cs, protowire.AppendVarint(protowire.AppendVarint(nil, 1<<40), 5))
	var bundle []byte
	bundle = tag(bundle, 1, protowire.VarintType)
	bundle = protowire.AppendVarint(bundle, 3)
	bundle = tag(bundle, 4, protowire.BytesType)
	bundle = protowire.AppendBytes(bundle, cs)
	bundle = tag(bundle, 3, protowire.Fixed32Type) // lost_events of a wrong wire type: unknown
	bundle = protowire.AppendFixed32(bundle, 1)
	bundle = tag(bundle, 99, protowire.StartGroupType)
	bundle = tag(bundle, 1, protowire.VarintType)
	bundle = protowire.AppendVarint(bundle, 7)
	bundle = tag(bundle, 99, protowire.EndGroupType)
	bundle = tag(bundle, 10, protowire.VarintType)
	bundle = protowire.AppendVarint(bundle, 12345)
	a = tag(a, 8, protowire.VarintType)
	a = protowire.AppendVarint(a, 1e9)
	a = tag(a, 1, protowire.BytesType)
	a = protowire.AppendBytes(a, bundle)
	a = tag(a, 10, protowire.VarintType)
	a = protowire.AppendVarint(a, 1)
	// The same bundle field again: merged into the first.
	b := tag(append([]byte(nil), a...), 1, protowire.BytesType)
	b = protowire.AppendBytes(b, bundle)
	// A bundle then a ProcessTree: the oneof ends as the ProcessTree.
	c := tag(append([]byte(nil), a...), 2, protowire.BytesType)
	c = protowire.AppendBytes(c, nil)
	// A truncated packed column.
	d := tag(nil, 1, protowire.BytesType)
	d = protowire.AppendBytes(d, tag(nil, 4, protowire.BytesType))
	d = append(d[:len(d)-1], 0x04)
	return [][]byte{a, b, c, d, {0x0a, 0x00}, {0x0a, 0x02, 0x22, 0x00}}
}

func TestPacketDecodeAgrees(t *testing.T) {
	var d packetDecoder
	fast := 0
	seeds := handPackets()
	seeds = append(seeds, tracePackets(t, writeEvents(t, goldenInfo, goldenEvents()))...)
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "golden", "*.pftrace"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, tracePackets(t, data)...)
	}
	for _, p := range seeds {
		if checkPacketDecode(t, &d, p) {
			fast++
		}
	}
	if fast < 10 {
		t.Errorf("fast path took only %d of %d packets", fast, len(seeds))
	}
	// The hand-made ones: which the fast path must take.
	for i, want := range []bool{true, true, false, false, true, true} {
		if got := checkPacketDecode(t, &d, seeds[i]); got != want {
			t.Errorf("hand packet %d: fast path %v, want %v", i, got, want)
		}
	}
}

// FuzzPacketDecode checks the hand-written bundle decoder against the
// generated code on arbitrary packets.
func FuzzPacketDecode(f *testing.F) {
	for _, p := range handPackets() {
		f.Add(p)
	}
	for _, p := range tracePackets(f, writeEvents(f, goldenInfo, goldenEvents())) {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var d packetDecoder
		checkPacketDecode(t, &d, data)
		checkPacketDecode(t, &d, data) // again, over the reused columns
	})
}
