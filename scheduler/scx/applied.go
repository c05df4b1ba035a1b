package scx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"temper.codes/temper-train/bpf"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// OpsName is the name the scheduler registers under; the kernel shows it in
// /sys/kernel/sched_ext/root/ops while it is attached.
const OpsName = "temper_layered"

// ErrEjected is wrapped by *EjectedError.
var ErrEjected = errors.New("the kernel ejected the sched_ext scheduler")

// ExitInfo is what the kernel told the scheduler's ops.exit when it was
// disabled.
type ExitInfo struct {
	Kind   uint32 // enum scx_exit_kind
	Code   int64
	Reason string
	Msg    string
}

// KindName names Kind as the kernel does (SCX_EXIT_*).
func (e ExitInfo) KindName() string {
	switch e.Kind {
	case 0:
		return "NONE"
	case 1:
		return "DONE"
	case 64:
		return "UNREG"
	case 65:
		return "UNREG_BPF"
	case 66:
		return "UNREG_KERN"
	case 67:
		return "SYSRQ"
	case 68:
		return "PARENT"
	case 1024:
		return "ERROR"
	case 1025:
		return "ERROR_BPF"
	case 1026:
		return "ERROR_STALL"
	}
	return fmt.Sprintf("kind %d", e.Kind)
}

func (e ExitInfo) String() string {
	s := fmt.Sprintf("%s (%d)", e.KindName(), e.Kind)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// byUser reports whether the exit is the detach we asked for.
func (e ExitInfo) byUser() bool { return e.Kind == 64 }

// EjectedError is the error for a scheduler the kernel (or an
// administrator, with SysRq-S) disabled while it was applied: every thread
// fell back to the fair class.
type EjectedError struct{ Info ExitInfo }

func (e *EjectedError) Error() string {
	return fmt.Sprintf("%v: %s; every thread is back on the fair class (CFS/EEVDF)", ErrEjected, e.Info)
}

func (e *EjectedError) Unwrap() error { return ErrEjected }

// Applied is a plan in force through the sched_ext scheduler.
type Applied struct {
	b     *Backend
	plan  scheduler.Plan
	cfg   *config
	coll  *ebpf.Collection
	lnk   link.Link
	kfunc []string

	ceilings *ceilingTable // nil: NoCeilings

	mu       sync.Mutex
	assigned map[uint32]uint32       // tid → layer, as written to task_layers
	bounded  map[uint32]taskCeilings // tid → ceilings, as written to task_ceilings
	written  int                     // ceilings.slots written to the ceilings map
	done     bool                    // reverted
	exit     *ExitInfo               // read after the scheduler was disabled

	revertOnce sync.Once
	revErr     error

	stop    chan struct{}
	stopped chan struct{}
}

var _ scheduler.Applied = (*Applied)(nil)

// Apply loads the scheduler configured for p, assigns the target's threads
// to layers, attaches it and waits until the kernel reports it enabled. On
// error nothing stays attached. Cancelling ctx detaches the scheduler.
func (b *Backend) Apply(ctx context.Context, p scheduler.Plan) (scheduler.Applied, error) {
	if err := b.Probe(); err != nil {
		return nil, err
	}
	a, err := b.apply(ctx, p)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// apply is Apply without the probe, so tests can drive the kernel's own
// refusals (a second scheduler).
func (b *Backend) apply(ctx context.Context, p scheduler.Plan) (*Applied, error) {
	if p.Classifier == nil || p.Threads == nil {
		return nil, errors.New("sched_ext backend: plan has no classifier or thread lister")
	}
	cfg, err := buildConfig(p)
	if err != nil {
		return nil, fmt.Errorf("sched_ext backend: %w", err)
	}
	tier, err := b.tier()
	if err != nil {
		return nil, err
	}
	if tier != nil {
		cfg.addTier()
	}
	threads, err := p.Threads()
	if err != nil {
		return nil, fmt.Errorf("sched_ext backend: list the target's threads: %w", err)
	}
	var ceilings *ceilingTable
	var tick time.Duration
	if !b.NoCeilings {
		read := b.limits
		if read == nil {
			if read, err = hierarchyLimits(); err != nil {
				return nil, fmt.Errorf("sched_ext backend: CPU ceilings: %w", err)
			}
		}
		ceilings = newCeilingTable(read)
		// The cgroups known now set the refill timer, which is fixed at load.
		if _, err := ceilings.assign(threads); err != nil {
			return nil, fmt.Errorf("sched_ext backend: CPU ceilings: %w", err)
		}
		tick = ceilings.tick()
	}
	coll, kfuncs, err := b.load(cfg, tick, tier)
	if err != nil {
		return nil, err
	}
	a := &Applied{b: b, plan: p, cfg: cfg, coll: coll, kfunc: kfuncs, ceilings: ceilings,
		assigned: map[uint32]uint32{}, bounded: map[uint32]taskCeilings{}}
	if err := a.update(threads); err != nil {
		coll.Close()
		return nil, err
	}

	lnk, err := link.AttachStructOps(link.StructOpsOptions{Map: coll.Maps[bpf.SchedulerMapTemperOps]})
	if err != nil {
		info, _ := a.readExit()
		coll.Close()
		switch {
		case errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EEXIST):
			return nil, fmt.Errorf("sched_ext backend: attach: another sched_ext scheduler (%s) is attached; detach it first: %w", opsName(b.sysfs), err)
		case info.Kind != 0:
			return nil, fmt.Errorf("sched_ext backend: attach: the kernel refused the scheduler: %s: %w", info, err)
		}
		return nil, fmt.Errorf("sched_ext backend: attach: %w", err)
	}
	a.lnk = lnk
	if err := a.waitEnabled(ctx); err != nil {
		a.lnk.Close()
		a.waitState("disabled", b.timeout)
		a.coll.Close()
		return nil, err
	}
	a.stop, a.stopped = make(chan struct{}), make(chan struct{})
	go a.watch(ctx)
	return a, nil
}

// load prepares the embedded object for cfg and the running kernel and
// loads it; tick is the ceilings' refill interval (0: no ceilings), tier
// the BestEffort cgroup (nil: no tier). It returns the kfuncs the program
// will call.
func (b *Backend) load(cfg *config, tick time.Duration, tier *tierCgroup) (*ebpf.Collection, []string, error) {
	spec, err := bpf.LoadScheduler()
	if err != nil {
		return nil, nil, fmt.Errorf("sched_ext backend: parse embedded BPF object: %w", err)
	}
	kernel, err := b.kernelBTF()
	if err != nil {
		return nil, nil, fmt.Errorf("sched_ext backend: kernel BTF: %w", err)
	}
	choice, err := resolveKfuncs(spec, kernel)
	if err != nil {
		return nil, nil, fmt.Errorf("sched_ext backend: %w", err)
	}
	hideKfuncs(spec, choice.Hide)
	if err := setVariables(spec, cfg, tick, tier); err != nil {
		return nil, nil, fmt.Errorf("sched_ext backend: %w", err)
	}
	if b.editSpec != nil {
		if err := b.editSpec(spec); err != nil {
			return nil, nil, err
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{KernelTypes: kernel},
	})
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, nil, fmt.Errorf("sched_ext backend: the verifier rejected the scheduler: %v\n%s", ve.Cause, logTail(ve.Log, 12))
		}
		return nil, nil, fmt.Errorf("sched_ext backend: load scheduler: %w", err)
	}
	return coll, choice.Use, nil
}

// logTail returns the last n lines of a verifier log, indented.
func logTail(log []string, n int) string {
	if len(log) > 0 && strings.HasPrefix(log[len(log)-1], "processed ") {
		log = log[:len(log)-1]
	}
	if len(log) > n {
		log = log[len(log)-n:]
	}
	return "  verifier: " + strings.Join(log, "\n  verifier: ")
}

// setVariables writes cfg, the ceilings' refill interval tick (0: no
// ceilings) and the tier's cgroup (nil: none) into the object's read-only
// globals.
func setVariables(spec *ebpf.CollectionSpec, cfg *config, tick time.Duration, tier *tierCgroup) error {
	var layers [maxLayers]layerConfig
	copy(layers[:], cfg.Layers)
	var cpus [maxCPUs]cpuConfig
	for i := range cpus {
		cpus[i] = cpuConfig{Owner: noLayer, Siblings: [maxSiblings]uint32{noCPU, noCPU, noCPU}}
	}
	copy(cpus[:], cfg.CPUs)
	var order [maxLayers + 1]uint64
	copy(order[:], cfg.Order)
	tierLayer, tc := uint32(noLayer), tierCgroup{}
	if tier != nil && cfg.Tier >= 0 {
		tierLayer, tc = uint32(cfg.Tier), *tier
	}
	for name, v := range map[string]any{
		bpf.SchedulerVarNrCpus:          uint32(len(cfg.CPUs)),
		bpf.SchedulerVarNrLayers:        uint32(len(cfg.Layers)),
		bpf.SchedulerVarDefaultLayer:    uint32(cfg.DefaultLayer()),
		bpf.SchedulerVarNrDispatch:      uint32(len(cfg.Order)),
		bpf.SchedulerVarDispatchOrder:   order,
		bpf.SchedulerVarLayers:          layers,
		bpf.SchedulerVarCpus:            cpus,
		bpf.SchedulerVarCeilingTickNs:   uint64(tick),
		bpf.SchedulerVarBesteffortLayer: tierLayer,
		bpf.SchedulerVarBesteffortCgid:  tc.ID,
		bpf.SchedulerVarBesteffortLevel: tc.Level,
	} {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("embedded BPF object has no variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// waitEnabled waits until sched_ext reports the scheduler enabled under
// our name.
func (a *Applied) waitEnabled(ctx context.Context) error {
	deadline := time.Now().Add(a.b.timeout)
	for {
		state, err := readState(a.b.sysfs)
		if err != nil {
			return fmt.Errorf("sched_ext backend: %w", err)
		}
		switch state {
		case "enabled":
			if name := opsName(a.b.sysfs); name != OpsName {
				return fmt.Errorf("sched_ext backend: state is enabled but the scheduler attached is %q, not %q", name, OpsName)
			}
			return nil
		case "disabled", "disabling":
			if info, err := a.readExit(); err == nil && info.Kind != 0 {
				return fmt.Errorf("sched_ext backend: enabling failed: %w", &EjectedError{Info: info})
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sched_ext backend: state still %q %v after attaching (want enabled)", state, a.b.timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sched_ext backend: waiting for enabled: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitState polls the sched_ext state until it reads want or timeout passes.
func (a *Applied) waitState(want string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		state, err := readState(a.b.sysfs)
		if err != nil || state == want {
			return state, err
		}
		if time.Now().After(deadline) {
			return state, fmt.Errorf("sched_ext state still %q %v after detaching (want %s)", state, timeout, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watch notices the scheduler leaving the enabled state without us (an
// error in the BPF program, a stall the kernel's watchdog caught, SysRq-S)
// and records why; it detaches when ctx is cancelled.
func (a *Applied) watch(ctx context.Context) {
	defer close(a.stopped)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-ctx.Done():
			go a.Revert()
			return
		case <-t.C:
		}
		state, err := readState(a.b.sysfs)
		if err != nil || state == "enabled" || state == "enabling" {
			continue
		}
		if state != "disabled" {
			// disabling: the exit info is written once it is done.
			continue
		}
		info, err := a.readExit()
		a.mu.Lock()
		if !a.done && a.exit == nil && err == nil {
			a.exit = &info
		}
		a.mu.Unlock()
		return
	}
}

// ejected returns the ejection error once the scheduler is gone without us.
func (a *Applied) ejected() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exit != nil && !a.exit.byUser() {
		return &EjectedError{Info: *a.exit}
	}
	return nil
}

// readExit reads what ops.exit recorded (zero Kind: it has not run).
func (a *Applied) readExit() (ExitInfo, error) {
	var info ExitInfo
	var reason [128]byte
	var msg [1024]byte
	for name, out := range map[string]any{
		bpf.SchedulerVarExitKind:   &info.Kind,
		bpf.SchedulerVarExitCode:   &info.Code,
		bpf.SchedulerVarExitReason: &reason,
		bpf.SchedulerVarExitMsg:    &msg,
	} {
		v, ok := a.coll.Variables[name]
		if !ok {
			return info, fmt.Errorf("scheduler has no variable %s", name)
		}
		if err := v.Get(out); err != nil {
			return info, fmt.Errorf("read %s: %w", name, err)
		}
	}
	info.Reason = cString(reason[:])
	info.Msg = cString(msg[:])
	return info, nil
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}

// update classifies threads into layers and ceilings and writes both to
// the kernel's maps: new ceilings first, then new and changed threads; it
// deletes threads no longer listed.
func (a *Applied) update(threads []profiles.Thread) error {
	layers := a.cfg.assign(a.plan.Classifier, threads)
	a.mu.Lock()
	defer a.mu.Unlock()
	var bounds map[uint32]taskCeilings
	if a.ceilings != nil {
		var err error
		if bounds, err = a.ceilings.assign(threads); err != nil {
			return fmt.Errorf("sched_ext backend: CPU ceilings: %w", err)
		}
		for ; a.written < len(a.ceilings.slots); a.written++ {
			c := a.ceilings.slots[a.written]
			if err := a.coll.Maps[bpf.SchedulerMapCeilings].Put(uint32(a.written), c.state()); err != nil {
				return fmt.Errorf("sched_ext backend: ceiling %s: %w", c, err)
			}
		}
	}
	if err := syncMap(a.coll.Maps[bpf.SchedulerMapTaskLayers], a.assigned, layers, func(tid uint32) string {
		return "assign thread " + fmt.Sprint(tid) + " to layer " + a.cfg.Names[layers[tid]]
	}); err != nil {
		return err
	}
	return syncMap(a.coll.Maps[bpf.SchedulerMapTaskCeilings], a.bounded, bounds, func(tid uint32) string {
		return "bound thread " + fmt.Sprint(tid) + " by its cgroups' CPU limits"
	})
}

// syncMap makes the kernel map m, whose contents are mirrored in have, hold
// want: it writes new and changed entries and deletes those want lacks.
// what names a write for errors.
func syncMap[V comparable](m *ebpf.Map, have, want map[uint32]V, what func(tid uint32) string) error {
	for tid, v := range want {
		if old, ok := have[tid]; ok && old == v {
			continue
		}
		if err := m.Put(tid, v); err != nil {
			return fmt.Errorf("sched_ext backend: %s: %w", what(tid), err)
		}
		have[tid] = v
	}
	for tid := range have {
		if _, ok := want[tid]; ok {
			continue
		}
		if err := m.Delete(tid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("sched_ext backend: forget thread %d: %w", tid, err)
		}
		delete(have, tid)
	}
	return nil
}

// Refresh lists the target's threads again and assigns new ones to their
// layers (and forgets threads that exited).
func (a *Applied) Refresh() error {
	if err := a.ejected(); err != nil {
		return err
	}
	a.mu.Lock()
	done := a.done
	a.mu.Unlock()
	if done {
		return fmt.Errorf("sched_ext backend: refresh: %w", scheduler.ErrReverted)
	}
	threads, err := a.plan.Threads()
	if err != nil {
		return fmt.Errorf("sched_ext backend: list the target's threads: %w", err)
	}
	return a.update(threads)
}

// Ceilings returns the CPU ceilings in force and their counters since
// Apply, in the order their cgroups were first seen; none with
// Backend.NoCeilings.
func (a *Applied) Ceilings() ([]CeilingStats, error) {
	if err := a.ejected(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		return nil, fmt.Errorf("sched_ext backend: ceilings: %w", scheduler.ErrReverted)
	}
	if a.ceilings == nil {
		return nil, nil
	}
	out := make([]CeilingStats, len(a.ceilings.slots))
	for i, c := range a.ceilings.slots {
		var st ceilingState
		if err := a.coll.Maps[bpf.SchedulerMapCeilings].Lookup(uint32(i), &st); err != nil {
			return nil, fmt.Errorf("sched_ext backend: read ceiling %s: %w", c, err)
		}
		out[i] = CeilingStats{Ceiling: c, Charged: time.Duration(st.ChargedNs), Throttles: st.Throttles}
	}
	return out, nil
}

// Stats returns the per-layer counters since Apply: the profile's groups in
// order, with Backend.BestEffort the tier's layer (BestEffortLayer), then
// the default layer (threads of the target no group matched, and, in its
// counters, every thread outside the target but the tier's). Threads counts
// the entries of the kernel's tid → layer map.
func (a *Applied) Stats() ([]scheduler.GroupStats, error) {
	if err := a.ejected(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		return nil, fmt.Errorf("sched_ext backend: stats: %w", scheduler.ErrReverted)
	}
	// Thread counts as the kernel's map holds them, not as we meant to
	// write them.
	count := make([]int, len(a.cfg.Layers))
	var tid, layer uint32
	it := a.coll.Maps[bpf.SchedulerMapTaskLayers].Iterate()
	for it.Next(&tid, &layer) {
		if int(layer) < len(count) {
			count[layer]++
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("sched_ext backend: read task_layers: %w", err)
	}
	out := make([]scheduler.GroupStats, len(a.cfg.Layers))
	m := a.coll.Maps[bpf.SchedulerMapStats]
	now := time.Now()
	for i := range a.cfg.Layers {
		var per []stats
		if err := m.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("sched_ext backend: read stats of layer %s: %w", a.cfg.Names[i], err)
		}
		g := scheduler.GroupStats{Group: a.cfg.Names[i], Treatment: a.cfg.Treatments[i], Threads: count[i], At: now,
			Missing: []scheduler.Unmeasured{{Counter: scheduler.Wait, Why: "not measured by the sched_ext backend"}}}
		if i == a.cfg.Tier {
			g.Notes = append(g.Notes, a.Tier()+"; threads not counted: found by cgroup ancestry, not listed")
		}
		for _, s := range per {
			g.RuntimeNs += s.RuntimeNs
			g.Dispatches += s.Dispatches
			g.Preemptions += s.Preemptions
			g.SiblingBusy += s.SiblingBusy
		}
		out[i] = g
	}
	return out, nil
}

// Assignments reads the kernel's tid → layer map back, as group names (the
// default layer is scheduler.Unmatched). Tests and debugging use it to check that
// each thread sits where the profile puts it.
func (a *Applied) Assignments() (map[int]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		return nil, fmt.Errorf("sched_ext backend: assignments: %w", scheduler.ErrReverted)
	}
	out := map[int]string{}
	var tid, layer uint32
	it := a.coll.Maps[bpf.SchedulerMapTaskLayers].Iterate()
	for it.Next(&tid, &layer) {
		name := fmt.Sprintf("layer %d", layer)
		if int(layer) < len(a.cfg.Names) {
			name = a.cfg.Names[layer]
		}
		out[int(tid)] = name
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("sched_ext backend: read task_layers: %w", err)
	}
	return out, nil
}

// Kfuncs lists the kfunc names the loaded program calls, one per renamed
// family (see kfuncs.go).
func (a *Applied) Kfuncs() []string { return a.kfunc }

// ExitInfo returns what the kernel reported when the scheduler was
// disabled, once it has been.
func (a *Applied) ExitInfo() (ExitInfo, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exit == nil {
		return ExitInfo{}, false
	}
	return *a.exit, true
}

// Revert detaches the scheduler (every thread returns to the fair class),
// waits for sched_ext to report disabled and reads the exit info. It
// returns an *EjectedError if the kernel had disabled the scheduler before
// we asked. It is idempotent, and concurrent calls (the context's watchdog
// and the owner) all return once the one revert has finished.
func (a *Applied) Revert() error {
	a.revertOnce.Do(func() { a.revErr = a.revert() })
	return a.revErr
}

func (a *Applied) revert() error {
	a.mu.Lock()
	a.done = true
	a.mu.Unlock()

	close(a.stop)
	<-a.stopped
	var errs []error
	if err := a.lnk.Close(); err != nil {
		errs = append(errs, fmt.Errorf("sched_ext backend: detach: %w", err))
	}
	if _, err := a.waitState("disabled", a.b.timeout); err != nil {
		errs = append(errs, fmt.Errorf("sched_ext backend: %w", err))
	}
	info, err := a.readExit()
	if err != nil {
		errs = append(errs, fmt.Errorf("sched_ext backend: exit info: %w", err))
	}
	a.mu.Lock()
	if a.exit == nil && err == nil {
		a.exit = &info
	}
	if a.exit != nil && !a.exit.byUser() {
		errs = append([]error{&EjectedError{Info: *a.exit}}, errs...)
	}
	a.mu.Unlock()
	a.coll.Close()
	return errors.Join(errs...)
}
