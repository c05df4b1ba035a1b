package observe

import (
	"bufio"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "temper.codes/temper-train/observe/perfettopb"
)

// PerfettoWriter writes events as a Perfetto trace that opens in
// ui.perfetto.dev and trace_processor: a SystemInfo packet (so prev_state is
// decoded with the right kernel layout), ProcessTree packets for thread and
// process identity, and per-CPU ftrace bundles with switches and wakings in
// compact_sched form and everything else as full FtraceEvents.
//
// The encoding is lossless for every Event field the format carries: a switch
// or waking goes into compact form only when compact_sched's implicit fields
// (the outgoing task, the waker) equal what the CPU's previous switch implies,
// and a bundle is closed early rather than let two events with one timestamp
// change their order. Reading the file back gives the same events.
type PerfettoWriter struct {
	w       *bufio.Writer
	info    TraceInfo
	layout  *stateLayout
	cpus    []*bundleBuilder
	infoBuf pb.ProcessTree // identity events not yet written
	infoTS  int64
	infoN   int
	buf     []byte
	err     error
	// BundleEvents is how many events a CPU collects before its bundle is
	// written; bigger bundles compress better, smaller ones bound the reader's
	// merge buffer.
	BundleEvents int
	// BundleAge bounds the time span of an open bundle: a quiet CPU's bundle
	// is written once an event on any CPU is this much newer than its first
	// event, so readers that sort within a window (ours: 1 s; trace_processor
	// streams the same way) never meet one CPU's old events late.
	BundleAge int64
	nextAge   int64   // timestamp at which open bundles are next checked for age
	nextMark  int64   // timestamp at which progress marks are next written
	marks     []int64 // per CPU: the last progress mark written (see progress)
}

// markLag sets how far progress marks trail the newest event: BundleAge/16
// (16 ms by default), both as the cross-CPU disorder Write tolerates and as the
// interval between marks. The recorder's input is in ring-buffer order, within
// microseconds; the reader holds about two lags' worth of events.
const markLag = 16

const seqID = 1 // the one packet sequence this writer emits

// NewPerfettoWriter starts a trace on w. info's kernel release, machine and
// CPU count go into the SystemInfo packet.
func NewPerfettoWriter(w io.Writer, info TraceInfo) *PerfettoWriter {
	pw := &PerfettoWriter{w: bufio.NewWriterSize(w, 256<<10), info: info,
		layout: layoutFor(info.KernelRelease), BundleEvents: 4096, BundleAge: 250e6}
	si := &pb.SystemInfo{NumCpus: uint32(max(info.NumCPUs, 0))}
	if info.KernelRelease != "" {
		sys := info.Sysname
		if sys == "" {
			sys = "Linux"
		}
		si.Utsname = &pb.Utsname{Sysname: []byte(sys), Release: []byte(info.KernelRelease),
			Version: []byte(info.KernelVersion), Machine: []byte(info.Machine)}
	}
	pw.packet(&pb.TracePacket{Data: &pb.TracePacket_SystemInfo{SystemInfo: si},
		TrustedPacketSequenceId: seqID, FirstPacketOnSequence: true,
		SequenceFlags: uint32(pb.SequenceFlags_SEQ_INCREMENTAL_STATE_CLEARED)})
	if info.Filtered {
		pw.packet(&pb.TracePacket{TrustedPacketSequenceId: seqID, Data: &pb.TracePacket_TraceAttributes{
			TraceAttributes: &pb.TraceAttributes{Attribute: []*pb.TraceAttributes_Attribute{{Key: pb.SwitchesAttribute,
				Value: &pb.TraceAttributes_Attribute_StringValue{StringValue: pb.SwitchesFiltered}}}}}})
	}
	return pw
}

// bundleBuilder accumulates one CPU's next bundle.
type bundleBuilder struct {
	cpu      int32
	cur      cpuCursor
	b        pb.FtraceEventBundle
	cs       pb.FtraceEventBundle_CompactSched
	intern   map[string]uint32
	lastSw   uint64
	lastWk   uint64
	n        int
	firstTS  int64
	lastTS   int64
	lastKind int // 1 compact switch, 2 compact waking, 3 full event
	irq      bool
}

// Write adds one event. Events of one CPU must come in timestamp order; across
// CPUs an event may come after one up to BundleAge/16 newer, not more (the
// progress marks promise readers so, see progress).
func (w *PerfettoWriter) Write(ev *Event) error {
	if w.err != nil {
		return w.err
	}
	switch ev.Kind {
	case KindThreadInfo, KindProcessInfo:
		w.addInfo(ev)
		return w.err
	}
	if ev.CPU < 0 {
		return w.writeGeneric(ev)
	}
	if w.infoN > 0 {
		w.flushInfo()
	}
	if ev.TS >= w.nextAge && w.BundleAge > 0 {
		w.flushOlder(ev.TS - w.BundleAge)
		w.nextAge = ev.TS + w.BundleAge/4
	}
	if lag := w.BundleAge / markLag; ev.TS >= w.nextMark && lag > 0 {
		if w.nextMark > 0 {
			w.progress(ev.TS - lag)
		}
		w.nextMark = ev.TS + lag
	}
	for int(ev.CPU) >= len(w.cpus) {
		w.cpus = append(w.cpus, nil)
	}
	bb := w.cpus[ev.CPU]
	if bb == nil {
		bb = &bundleBuilder{cpu: ev.CPU}
		w.cpus[ev.CPU] = bb
	}
	kind := 3
	switch ev.Kind {
	case KindSwitch:
		if bb.cur.known && ev.PrevTid == bb.cur.tid && ev.PrevComm == bb.cur.comm &&
			ev.PrevPrio == bb.cur.prio && ev.Pid == bb.cur.tid && ev.IRQ == IRQNone {
			kind = 1
		}
	case KindWaking:
		if bb.cur.known && ev.Pid == bb.cur.tid {
			kind = 2
		}
	}
	if bb.n == 0 {
		bb.firstTS = ev.TS
	}
	if bb.n > 0 && ev.TS == bb.lastTS && kind != bb.lastKind {
		w.flushCPU(bb)
	}
	if ev.TS < bb.lastTS && bb.n > 0 {
		return fmt.Errorf("write %s: cpu %d timestamp %d before %d", ev.Kind, ev.CPU, ev.TS, bb.lastTS)
	}
	raw, ok := w.layout.encode(ev.PrevState)
	if ev.Kind == KindSwitch && !ok {
		return fmt.Errorf("write sched_switch at %d: state %s cannot be written for kernel %q", ev.TS, ev.PrevState, w.info.KernelRelease)
	}
	switch kind {
	case 1:
		cs := &bb.cs
		cs.SwitchTimestamp = append(cs.SwitchTimestamp, uint64(ev.TS)-bb.lastSw)
		bb.lastSw = uint64(ev.TS)
		cs.SwitchPrevState = append(cs.SwitchPrevState, raw)
		cs.SwitchNextPid = append(cs.SwitchNextPid, ev.Tid)
		cs.SwitchNextPrio = append(cs.SwitchNextPrio, ev.Prio)
		cs.SwitchNextCommIndex = append(cs.SwitchNextCommIndex, bb.internComm(ev.Comm))
	case 2:
		cs := &bb.cs
		cs.WakingTimestamp = append(cs.WakingTimestamp, uint64(ev.TS)-bb.lastWk)
		bb.lastWk = uint64(ev.TS)
		cs.WakingPid = append(cs.WakingPid, ev.Tid)
		cs.WakingTargetCpu = append(cs.WakingTargetCpu, ev.TargetCPU)
		cs.WakingPrio = append(cs.WakingPrio, ev.Prio)
		cs.WakingCommIndex = append(cs.WakingCommIndex, bb.internComm(ev.Comm))
		cs.WakingCommonFlags = append(cs.WakingCommonFlags, irqFlags(ev.IRQ))
		if ev.IRQ != IRQNone {
			bb.irq = true
		}
	default:
		fe, err := fullEvent(ev, raw)
		if err != nil {
			return err
		}
		bb.b.Event = append(bb.b.Event, fe)
	}
	if ev.Kind == KindSwitch {
		bb.cur = cpuCursor{known: true, tid: ev.Tid, comm: ev.Comm, prio: ev.Prio}
	}
	bb.n++
	bb.lastTS, bb.lastKind = ev.TS, kind
	if bb.n >= w.BundleEvents {
		w.flushCPU(bb)
	}
	return w.err
}

func irqFlags(c IRQContext) uint32 {
	switch c {
	case IRQHard:
		return traceFlagHardIRQ
	case IRQSoft:
		return traceFlagSoftIRQ
	}
	return 0
}

func (bb *bundleBuilder) internComm(c string) uint32 {
	if bb.intern == nil {
		bb.intern = map[string]uint32{}
	}
	if i, ok := bb.intern[c]; ok {
		return i
	}
	i := uint32(len(bb.cs.InternTable))
	bb.cs.InternTable = append(bb.cs.InternTable, []byte(c))
	bb.intern[c] = i
	return i
}

func fullEvent(ev *Event, rawState int64) (*pb.FtraceEvent, error) {
	if ev.TS == 0 {
		// proto3 would leave it off the wire, and trace_processor drops an
		// event without a timestamp.
		return nil, fmt.Errorf("write %s on cpu %d: timestamp 0 cannot be written", ev.Kind, ev.CPU)
	}
	fe := &pb.FtraceEvent{Timestamp: uint64(ev.TS), Pid: uint32(ev.Pid), CommonFlags: irqFlags(ev.IRQ)}
	switch ev.Kind {
	case KindSwitch:
		fe.Event = &pb.FtraceEvent_SchedSwitch{SchedSwitch: &pb.SchedSwitchFtraceEvent{
			PrevComm: []byte(ev.PrevComm), PrevPid: ev.PrevTid, PrevPrio: ev.PrevPrio, PrevState: rawState,
			NextComm: []byte(ev.Comm), NextPid: ev.Tid, NextPrio: ev.Prio}}
	case KindWaking:
		fe.Event = &pb.FtraceEvent_SchedWaking{SchedWaking: &pb.SchedWakingFtraceEvent{
			Comm: []byte(ev.Comm), Pid: ev.Tid, Prio: ev.Prio, Success: 1, TargetCpu: ev.TargetCPU}}
	case KindWakeup:
		fe.Event = &pb.FtraceEvent_SchedWakeup{SchedWakeup: &pb.SchedWakeupFtraceEvent{
			Comm: []byte(ev.Comm), Pid: ev.Tid, Prio: ev.Prio, Success: 1, TargetCpu: ev.TargetCPU}}
	case KindWakeupNew:
		fe.Event = &pb.FtraceEvent_SchedWakeupNew{SchedWakeupNew: &pb.SchedWakeupNewFtraceEvent{
			Comm: []byte(ev.Comm), Pid: ev.Tid, Prio: ev.Prio, Success: 1, TargetCpu: ev.TargetCPU}}
	case KindNewTask:
		fe.Event = &pb.FtraceEvent_TaskNewtask{TaskNewtask: &pb.TaskNewtaskFtraceEvent{
			Pid: ev.Tid, Comm: []byte(ev.Comm), CloneFlags: ev.CloneFlags}}
	case KindRename:
		fe.Event = &pb.FtraceEvent_TaskRename{TaskRename: &pb.TaskRenameFtraceEvent{
			Pid: ev.Tid, Oldcomm: []byte(ev.PrevComm), Newcomm: []byte(ev.Comm)}}
	case KindFork:
		fe.Event = &pb.FtraceEvent_SchedProcessFork{SchedProcessFork: &pb.SchedProcessForkFtraceEvent{
			ParentComm: []byte(ev.PrevComm), ParentPid: ev.PrevTid, ChildComm: []byte(ev.Comm), ChildPid: ev.Tid}}
	case KindExit:
		fe.Event = &pb.FtraceEvent_SchedProcessExit{SchedProcessExit: &pb.SchedProcessExitFtraceEvent{
			Comm: []byte(ev.Comm), Pid: ev.Tid, Tgid: ev.Tgid, Prio: ev.Prio}}
	case KindFree:
		fe.Event = &pb.FtraceEvent_SchedProcessFree{SchedProcessFree: &pb.SchedProcessFreeFtraceEvent{
			Comm: []byte(ev.Comm), Pid: ev.Tid, Prio: ev.Prio}}
	case KindBlockedReason:
		var io uint32
		if ev.IOWait {
			io = 1
		}
		fe.Event = &pb.FtraceEvent_SchedBlockedReason{SchedBlockedReason: &pb.SchedBlockedReasonFtraceEvent{
			Pid: ev.Tid, IoWait: io}}
	default:
		return nil, fmt.Errorf("write: unsupported event kind %s", ev.Kind)
	}
	return fe, nil
}

func (w *PerfettoWriter) addInfo(ev *Event) {
	// A thread entry followed by a process entry would come back in the other
	// order (a ProcessTree lists processes first), so start a new packet.
	if w.infoN > 0 && (ev.TS != w.infoTS || (ev.Kind == KindProcessInfo && len(w.infoBuf.Threads) > 0)) {
		w.flushInfo()
	}
	w.infoTS = ev.TS
	w.infoN++
	if ev.Kind == KindProcessInfo {
		cmd := make([][]byte, len(ev.Args))
		for i, a := range ev.Args {
			cmd[i] = []byte(a)
		}
		// trace_processor skips a process without a cmdline entry, parent and
		// all; Perfetto's own scraper writes the name then, and says so.
		isComm := len(cmd) == 0
		if isComm {
			cmd = [][]byte{[]byte(ev.Comm)}
		}
		w.infoBuf.Processes = append(w.infoBuf.Processes, &pb.ProcessTree_Process{Pid: ev.Tid, Ppid: ev.PrevTid,
			Cmdline: cmd, CmdlineIsComm: isComm})
		return
	}
	w.infoBuf.Threads = append(w.infoBuf.Threads, &pb.ProcessTree_Thread{Tid: ev.Tid, Tgid: ev.Tgid, Name: []byte(ev.Comm)})
}

func (w *PerfettoWriter) flushInfo() {
	ts := uint64(w.infoTS)
	pt := &pb.ProcessTree{Processes: w.infoBuf.Processes, Threads: w.infoBuf.Threads}
	w.packet(&pb.TracePacket{Timestamp: &ts, Data: &pb.TracePacket_ProcessTree{ProcessTree: pt},
		TrustedPacketSequenceId: seqID})
	w.infoBuf = pb.ProcessTree{}
	w.infoN = 0
}

func (w *PerfettoWriter) flushCPU(bb *bundleBuilder) {
	if bb.n == 0 && !bb.b.LostEvents {
		return
	}
	b := &bb.b
	cpu := uint32(bb.cpu)
	b.Cpu = &cpu // written even when 0: trace_processor drops a bundle without
	flags := bb.cs.WakingCommonFlags
	if len(bb.cs.SwitchTimestamp) > 0 || len(bb.cs.WakingTimestamp) > 0 {
		if !bb.irq {
			bb.cs.WakingCommonFlags = nil
		}
		b.CompactSched = &bb.cs
	}
	w.packet(&pb.TracePacket{Data: &pb.TracePacket_FtraceEvents{FtraceEvents: b},
		TrustedPacketSequenceId: seqID})
	// The packet is encoded: start the next bundle in the same memory
	// rather than making garbage of the columns.
	cs := &bb.cs
	cs.SwitchTimestamp, cs.SwitchPrevState = cs.SwitchTimestamp[:0], cs.SwitchPrevState[:0]
	cs.SwitchNextPid, cs.SwitchNextPrio = cs.SwitchNextPid[:0], cs.SwitchNextPrio[:0]
	cs.SwitchNextCommIndex, cs.InternTable = cs.SwitchNextCommIndex[:0], cs.InternTable[:0]
	cs.WakingTimestamp, cs.WakingPid = cs.WakingTimestamp[:0], cs.WakingPid[:0]
	cs.WakingTargetCpu, cs.WakingPrio = cs.WakingTargetCpu[:0], cs.WakingPrio[:0]
	cs.WakingCommIndex, cs.WakingCommonFlags = cs.WakingCommIndex[:0], flags[:0]
	clear(b.Event)
	b.Event, b.CompactSched, b.LostEvents = b.Event[:0], nil, false
	bb.lastSw, bb.lastWk, bb.n, bb.firstTS, bb.lastKind, bb.irq = 0, 0, 0, 0, 0, false
	clear(bb.intern)
}

// flushOlder writes every open bundle whose first event is before ts.
func (w *PerfettoWriter) flushOlder(ts int64) {
	for _, bb := range w.cpus {
		if bb != nil && bb.n > 0 && bb.firstTS < ts {
			w.flushCPU(bb)
		}
	}
}

// progress writes, for every CPU, how far its data in the file is complete: an
// empty bundle for the CPU, stamped in TracePacket.timestamp with a time before
// which none of the CPU's events is still to come. That is ts, the newest event
// less the cross-CPU disorder Write tolerates (see markLag), or the first event
// of the CPU's open bundle if earlier. Readers that know these marks (ours: see
// merger.mark) release a quiet CPU's neighbours without waiting a sort window,
// which keeps their memory to the span the marks trail by; other readers see
// bundles with no events. A mark is written only when it moved.
func (w *PerfettoWriter) progress(ts int64) {
	n := max(w.info.NumCPUs, len(w.cpus))
	for len(w.marks) < n {
		w.marks = append(w.marks, 0)
	}
	for cpu := range n {
		mark := ts
		if cpu < len(w.cpus) {
			if bb := w.cpus[cpu]; bb != nil && bb.n > 0 {
				mark = min(mark, bb.firstTS)
			}
		}
		if mark <= w.marks[cpu] {
			continue
		}
		w.marks[cpu] = mark
		t, c := uint64(mark), uint32(cpu)
		w.packet(&pb.TracePacket{Timestamp: &t, TrustedPacketSequenceId: seqID,
			Data: &pb.TracePacket_FtraceEvents{FtraceEvents: &pb.FtraceEventBundle{Cpu: &c}}})
	}
}

// MarkLost records that events were lost on cpu before the events that follow
// it: the CPU's next bundle carries Perfetto's lost_events flag.
func (w *PerfettoWriter) MarkLost(cpu int32) {
	for int(cpu) >= len(w.cpus) {
		w.cpus = append(w.cpus, nil)
	}
	if w.cpus[cpu] == nil {
		w.cpus[cpu] = &bundleBuilder{cpu: cpu}
	}
	bb := w.cpus[cpu]
	if bb.n > 0 {
		w.flushCPU(bb)
	}
	bb.b.LostEvents = true
}

func (w *PerfettoWriter) packet(p *pb.TracePacket) {
	if w.err != nil {
		return
	}
	var err error
	w.buf, err = proto.MarshalOptions{}.MarshalAppend(w.buf[:0], p)
	if err != nil {
		w.err = fmt.Errorf("encode packet: %w", err)
		return
	}
	var hdr [binaryMaxHeader]byte
	h := protowire.AppendTag(hdr[:0], 1, protowire.BytesType)
	h = protowire.AppendVarint(h, uint64(len(w.buf)))
	if _, err := w.w.Write(h); err != nil {
		w.err = err
		return
	}
	if _, err := w.w.Write(w.buf); err != nil {
		w.err = err
	}
}

const binaryMaxHeader = 1 + 10

// Flush writes out every pending bundle, so that what has been written so far
// is a complete, readable trace.
func (w *PerfettoWriter) Flush() error {
	if w.infoN > 0 {
		w.flushInfo()
	}
	for _, bb := range w.cpus {
		if bb != nil {
			w.flushCPU(bb)
		}
	}
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

// Buffered is how many bytes of encoded trace wait in the writer's buffer,
// not yet passed to the underlying writer (open bundles not counted): with
// what the underlying writer received, the size of the trace so far.
func (w *PerfettoWriter) Buffered() int { return w.w.Buffered() }

// Close flushes; the caller closes the underlying writer.
func (w *PerfettoWriter) Close() error { return w.Flush() }

// writeGeneric writes the task events that came without a CPU (Perfetto's
// kernel-agnostic generic_kernel packets) back in that form.
func (w *PerfettoWriter) writeGeneric(ev *Event) error {
	ts := uint64(ev.TS)
	p := &pb.TracePacket{Timestamp: &ts, TrustedPacketSequenceId: seqID}
	switch ev.Kind {
	case KindNewTask:
		p.Data = &pb.TracePacket_GenericKernelTaskStateEvent{GenericKernelTaskStateEvent: &pb.GenericKernelTaskStateEvent{
			Cpu: -1, Comm: []byte(ev.Comm), Tid: int64(ev.Tid), State: genericTaskCreated, Prio: ev.Prio}}
	case KindRename:
		p.Data = &pb.TracePacket_GenericKernelTaskRenameEvent{GenericKernelTaskRenameEvent: &pb.GenericKernelTaskRenameEvent{
			Tid: int64(ev.Tid), Comm: []byte(ev.Comm)}}
	default:
		return fmt.Errorf("write %s: event has no CPU", ev.Kind)
	}
	if w.infoN > 0 {
		w.flushInfo()
	}
	w.packet(p)
	return w.err
}
