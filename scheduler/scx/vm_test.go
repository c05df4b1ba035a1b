package scx

// Tests that attach the scheduler to a real kernel. This machine's kernel
// has no sched_ext, so they skip here; `make vmtest` (part of make test)
// boots a sched_ext kernel in qemu and runs them there (TEMPER_VMTEST=1,
// where a skip is a failure, and scripts/vmtest.sh fails on a check that
// did not report), next to its end-to-end checks. These skips say where a
// test runs, not what it lacks, so they are not internal/need's: a host
// without sched_ext is no failure even under CI.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"temper.codes/temper-train/bpf"
	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/observe/snapshot"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/schedulertest"
)

// inVM reports whether the test runs inside make vmtest's VM.
func inVM() bool { return os.Getenv("TEMPER_VMTEST") == "1" }

// needSchedExt skips (fails inside the VM) unless a sched_ext scheduler can
// be attached here.
func needSchedExt(t *testing.T) *Backend {
	t.Helper()
	b := New()
	if err := b.Probe(); err != nil {
		if inVM() {
			t.Fatalf("inside the VM: %v", err)
		}
		t.Skipf("%s runs in make vmtest's VM: this kernel cannot attach a sched_ext scheduler (%v)", t.Name(), err)
	}
	return b
}

// vmFile returns a file the VM image provides (the test profile); outside
// the VM, the repository's copy.
func vmFile(t *testing.T, env, fallback string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	need.File(t, "the file "+env+" names in the VM", fallback, "set "+env)
	return fallback
}

// startWorkload starts testdata/workload (the VM image's, $TEMPER_WORKLOAD).
func startWorkload(t *testing.T) *schedulertest.Workload {
	t.Helper()
	return schedulertest.StartWorkload(t, testkit.Workload(t))
}

// vmPlan builds the plan of testdata/vmtest/profile.toml for the targets.
func vmPlan(t *testing.T, tg *schedulertest.Targets) scheduler.Plan {
	t.Helper()
	return vmPlanWith(t, tg, nil)
}

// vmPlanWith is vmPlan with the profile changed by edit first (nil: as
// loaded).
func vmPlanWith(t *testing.T, tg *schedulertest.Targets, edit func(*profiles.Profile)) scheduler.Plan {
	t.Helper()
	prof, err := profiles.Load(vmFile(t, "TEMPER_VMTEST_PROFILE", "../../testdata/vmtest/profile.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(prof)
	}
	topo, err := machine.ReadTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	pl, err := scheduler.NewPlan(prof, topo, tg.Threads)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// expectedGroup is the group testdata/vmtest/profile.toml gives a workload
// thread.
func expectedGroup(name string) string {
	switch {
	case strings.HasPrefix(name, "wl-compute-"):
		return "compute"
	case name == "wl-acceptor" || strings.HasPrefix(name, "wl-worker-"):
		return "requests"
	case name == "wl-logger" || name == "wl-syncer" || strings.HasPrefix(name, "wl-idle-"):
		return "housekeeping"
	}
	return "rest"
}

func state(t *testing.T) string {
	t.Helper()
	s, err := readState(sysfsRoot)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lastRun reads the CPU a thread last ran on (/proc/TID/stat field 39) and
// its CPU time so far (/proc/TID/schedstat, ns).
func lastRun(tid int) (cpu int, cputime uint64, err error) {
	var proc procfs.FS
	st, err := proc.Stat(tid)
	if err != nil {
		return 0, 0, err
	}
	ss, err := proc.Schedstat(tid)
	if err != nil {
		return 0, 0, err
	}
	return st.Processor, ss.RunNs, nil
}

func TestVMApplyRevert(t *testing.T) {
	b := needSchedExt(t)
	w := startWorkload(t)
	tg := schedulertest.NewTargets(w.Pid)
	p := vmPlan(t, tg)
	owned := p.Cores.Exclusive[0]
	t.Logf("topology: %d CPUs; compute owns CPUs %v, shared %v", len(p.Topology.CPUs), owned, p.Cores.Shared)

	start := time.Now()
	app, err := b.Apply(context.Background(), p)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	a := app.(*Applied)
	t.Logf("attached in %v; kfuncs: %v", time.Since(start).Round(time.Millisecond), a.Kfuncs())
	reverted := false
	defer func() {
		if !reverted {
			a.Revert()
		}
	}()
	if s := state(t); s != "enabled" {
		t.Fatalf("state %q while applied, want enabled", s)
	}
	if ops := opsName(sysfsRoot); ops != OpsName {
		t.Fatalf("root/ops %q, want %q", ops, OpsName)
	}

	got, err := a.Assignments()
	if err != nil {
		t.Fatal(err)
	}
	for tid, name := range w.Threads {
		if got[tid] != expectedGroup(name) {
			t.Errorf("thread %d %s is in layer %q, want %q", tid, name, got[tid], expectedGroup(name))
		}
	}

	// While applied, sample where the threads run: compute only on the
	// primary CPU of its owned core, nothing else of the workload on the
	// owned core. A sample counts when the thread ran since the last one
	// (its CPU time grew): the last CPU of a thread asleep since before
	// the attach says nothing.
	primary := slices.Min(owned)
	bad, seen := map[string]int{}, map[string]int{}
	ran := map[int]uint64{}
	for i := 0; i < 41; i++ {
		for tid, name := range w.Threads {
			cpu, cputime, err := lastRun(tid)
			if err != nil {
				t.Fatal(err)
			}
			prev, ok := ran[tid]
			ran[tid] = cputime
			if !ok || cputime == prev {
				continue
			}
			seen[expectedGroup(name)]++
			isCompute := expectedGroup(name) == "compute"
			if isCompute && cpu != primary || !isCompute && slices.Contains(owned, cpu) {
				bad[name+" on CPU "+strconv.Itoa(cpu)]++
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("placement samples of threads that ran, per group: %v", seen)
	if len(bad) > 0 {
		t.Errorf("threads off their CPUs (thread on CPU: samples): %v", bad)
	}
	if seen["compute"] == 0 || seen["requests"] == 0 {
		t.Errorf("compute or request threads never seen running: %v", seen)
	}

	// A second process of the target appears: Refresh assigns its threads.
	w2 := startWorkload(t)
	tg.Add(w2.Pid)
	if err := a.Refresh(); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	got, err = a.Assignments()
	if err != nil {
		t.Fatal(err)
	}
	for tid, name := range w2.Threads {
		if got[tid] != expectedGroup(name) {
			t.Errorf("after refresh: thread %d %s is in layer %q, want %q", tid, name, got[tid], expectedGroup(name))
		}
	}

	st, err := a.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"compute": 4, "requests": 10, "housekeeping": 8, "rest": 4, scheduler.Unmatched: 0}
	for _, g := range st {
		t.Logf("stats %-12s %-9s threads=%d runtime=%v dispatches=%d preemptions=%d sibling_busy=%d",
			g.Group, g.Treatment, g.Threads, time.Duration(g.RuntimeNs), g.Dispatches, g.Preemptions, g.SiblingBusy)
		if g.Threads != want[g.Group] {
			t.Errorf("group %s: %d threads, want %d", g.Group, g.Threads, want[g.Group])
		}
		if g.Group != scheduler.Unmatched && g.Group != "housekeeping" && (g.RuntimeNs == 0 || g.Dispatches == 0) {
			t.Errorf("group %s: no runtime or dispatches recorded", g.Group)
		}
	}
	if st[len(st)-1].RuntimeNs == 0 {
		t.Errorf("default layer (everything outside the workload) recorded no runtime")
	}

	start = time.Now()
	reverted = true
	if err := a.Revert(); err != nil {
		t.Fatalf("revert: %v", err)
	}
	t.Logf("detached in %v", time.Since(start).Round(time.Millisecond))
	if s := state(t); s != "disabled" {
		t.Errorf("state %q after revert, want disabled", s)
	}
	info, ok := a.ExitInfo()
	if !ok || info.Kind != 64 {
		t.Errorf("exit info %v (read %v), want UNREG (64)", info, ok)
	}
	t.Logf("exit info: %s", info)
	if err := a.Revert(); err != nil {
		t.Errorf("second revert: %v", err)
	}
}

func TestVMSecondSchedulerRefused(t *testing.T) {
	b := needSchedExt(t)
	w := startWorkload(t)
	p := vmPlan(t, schedulertest.NewTargets(w.Pid))
	app, err := b.Apply(context.Background(), p)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	defer app.Revert()

	// Through Apply, Probe refuses.
	_, err = b.Apply(context.Background(), p)
	if !errors.Is(err, scheduler.ErrUnsupported) || !strings.Contains(err.Error(), OpsName) {
		t.Errorf("second Apply: %v, want ErrUnsupported naming %s", err, OpsName)
	}
	t.Logf("second Apply: %v", err)
	// Past the probe, the kernel refuses the attach.
	if a2, err := b.apply(context.Background(), p); err == nil {
		a2.Revert()
		t.Errorf("second attach succeeded")
	} else {
		t.Logf("second attach: %v", err)
		if !strings.Contains(err.Error(), "attach") {
			t.Errorf("second attach error %q does not say what failed", err)
		}
	}
	if s := state(t); s != "enabled" || opsName(sysfsRoot) != OpsName {
		t.Errorf("first scheduler disturbed: state %q, ops %q", s, opsName(sysfsRoot))
	}
	if err := app.Revert(); err != nil {
		t.Errorf("revert: %v", err)
	}
}

func TestVMVerifierRejection(t *testing.T) {
	b := needSchedExt(t)
	// Read 8 bytes above the frame pointer: outside the stack, which the
	// verifier refuses wherever it is.
	b.editSpec = func(spec *ebpf.CollectionSpec) error {
		p := spec.Programs[bpf.SchedulerProgTsDispatch]
		bad := asm.LoadMem(asm.R0, asm.R10, 8, asm.DWord).WithSymbol(p.Instructions[0].Symbol())
		p.Instructions[0] = p.Instructions[0].WithSymbol("")
		p.Instructions = append(asm.Instructions{bad}, p.Instructions...)
		return nil
	}
	w := startWorkload(t)
	_, err := b.Apply(context.Background(), vmPlan(t, schedulertest.NewTargets(w.Pid)))
	if err == nil {
		t.Fatal("a broken program loaded")
	}
	t.Logf("error:\n%v", err)
	if !strings.Contains(err.Error(), "verifier rejected") || !strings.Contains(err.Error(), "verifier: ") {
		t.Errorf("error lacks the verifier's verdict and log tail: %v", err)
	}
	if s := state(t); s != "disabled" {
		t.Errorf("state %q after a failed load, want disabled", s)
	}
}

func TestVMEjectionReported(t *testing.T) {
	b := needSchedExt(t)
	w := startWorkload(t)
	app, err := b.Apply(context.Background(), vmPlan(t, schedulertest.NewTargets(w.Pid)))
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	a := app.(*Applied)
	defer a.Revert()
	// SysRq-S: the kernel disables the BPF scheduler, as it does on an
	// error or a stall.
	if err := os.WriteFile("/proc/sysrq-trigger", []byte("S"), 0); err != nil {
		t.Fatalf("sysrq: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := a.Stats()
		if err != nil {
			var ej *EjectedError
			if !errors.As(err, &ej) || ej.Info.Kind != 67 {
				t.Fatalf("stats after SysRq-S: %v, want an EjectedError of kind SYSRQ (67)", err)
			}
			t.Logf("noticed: %v", err)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ejection not noticed in 30 s (state %q)", state(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	err = a.Revert()
	var ej *EjectedError
	if !errors.As(err, &ej) || !errors.Is(err, ErrEjected) {
		t.Errorf("revert after ejection: %v, want the EjectedError", err)
	}
	if s := state(t); s != "disabled" {
		t.Errorf("state %q after ejection, want disabled", s)
	}
}

// TestVMKfuncWorkaround proves the workaround is needed and works on the
// running kernel: loading with every kfunc name visible fails in
// cilium/ebpf's lookup, loading with the names resolveKfuncs hides succeeds.
func TestVMKfuncWorkaround(t *testing.T) {
	b := needSchedExt(t)
	kernel, err := b.kernelBTF()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := buildConfig(vmPlan(t, schedulertest.NewTargets()))
	if err != nil {
		t.Fatal(err)
	}
	for _, hide := range []bool{false, true} {
		spec, err := bpf.LoadScheduler()
		if err != nil {
			t.Fatal(err)
		}
		if err := setVariables(spec, cfg, defaultCeilingTick, nil); err != nil {
			t.Fatal(err)
		}
		ch, err := resolveKfuncs(spec, kernel)
		if err != nil {
			t.Fatal(err)
		}
		if hide {
			hideKfuncs(spec, ch.Hide)
		}
		coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kernel}})
		if err == nil {
			coll.Close()
		}
		t.Logf("hide=%v: use %v, hidden %v: load error %v", hide, ch.Use, ch.Hide, err)
		ambiguous := false
		for _, why := range ch.Hide {
			ambiguous = ambiguous || strings.Contains(why, "several matches")
		}
		switch {
		case hide && err != nil:
			t.Errorf("load with hidden kfuncs: %v", err)
		case !hide && ambiguous && err == nil:
			t.Errorf("loaded with ambiguous kfunc names visible: cilium/ebpf's lookup bug is fixed; resolveKfuncs can stop hiding names")
		}
	}
}

// TestAnalysisSMT checks a `temper-train analyze --json` result recorded in
// the VM (scripts/vmtest.sh's end-to-end part): with the profile applied the
// hot compute threads never shared a core (EXPECT=none); without it
// (EXPECT=stacking) they did, which shows the check can see stacking.
func TestAnalysisSMT(t *testing.T) {
	path, expect := os.Getenv("TEMPER_VMTEST_ANALYSIS"), os.Getenv("TEMPER_VMTEST_EXPECT")
	if path == "" {
		t.Skipf("%s runs in make vmtest's VM: it checks an analysis recorded there (TEMPER_VMTEST_ANALYSIS)", t.Name())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Lint struct {
			SMT struct {
				Status     string  `json:"status"`
				Checked    bool    `json:"checked"`
				HotThreads []int32 `json:"hot_threads"`
				Pairs      []struct {
					Threads    [2]string `json:"threads"`
					TogetherNs int64     `json:"together_ns"`
				} `json:"pairs"`
			} `json:"smt"`
		} `json:"lint"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	smt := a.Lint.SMT
	if !smt.Checked {
		t.Fatalf("SMT lint did not run: %s", smt.Status)
	}
	var together int64
	var pairs []string
	for _, p := range smt.Pairs {
		if (strings.Contains(p.Threads[0], "wl-compute") || strings.Contains(p.Threads[1], "wl-compute")) && p.TogetherNs > 0 {
			together += p.TogetherNs
			pairs = append(pairs, fmt.Sprintf("%s+%s %v", p.Threads[0], p.Threads[1], time.Duration(p.TogetherNs)))
		}
	}
	t.Logf("%s; %d hot threads; compute pairs sharing a core: %d (%v together) %v", smt.Status, len(smt.HotThreads), len(pairs), time.Duration(together), pairs)
	switch expect {
	case "none":
		if len(pairs) > 0 {
			t.Errorf("exclusive compute threads shared a core: %v", pairs)
		}
	case "stacking":
		if len(pairs) == 0 {
			t.Errorf("no compute pair shared a core without the profile: the control cannot tell")
		}
	default:
		t.Fatalf("TEMPER_VMTEST_EXPECT=%q, want none or stacking", expect)
	}
}

// TestApplyOutputLayers checks the --stats-json of a `temper-train apply
// --backend sched_ext` run inside the VM: each workload thread was in the
// group the profile gives it, each group's thread count is what the kernel
// map held, and the groups that ran recorded runtime and dispatches.
func TestApplyOutputLayers(t *testing.T) {
	path := os.Getenv("TEMPER_VMTEST_STATS")
	if path == "" {
		t.Skipf("%s runs in make vmtest's VM: it checks an apply --stats-json written there (TEMPER_VMTEST_STATS)", t.Name())
	}
	pid, _ := strconv.Atoi(os.Getenv("TEMPER_VMTEST_PID"))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Backend string `json:"backend"`
		Groups  []struct {
			Name        string `json:"name"`
			Threads     int    `json:"threads"`
			RuntimeNs   uint64 `json:"runtime_ns"`
			Dispatches  uint64 `json:"dispatches"`
			Preemptions uint64 `json:"preemptions"`
			SiblingBusy uint64 `json:"sibling_busy"`
		} `json:"groups"`
		Threads []struct {
			Tid   int    `json:"tid"`
			Tgid  int    `json:"tgid"`
			Comm  string `json:"comm"`
			Group string `json:"group"`
		} `json:"threads"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if s.Backend != "sched_ext" {
		t.Errorf("backend %q, want sched_ext", s.Backend)
	}
	count := map[string]int{}
	for _, th := range s.Threads {
		if th.Tgid != pid {
			continue
		}
		count[expectedGroup(th.Comm)]++
		if th.Group != expectedGroup(th.Comm) {
			t.Errorf("thread %d %s in group %q, want %q", th.Tid, th.Comm, th.Group, expectedGroup(th.Comm))
		}
	}
	var summary []string
	for _, g := range s.Groups {
		summary = append(summary, fmt.Sprintf("%s: %d threads, %v, %d dispatches, %d preemptions, %d sibling-busy",
			g.Name, g.Threads, time.Duration(g.RuntimeNs).Round(time.Millisecond), g.Dispatches, g.Preemptions, g.SiblingBusy))
		if g.Name == scheduler.Unmatched {
			continue
		}
		if g.Threads != count[g.Name] {
			t.Errorf("group %s: %d threads in the kernel map, %d workload threads classified there", g.Name, g.Threads, count[g.Name])
		}
		if g.Name != "housekeeping" && (g.RuntimeNs == 0 || g.Dispatches == 0) {
			t.Errorf("group %s recorded no runtime or dispatches", g.Name)
		}
	}
	t.Logf("%d workload threads where the profile puts them; %s", len(s.Threads), strings.Join(summary, "; "))
}

// TestVMYieldNotStarved saturates the shared CPUs with normal work: the
// yield layer, consumed only when nothing else runs, must still be served
// (the starvation bound), and the kernel must not eject the scheduler.
func TestVMYieldNotStarved(t *testing.T) {
	b := needSchedExt(t)
	w := startWorkload(t)
	tasks := taskSnapshot()
	start := time.Now()
	app, err := b.Apply(context.Background(), vmPlan(t, schedulertest.NewTargets(w.Pid)))
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Logf("attached in %v", time.Since(start).Round(time.Millisecond))
	a := app.(*Applied)
	defer a.Revert()
	// Four spinning processes (default layer, normal) for two shared CPUs.
	for i := 0; i < 4; i++ {
		spin := exec.Command("sh", "-c", "while :; do :; done")
		if err := spin.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			start := time.Now()
			spin.Process.Kill()
			spin.Wait()
			t.Logf("spinner stopped in %v", time.Since(start).Round(time.Millisecond))
		})
	}
	// The yield layer's runtime and the default layer's preemptions (its
	// spinners lose their CPUs at every spent slice, still runnable).
	counters := func() (yield uint64, preempted uint64) {
		st, err := a.Stats()
		if err != nil {
			explainEjection(t, a, tasks)
			t.Fatal(err)
		}
		found := false
		for _, g := range st {
			switch g.Group {
			case "housekeeping":
				yield, found = g.RuntimeNs, true
			case scheduler.Unmatched:
				preempted = g.Preemptions
			}
		}
		if !found {
			t.Fatal("no housekeeping group")
		}
		return yield, preempted
	}
	time.Sleep(time.Second)
	before, p0 := counters()
	time.Sleep(4 * time.Second)
	after, p1 := counters()
	t.Logf("yield layer ran %v in 4 s under saturation; the default layer was preempted %d times", time.Duration(after-before), p1-p0)
	if after == before {
		t.Errorf("the yield layer did not run in 4 s of saturation")
	}
	if p1 == p0 {
		t.Errorf("the default layer's spinners were never preempted in 4 s of saturation: preemptions count lost CPUs of still-runnable tasks")
	}
	if s := state(t); s != "enabled" {
		t.Errorf("state %q under saturation, want enabled", s)
		explainEjection(t, a, tasks)
	}
	start = time.Now()
	if err := a.Revert(); err != nil {
		t.Errorf("revert: %v", err)
	}
	t.Logf("detached under saturation in %v", time.Since(start).Round(time.Millisecond))
}

// TestVMBatchShare saturates the shared CPUs with normal spinners and
// measures the workload's compute pool (fork/join, ~40% duty per member)
// as a batch group and then, in the same test, as a normal one: its share
// of the CPU time the pool and the spinners got. Batch is a normal layer
// with a long slice, so it keeps about normal's share (as SCHED_BATCH does
// under CFS) instead of waiting until no normal work is left, which
// starved it to one run per starvation bound (1 s).
func TestVMBatchShare(t *testing.T) {
	b := needSchedExt(t)
	w := startWorkload(t)
	tasks := taskSnapshot()
	// As in TestVMYieldNotStarved, the spinners run only while the
	// scheduler is attached.
	spin := func() (pids []int, stop func()) {
		var cmds []*exec.Cmd
		stop = func() {
			for _, c := range cmds {
				c.Process.Kill()
				c.Wait()
			}
			cmds = nil
		}
		t.Cleanup(stop)
		for range 2 * runtime.NumCPU() {
			c := exec.Command("sh", "-c", "while :; do :; done")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			cmds = append(cmds, c)
			pids = append(pids, c.Process.Pid)
		}
		return pids, stop
	}
	cpuOf := func(pids []int) uint64 {
		var sum uint64
		for _, pid := range pids {
			_, ns, err := lastRun(pid)
			if err != nil {
				t.Fatalf("spinner %d: %v", pid, err)
			}
			sum += ns
		}
		return sum
	}
	share := func(tr profiles.Treatment) float64 {
		t.Helper()
		pl := vmPlanWith(t, schedulertest.NewTargets(w.Pid), func(p *profiles.Profile) {
			for i := range p.ThreadGroups {
				if g := &p.ThreadGroups[i]; g.Name == "compute" {
					g.Treatment, g.CPUFraction, g.ExclusiveCores = tr, 0, 0
				}
			}
		})
		app, err := b.Apply(context.Background(), pl)
		if err != nil {
			t.Fatalf("apply with compute %s: %v", tr, err)
		}
		a := app.(*Applied)
		defer a.Revert()
		pids, stop := spin()
		defer stop()
		runtimeOf := func() uint64 {
			st, err := a.Stats()
			if err != nil {
				explainEjection(t, a, tasks)
				t.Fatal(err)
			}
			for _, g := range st {
				if g.Group == "compute" {
					return g.RuntimeNs
				}
			}
			t.Fatal("no compute group in the stats")
			return 0
		}
		// Every spinner has run before the window opens (starting them
		// is slow in the emulated VM).
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			ran := 0
			for _, pid := range pids {
				if _, ns, err := lastRun(pid); err == nil && ns > 0 {
					ran++
				}
			}
			if ran == len(pids) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d spinners ran in a minute", ran, len(pids))
			}
		}
		time.Sleep(time.Second)
		c0, s0 := runtimeOf(), cpuOf(pids)
		time.Sleep(4 * time.Second)
		c, sp := time.Duration(runtimeOf()-c0), time.Duration(cpuOf(pids)-s0)
		t.Logf("compute as %s: %v of CPU over the window, the %d spinners %v (the window is 4 s of sleep, longer when the test waits for a CPU)", tr, c.Round(time.Millisecond), len(pids), sp.Round(time.Millisecond))
		if s := state(t); s != "enabled" {
			t.Errorf("state %q with compute %s under saturation, want enabled", s, tr)
		}
		stop()
		if err := a.Revert(); err != nil {
			t.Errorf("revert: %v", err)
		}
		if c+sp == 0 {
			t.Fatalf("neither the compute pool nor the spinners ran with compute %s", tr)
		}
		return float64(c) / float64(c+sp)
	}
	batch, normal := share(profiles.Batch), share(profiles.Normal)
	t.Logf("the compute pool's share of the CPU time under saturation: %.1f%% as batch, %.1f%% as normal", 100*batch, 100*normal)
	// Same queue and weight, a longer slice: about the same share. Below a
	// third of it is batch served after normal work again.
	if 3*batch < normal {
		t.Errorf("batch's share %.1f%% is less than a third of normal's %.1f%%", 100*batch, 100*normal)
	}
}

// TestVMContextCancelDetaches: cancelling Apply's context detaches the
// scheduler without a Revert call; a later Revert reports the clean detach.
func TestVMContextCancelDetaches(t *testing.T) {
	b := needSchedExt(t)
	w := startWorkload(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	app, err := b.Apply(ctx, vmPlan(t, schedulertest.NewTargets(w.Pid)))
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	cancel()
	deadline := time.Now().Add(30 * time.Second)
	for state(t) != "disabled" {
		if time.Now().After(deadline) {
			app.Revert()
			t.Fatalf("state %q 30 s after cancelling the context", state(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := app.Revert(); err != nil {
		t.Errorf("revert after cancel: %v", err)
	}
	if info, ok := app.(*Applied).ExitInfo(); !ok || info.Kind != 64 {
		t.Errorf("exit info %v (%v), want UNREG", info, ok)
	}
}

// TestVMContract holds the sched_ext backend to the contract every backend
// keeps, on the VM's sched_ext kernel.
func TestVMContract(t *testing.T) {
	needSchedExt(t)
	schedulertest.TestBackend(t, func(*testing.T) scheduler.Backend { return New() })
}

// TestVMSwitchover measures refine's switch-over between arms on this
// backend: a profile put in force through scheduler.Start and stopped, as
// refine does at every change of arm. The VM's CPUs are emulated (TCG), so
// the figure shows that it works and its order, not a node's cost; make
// bench prints it next to the CFS backend's.
func TestVMSwitchover(t *testing.T) {
	b := needSchedExt(t)
	w := startWorkload(t)
	plan := vmPlan(t, schedulertest.NewTargets(w.Pid))
	const n = 5
	var total time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		s, err := scheduler.Start(context.Background(), b, plan, scheduler.Options{})
		if err != nil {
			t.Fatalf("switch-over %d: start: %v", i, err)
		}
		if got := state(t); got != "enabled" {
			s.Stop()
			t.Fatalf("switch-over %d: state %q while in force, want enabled", i, got)
		}
		if sum := s.Stop(); sum.RevertErr != nil {
			t.Fatalf("switch-over %d: stop: %v", i, sum.RevertErr)
		}
		total += time.Since(start)
		if got := state(t); got != "disabled" {
			t.Fatalf("switch-over %d: state %q after stop, want disabled", i, got)
		}
	}
	t.Logf("switch-over (apply + revert) on sched_ext: %.1f ms mean over %d (TCG-emulated VM: for function only)", float64(total.Microseconds())/1000/n, n)
}

// TestVMCeiling holds a cgroup limited to 0.5 CPU (cpu.max "50000 100000")
// whose two threads would each use a whole CPU to its limit under the
// scheduler: its cpu.stat usage over 10 s stays within 0.5 CPU + 5% with
// the ceilings, and is above that with Backend.NoCeilings, which shows the
// kernel does not enforce cpu.max under sched_ext and the check can see it.
func TestVMCeiling(t *testing.T) {
	const (
		limit  = 500 // millicores
		window = 10 * time.Second
		slack  = 1.05
	)
	for _, tt := range []struct {
		name       string
		noCeilings bool
	}{{"ceiling", false}, {"no ceiling", true}} {
		t.Run(tt.name, func(t *testing.T) {
			b := needSchedExt(t)
			b.NoCeilings = tt.noCeilings
			h, err := cgroup.Find()
			if err != nil {
				t.Fatal(err)
			}
			dir, err := h.Top().Make(fmt.Sprintf("temper-ceiling-%d", os.Getpid()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := dir.Remove(); err != nil {
					t.Errorf("remove the test cgroup: %v", err)
				}
			})
			if err := dir.Set(h.Quota(limit)); err != nil {
				t.Fatal(err)
			}
			var pids []int
			for range 2 {
				spin := exec.Command("sh", "-c", "while :; do :; done")
				if err := dir.Start(spin); err != nil {
					t.Fatal(err)
				}
				pids = append(pids, spin.Process.Pid)
				t.Cleanup(func() { spin.Process.Kill(); spin.Wait() })
			}
			usage := func() time.Duration {
				c, err := snapshot.ReadCgroupCPU(snapshot.CgroupDir{Version: h.Version, Path: dir.CPU})
				if err != nil {
					t.Fatal(err)
				}
				if c.UsageNs == nil {
					t.Fatalf("cgroup %s has no CPU usage (missing %v)", dir.CPU, c.Missing)
				}
				return time.Duration(*c.UsageNs)
			}

			tasks := taskSnapshot()
			app, err := b.Apply(context.Background(), vmPlan(t, schedulertest.NewTargets(pids...)))
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			a := app.(*Applied)
			defer a.Revert()
			time.Sleep(time.Second) // the scheduler settles; the first period's budget is spent
			u0, t0 := usage(), time.Now()
			time.Sleep(window)
			used := float64(usage()-u0) / float64(time.Since(t0))
			if s := state(t); s != "enabled" {
				explainEjection(t, a, tasks)
				t.Fatalf("state %q after %v, want enabled", s, window)
			}
			cs, err := a.Ceilings()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				t.Logf("ceiling %s: charged %v, %d throttles", c.Ceiling, c.Charged.Round(time.Millisecond), c.Throttles)
			}
			if err := a.Revert(); err != nil {
				t.Errorf("revert: %v", err)
			}
			bound := float64(limit) / 1000 * slack
			t.Logf("%s: the 0.5-CPU cgroup's two spinners used %.3f CPUs over %v (cpu.stat usage; bound %.3f)", tt.name, used, window, bound)
			switch {
			case !tt.noCeilings && len(cs) != 1:
				t.Errorf("%d ceilings, want the test cgroup's one", len(cs))
			case !tt.noCeilings && used > bound:
				t.Errorf("with the ceiling the cgroup used %.3f CPUs, above its limit of %.1f + 5%%", used, float64(limit)/1000)
			case tt.noCeilings && len(cs) != 0:
				t.Errorf("NoCeilings: %d ceilings in force, want none", len(cs))
			case tt.noCeilings && used <= bound:
				t.Errorf("without the ceiling the cgroup used %.3f CPUs, within its limit: the check cannot tell the ceiling works", used)
			}
		})
	}
}
