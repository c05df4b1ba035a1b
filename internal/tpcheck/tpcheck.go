// Package tpcheck holds a Perfetto trace's bytes to the rules of
// trace_processor's ftrace importer (google/perfetto:
// src/trace_processor/importers/ftrace/ftrace_tokenizer.cc and
// ftrace_sched_event_tracker.cc, importers/proto/proto_trace_reader.cc and
// system_probes_parser.cc), the rules under which it drops data or counts an
// error stat.
//
// It reads the wire format with protowire and nothing else: a trace written
// and read back by the same generated code can pass a round trip and still
// break the importer (proto3 leaves zero values off the wire, and
// trace_processor tests some fields for presence).
package tpcheck

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	// Only the attribute names: the wire is read with protowire.
	"temper.codes/temper-train/internal/bounded"
	pb "temper.codes/temper-train/observe/perfettopb"
)

// maxCPU is the tokenizer's bound (kMaxCpuCount): a bundle for a higher CPU
// fails the import.
const maxCPU = 1024

// Report counts what the importer would reject or flag.
type Report struct {
	Packets int
	Bundles int
	// NoCPU counts bundles without a cpu field: the tokenizer logs "CPU field
	// not found in FtraceEventBundle", counts ftrace_bundle_tokenizer_errors
	// and drops the bundle. BadCPU counts bundles for a CPU >= 1024 (the
	// import fails).
	NoCPU, BadCPU int
	// NoTimestamp counts full FtraceEvents without a timestamp field (dropped,
	// ftrace_bundle_tokenizer_errors).
	NoTimestamp int
	// NoSequenceID counts packets without trusted_packet_sequence_id (their
	// sequence flags and incremental state are ignored).
	NoSequenceID int
	// NoCmdline counts ProcessTree processes without a cmdline entry: the
	// importer skips them, parent and all.
	NoCmdline int
	// ColumnErrors counts compact_sched messages whose switch or waking
	// columns differ in length; InternErrors those with a comm index outside
	// the intern table (both: compact_sched_has_parse_errors).
	ColumnErrors, InternErrors int

	// Switches counts sched_switch events, FullSwitches the ones written as
	// full FtraceEvents (compact ones carry no prev_pid to contradict).
	Switches, FullSwitches int
	// Mismatched counts full switches whose prev_pid is not the CPU's last
	// next_pid (mismatched_sched_switch_tids; the earlier slice stays open)
	// where the writer is to blame. Two kinds are the kernel's, counted
	// apart: AfterIdle, where the last next_pid was 0 (some kernels do not
	// report some switches out of the idle task; stock perf and tracefs
	// show the same), and AfterUnreported, where the last next_pid is a task
	// the trace never shows being switched out of, on any CPU: the kernel
	// reports no switch out of it at all (Unreported lists them; on this
	// project's VMs, threads of the sandbox's pid 1).
	Mismatched, AfterIdle, AfterUnreported int
	Unreported                             []int64

	// Filtered: the trace says it holds only some switches
	// (perfettopb.SwitchesAttribute).
	Filtered bool

	// Problems describes the first few violations.
	Problems []string
}

const maxProblems = 10

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Err reports every rule the trace breaks, nil if none. A filtered trace
// may have mismatched switches (it says it lacks some).
func (r *Report) Err() error {
	var errs []string
	for _, c := range []struct {
		n    int
		what string
	}{
		{r.NoCPU, "ftrace bundles without a cpu"},
		{r.BadCPU, "ftrace bundles for a cpu >= 1024"},
		{r.NoTimestamp, "ftrace events without a timestamp"},
		{r.NoSequenceID, "packets without trusted_packet_sequence_id"},
		{r.NoCmdline, "processes without a cmdline"},
		{r.ColumnErrors, "compact_sched messages with columns of unequal length"},
		{r.InternErrors, "compact_sched messages with a comm index beyond the intern table"},
	} {
		if c.n > 0 {
			errs = append(errs, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	if r.Mismatched > 0 && !r.Filtered {
		errs = append(errs, fmt.Sprintf("%d of %d switches whose prev_pid is not the cpu's last next_pid", r.Mismatched, r.Switches))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s (first: %s)", strings.Join(errs, ", "), strings.Join(r.Problems, "; "))
}

// String is a one-line summary of the counts.
func (r *Report) String() string {
	return fmt.Sprintf("%d packets, %d bundles (%d without cpu), %d switches (%d full; %d mismatched, %d after idle, %d after tasks never reported switching out %v), filtered=%v, %d events without timestamp, %d packets without sequence id, %d processes without cmdline, %d column and %d intern errors",
		r.Packets, r.Bundles, r.NoCPU, r.Switches, r.FullSwitches, r.Mismatched, r.AfterIdle, r.AfterUnreported, r.Unreported, r.Filtered,
		r.NoTimestamp, r.NoSequenceID, r.NoCmdline, r.ColumnErrors, r.InternErrors)
}

// ErrMalformed is wrapped by Check's errors for bytes that are not a trace.
var ErrMalformed = errors.New("malformed trace")

// switchRec is one sched_switch as the importer orders it.
type switchRec struct {
	ts   int64
	prev int64
	next int64
	full bool
	off  int // packet offset, for messages
}

// MaxTraceBytes caps a trace Check reads, compressed or decompressed: it
// holds the whole trace in memory.
const MaxTraceBytes = 1 << 30

// Check reads a whole trace (gzip-compressed or not) and reports how the
// importer would take it.
func Check(data []byte) (*Report, error) {
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
		if data, err = bounded.ReadAll(zr, MaxTraceBytes); err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
	}
	r := &Report{}
	perCPU := map[uint64][]switchRec{}
	off := 0
	for b := data; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("%w: byte %d: bad tag", ErrMalformed, off)
		}
		if num != 1 || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if m < 0 {
				return nil, fmt.Errorf("%w: byte %d: field %d", ErrMalformed, off, num)
			}
			b, off = b[n+m:], off+n+m
			continue
		}
		p, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, fmt.Errorf("%w: byte %d: truncated packet", ErrMalformed, off)
		}
		if err := r.packet(p, off, perCPU); err != nil {
			return nil, err
		}
		b, off = b[n+m:], off+n+m
	}
	cpus := make([]uint64, 0, len(perCPU))
	for c := range perCPU {
		cpus = append(cpus, c)
	}
	slices.Sort(cpus)
	for _, cpu := range cpus {
		sw := perCPU[cpu]
		slices.SortStableFunc(sw, func(a, b switchRec) int {
			switch {
			case a.ts < b.ts:
				return -1
			case a.ts > b.ts:
				return 1
			}
			return 0
		})
		perCPU[cpu] = sw
	}
	// Tasks the trace shows being switched out of: a full switch's prev, and
	// the implicit prev (the last next) of a compact one.
	left := map[int64]bool{}
	for _, sw := range perCPU {
		for i, s := range sw {
			if s.full {
				left[s.prev] = true
			} else if i > 0 {
				left[sw[i-1].next] = true
			}
		}
	}
	unreported := map[int64]bool{}
	for _, cpu := range cpus {
		known := false
		var last int64
		for _, s := range perCPU[cpu] {
			if s.full && known && s.prev != last {
				switch {
				case last == 0:
					r.AfterIdle++
				case !left[last]:
					r.AfterUnreported++
					if !unreported[last] {
						unreported[last] = true
						r.Unreported = append(r.Unreported, last)
					}
				default:
					r.Mismatched++
					r.problem("cpu %d at %d (packet at byte %d): switch from pid %d, but the cpu last switched to %d", cpu, s.ts, s.off, s.prev, last)
				}
			}
			known, last = true, s.next
		}
	}
	slices.Sort(r.Unreported)
	return r, nil
}

// fields walks one message's fields; fn gets each field's number, type and
// value bytes (a varint's bytes unparsed).
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errors.New("bad tag")
		}
		b = b[n:]
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return fmt.Errorf("field %d: bad value", num)
		}
		v := b[:m]
		if typ == protowire.BytesType {
			v, _ = protowire.ConsumeBytes(b)
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}

func varint(v []byte) uint64 {
	x, _ := protowire.ConsumeVarint(v)
	return x
}

// Field numbers of perfetto_trace.proto.
const (
	packetFtraceEvents    = 1
	packetProcessTree     = 2
	packetSequenceID      = 10
	packetTraceAttributes = 126
)

func (r *Report) packet(p []byte, off int, perCPU map[uint64][]switchRec) error {
	r.Packets++
	hasSeq := false
	err := fields(p, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == packetSequenceID && typ == protowire.VarintType:
			hasSeq = true
		case num == packetFtraceEvents && typ == protowire.BytesType:
			return r.bundle(v, off, perCPU)
		case num == packetProcessTree && typ == protowire.BytesType:
			return r.processTree(v, off)
		case num == packetTraceAttributes && typ == protowire.BytesType:
			return r.attributes(v)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: packet at byte %d: %v", ErrMalformed, off, err)
	}
	if !hasSeq {
		r.NoSequenceID++
		r.problem("packet at byte %d has no trusted_packet_sequence_id", off)
	}
	return nil
}

func (r *Report) processTree(b []byte, off int) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		hasCmd := false
		var pid uint64
		if err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				pid = varint(v)
			case num == 3 && typ == protowire.BytesType:
				hasCmd = true
			}
			return nil
		}); err != nil {
			return err
		}
		if !hasCmd {
			r.NoCmdline++
			r.problem("process %d (packet at byte %d) has no cmdline", int32(pid), off)
		}
		return nil
	})
}

func (r *Report) attributes(b []byte) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		var key, val string
		if err := fields(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch {
			case num == 1 && typ == protowire.BytesType:
				key = string(v)
			case num == 3 && typ == protowire.BytesType:
				val = string(v)
			}
			return nil
		}); err != nil {
			return err
		}
		if key == pb.SwitchesAttribute {
			r.Filtered = val == pb.SwitchesFiltered
		}
		return nil
	})
}

// bundle checks one FtraceEventBundle and collects its switches.
func (r *Report) bundle(b []byte, off int, perCPU map[uint64][]switchRec) error {
	r.Bundles++
	var cpu uint64
	hasCPU := false
	var sw []switchRec
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			cpu, hasCPU = varint(v), true
		case num == 2 && typ == protowire.BytesType:
			s, ok, err := r.event(v, off)
			if err != nil {
				return err
			}
			if ok {
				sw = append(sw, s)
			}
		case num == 4 && typ == protowire.BytesType:
			s, err := r.compactSched(v, off)
			if err != nil {
				return err
			}
			sw = append(sw, s...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case !hasCPU:
		r.NoCPU++
		r.problem("bundle at byte %d has no cpu", off)
		return nil // dropped whole, switches and all
	case cpu >= maxCPU:
		r.BadCPU++
		r.problem("bundle at byte %d is for cpu %d", off, cpu)
		return nil
	}
	// Within a bundle the importer takes the compact columns before the full
	// events; the stable sort by time in Check keeps that order for ties.
	slices.SortStableFunc(sw, func(a, b switchRec) int {
		if a.full == b.full {
			return 0
		}
		if !a.full {
			return -1
		}
		return 1
	})
	perCPU[cpu] = append(perCPU[cpu], sw...)
	return nil
}

// event checks one full FtraceEvent; for a sched_switch it returns the switch.
func (r *Report) event(b []byte, off int) (switchRec, bool, error) {
	s := switchRec{full: true, off: off}
	hasTS, isSwitch := false, false
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			s.ts, hasTS = int64(varint(v)), true
		case num == 4 && typ == protowire.BytesType:
			isSwitch = true
			return fields(v, func(num protowire.Number, typ protowire.Type, v []byte) error {
				switch {
				case num == 2 && typ == protowire.VarintType:
					s.prev = int64(int32(varint(v)))
				case num == 6 && typ == protowire.VarintType:
					s.next = int64(int32(varint(v)))
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return s, false, err
	}
	if !hasTS {
		r.NoTimestamp++
		r.problem("event at byte %d has no timestamp", off)
		return s, false, nil
	}
	if isSwitch {
		r.Switches++
		r.FullSwitches++
	}
	return s, isSwitch, nil
}

// compactSched checks one CompactSched message and returns its switches.
func (r *Report) compactSched(b []byte, off int) ([]switchRec, error) {
	cols := map[protowire.Number][]uint64{}
	interned := 0
	err := fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == 5 {
			interned++
			return nil
		}
		if num < 1 || num > 12 {
			return nil
		}
		if typ == protowire.VarintType {
			cols[num] = append(cols[num], varint(v))
			return nil
		}
		for len(v) > 0 {
			x, n := protowire.ConsumeVarint(v)
			if n < 0 {
				return fmt.Errorf("compact_sched field %d: bad packed varint", num)
			}
			cols[num] = append(cols[num], x)
			v = v[n:]
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	bad := false
	nsw := len(cols[1])
	for _, f := range []protowire.Number{2, 3, 4, 6} {
		bad = bad || len(cols[f]) != nsw
	}
	nwk := len(cols[7])
	for _, f := range []protowire.Number{8, 9, 10, 11} {
		bad = bad || len(cols[f]) != nwk
	}
	if fl := len(cols[12]); fl != 0 && fl != nwk {
		bad = true
	}
	if bad {
		r.ColumnErrors++
		r.problem("compact_sched at byte %d: columns of unequal length", off)
		return nil, nil
	}
	for _, f := range []protowire.Number{6, 11} {
		for _, i := range cols[f] {
			if i >= uint64(interned) {
				r.InternErrors++
				r.problem("compact_sched at byte %d: comm index %d of %d", off, i, interned)
				return nil, nil
			}
		}
	}
	sw := make([]switchRec, nsw)
	var ts int64
	for i := range sw {
		ts += int64(cols[1][i])
		sw[i] = switchRec{ts: ts, next: int64(int32(cols[3][i])), off: off}
	}
	r.Switches += nsw
	return sw, nil
}
