package observe

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"temper.codes/temper-train/bpf"
	"temper.codes/temper-train/internal/procfs"
)

// Attach modes: how the tracer's programs hook the scheduler tracepoints.
const (
	AttachAuto  = ""       // tp_btf when the kernel has BTF, else raw_tp
	AttachBTF   = "tp_btf" // BTF-typed tracepoints (cheapest)
	AttachRawTP = "raw_tp" // raw tracepoints (kernels without usable BTF)
)

// Why a recording stopped.
const (
	StopDuration    = "duration"
	StopMaxEvents   = "max-events"
	StopMaxBytes    = "max-bytes"
	StopInterrupted = "interrupted"
	StopTargetGone  = "target exited"
)

// RecordOptions says what to trace and when to stop.
type RecordOptions struct {
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
	// so (TraceInfo.Filtered).
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
	Progress func(RecordProgress)
	// OnAttached, when set, is called once the tracer is attached: from then
	// on every event of the targets is recorded.
	OnAttached func()
	// TracingChecked says the caller has already run CheckTracing, and it
	// passed (a CLI checks first, to fail before it starts a command or
	// takes a snapshot): Record does not probe the privileges and the
	// kernel again.
	TracingChecked bool
}

// RecordProgress is a running count, for a progress line.
type RecordProgress struct {
	Elapsed  time.Duration
	Duration time.Duration
	Events   int64
	Rate     float64 // events/s over the last interval
	Lost     uint64
	Bytes    int64
}

// RecordResult describes a finished recording.
type RecordResult struct {
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
func (r *RecordResult) TotalLost() uint64 {
	var n uint64
	for _, l := range r.Lost {
		n += l
	}
	return n
}

// Errors a caller can act on.
var (
	ErrNoPrivilege = errors.New("tracing needs root or CAP_BPF with CAP_PERFMON")
	ErrNoKernelBPF = errors.New("the kernel lacks BPF support the tracer needs")
	ErrNoTargets   = errors.New("nothing to trace")
)

// CheckTracing reports whether this process may load and attach the tracer:
// privileges first, then the kernel features it uses.
func CheckTracing() error {
	if os.Geteuid() != 0 {
		caps, err := procfs.EffectiveCaps()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNoPrivilege, err)
		}
		if !caps.Has(procfs.CapSysAdmin) && !caps.Has(procfs.CapBPF, procfs.CapPerfmon) {
			return fmt.Errorf("%w: run as root (sudo) or grant the capabilities (setcap cap_bpf,cap_perfmon+ep)", ErrNoPrivilege)
		}
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	release := unix.ByteSliceToString(uts.Release[:])
	if major, minor, ok := kernelVersion(release); ok && (major < 5 || major == 5 && minor < 8) {
		return fmt.Errorf("%w: kernel %s is older than 5.8 (BPF ring buffer, boot-time clock): observe a newer node", ErrNoKernelBPF, release)
	}
	if _, err := btf.LoadKernelSpec(); err != nil {
		return fmt.Errorf("%w: no kernel BTF (%v): the tracer relocates against /sys/kernel/btf/vmlinux; use a kernel built with CONFIG_DEBUG_INFO_BTF=y", ErrNoKernelBPF, err)
	}
	for _, probe := range []struct {
		what string
		err  error
	}{
		{"BPF ring buffer maps", features.HaveMapType(ebpf.RingBuf)},
		{"raw tracepoint programs", features.HaveProgramType(ebpf.RawTracepoint)},
	} {
		if probe.err != nil {
			if errors.Is(probe.err, ebpf.ErrNotSupported) {
				return fmt.Errorf("%w: %s not supported by kernel %s", ErrNoKernelBPF, probe.what, release)
			}
			return fmt.Errorf("probe %s: %w", probe.what, probe.err)
		}
	}
	return nil
}

// Record traces the target's scheduling events until a bound is reached, the
// context is cancelled (Ctrl-C: not an error) or, with StopWhenGone, the
// target has exited, and writes them to w as a Perfetto trace. Whatever
// happens after the tracer is attached, w receives a complete, valid trace
// of what was recorded; an error means the trace is unusable. It first runs
// CheckTracing, unless opts.TracingChecked says the caller did.
func Record(ctx context.Context, w io.Writer, opts RecordOptions) (*RecordResult, error) {
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

	rec := &recorder{opts: opts, t: t, res: &RecordResult{Attach: t.attach, Start: start, Warnings: warnings},
		targets: map[int]bool{}, tgidOf: map[int32]int32{},
		comms: map[[16]byte]string{}}
	for _, g := range opts.Tgids {
		if err := rec.addTarget(g); err != nil {
			return nil, err
		}
	}
	cw := &countingWriter{w: w}
	rec.cw = cw
	info := hostTraceInfo()
	info.Filtered = opts.FilterSwitches && !opts.TraceAll
	rec.pw = NewPerfettoWriter(cw, info)
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

// tracer is the loaded BPF side.
type tracer struct {
	objs   tracerObjects
	links  []link.Link
	rd     *ringbuf.Reader
	attach string
	ncpu   int
}

// tracerObjects names what is loaded: one of the two program sets.
type tracerObjects struct {
	Targets  *ebpf.Map `ebpf:"targets"`
	Events   *ebpf.Map `ebpf:"events"`
	Counters *ebpf.Map `ebpf:"counters"`
	Cpus     *ebpf.Map `ebpf:"cpus"`
	progs    map[string]*ebpf.Program
}

var tracepoints = []struct{ group, name string }{
	{"sched", "sched_switch"}, {"sched", "sched_waking"}, {"sched", "sched_wakeup_new"},
	{"sched", "sched_process_fork"}, {"sched", "sched_process_exit"}, {"task", "task_rename"},
}

// loadTracer loads and attaches the tracer in the requested mode or, for
// AttachAuto, in the first mode that works; warnings say why a mode was
// passed over.
func loadTracer(opts RecordOptions) (*tracer, []string, error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, nil, fmt.Errorf("raise memlock limit: %w", err)
	}
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, nil, fmt.Errorf("count CPUs: %w", err)
	}
	modes := []string{opts.Attach}
	if opts.Attach == AttachAuto {
		modes = []string{AttachBTF, AttachRawTP}
	}
	var errs []error
	var warnings []string
	for _, mode := range modes {
		t, err := loadMode(mode, opts, ncpu)
		if err == nil {
			if err = t.attachAll(); err == nil {
				return t, warnings, nil
			}
			t.close()
		}
		errs = append(errs, fmt.Errorf("%s: %w", mode, err))
		warnings = append(warnings, fmt.Sprintf("%s unavailable, fell back: %v", mode, err))
	}
	return nil, nil, fmt.Errorf("load tracer: %w", errors.Join(errs...))
}

func loadMode(mode string, opts RecordOptions, ncpu int) (*tracer, error) {
	spec, err := bpf.LoadTracer()
	if err != nil {
		return nil, fmt.Errorf("parse embedded BPF object: %w", err)
	}
	prefix := map[string]string{AttachBTF: "btf_", AttachRawTP: "raw_"}[mode]
	if prefix == "" {
		return nil, fmt.Errorf("unknown attach mode %q (want %s or %s)", mode, AttachBTF, AttachRawTP)
	}
	for name := range spec.Programs {
		if !strings.HasPrefix(name, prefix) {
			delete(spec.Programs, name)
		}
	}
	major, minor, _ := kernelVersion(hostTraceInfo().KernelRelease)
	for name, v := range map[string]bool{
		"prev_state_arg":  major > 5 || major == 5 && minor >= 18,
		"follow_forks":    !opts.NoFollowForks,
		"trace_all":       opts.TraceAll,
		"filter_switches": opts.FilterSwitches && !opts.TraceAll,
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("set %s: %w", name, err)
		}
	}
	if err := spec.Variables["preempt_count_from_rq"].Set(preemptCountFromRunqueue()); err != nil {
		return nil, fmt.Errorf("set preempt_count_from_rq: %w", err)
	}
	size := opts.BufferBytes
	if size == 0 {
		size = 16 << 20
	}
	if size < os.Getpagesize() || size&(size-1) != 0 {
		return nil, fmt.Errorf("ring buffer size %d: want a power of two of at least %d", size, os.Getpagesize())
	}
	spec.Maps["events"].MaxEntries = uint32(size)
	spec.Maps["cpus"].MaxEntries = uint32(ncpu)

	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("verifier rejected the tracer: %w", err)
		}
		if errors.Is(err, ebpf.ErrNotSupported) {
			return nil, fmt.Errorf("%w: %v", ErrNoKernelBPF, err)
		}
		return nil, err
	}
	t := &tracer{attach: mode, ncpu: ncpu}
	t.objs.progs = coll.Programs
	t.objs.Targets, t.objs.Events = coll.Maps["targets"], coll.Maps["events"]
	t.objs.Counters, t.objs.Cpus = coll.Maps["counters"], coll.Maps["cpus"]
	if err := t.fillCPUs(opts.Siblings); err != nil {
		coll.Close()
		return nil, err
	}
	if t.rd, err = ringbuf.NewReader(t.objs.Events); err != nil {
		coll.Close()
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	return t, nil
}

// preemptCountFromRunqueue gives the distance from a CPU's runqueue to its
// preempt count: both are per-CPU variables, so the distance is the same on
// every CPU and equals the distance of their offsets in the kernel BTF's
// .data..percpu section. The tracer uses it to tell whether a waking fired
// in interrupt context (0: not found; the tracer falls back).
func preemptCountFromRunqueue() int64 {
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return 0
	}
	var ds *btf.Datasec
	if err := kernel.TypeByName(".data..percpu", &ds); err != nil {
		return 0
	}
	offsets := map[string]int64{}
	for _, v := range ds.Vars {
		if vr, ok := v.Type.(*btf.Var); ok {
			offsets[vr.Name] = int64(v.Offset)
		}
	}
	rq, ok := offsets["runqueues"]
	if !ok {
		return 0
	}
	if pc, ok := offsets["__preempt_count"]; ok { // x86 since 6.15
		return pc - rq
	}
	// x86 6.1 to 6.14: pcpu_hot.preempt_count
	hot, ok := offsets["pcpu_hot"]
	var st *btf.Struct
	if !ok || kernel.TypeByName("pcpu_hot", &st) != nil {
		return 0
	}
	for _, m := range st.Members {
		if m.Name == "preempt_count" {
			return hot + int64(m.Offset.Bytes()) - rq
		}
	}
	return 0
}

func (t *tracer) fillCPUs(siblings [][]int) error {
	for cpu := 0; cpu < t.ncpu; cpu++ {
		var c bpf.TracerTtCpu
		for i := range c.Siblings {
			c.Siblings[i] = ^uint32(0)
		}
		if cpu < len(siblings) {
			n := 0
			for _, s := range siblings[cpu] {
				if s != cpu && s >= 0 && s < t.ncpu && n < len(c.Siblings)-1 {
					c.Siblings[n] = uint32(s)
					n++
				}
			}
		}
		if err := t.objs.Cpus.Put(uint32(cpu), &c); err != nil {
			return fmt.Errorf("fill cpu map: %w", err)
		}
	}
	return nil
}

func (t *tracer) attachAll() error {
	prefix := map[string]string{AttachBTF: "btf_", AttachRawTP: "raw_"}[t.attach]
	for _, tp := range tracepoints {
		prog := t.objs.progs[prefix+tp.name]
		var l link.Link
		var err error
		if t.attach == AttachBTF {
			l, err = link.AttachTracing(link.TracingOptions{Program: prog})
		} else {
			l, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp.name, Program: prog})
		}
		if err != nil {
			t.detach()
			return fmt.Errorf("attach %s to %s:%s: %w", t.attach, tp.group, tp.name, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

func (t *tracer) detach() {
	for _, l := range t.links {
		l.Close()
	}
	t.links = nil
}

func (t *tracer) close() {
	t.detach()
	if t.rd != nil {
		t.rd.Close()
	}
	for _, p := range t.objs.progs {
		p.Close()
	}
	for _, m := range []*ebpf.Map{t.objs.Targets, t.objs.Events, t.objs.Counters, t.objs.Cpus} {
		if m != nil {
			m.Close()
		}
	}
}

// recorder is one recording's user-space side: it drains the ring buffer
// into the Perfetto writer, watches the bounds and keeps the target set.
type recorder struct {
	opts RecordOptions
	t    *tracer
	res  *RecordResult
	pw   *PerfettoWriter
	cw   *countingWriter

	targets map[int]bool
	tgidOf  map[int32]int32 // threads already described in the trace
	lastTS  []int64         // per CPU; math.MinInt64 before the first event
	comms   map[[16]byte]string
	ev      Event
	rec     ringbuf.Record
	stopped bool

	lastProgress      time.Time
	lastProgressCount int64
	started           time.Time
}

// addTarget adds a thread group to the kernel's target bitmap.
func (r *recorder) addTarget(tgid int) error {
	if !r.noteTarget(tgid) {
		return nil
	}
	if tgid >= maxPid {
		return fmt.Errorf("add target %d: beyond the tracer's pid range (%d)", tgid, maxPid)
	}
	// Read-modify-write of one word: the fork handler may set a bit of the
	// same word meanwhile and be overwritten. That child is not lost for
	// long: the process is found again by the next refresh.
	key := uint32(tgid / 64)
	var word uint64
	if err := r.t.objs.Targets.Lookup(key, &word); err != nil {
		return fmt.Errorf("add target %d: %w", tgid, err)
	}
	if err := r.t.objs.Targets.Put(key, word|1<<(tgid%64)); err != nil {
		return fmt.Errorf("add target %d: %w", tgid, err)
	}
	return nil
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

// maxPid bounds the pids the target bitmap holds (TT_MAX_PID in bpf/tracer.h).
const maxPid = 1 << 22

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

// handle decodes one tt_event (layout: bpf/tracer.h) and writes it.
func (r *recorder) handle(b []byte) {
	if r.stopped {
		r.res.Discarded++
		return
	}
	if len(b) < 80 {
		r.warn(fmt.Sprintf("short ring buffer record (%d bytes)", len(b)))
		return
	}
	le := binary.LittleEndian
	ev := &r.ev
	*ev = Event{TS: int64(le.Uint64(b[0:])), CPU: int32(le.Uint16(b[10:]))}
	kind := b[8]
	pid, ptgid, pprio := int32(le.Uint32(b[16:])), int32(le.Uint32(b[20:])), int32(le.Uint32(b[24:]))
	tid, tgid, prio := int32(le.Uint32(b[28:])), int32(le.Uint32(b[32:])), int32(le.Uint32(b[36:]))
	comm, pcomm := r.comm(b[44:60]), r.comm(b[60:76])
	ev.Pid, ev.Tid, ev.Tgid, ev.Comm, ev.Prio = pid, tid, tgid, comm, prio
	switch bpf.TracerTtKind(kind) {
	case bpf.TracerTtKindTT_SWITCH:
		ev.Kind = KindSwitch
		ev.PrevTid, ev.PrevComm, ev.PrevPrio = pid, pcomm, pprio
		ev.PrevState = TaskState(le.Uint16(b[12:]))
	case bpf.TracerTtKindTT_WAKING, bpf.TracerTtKindTT_WAKEUP_NEW:
		ev.Kind = KindWaking
		if bpf.TracerTtKind(kind) == bpf.TracerTtKindTT_WAKEUP_NEW {
			ev.Kind = KindWakeupNew
		}
		ev.TargetCPU = int32(le.Uint32(b[40:]))
		switch bpf.TracerTtIrq(b[9]) {
		case bpf.TracerTtIrqTT_IRQ_SOFT:
			ev.IRQ = IRQSoft
		case bpf.TracerTtIrqTT_IRQ_HARD, bpf.TracerTtIrqTT_IRQ_ANY:
			// ANY: an interrupt of unknown kind (no preempt count on this
			// kernel); either way the current task is not the waker.
			ev.IRQ = IRQHard
		}
	case bpf.TracerTtKindTT_FORK:
		ev.Kind = KindFork
		ev.PrevTid, ev.PrevComm = pid, pcomm
		if tgid != ptgid && !r.opts.NoFollowForks && r.targets[int(ptgid)] {
			r.noteTarget(int(tgid)) // the kernel side already set its bit
		}
	case bpf.TracerTtKindTT_EXIT:
		ev.Kind = KindExit
	case bpf.TracerTtKindTT_RENAME:
		ev.Kind = KindRename
		ev.PrevComm = pcomm
	default:
		r.warn(fmt.Sprintf("unknown ring buffer record kind %d", kind))
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
	if ev.Kind != KindRename {
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
	case r.opts.MaxBytes > 0 && r.res.Events%1024 == 0 && r.cw.n+int64(r.pw.w.Buffered()) >= r.opts.MaxBytes:
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
	r.pw.Write(&Event{TS: ts, Kind: KindThreadInfo, CPU: -1, Tid: tid, Tgid: tgid, Comm: comm})
}

func (r *recorder) comm(b []byte) string {
	var key [16]byte
	copy(key[:], b)
	if s, ok := r.comms[key]; ok {
		return s
	}
	n := 0
	for n < len(b) && b[n] != 0 {
		n++
	}
	s := string(b[:n])
	if len(r.comms) < 1<<16 {
		r.comms[key] = s
	}
	return s
}

// readCounters sums the kernel side's per-CPU counters; a CPU whose lost
// count grew gets Perfetto's lost_events flag on its next bundle.
func (r *recorder) readCounters(final bool) {
	var per []bpf.TracerTtCounters
	if err := r.t.objs.Counters.Lookup(uint32(0), &per); err != nil {
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
	p := RecordProgress{Elapsed: now.Sub(r.started), Duration: r.opts.Duration,
		Events: r.res.Events, Lost: r.res.TotalLost(), Bytes: r.cw.n + int64(r.pw.w.Buffered())}
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
		ev := &Event{TS: ts, Kind: KindProcessInfo, CPU: -1, Tid: int32(g), PrevTid: int32(ppid), Args: args}
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
			r.pw.Write(&Event{TS: ts, Kind: KindThreadInfo, CPU: -1, Tid: int32(tid), Tgid: int32(g), Comm: comm})
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

func hostTraceInfo() TraceInfo {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	n, _ := ebpf.PossibleCPU()
	return TraceInfo{Format: FormatPerfetto, Sysname: unix.ByteSliceToString(uts.Sysname[:]),
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
