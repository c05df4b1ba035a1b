package observe

import (
	"encoding/binary"
	"math/bits"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "temper.codes/temper-train/observe/perfettopb"
)

// bundleCols is one FtraceEventBundle as the reader consumes it: the bundle's
// scalar fields and the compact_sched columns as flat slices. The hand-written
// decoder fills it straight from the packet bytes, reusing the slices from one
// bundle to the next (intern table entries point into the packet buffer), so
// the common packet of an observe trace costs no allocation; bundles decoded by
// the generated code are viewed through it too (fromPB), so one function turns
// both into events.
type bundleCols struct {
	cpu      uint32
	hasCPU   bool // the cpu field was on the wire (trace_processor drops a bundle without)
	lost     bool
	prevEnd  *uint64 // previous_bundle_end_timestamp, nil when absent
	lastRead *uint64 // last_read_event_timestamp, nil when absent
	hasCS    bool    // a compact_sched message was present, even empty

	intern  [][]byte
	swTS    []uint64
	swState []int64
	swPid   []int32
	swPrio  []int32
	swComm  []uint32
	wkTS    []uint64
	wkPid   []int32
	wkCPU   []int32
	wkPrio  []int32
	wkComm  []uint32
	wkFlags []uint32

	full []*pb.FtraceEvent // full events, in file order

	// Storage the decoder reuses: the optional timestamps and a pool of full
	// events (a bundle's full events are rare in observe traces, all of them in
	// stock Perfetto ones).
	prevEndV, lastReadV uint64
	pool                []*pb.FtraceEvent
}

// reset empties b for the next bundle, keeping its memory.
func (b *bundleCols) reset() {
	b.cpu, b.hasCPU, b.lost, b.prevEnd, b.lastRead, b.hasCS = 0, false, false, nil, nil, false
	clear(b.intern)
	b.intern = b.intern[:0]
	b.swTS, b.swState, b.swPid, b.swPrio, b.swComm = b.swTS[:0], b.swState[:0], b.swPid[:0], b.swPrio[:0], b.swComm[:0]
	b.wkTS, b.wkPid, b.wkCPU, b.wkPrio = b.wkTS[:0], b.wkPid[:0], b.wkCPU[:0], b.wkPrio[:0]
	b.wkComm, b.wkFlags = b.wkComm[:0], b.wkFlags[:0]
	b.full = b.full[:0]
}

// fromPB views a bundle decoded by the generated code; the slices alias it.
func (b *bundleCols) fromPB(p *pb.FtraceEventBundle) {
	*b = bundleCols{cpu: p.GetCpu(), hasCPU: p.Cpu != nil, lost: p.LostEvents, prevEnd: p.PreviousBundleEndTimestamp,
		lastRead: p.LastReadEventTimestamp, full: p.Event}
	if cs := p.CompactSched; cs != nil {
		b.hasCS = true
		b.intern = cs.InternTable
		b.swTS, b.swState, b.swPid, b.swPrio, b.swComm = cs.SwitchTimestamp, cs.SwitchPrevState, cs.SwitchNextPid, cs.SwitchNextPrio, cs.SwitchNextCommIndex
		b.wkTS, b.wkPid, b.wkCPU, b.wkPrio = cs.WakingTimestamp, cs.WakingPid, cs.WakingTargetCpu, cs.WakingPrio
		b.wkComm, b.wkFlags = cs.WakingCommIndex, cs.WakingCommonFlags
	}
}

// Field numbers the fast path reads (see perfettopb/perfetto.proto).
const (
	fieldPacketFtraceEvents = 1
	fieldPacketTimestamp    = 8
)

// packetDecoder decodes the TracePackets that carry an FtraceEventBundle —
// nearly every packet of a sched trace — without the generated Unmarshal.
// Anything else, and anything it does not accept exactly as the generated code
// would, it declines, and the caller decodes the packet with the generated code
// (which then also produces the error message for damaged input).
type packetDecoder struct {
	hasTS  bool
	ts     uint64
	bundle bundleCols
}

// decode reports whether b is a TracePacket holding an ftrace bundle that it
// decoded into d.ts/d.hasTS and d.bundle. On false, d's fields are undefined
// and b must be decoded by the generated code.
func (d *packetDecoder) decode(b []byte) bool {
	d.hasTS, d.ts = false, 0
	d.bundle.reset()
	found := false
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == fieldPacketTimestamp && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			d.ts, d.hasTS = v, true
			b = b[n:]
			continue
		case num == fieldPacketFtraceEvents && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !d.decodeBundle(v) {
				return false
			}
			found = true
			b = b[n:]
			continue
		case num == 2 || num == 6 || num == 45 || num == 117 || num == 120 || num == 126:
			// Another member of the data oneof: the generated code's rules for
			// a oneof that changes case are not worth repeating here.
			return false
		}
		// Scalar fields the reader ignores, fields of a wrong wire type and
		// unknown fields: skipped, as DiscardUnknown does, once well-formed.
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return found
}

// decodeBundle merges one occurrence of an FtraceEventBundle into d.bundle
// (protobuf merges repeated occurrences of a message field).
func (d *packetDecoder) decodeBundle(b []byte) bool {
	bc := &d.bundle
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if typ == protowire.VarintType && (num == 1 || num == 3 || num == 9 || num == 10) {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			switch num {
			case 1:
				bc.cpu, bc.hasCPU = uint32(v), true
			case 3:
				bc.lost = v != 0
			case 9:
				bc.lastReadV, bc.lastRead = v, &bc.lastReadV
			case 10:
				bc.prevEndV, bc.prevEnd = v, &bc.prevEndV
			}
			continue
		}
		if typ == protowire.BytesType && (num == 2 || num == 4) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			if num == 4 {
				bc.hasCS = true
				if !decodeCompactSched(v, bc) {
					return false
				}
				continue
			}
			if len(bc.full) == len(bc.pool) {
				bc.pool = append(bc.pool, new(pb.FtraceEvent))
			}
			fe := bc.pool[len(bc.full)]
			if err := (proto.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(v, fe); err != nil {
				return false
			}
			bc.full = append(bc.full, fe)
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

// decodeCompactSched appends one CompactSched occurrence's columns to bc.
// Repeated scalars are accepted packed or not, as the generated code does.
func decodeCompactSched(b []byte, bc *bundleCols) bool {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == 5 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			bc.intern = append(bc.intern, v)
			b = b[n:]
			continue
		}
		if num >= 1 && num <= 12 && num != 5 && (typ == protowire.VarintType || typ == protowire.BytesType) {
			var vals []byte
			if typ == protowire.BytesType {
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return false
				}
				vals, b = v, b[n:]
			} else {
				_, n := protowire.ConsumeVarint(b)
				if n < 0 {
					return false
				}
				vals, b = b[:n], b[n:]
			}
			if !appendColumn(num, vals, bc) {
				return false
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return false
		}
		b = b[n:]
	}
	return true
}

// consumeTag is protowire.ConsumeTag, also refusing field numbers above the
// maximum as the generated code does.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n >= 0 && num > protowire.MaxValidNumber {
		return 0, 0, -1
	}
	return num, typ, n
}

// appendColumn decodes a run of varints (a packed field's payload, or one
// unpacked value) onto column num of bc, converting as the generated code does
// (int32 and uint32 columns truncate).
func appendColumn(num protowire.Number, b []byte, bc *bundleCols) bool {
	ok := true
	switch num {
	case 1:
		bc.swTS, ok = appendVarints(bc.swTS, b)
	case 2:
		bc.swState, ok = appendVarints(bc.swState, b)
	case 3:
		bc.swPid, ok = appendVarints(bc.swPid, b)
	case 4:
		bc.swPrio, ok = appendVarints(bc.swPrio, b)
	case 6:
		bc.swComm, ok = appendVarints(bc.swComm, b)
	case 7:
		bc.wkTS, ok = appendVarints(bc.wkTS, b)
	case 8:
		bc.wkPid, ok = appendVarints(bc.wkPid, b)
	case 9:
		bc.wkCPU, ok = appendVarints(bc.wkCPU, b)
	case 10:
		bc.wkPrio, ok = appendVarints(bc.wkPrio, b)
	case 11:
		bc.wkComm, ok = appendVarints(bc.wkComm, b)
	case 12:
		bc.wkFlags, ok = appendVarints(bc.wkFlags, b)
	}
	return ok
}

// appendVarints appends every varint of b to dst, converted to T; it reports
// false when b does not end on a complete varint (or holds one too long).
// Every varint ends in the one byte of it below 0x80, so counting those
// bytes (eight at a time) sizes dst once before the values are decoded.
func appendVarints[T int32 | int64 | uint32 | uint64](dst []T, b []byte) ([]T, bool) {
	if len(b) == 0 {
		return dst, true
	}
	if b[len(b)-1] >= 0x80 {
		return dst, false
	}
	n, i := 0, 0
	for ; i+8 <= len(b); i += 8 {
		n += bits.OnesCount64(^binary.LittleEndian.Uint64(b[i:]) & 0x8080808080808080)
	}
	for ; i < len(b); i++ {
		if b[i] < 0x80 {
			n++
		}
	}
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	i = 0
	for k := range out {
		if c := b[i]; c < 0x80 { // one byte: comm indexes, prios, small deltas
			out[k] = T(c)
			i++
			continue
		}
		if c := b[i+1]; c < 0x80 {
			out[k] = T(uint64(b[i]&0x7f) | uint64(c)<<7)
			i += 2
			continue
		}
		if c := b[i+2]; c < 0x80 { // three bytes: tids, timestamp deltas
			out[k] = T(uint64(b[i]&0x7f) | uint64(b[i+1]&0x7f)<<7 | uint64(c)<<14)
			i += 3
			continue
		}
		v, m := protowire.ConsumeVarint(b[i:])
		if m < 0 {
			return dst, false
		}
		out[k] = T(v)
		i += m
	}
	return dst[:len(dst)+n], true
}
