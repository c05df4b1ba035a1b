//go:build linux

package record

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"temper.codes/temper-train/bpf"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/observe"
)

// This file is the kernel side of a recording: what the tracer needs from
// the kernel (CheckTracing), loading bpf/tracer.bpf.c in one attach mode,
// attaching it to the scheduler tracepoints and detaching it. record.go
// reads what it writes into the ring buffer.

// Attach modes: how the tracer's programs hook the scheduler tracepoints.
const (
	AttachAuto  = ""       // tp_btf when the kernel has BTF, else raw_tp
	AttachBTF   = "tp_btf" // BTF-typed tracepoints (cheapest)
	AttachRawTP = "raw_tp" // raw tracepoints (kernels without usable BTF)
)

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
	release := kernelRelease()
	if major, minor, ok := observe.ParseKernelRelease(release); ok && (major < 5 || major == 5 && minor < 8) {
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

// tracepoints are the scheduler tracepoints the tracer hooks, each with its
// program in the two attach modes (bpf2go's names for them).
var tracepoints = []struct {
	group, name string
	btf, raw    string
}{
	{"sched", "sched_switch", bpf.TracerProgBtfSchedSwitch, bpf.TracerProgRawSchedSwitch},
	{"sched", "sched_waking", bpf.TracerProgBtfSchedWaking, bpf.TracerProgRawSchedWaking},
	{"sched", "sched_wakeup_new", bpf.TracerProgBtfSchedWakeupNew, bpf.TracerProgRawSchedWakeupNew},
	{"sched", "sched_process_fork", bpf.TracerProgBtfSchedProcessFork, bpf.TracerProgRawSchedProcessFork},
	{"sched", "sched_process_exit", bpf.TracerProgBtfSchedProcessExit, bpf.TracerProgRawSchedProcessExit},
	{"task", "task_rename", bpf.TracerProgBtfTaskRename, bpf.TracerProgRawTaskRename},
}

// program names the tracer's program for tracepoint i in an attach mode.
func program(mode string, i int) string {
	if mode == AttachBTF {
		return tracepoints[i].btf
	}
	return tracepoints[i].raw
}

// tracer is the loaded BPF side: the maps, one program per tracepoint (in
// tracepoints' order) and, once attached, their links.
type tracer struct {
	maps   bpf.TracerMaps
	progs  []*ebpf.Program
	links  []link.Link
	rd     *ringbuf.Reader
	attach string
	ncpu   int
}

// loadTracer loads and attaches the tracer in the requested mode or, for
// AttachAuto, in the first mode that works; warnings say why a mode was
// passed over.
func loadTracer(opts Options) (*tracer, []string, error) {
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

// loadMode loads the maps and the mode's programs (the other mode's are
// left out of the collection: a kernel without BTF cannot load tp_btf ones).
func loadMode(mode string, opts Options, ncpu int) (*tracer, error) {
	if mode != AttachBTF && mode != AttachRawTP {
		return nil, fmt.Errorf("unknown attach mode %q (want %s or %s)", mode, AttachBTF, AttachRawTP)
	}
	spec, err := bpf.LoadTracer()
	if err != nil {
		return nil, fmt.Errorf("parse embedded BPF object: %w", err)
	}
	var specs bpf.TracerSpecs
	if err := spec.Assign(&specs); err != nil {
		return nil, fmt.Errorf("embedded BPF object: %w", err)
	}
	keep := map[string]bool{}
	for i := range tracepoints {
		keep[program(mode, i)] = true
	}
	for name := range spec.Programs {
		if !keep[name] {
			delete(spec.Programs, name)
		}
	}
	major, minor, _ := observe.ParseKernelRelease(kernelRelease())
	for _, v := range []struct {
		spec  *ebpf.VariableSpec
		value any
	}{
		{specs.PrevStateArg, major > 5 || major == 5 && minor >= 18},
		{specs.FollowForks, !opts.NoFollowForks},
		{specs.TraceAll, opts.TraceAll},
		{specs.FilterSwitches, opts.FilterSwitches && !opts.TraceAll},
		{specs.PreemptCountFromRq, preemptCountFromRunqueue()},
	} {
		if err := v.spec.Set(v.value); err != nil {
			return nil, fmt.Errorf("set %s: %w", v.spec.Name, err)
		}
	}
	size := opts.BufferBytes
	if size == 0 {
		size = 16 << 20
	}
	if err := checkBuffer(size); err != nil {
		return nil, err
	}
	specs.Events.MaxEntries = uint32(size)
	specs.Cpus.MaxEntries = uint32(ncpu)

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
	defer coll.Close() // what Assign and DetachProgram did not take
	t := &tracer{attach: mode, ncpu: ncpu}
	if err := coll.Assign(&t.maps); err != nil {
		return nil, fmt.Errorf("tracer maps: %w", err)
	}
	for i := range tracepoints {
		t.progs = append(t.progs, coll.DetachProgram(program(mode, i)))
	}
	if err := t.fillCPUs(opts.Siblings); err != nil {
		t.close()
		return nil, err
	}
	if t.rd, err = ringbuf.NewReader(t.maps.Events); err != nil {
		t.close()
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

// fillCPUs writes each CPU's SMT siblings into the cpus map.
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
		if err := t.maps.Cpus.Put(uint32(cpu), &c); err != nil {
			return fmt.Errorf("fill cpu map: %w", err)
		}
	}
	return nil
}

// maxPid bounds the pids the target bitmap holds (TT_MAX_PID in bpf/tracer.h).
const maxPid = 1 << 22

// addTarget sets a thread group's bit in the kernel's target bitmap.
func (t *tracer) addTarget(tgid int) error {
	if tgid >= maxPid {
		return fmt.Errorf("add target %d: beyond the tracer's pid range (%d)", tgid, maxPid)
	}
	// Read-modify-write of one word: the fork handler may set a bit of the
	// same word meanwhile and be overwritten. That child is not lost for
	// long: the process is found again by the next refresh.
	key := uint32(tgid / 64)
	var word uint64
	if err := t.maps.Targets.Lookup(key, &word); err != nil {
		return fmt.Errorf("add target %d: %w", tgid, err)
	}
	if err := t.maps.Targets.Put(key, word|1<<(tgid%64)); err != nil {
		return fmt.Errorf("add target %d: %w", tgid, err)
	}
	return nil
}

// counters reads the kernel side's per-CPU event counts.
func (t *tracer) counters() ([]bpf.TracerTtCounters, error) {
	var per []bpf.TracerTtCounters
	if err := t.maps.Counters.Lookup(uint32(0), &per); err != nil {
		return nil, err
	}
	return per, nil
}

func (t *tracer) attachAll() error {
	for i, tp := range tracepoints {
		prog := t.progs[i]
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
	for _, p := range t.progs {
		if p != nil {
			p.Close()
		}
	}
	t.maps.Close()
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var uts unix.Utsname
	_ = unix.Uname(&uts)
	return unix.ByteSliceToString(uts.Release[:])
}
