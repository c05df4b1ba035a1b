package observe

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "temper.codes/temper-train/observe/perfettopb"
)

// PerfettoReader decodes a Perfetto protobuf trace packet by packet. It reads
// sched events from full FtraceEvents and from compact_sched bundles, thread and
// process identity from ProcessTree, and the kernel release from SystemInfo
// (prev_state's bit layout depends on it).
type PerfettoReader struct {
	name  string
	br    *bufio.Reader
	off   int64 // bytes of the (decompressed) stream consumed
	buf   []byte
	pkt   pb.TracePacket
	unm   proto.UnmarshalOptions
	info  TraceInfo
	stats ReadStats
	merge *merger
	eof   bool
	// pending is the error that ends the trace (io.EOF at its end), kept
	// until the events read before it have been handed out.
	pending error

	layout *stateLayout
	lastTS int64 // newest packet timestamp, for packets that carry none
	crop   cropState

	fast   packetDecoder // ftrace bundle packets without the generated code
	cols   bundleCols    // a bundle decoded by the generated code, viewed as columns
	intern []int32       // the current bundle's intern table, as the merger's string ids
}

// cpuCursor is what a compact_sched stream leaves implicit for one CPU: the
// task currently on it (the prev of the next switch and the waker of a waking).
type cpuCursor struct {
	known  bool
	tid    int32
	comm   string // the writer's
	commID int32  // the reader's: comm as an id of its merger's strings
	prio   int32
}

func newPerfettoReader(br *bufio.Reader, name string) *PerfettoReader {
	r := &PerfettoReader{
		name:   name,
		br:     br,
		info:   TraceInfo{Format: FormatPerfetto},
		layout: layoutFor(""),
		unm:    proto.UnmarshalOptions{DiscardUnknown: true},
	}
	r.merge = newMerger(defaultSortWindow, &r.stats)
	return r
}

// Info implements Reader.
func (r *PerfettoReader) Info() TraceInfo { return r.info }

// Stats implements Reader.
func (r *PerfettoReader) Stats() ReadStats {
	s := r.stats
	s.OutOfOrder = r.merge.late
	s.Cropped = r.crop.dropped
	return s
}

// Close implements Reader; the caller owns the underlying stream.
func (r *PerfettoReader) Close() error { return nil }

// Next implements Reader.
func (r *PerfettoReader) Next(ev *Event) error {
	_, err := r.nextBatch(unsafe.Slice(ev, 1))
	return err
}

// nextBatch implements batchReader: it fills evs as far as the trace goes.
func (r *PerfettoReader) nextBatch(evs []Event) (int, error) {
	n := 0
	for {
		if got := r.merge.popRun(evs[n:]); got > 0 {
			if r.crop.threshold > 0 {
				got = r.crop.drop(evs[n : n+got])
			}
			n += got
			r.stats.Events += int64(got)
			if n == len(evs) {
				return n, nil
			}
			continue
		}
		if r.pending != nil {
			if n > 0 {
				return n, nil
			}
			return 0, r.pending
		}
		if r.eof {
			if r.stats.Events == 0 {
				r.pending = &FormatError{File: r.name, Offset: r.off, Err: fmt.Errorf("trace holds %w", ErrEmpty)}
			} else {
				r.pending = io.EOF
			}
			continue
		}
		if err := r.readPacket(); err != nil {
			if errors.Is(err, io.EOF) {
				r.eof = true
				r.merge.finish()
				continue
			}
			// The events read so far go out first.
			r.pending = err
		}
	}
}

func (r *PerfettoReader) errorf(off int64, sentinel error, format string, args ...any) error {
	return &FormatError{File: r.name, Offset: off, Err: fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sentinel)}
}

// readPacket reads one top-level Trace field and feeds what it holds to the
// merger. It returns io.EOF at a clean end of the stream.
func (r *PerfettoReader) readPacket() error {
	start := r.off
	tag, err := r.varint()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return r.errorf(start, ErrTruncated, "record tag")
	}
	num, typ := protowire.DecodeTag(tag)
	if num <= 0 || (num == 1 && typ != protowire.BytesType) {
		return r.errorf(start, ErrCorrupt, "bad record tag 0x%x", tag)
	}
	switch typ {
	case protowire.VarintType:
		if _, err := r.varint(); err != nil {
			return r.errorf(start, ErrTruncated, "field %d", num)
		}
		return nil
	case protowire.Fixed32Type, protowire.Fixed64Type:
		n := int64(4)
		if typ == protowire.Fixed64Type {
			n = 8
		}
		return r.discard(start, n, num)
	case protowire.BytesType:
	default:
		return r.errorf(start, ErrCorrupt, "field %d has unsupported wire type %d", num, typ)
	}
	size, err := r.varint()
	if err != nil {
		return r.errorf(start, ErrTruncated, "record length")
	}
	if size > maxPacketBytes {
		return r.errorf(start, ErrCorrupt, "record of %d bytes exceeds the %d-byte limit", size, maxPacketBytes)
	}
	if num != 1 {
		return r.discard(start, int64(size), num)
	}
	if cap(r.buf) < int(size) {
		r.buf = make([]byte, size)
	}
	r.buf = r.buf[:size]
	n, err := io.ReadFull(r.br, r.buf)
	r.off += int64(n)
	if err != nil {
		return r.errorf(start, ErrTruncated, "packet of %d bytes has only %d", size, n)
	}
	if r.fast.decode(r.buf) {
		if r.progressMark(&r.fast.bundle, r.fast.hasTS, r.fast.ts) {
			return nil
		}
		if r.fast.hasTS && int64(r.fast.ts) > r.lastTS {
			r.lastTS = int64(r.fast.ts)
		}
		return r.handleBundle(start, &r.fast.bundle)
	}
	if err := r.unm.Unmarshal(r.buf, &r.pkt); err != nil {
		return r.errorf(start, ErrCorrupt, "packet: %v", err)
	}
	return r.handlePacket(start, &r.pkt)
}

func (r *PerfettoReader) discard(start, n int64, num protowire.Number) error {
	got, err := r.br.Discard(int(n))
	r.off += int64(got)
	if err != nil {
		return r.errorf(start, ErrTruncated, "field %d of %d bytes has only %d", num, n, got)
	}
	return nil
}

func (r *PerfettoReader) varint() (uint64, error) {
	var v uint64
	for i := 0; i < 10; i++ {
		b, err := r.br.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		r.off++
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("varint overflow")
}

func (r *PerfettoReader) handlePacket(off int64, p *pb.TracePacket) error {
	if d, ok := p.Data.(*pb.TracePacket_FtraceEvents); ok && p.Timestamp != nil {
		r.cols.fromPB(d.FtraceEvents)
		if r.progressMark(&r.cols, true, *p.Timestamp) {
			return nil
		}
	}
	if p.Timestamp != nil && int64(*p.Timestamp) > r.lastTS {
		r.lastTS = int64(*p.Timestamp)
	}
	switch d := p.Data.(type) {
	case *pb.TracePacket_FtraceEvents:
		r.cols.fromPB(d.FtraceEvents)
		return r.handleBundle(off, &r.cols)
	case *pb.TracePacket_SystemInfo:
		r.handleSystemInfo(d.SystemInfo)
	case *pb.TracePacket_ProcessTree:
		r.handleProcessTree(p, d.ProcessTree)
	case *pb.TracePacket_GenericKernelTaskStateEvent:
		r.handleGenericState(p, d.GenericKernelTaskStateEvent)
	case *pb.TracePacket_GenericKernelTaskRenameEvent:
		g := d.GenericKernelTaskRenameEvent
		r.merge.push(&Event{TS: r.packetTS(p), Kind: KindRename, CPU: -1, Pid: -1,
			Tid: int32(g.Tid), Comm: string(g.Comm)})
	case *pb.TracePacket_TraceAttributes:
		for _, a := range d.TraceAttributes.Attribute {
			if a.Key == pb.SwitchesAttribute {
				r.info.Filtered = a.GetStringValue() == pb.SwitchesFiltered
			}
		}
	case *pb.TracePacket_ClockSnapshot:
		// One clock domain is assumed: ftrace and our tracer both stamp events
		// with the same kernel clock, so there is nothing to convert.
	default:
		r.stats.skip("packet")
	}
	return nil
}

func (r *PerfettoReader) packetTS(p *pb.TracePacket) int64 {
	if p.Timestamp != nil {
		return int64(*p.Timestamp)
	}
	return r.lastTS
}

func (r *PerfettoReader) handleSystemInfo(si *pb.SystemInfo) {
	if u := si.Utsname; u != nil {
		r.info.Sysname = string(u.Sysname)
		r.info.KernelRelease = string(u.Release)
		r.info.KernelVersion = string(u.Version)
		r.info.Machine = string(u.Machine)
		if string(u.Sysname) == "Linux" || len(u.Sysname) == 0 {
			r.layout = layoutFor(r.info.KernelRelease)
		}
	}
	if si.NumCpus > 0 {
		r.info.NumCPUs = int(si.NumCpus)
		r.merge.cpus = int(si.NumCpus)
	}
}

func (r *PerfettoReader) handleProcessTree(p *pb.TracePacket, pt *pb.ProcessTree) {
	ts := r.packetTS(p)
	for _, pr := range pt.Processes {
		var args []string
		for _, a := range pr.Cmdline {
			args = append(args, string(a))
		}
		var comm string
		if pr.CmdlineIsComm && len(args) > 0 {
			// The process name standing in for a missing command line.
			comm, args = args[0], nil
		}
		r.merge.push(&Event{TS: ts, Kind: KindProcessInfo, CPU: -1, Pid: -1,
			Tid: pr.Pid, Tgid: pr.Pid, PrevTid: pr.Ppid, Args: args, Comm: comm})
	}
	for _, th := range pt.Threads {
		r.merge.push(&Event{TS: ts, Kind: KindThreadInfo, CPU: -1, Pid: -1,
			Tid: th.Tid, Tgid: th.Tgid, Comm: string(th.Name)})
	}
}

// Perfetto's TaskStateEnum values used by GenericKernelTaskStateEvent.
const genericTaskCreated = 1

func (r *PerfettoReader) handleGenericState(p *pb.TracePacket, g *pb.GenericKernelTaskStateEvent) {
	if g.State != genericTaskCreated {
		r.stats.skip(fmt.Sprintf("generic_kernel_task_state_event(state=%d)", g.State))
		return
	}
	r.merge.push(&Event{TS: r.packetTS(p), Kind: KindNewTask, CPU: -1, Pid: -1,
		Tid: int32(g.Tid), Comm: string(g.Comm), Prio: g.Prio})
}

// progressMark reports whether b is a progress mark (see
// PerfettoWriter.progress): a bundle with nothing in it but its CPU, stamped
// with a packet timestamp. It hands the mark to the merger; the bundle is
// otherwise ignored, as readers that do not know marks ignore it.
func (r *PerfettoReader) progressMark(b *bundleCols, hasTS bool, ts uint64) bool {
	if !hasTS || !b.hasCPU || b.lost || b.prevEnd != nil || b.lastRead != nil || len(b.full) > 0 || b.cpu > 1<<16 ||
		len(b.intern)+len(b.swTS)+len(b.swState)+len(b.swPid)+len(b.swPrio)+len(b.swComm)+
			len(b.wkTS)+len(b.wkPid)+len(b.wkCPU)+len(b.wkPrio)+len(b.wkComm)+len(b.wkFlags) > 0 {
		return false
	}
	if ts > uint64(emptyHead) {
		ts = uint64(emptyHead)
	}
	r.merge.mark(int32(b.cpu), int64(ts))
	return true
}

// handleBundle queues one CPU's bundle in the merger: its compact switch and
// waking columns with absolute timestamps, interned comms and decoded states,
// and its full events converted. The merger releases them in timestamp order
// and fills in compact_sched's implicit fields from the CPU's cursor.
func (r *PerfettoReader) handleBundle(off int64, b *bundleCols) error {
	if !b.hasCPU {
		r.stats.NoCPUBundles++
		r.stats.NoCPUEvents += int64(len(b.swTS) + len(b.wkTS) + len(b.full))
		return nil
	}
	cpu := int32(b.cpu)
	if b.cpu > 1<<16 {
		return r.errorf(off, ErrCorrupt, "ftrace bundle for cpu %d", b.cpu)
	}
	if b.lost {
		if r.stats.LostGaps == nil {
			r.stats.LostGaps = map[int32]int64{}
		}
		r.stats.LostGaps[cpu]++
	}
	sw := len(b.swTS) // lengths of the compact switch and waking columns
	if len(b.swState) != sw || len(b.swPid) != sw || len(b.swPrio) != sw || len(b.swComm) != sw {
		return r.errorf(off, ErrCorrupt, "compact_sched switch columns of unequal length on cpu %d", cpu)
	}
	wk := len(b.wkTS)
	if len(b.wkPid) != wk || len(b.wkCPU) != wk || len(b.wkPrio) != wk || len(b.wkComm) != wk {
		return r.errorf(off, ErrCorrupt, "compact_sched waking columns of unequal length on cpu %d", cpu)
	}
	intern := r.internTable(b.intern)
	s := r.merge.newBundle()
	badComm := func(ci uint32) error {
		r.merge.dropBundle(s)
		return r.errorf(off, ErrCorrupt, "compact_sched comm index %d beyond intern table of %d", ci, len(intern))
	}
	s.swTS, s.swState = slices.Grow(s.swTS, sw)[:sw], slices.Grow(s.swState, sw)[:sw]
	s.swTid, s.swPrio, s.swComm = append(s.swTid, b.swPid...), append(s.swPrio, b.swPrio...), slices.Grow(s.swComm, sw)[:sw]
	var ts uint64
	for i := range sw {
		if int(b.swComm[i]) >= len(intern) {
			return badComm(b.swComm[i])
		}
		ts += b.swTS[i]
		s.swTS[i] = int64(ts)
		s.swState[i] = r.layout.decode(b.swState[i])
		s.swComm[i] = intern[b.swComm[i]]
	}
	s.lastTS = int64(ts)
	s.wkTS, s.wkComm, s.wkIRQ = slices.Grow(s.wkTS, wk)[:wk], slices.Grow(s.wkComm, wk)[:wk], slices.Grow(s.wkIRQ, wk)[:wk]
	s.wkTid, s.wkCPU, s.wkPrio = append(s.wkTid, b.wkPid...), append(s.wkCPU, b.wkCPU...), append(s.wkPrio, b.wkPrio...)
	ts = 0
	for j := range wk {
		if int(b.wkComm[j]) >= len(intern) {
			return badComm(b.wkComm[j])
		}
		ts += b.wkTS[j]
		s.wkTS[j] = int64(ts)
		s.wkComm[j] = intern[b.wkComm[j]]
		s.wkIRQ[j] = IRQNone
		if j < len(b.wkFlags) {
			s.wkIRQ[j] = irqFromFlags(b.wkFlags[j])
		}
	}
	s.lastTS = max(s.lastTS, int64(ts))
	r.crop.firstBundle(cpu, b)
	var ev Event
	for _, fe := range b.full {
		if r.fullEvent(cpu, fe, &ev) {
			s.full = append(s.full, r.merge.record(&ev))
			s.lastTS = max(s.lastTS, ev.TS)
		}
	}
	r.merge.pushBundle(cpu, s)
	return nil
}

// internTable turns a bundle's intern table into the merger's string ids,
// each distinct comm allocated once per trace rather than once per bundle.
func (r *PerfettoReader) internTable(tab [][]byte) []int32 {
	m := r.merge
	r.intern = r.intern[:0]
	for _, b := range tab {
		id, ok := m.ids[string(b)]
		if !ok {
			id = m.intern(string(b))
		}
		r.intern = append(r.intern, id)
	}
	return r.intern
}

// fullEvent converts one FtraceEvent; it reports false for events the model
// does not use (they are counted in Stats().Skipped).
func (r *PerfettoReader) fullEvent(cpu int32, fe *pb.FtraceEvent, ev *Event) bool {
	*ev = Event{TS: int64(fe.Timestamp), CPU: cpu, Pid: int32(fe.Pid), IRQ: irqFromFlags(fe.CommonFlags)}
	switch e := fe.Event.(type) {
	case *pb.FtraceEvent_SchedSwitch:
		s := e.SchedSwitch
		ev.Kind = KindSwitch
		ev.PrevTid, ev.PrevComm, ev.PrevPrio = s.PrevPid, string(s.PrevComm), s.PrevPrio
		ev.PrevState = r.layout.decode(s.PrevState)
		ev.Tid, ev.Comm, ev.Prio = s.NextPid, string(s.NextComm), s.NextPrio
	case *pb.FtraceEvent_SchedWaking:
		s := e.SchedWaking
		ev.Kind = KindWaking
		ev.Tid, ev.Comm, ev.Prio, ev.TargetCPU = s.Pid, string(s.Comm), s.Prio, s.TargetCpu
	case *pb.FtraceEvent_SchedWakeup:
		s := e.SchedWakeup
		ev.Kind = KindWakeup
		ev.Tid, ev.Comm, ev.Prio, ev.TargetCPU = s.Pid, string(s.Comm), s.Prio, s.TargetCpu
	case *pb.FtraceEvent_SchedWakeupNew:
		s := e.SchedWakeupNew
		ev.Kind = KindWakeupNew
		ev.Tid, ev.Comm, ev.Prio, ev.TargetCPU = s.Pid, string(s.Comm), s.Prio, s.TargetCpu
	case *pb.FtraceEvent_TaskNewtask:
		s := e.TaskNewtask
		ev.Kind = KindNewTask
		ev.Tid, ev.Comm, ev.CloneFlags = s.Pid, string(s.Comm), s.CloneFlags
	case *pb.FtraceEvent_TaskRename:
		s := e.TaskRename
		ev.Kind = KindRename
		ev.Tid, ev.PrevComm, ev.Comm = s.Pid, string(s.Oldcomm), string(s.Newcomm)
	case *pb.FtraceEvent_SchedProcessFork:
		s := e.SchedProcessFork
		ev.Kind = KindFork
		ev.PrevTid, ev.PrevComm = s.ParentPid, string(s.ParentComm)
		ev.Tid, ev.Comm = s.ChildPid, string(s.ChildComm)
	case *pb.FtraceEvent_SchedProcessExit:
		s := e.SchedProcessExit
		ev.Kind = KindExit
		ev.Tid, ev.Tgid, ev.Comm, ev.Prio = s.Pid, s.Tgid, string(s.Comm), s.Prio
	case *pb.FtraceEvent_SchedProcessFree:
		s := e.SchedProcessFree
		ev.Kind = KindFree
		ev.Tid, ev.Comm, ev.Prio = s.Pid, string(s.Comm), s.Prio
	case *pb.FtraceEvent_SchedBlockedReason:
		s := e.SchedBlockedReason
		ev.Kind = KindBlockedReason
		ev.Tid, ev.IOWait = s.Pid, s.IoWait != 0
	default:
		r.stats.skip("ftrace_event")
		return false
	}
	return true
}

// cropState implements trace_processor's default crop of the trace start: the
// first bundle read for each CPU says, in previous_bundle_end_timestamp, from
// when on that CPU's data is complete; events of any CPU before the latest of
// those points are dropped. Compact switches before it still set the CPU's
// cursor, as they do in trace_processor.
type cropState struct {
	seen      []bool
	threshold int64
	dropped   int64
}

// drop removes from evs the events the crop drops, counting them, and
// returns how many are left (at the front of evs).
func (c *cropState) drop(evs []Event) int {
	k := 0
	for i := range evs {
		if evs[i].CPU >= 0 && evs[i].TS < c.threshold {
			c.dropped++
			continue
		}
		if k != i {
			evs[k] = evs[i]
		}
		k++
	}
	return k
}

func (c *cropState) firstBundle(cpu int32, b *bundleCols) {
	for int(cpu) >= len(c.seen) {
		c.seen = append(c.seen, false)
	}
	if c.seen[cpu] {
		return
	}
	c.seen[cpu] = true
	start := b.prevEnd
	if start == nil {
		start = b.lastRead
	}
	if start != nil && int64(*start) > c.threshold {
		c.threshold = int64(*start)
	}
}

// Kernel trace_entry flag bits (include/linux/trace_events.h).
const (
	traceFlagHardIRQ = 0x08
	traceFlagSoftIRQ = 0x10
)

func irqFromFlags(f uint32) IRQContext {
	switch {
	case f&traceFlagHardIRQ != 0:
		return IRQHard
	case f&traceFlagSoftIRQ != 0:
		return IRQSoft
	}
	return IRQNone
}
