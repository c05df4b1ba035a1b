//go:build linux

package record

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"temper.codes/temper-train/bpf"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/observe"
)

// This file is the user-space side of a recording: Run's loop drains the
// ring buffer tracer.go set up, turns each record into an observe.Event and
// writes it to a Perfetto trace, watching the bounds and the target set.

// Why a recording stopped.
const (
	StopDuration    = "duration"
	StopMaxEvents   = "max-events"
	StopMaxBytes    = "max-bytes"
	StopInterrupted = "interrupted"
	StopTargetGone  = "target exited"
)

// Options says what to trace and when to stop.
type Options struct {
	// Tgids are the thread groups to trace: all their threads, present and
	// future, and (unless NoFollowForks) processes they fork.
	Tgids []int
	// Refresh, when set, is called every RefreshEvery (default 500 ms) for
	// thread groups that joined the target by other means than fork (a
	// process moved into a traced cgroup).
	Refresh      func() ([]int, error)
	RefreshEvery time.Duration
	// StopWhenGone ends the recording once no target process is alive.
	StopWhenGone  bool
	NoFollowForks bool
	// TraceAll traces every task on the machine, ignoring Tgids.
	TraceAll bool
	// FilterSwitches records only the switches that involve a target (and,
	// with Siblings, those of CPUs whose SMT sibling runs one), as observe
	// did before every switch was recorded: smaller traces, but a CPU's
	// switches no longer chain, so other tasks' states are incomplete and
	// trace_processor counts mismatched_sched_switch_tids. The trace says
	// so (observe.TraceInfo.Filtered).
	FilterSwitches bool

	// Bounds: the first reached stops the recording. Zero means no bound,
	// except Duration, which defaults to 10 s.
	Duration  time.Duration
	MaxEvents int64
	MaxBytes  int64

	// Siblings[cpu] lists the other hardware threads of cpu's core (from
	// the snapshot's topology). Nil means unknown: no SMT occupancy tracking.
	Siblings [][]int
	// Attach is AttachAuto, AttachBTF or AttachRawTP.
	Attach string
	// BufferBytes is the ring buffer size (a power of two, default 16 MiB).
	BufferBytes int
	// Progress, when set, is called about once a second and at the end.
	Progress func(Progress)
	// OnAttached, when set, is called once the tracer is attached: from then
	// on every event of the targets is recorded.
	OnAttached func()
	// TracingChecked says the caller has already run CheckTracing, and it
	// passed (a CLI checks first, to fail before it starts a command or
	// takes a snapshot): Run does not probe the privileges and the
	// kernel again.
	TracingChecked bool
}

// Progress is a running count, for a progress line.
type Progress struct {
	Elapsed  time.Duration
	Duration time.Duration
	Events   int64
	Rate     float64 // events/s over the last interval
	Lost     uint64
	Bytes    int64
}

// Result describes a finished recording.
type Result struct {
	Attach     string // the attach mode used
	StopReason string
	Start, End int64 // trace clock (CLOCK_BOOTTIME) ns
	Events     int64 // events written to the trace
	Bytes      int64 // trace bytes written
	// Emitted and Lost are the kernel side's per-CPU counts: events put into
	// the ring buffer and events dropped because it was full.
	Emitted []uint64
	Lost    []uint64
	// Discarded counts events that arrived after a bound was reached.
	Discarded int64
	// Clamped counts events whose timestamp was behind an earlier event of
	// the same CPU (a tracepoint interrupted by another) and was raised to it.
	Clamped  int64
	Targets  []int // every thread group traced, in order of discovery
	Warnings []string
}

// TotalLost sums Lost over CPUs.
func (r *Result) TotalLost() uint64 {
	var n uint64
	for _, l := range r.Lost {
		n += l
	}
	return n
}

// Run traces the target's scheduling events until a bound is reached, the
// context is cancelled (Ctrl-C: not an error) or, with StopWhenGone, the
// target has exited, and writes them to w as a Perfetto trace. Whatever
// happens after the tracer is attached, w receives a complete, valid trace
// of what was recorded; an error means the trace is unusable. It first runs
// CheckTracing, unless opts.TracingChecked says the caller did.
func Run(ctx context.Context, w io.Writer, opts Options) (*Result, error) {
	if len(opts.Tgids) == 0 && !opts.TraceAll && opts.Refresh == nil {
		return nil, ErrNoTargets
	}
	if !opts.TracingChecked {
		if err := CheckTracing(); err != nil {
			return nil, err
		}
	}
	if opts.Duration <= 0 {
		opts.Duration = 10 * time.Second
	}
	if opts.RefreshEvery <= 0 {
		opts.RefreshEvery = 500 * time.Millisecond
	}
	start := bootNow()
	t, warnings, err := loadTracer(opts)
	if err != nil {
		return nil, err
	}
	defer t.close()

	rec := &recorder{opts: opts, t: t, res: &Result{Attach: t.attach, Start: start, Warnings: warnings},
		targets: map[int]bool{}, tgidOf: map[int32]int32{},
		comms: map[[16]int8]string{}}
	for _, g := range opts.Tgids {
		if err := rec.addTarget(g); err != nil {
			return nil, err
		}
	}
	cw := &countingWriter{w: w}
	rec.cw = cw
	info := hostTraceInfo()
	info.Filtered = opts.FilterSwitches && !opts.TraceAll
	rec.pw = observe.NewPerfettoWriter(cw, info)
	rec.pw.BundleEvents = 4096
	rec.writeProcessTree(start, opts.Tgids)
	if opts.OnAttached != nil {
		opts.OnAttached()
	}
	runErr := rec.run(ctx)
	t.detach()
	rec.drain()
	rec.res.End = bootNow()
	rec.readCounters(true)
	if err := rec.pw.Flush(); err != nil {
		return nil, fmt.Errorf("write trace: %w", err)
	}
	rec.res.Bytes = cw.n
	rec.progress(true)
	if runErr != nil {
		return nil, runErr
	}
	return rec.res, nil
}

// recorder is one recording's user-space side: it drains the ring buffer
// into the Perfetto writer, watches the bounds and keeps the target set.
type recorder struct {
	opts Options
	t    *tracer
	res  *Result
	pw   *observe.PerfettoWriter
	cw   *countingWriter

	targets map[int]bool
	tgidOf  map[int32]int32 // threads already described in the trace
	lastTS  []int64         // per CPU; math.MinInt64 before the first event
	comms   map[[16]int8]string
	ev      observe.Event
	raw     bpf.TracerTtEvent
	rec     ringbuf.Record
	stopped bool

	lastProgress      time.Time
	lastProgressCount int64
	started           time.Time
}

// addTarget adds a thread group to the traced set, in the kernel too.
func (r *recorder) addTarget(tgid int) error {
	if !r.noteTarget(tgid) {
		return nil
	}
	return r.t.addTarget(tgid)
}

// noteTarget records a thread group as traced and reports whether it is new.
func (r *recorder) noteTarget(tgid int) bool {
	if tgid <= 0 || r.targets[tgid] {
		return false
	}
	r.targets[tgid] = true
	r.res.Targets = append(r.res.Targets, tgid)
	return true
}

// pollEvery is how long the reader sleeps between drains. Blocking in the
// ring buffer's epoll instead costs more: the kernel must wake the reader
// (the BPF side would have to ask for it per event), and a long blocking
// system call makes the Go runtime's monitor poll at its fastest rate. At
// 500k events/s a 10 ms pause leaves about 400 KiB in a 16 MiB ring.
const pollEvery = 10 * time.Millisecond

func (r *recorder) run(ctx context.Context) error {
	r.started = time.Now()
	r.lastProgress = r.started
	deadline := r.started.Add(r.opts.Duration)
	nextRefresh := r.started.Add(r.opts.RefreshEvery)
	nextCounters := r.started
	for {
		if err := r.drainNow(); err != nil {
			return err
		}
		if r.stopped {
			return nil
		}
		now := time.Now()
		switch {
		case ctx.Err() != nil:
			r.res.StopReason = StopInterrupted
			return nil
		case !now.Before(deadline):
			r.res.StopReason = StopDuration
			return nil
		}
		if !now.Before(nextCounters) {
			nextCounters = now.Add(100 * time.Millisecond)
			r.readCounters(false)
		}
		if now.Sub(r.lastProgress) >= time.Second {
			r.progress(false)
		}
		if now.After(nextRefresh) {
			nextRefresh = now.Add(r.opts.RefreshEvery)
			if err := r.refresh(); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(pollEvery, deadline.Sub(now))):
		}
	}
}

// drainNow handles every record already in the ring, without waiting.
func (r *recorder) drainNow() error {
	r.t.rd.SetDeadline(time.Now())
	for !r.stopped {
		if err := r.t.rd.ReadInto(&r.rec); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil
			}
			return fmt.Errorf("read ring buffer: %w", err)
		}
		r.handle(r.rec.RawSample)
	}
	return nil
}

// drain empties the ring after the programs are detached.
func (r *recorder) drain() {
	r.t.rd.SetDeadline(time.Now())
	for {
		if err := r.t.rd.ReadInto(&r.rec); err != nil {
			return
		}
		if r.stopped {
			r.res.Discarded++
			continue
		}
		r.handle(r.rec.RawSample)
	}
}

func (r *recorder) refresh() error {
	if r.opts.Refresh != nil {
		tgids, err := r.opts.Refresh()
		if err != nil {
			r.warn(fmt.Sprintf("refresh target: %v", err))
		}
		ts := bootNow()
		for _, g := range tgids {
			if !r.targets[g] {
				if err := r.addTarget(g); err != nil {
					return err
				}
				r.writeProcessTree(ts, []int{g})
			}
		}
	}
	if r.opts.StopWhenGone && !r.opts.TraceAll {
		for g := range r.targets {
			if procAlive(g) {
				return nil
			}
		}
		r.res.StopReason = StopTargetGone
		r.stopped = true
	}
	return nil
}

func (r *recorder) warn(msg string) {
	for _, w := range r.res.Warnings {
		if w == msg {
			return
		}
	}
	r.res.Warnings = append(r.res.Warnings, msg)
}

// eventSize is the size of a ring buffer record, struct tt_event.
const eventSize = int(unsafe.Sizeof(bpf.TracerTtEvent{}))

// handle decodes one ring buffer record and writes it.
func (r *recorder) handle(b []byte) {
	if r.stopped {
		r.res.Discarded++
		return
	}
	if len(b) < eventSize {
		r.warn(fmt.Sprintf("short ring buffer record (%d bytes)", len(b)))
		return
	}
	// The record is the kernel's struct tt_event in host layout, which is
	// the layout bpf2go gives its Go twin: copy the bytes over it.
	e := &r.raw
	copy(unsafe.Slice((*byte)(unsafe.Pointer(e)), eventSize), b)
	ev := &r.ev
	*ev = observe.Event{TS: int64(e.Ts), CPU: int32(e.Cpu)}
	pid, ptgid, pprio := e.Pid, e.PrevTgid, e.PrevPrio
	tid, tgid, prio := e.Tid, e.Tgid, e.Prio
	comm, pcomm := r.comm(&e.Comm), r.comm(&e.PrevComm)
	ev.Pid, ev.Tid, ev.Tgid, ev.Comm, ev.Prio = pid, tid, tgid, comm, prio
	switch kind := bpf.TracerTtKind(e.Kind); kind {
	case bpf.TracerTtKindTT_SWITCH:
		ev.Kind = observe.KindSwitch
		ev.PrevTid, ev.PrevComm, ev.PrevPrio = pid, pcomm, pprio
		ev.PrevState = observe.TaskState(e.PrevState)
	case bpf.TracerTtKindTT_WAKING, bpf.TracerTtKindTT_WAKEUP_NEW:
		ev.Kind = observe.KindWaking
		if kind == bpf.TracerTtKindTT_WAKEUP_NEW {
			ev.Kind = observe.KindWakeupNew
		}
		ev.TargetCPU = e.TargetCpu
		switch bpf.TracerTtIrq(e.Irq) {
		case bpf.TracerTtIrqTT_IRQ_SOFT:
			ev.IRQ = observe.IRQSoft
		case bpf.TracerTtIrqTT_IRQ_HARD, bpf.TracerTtIrqTT_IRQ_ANY:
			// ANY: an interrupt of unknown kind (no preempt count on this
			// kernel); either way the current task is not the waker.
			ev.IRQ = observe.IRQHard
		}
	case bpf.TracerTtKindTT_FORK:
		ev.Kind = observe.KindFork
		ev.PrevTid, ev.PrevComm = pid, pcomm
		if tgid != ptgid && !r.opts.NoFollowForks && r.targets[int(ptgid)] {
			r.noteTarget(int(tgid)) // the kernel side already set its bit
		}
	case bpf.TracerTtKindTT_EXIT:
		ev.Kind = observe.KindExit
	case bpf.TracerTtKindTT_RENAME:
		ev.Kind = observe.KindRename
		ev.PrevComm = pcomm
	default:
		r.warn(fmt.Sprintf("unknown ring buffer record kind %d", e.Kind))
		return
	}
	for int(ev.CPU) >= len(r.lastTS) {
		r.lastTS = append(r.lastTS, math.MinInt64)
	}
	if last := r.lastTS[ev.CPU]; ev.TS < last {
		ev.TS = last
		r.res.Clamped++
	}
	r.lastTS[ev.CPU] = ev.TS
	r.describe(ev.TS, pid, ptgid, pcomm)
	if ev.Kind != observe.KindRename {
		r.describe(ev.TS, tid, tgid, comm)
	}
	if err := r.pw.Write(ev); err != nil {
		r.warn(err.Error())
		return
	}
	r.res.Events++
	switch {
	case r.opts.MaxEvents > 0 && r.res.Events >= r.opts.MaxEvents:
		r.res.StopReason, r.stopped = StopMaxEvents, true
	case r.opts.MaxBytes > 0 && r.res.Events%1024 == 0 && r.cw.n+int64(r.pw.Buffered()) >= r.opts.MaxBytes:
		r.res.StopReason, r.stopped = StopMaxBytes, true
	}
}

// describe writes a thread's identity into the trace the first time it is
// seen (or when its thread group changes: a tid reused), so the trace knows
// every task's process, the non-target ones included.
func (r *recorder) describe(ts int64, tid, tgid int32, comm string) {
	if tid <= 0 || tgid <= 0 {
		return
	}
	if g, ok := r.tgidOf[tid]; ok && g == tgid {
		return
	}
	r.tgidOf[tid] = tgid
	r.pw.Write(&observe.Event{TS: ts, Kind: observe.KindThreadInfo, CPU: -1, Tid: tid, Tgid: tgid, Comm: comm})
}

// comm interns a task's comm: the same few recur in every record.
func (r *recorder) comm(c *[16]int8) string {
	if s, ok := r.comms[*c]; ok {
		return s
	}
	var b [16]byte
	n := 0
	for n < len(c) && c[n] != 0 {
		b[n] = byte(c[n])
		n++
	}
	s := string(b[:n])
	if len(r.comms) < 1<<16 {
		r.comms[*c] = s
	}
	return s
}

// readCounters sums the kernel side's per-CPU counters; a CPU whose lost
// count grew gets Perfetto's lost_events flag on its next bundle.
func (r *recorder) readCounters(final bool) {
	per, err := r.t.counters()
	if err != nil {
		r.warn(fmt.Sprintf("read counters: %v", err))
		return
	}
	if r.res.Lost == nil {
		r.res.Lost = make([]uint64, len(per))
		r.res.Emitted = make([]uint64, len(per))
	}
	for cpu, c := range per {
		if c.Lost > r.res.Lost[cpu] && !final {
			r.pw.MarkLost(int32(cpu))
		}
		r.res.Lost[cpu], r.res.Emitted[cpu] = c.Lost, c.Emitted
	}
}

func (r *recorder) progress(final bool) {
	if r.opts.Progress == nil {
		return
	}
	now := time.Now()
	p := Progress{Elapsed: now.Sub(r.started), Duration: r.opts.Duration,
		Events: r.res.Events, Lost: r.res.TotalLost(), Bytes: r.cw.n + int64(r.pw.Buffered())}
	if dt := now.Sub(r.lastProgress).Seconds(); dt > 0 {
		p.Rate = float64(r.res.Events-r.lastProgressCount) / dt
	}
	if final {
		p.Rate = float64(r.res.Events) / max(p.Elapsed.Seconds(), 1e-9)
	}
	r.lastProgress, r.lastProgressCount = now, r.res.Events
	r.opts.Progress(p)
}

// writeProcessTree describes the target processes and their threads from
// /proc, so the trace names threads that never switch during the window.
func (r *recorder) writeProcessTree(ts int64, tgids []int) {
	var proc procfs.FS
	for _, g := range tgids {
		ppid, args := procParent(g)
		ev := &observe.Event{TS: ts, Kind: observe.KindProcessInfo, CPU: -1, Tid: int32(g), PrevTid: int32(ppid), Args: args}
		if len(args) == 0 {
			ev.Comm, _ = proc.TaskComm(g, g) // a zombie: named by its comm
		}
		r.pw.Write(ev)
	}
	for _, g := range tgids {
		tids, _ := proc.Tasks(g)
		for _, tid := range tids {
			comm, _ := proc.TaskComm(g, tid)
			r.tgidOf[int32(tid)] = int32(g)
			r.pw.Write(&observe.Event{TS: ts, Kind: observe.KindThreadInfo, CPU: -1, Tid: int32(tid), Tgid: int32(g), Comm: comm})
		}
	}
}

// procAlive reports whether pid exists and is not a zombie.
func procAlive(pid int) bool {
	st, err := procfs.FS{}.Stat(pid)
	return err == nil && !st.Exited()
}

// procParent reads a process's parent pid and command line; what cannot
// be read is left zero.
func procParent(pid int) (int, []string) {
	var proc procfs.FS
	var ppid int
	if st, err := proc.Stat(pid); err == nil {
		ppid = st.PPID
	}
	cmdline, _ := proc.Cmdline(pid)
	return ppid, cmdline.Args()
}

func hostTraceInfo() observe.TraceInfo {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	n, _ := ebpf.PossibleCPU()
	return observe.TraceInfo{Format: observe.FormatPerfetto, Sysname: unix.ByteSliceToString(uts.Sysname[:]),
		KernelRelease: unix.ByteSliceToString(uts.Release[:]), KernelVersion: unix.ByteSliceToString(uts.Version[:]),
		Machine: unix.ByteSliceToString(uts.Machine[:]), NumCPUs: n}
}

// bootNow reads the clock the BPF side stamps events with.
func bootNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return ts.Nano()
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
