package tpcheck

import (
	"bytes"
	"compress/gzip"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// The cases are built field by field with protowire, as the importer sees
// them, so a bug shared with the project's writer cannot hide here.

func msg(fields ...[]byte) []byte { return bytes.Join(fields, nil) }

func varintField(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

func bytesField(num protowire.Number, b []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
}

func packed(num protowire.Number, vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = protowire.AppendVarint(b, v)
	}
	return bytesField(num, b)
}

// packet wraps a TracePacket body as a Trace's packet field, with sequence id 1.
func packet(body ...[]byte) []byte {
	return bytesField(1, msg(append(body, varintField(packetSequenceID, 1))...))
}

// bundle is an FtraceEventBundle packet; cpu < 0 leaves the field off.
func bundle(cpu int, body ...[]byte) []byte {
	if cpu >= 0 {
		body = append([][]byte{varintField(1, uint64(cpu))}, body...)
	}
	return packet(bytesField(packetFtraceEvents, msg(body...)))
}

// sw is a full sched_switch event.
func sw(ts uint64, prev, next int32) []byte {
	return bytesField(2, msg(varintField(1, ts), bytesField(4, msg(
		varintField(2, uint64(uint32(prev))), varintField(6, uint64(uint32(next)))))))
}

// compact is a compact_sched with switches to the given pids, 1 ns apart
// from ts, every comm index 0 of a one-entry intern table.
func compact(ts uint64, next ...uint64) []byte {
	n := len(next)
	tss, zeros := make([]uint64, n), make([]uint64, n)
	for i := range tss {
		tss[i] = 1
	}
	tss[0] = ts
	return bytesField(4, msg(packed(1, tss...), packed(2, zeros...), packed(3, next...),
		packed(4, zeros...), bytesField(5, []byte("x")), packed(6, zeros...)))
}

func TestCheck(t *testing.T) {
	filtered := packet(bytesField(packetTraceAttributes, bytesField(1, msg(
		bytesField(1, []byte("temper_train.switches")), bytesField(3, []byte("filtered"))))))
	cases := []struct {
		name  string
		trace []byte
		ok    bool
		check func(*Report) bool
	}{
		{"chained switches", msg(bundle(0, sw(10, 0, 5), sw(20, 5, 6)), bundle(1, compact(15, 7, 8), sw(30, 8, 9))), true,
			func(r *Report) bool { return r.Switches == 5 && r.FullSwitches == 3 && r.Mismatched == 0 }},
		{"cpu 0 left off the wire", msg(bundle(-1, sw(10, 0, 5)), bundle(1, sw(11, 0, 6))), false,
			func(r *Report) bool { return r.NoCPU == 1 && r.Bundles == 2 }},
		{"cpu beyond 1023", bundle(1024, sw(10, 0, 5)), false, func(r *Report) bool { return r.BadCPU == 1 }},
		{"event without timestamp", bundle(0, bytesField(2, bytesField(4, varintField(6, 5)))), false,
			func(r *Report) bool { return r.NoTimestamp == 1 }},
		{"packet without sequence id", bytesField(1, bytesField(packetFtraceEvents, varintField(1, 0))), false,
			func(r *Report) bool { return r.NoSequenceID == 1 }},
		{"process without cmdline", packet(bytesField(packetProcessTree, bytesField(1, varintField(1, 42)))), false,
			func(r *Report) bool { return r.NoCmdline == 1 }},
		{"columns of unequal length", bundle(0, bytesField(4, msg(packed(1, 1, 2), packed(2, 0), packed(3, 5, 6),
			packed(4, 0, 0), bytesField(5, []byte("x")), packed(6, 0, 0)))), false,
			func(r *Report) bool { return r.ColumnErrors == 1 }},
		{"comm index beyond the intern table", bundle(0, bytesField(4, msg(packed(1, 1), packed(2, 0), packed(3, 5),
			packed(4, 0), bytesField(5, []byte("x")), packed(6, 1)))), false,
			func(r *Report) bool { return r.InternErrors == 1 }},
		// CPU 0 switched to 5, but its next switch comes from 7; 5 is seen
		// switching out elsewhere, so the switch 5 -> 7 is missing.
		{"mismatched switch", msg(bundle(0, sw(10, 0, 5), sw(20, 7, 6)), bundle(1, sw(30, 5, 8))), false,
			func(r *Report) bool { return r.Mismatched == 1 }},
		{"after idle", bundle(0, sw(10, 5, 0), sw(20, 7, 6), sw(30, 6, 5)), true,
			func(r *Report) bool { return r.AfterIdle == 1 && r.Mismatched == 0 }},
		// 75 is never seen switching out, on any CPU: the kernel's.
		{"after a task never reported switching out", bundle(0, sw(10, 5, 75), sw(20, 7, 6), sw(30, 6, 7)), true,
			func(r *Report) bool { return r.AfterUnreported == 1 && len(r.Unreported) == 1 && r.Unreported[0] == 75 }},
		{"filtered trace may mismatch", msg(filtered, bundle(0, sw(10, 0, 5), sw(20, 7, 6)), bundle(1, sw(30, 5, 8))), true,
			func(r *Report) bool { return r.Filtered && r.Mismatched == 1 }},
		// The importer orders a CPU's switches by time across bundles.
		{"ordered by time", msg(bundle(0, sw(20, 5, 6)), bundle(0, sw(10, 0, 5))), true,
			func(r *Report) bool { return r.Mismatched == 0 && r.AfterIdle == 0 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Check(c.trace)
			if err != nil {
				t.Fatal(err)
			}
			if (r.Err() == nil) != c.ok || !c.check(r) {
				t.Errorf("%s; err %v; want ok=%v", r, r.Err(), c.ok)
			}
		})
	}
}

func TestCheckGzipAndMalformed(t *testing.T) {
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write(bundle(-1, sw(10, 0, 5)))
	zw.Close()
	r, err := Check(zb.Bytes())
	if err != nil || r.NoCPU != 1 {
		t.Errorf("gzipped: %v, %v", r, err)
	}
	if _, err := Check(bundle(0, sw(10, 0, 5))[:5]); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated: %v, want ErrMalformed", err)
	}
}
