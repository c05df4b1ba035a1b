package cfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
	"temper.codes/temper-train/scheduler/schedulertest"
)

// workloadProfile gives each of the workload's roles another treatment;
// wl-main and wl-timer match no group.
func workloadProfile() *profiles.Profile {
	return &profiles.Profile{SchemaVersion: 1, ID: "workload-test", ThreadGroups: []profiles.ThreadGroup{
		{Name: "compute", Match: profiles.Match{CommPrefix: []string{"wl-compute"}}, Treatment: profiles.Exclusive, ExclusiveCores: 1},
		{Name: "acceptor", Match: profiles.Match{CommPrefix: []string{"wl-acceptor"}}, Treatment: profiles.Latency, RTPriority: 10},
		{Name: "workers", Match: profiles.Match{CommRegex: `^wl-worker-\d+$`}, Treatment: profiles.Latency, Weight: 200, SliceUs: 500},
		{Name: "wal", Match: profiles.Match{CommPrefix: []string{"wl-logger", "wl-syncer"}}, Treatment: profiles.Batch},
		{Name: "idle", Match: profiles.Match{CommPrefix: []string{"wl-idle"}}, Treatment: profiles.Yield},
		{Name: "leader", Match: profiles.Match{GroupLeader: boolp(true), CommPrefix: []string{"nothing-"}}, Treatment: profiles.Normal},
	}}
}

// TestApplyRevertWorkload applies a profile to the real C workload and
// checks, in /proc, that every thread got its treatment and then got back
// exactly what it had, including settings that were not the defaults.
func TestApplyRevertWorkload(t *testing.T) {
	schedulertest.NeedBackend(t, New(Options{}))
	needCores(t, 2)
	p := startWorkload(t)
	// Originals that are not the defaults, to see they come back exactly.
	testkit.Must(t, unix.Setpriority(unix.PRIO_PROCESS, p.tids["wl-worker-1"], 2))
	testkit.Must(t, unix.Setpriority(unix.PRIO_PROCESS, p.tids["wl-idle-0"], 4))
	testkit.Must(t, unix.Setpriority(unix.PRIO_PROCESS, p.tids["wl-logger"], -2))
	before := p.views(t)

	pl := plan(t, workloadProfile(), p.cmd.Process.Pid)
	excl := pl.Cores.Exclusive[0]
	k := probeSlice()
	// The workers' slice_us 500 is their slice where the kernel takes one.
	workerSlice := func(was uint64) uint64 {
		if k.slice {
			return 500_000
		}
		return was
	}
	a, state, notes := applyForTest(t, context.Background(), pl)

	shared := func(name string) string { return minus(t, before[name].CPUs, excl) }
	cases := []struct {
		names []string
		want  func(name string) kernelView
	}{
		{[]string{"wl-compute-0", "wl-compute-1"}, func(n string) kernelView {
			return kernelView{CPUs: cpus(excl), Policy: before[n].Policy, Nice: before[n].Nice, Slice: before[n].Slice}
		}},
		{[]string{"wl-acceptor"}, func(n string) kernelView {
			// No weight: nice stays; RT threads' children must not inherit RT.
			// /proc shows no slice for RT and SCHED_IDLE threads.
			return kernelView{CPUs: shared(n), Policy: unix.SCHED_RR, RTPrio: 10, Nice: before[n].Nice, ResetOnFork: true}
		}},
		{[]string{"wl-worker-0", "wl-worker-1", "wl-worker-2", "wl-worker-3"}, func(n string) kernelView {
			return kernelView{CPUs: shared(n), Policy: unix.SCHED_NORMAL, Nice: NiceForWeight(200), Slice: workerSlice(before[n].Slice)}
		}},
		{[]string{"wl-logger", "wl-syncer"}, func(n string) kernelView {
			return kernelView{CPUs: shared(n), Policy: unix.SCHED_BATCH, Nice: before[n].Nice, Slice: before[n].Slice}
		}},
		{[]string{"wl-idle-0", "wl-idle-1"}, func(n string) kernelView {
			return kernelView{CPUs: shared(n), Policy: unix.SCHED_IDLE, Nice: before[n].Nice}
		}},
		{[]string{"wl-main", "wl-timer"}, func(n string) kernelView {
			return kernelView{CPUs: shared(n), Policy: before[n].Policy, Nice: before[n].Nice, Slice: before[n].Slice}
		}},
	}
	for _, c := range cases {
		for _, n := range c.names {
			if got, want := readKernel(t, p.tids[n]), c.want(n); got != want {
				t.Errorf("applied: %s: %v, want %v (before: %v)", n, got, want, before[n])
			}
		}
	}
	if !strings.Contains(notes.String(), `group "compute" gets CPUs `+cpus(excl)) {
		t.Errorf("no note about what CFS exclusivity means:\n%s", notes)
	}

	// The state file records each changed thread's originals.
	st, err := ReadState(state)
	if err != nil {
		t.Fatal(err)
	}
	if st.Profile != "workload-test" || st.Pid != os.Getpid() || len(st.Threads) != 13 {
		t.Errorf("state file: profile %q pid %d, %d threads; want workload-test, %d, 13", st.Profile, st.Pid, len(st.Threads), os.Getpid())
	}
	for _, r := range st.Threads {
		if b := before[r.Comm]; cpus(r.Original.CPUs) != b.CPUs || r.Original.Nice != b.Nice || r.Original.Policy != b.Policy {
			t.Errorf("state file: %s original %+v, was %v", r.Comm, r.Original, b)
		}
	}

	// Compute threads spin and workers wake ~250 times/s: both run and
	// wait. How soon the counters move depends on what else the machine
	// runs, so wait for it (generously) instead of sleeping a fixed time.
	stats := waitStats(t, a, time.Minute, func(s []scheduler.GroupStats) bool {
		return len(s) > 2 && s[0].RuntimeNs > 0 && s[2].RuntimeNs > 0 && s[2].WaitNs > 0
	})
	wantThreads := map[string]int{"compute": 2, "acceptor": 1, "workers": 4, "wal": 2, "idle": 2, "leader": 0, scheduler.Unmatched: 2}
	var names []string
	for _, s := range stats {
		names = append(names, s.Group)
		if s.Threads != wantThreads[s.Group] {
			t.Errorf("stats: group %s has %d threads, want %d", s.Group, s.Threads, wantThreads[s.Group])
		}
		if s.Measures(scheduler.SiblingBusy) || s.Measures(scheduler.Dispatches) || s.Dispatches != 0 {
			t.Errorf("stats: group %s does not name sibling_busy and dispatches as missing (and zero): %+v", s.Group, s)
		}
	}
	if want := []string{"compute", "acceptor", "workers", "wal", "idle", "leader", scheduler.Unmatched}; !slices.Equal(names, want) {
		t.Errorf("stats groups %q, want %q", names, want)
	}
	if notApplied := slices.ContainsFunc(stats[2].Notes, func(m string) bool { return strings.HasPrefix(m, "slice_us 500 not applied") }); notApplied == k.slice {
		t.Errorf("workers' notes %q: slice_us not applied is %t, the kernel takes a slice is %t", stats[2].Notes, notApplied, k.slice)
	}
	t.Logf("stats: %+v", stats)

	if err := a.Revert(); err != nil {
		t.Fatalf("revert: %v", err)
	}
	after := p.views(t)
	for n, b := range before {
		if after[n] != b {
			t.Errorf("reverted: %s: %v, want %v", n, after[n], b)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state file after a clean revert: %v", err)
	}
	// Idempotent: a second revert changes nothing and fails nothing, and a
	// refresh after revert does not re-apply: it says the plan is reverted.
	testkit.Must(t, unix.Setpriority(unix.PRIO_PROCESS, p.tids["wl-worker-0"], 1))
	if err := a.Revert(); err != nil {
		t.Errorf("second revert: %v", err)
	}
	if err := a.Refresh(); !errors.Is(err, scheduler.ErrReverted) {
		t.Errorf("refresh after revert: %v, want ErrReverted", err)
	}
	if got := readKernel(t, p.tids["wl-worker-0"]).Nice; got != 1 {
		t.Errorf("second revert or refresh touched wl-worker-0: nice %d, want 1", got)
	}
}

// TestRefreshNewThreads: threads created after apply are classified on
// Refresh — first under the name they inherit, then again when they rename
// themselves — and they revert to what their process had before apply,
// not to what they inherited from a changed creator.
func TestRefreshNewThreads(t *testing.T) {
	schedulertest.NeedBackend(t, New(Options{}))
	needCores(t, 2)
	p := start(t, testkit.BuildC(t, "testdata/spawner.c"), "--rename-ms", "400")
	if !p.lines.Scan() || !strings.HasPrefix(p.lines.Text(), "ready") {
		t.Fatalf("spawner: %q %v", p.lines.Text(), p.lines.Err())
	}
	pid := p.cmd.Process.Pid
	before := readKernel(t, pid)
	prof := &profiles.Profile{SchemaVersion: 1, ID: "spawner", ThreadGroups: []profiles.ThreadGroup{
		{Name: "main", Match: profiles.Match{CommPrefix: []string{"sp-main"}}, Treatment: profiles.Batch},
		{Name: "late-0", Match: profiles.Match{CommPrefix: []string{"sp-late-0"}}, Treatment: profiles.Exclusive, ExclusiveCores: 1},
		{Name: "late-1", Match: profiles.Match{CommPrefix: []string{"sp-late-1"}}, Treatment: profiles.Latency, Weight: 200, SliceUs: 200},
	}}
	pl := plan(t, prof, pid)
	excl := pl.Cores.Exclusive[1]
	shared := minus(t, before.CPUs, excl)
	a, state, _ := applyForTest(t, context.Background(), pl)
	if got, want := readKernel(t, pid), (kernelView{CPUs: shared, Policy: unix.SCHED_BATCH, Nice: before.Nice, Slice: before.Slice}); got != want {
		t.Fatalf("sp-main applied: %v, want %v", got, want)
	}

	late := make([]int, 2)
	for i := range late {
		testkit.Must(t, p.cmd.Process.Signal(unix.SIGUSR1))
		if !p.lines.Scan() {
			t.Fatal(p.lines.Err())
		}
		var n int
		if _, err := fmtSscan(p.lines.Text(), "thread %d %d", &late[i], &n); err != nil || n != i {
			t.Fatalf("spawner said %q", p.lines.Text())
		}
	}
	// Still named sp-main: the new threads are in group main and keep what
	// they inherited, which is what group main wants.
	testkit.Must(t, a.Refresh())
	for _, tid := range late {
		if got, want := readKernel(t, tid), (kernelView{CPUs: shared, Policy: unix.SCHED_BATCH, Nice: before.Nice, Slice: before.Slice}); got != want {
			t.Errorf("new thread %d as sp-main: %v, want %v", tid, got, want)
		}
	}
	stats, _ := a.Stats()
	if stats[0].Threads != 3 {
		t.Errorf("group main has %d threads after the first refresh, want 3", stats[0].Threads)
	}
	st, err := ReadState(state)
	if err != nil || len(st.Threads) != 3 {
		t.Fatalf("state file after refresh: %v, %+v", err, st)
	}
	for _, r := range st.Threads {
		if cpus(r.Original.CPUs) != before.CPUs || r.Original.Policy != before.Policy {
			t.Errorf("state file: thread %d recorded original %+v, want the process's %v", r.Tid, r.Original, before)
		}
	}

	for range late {
		if !p.lines.Scan() || !strings.HasPrefix(p.lines.Text(), "renamed") {
			t.Fatalf("spawner: %q %v", p.lines.Text(), p.lines.Err())
		}
	}
	testkit.Must(t, a.Refresh())
	lateSlice := before.Slice
	if probeSlice().slice {
		lateSlice = 200_000
	}
	wants := []kernelView{
		{CPUs: cpus(excl), Policy: before.Policy, Nice: before.Nice, Slice: before.Slice}, // sp-late-0: exclusive
		{CPUs: shared, Policy: before.Policy, Nice: NiceForWeight(200), Slice: lateSlice}, // sp-late-1: latency
	}
	for i, tid := range late {
		if got := readKernel(t, tid); got != wants[i] {
			t.Errorf("sp-late-%d after rename: %v, want %v", i, got, wants[i])
		}
	}
	stats, _ = a.Stats()
	if stats[0].Threads != 1 || stats[1].Threads != 1 || stats[2].Threads != 1 {
		t.Errorf("after rename: groups have %d/%d/%d threads, want 1/1/1", stats[0].Threads, stats[1].Threads, stats[2].Threads)
	}

	testkit.Must(t, a.Revert())
	for _, tid := range append([]int{pid}, late...) {
		if got := readKernel(t, tid); got != before {
			t.Errorf("reverted: thread %d: %v, want the process's original %v", tid, got, before)
		}
	}
}

// TestCancelReverts: cancelling the context given to Apply reverts.
func TestCancelReverts(t *testing.T) {
	schedulertest.NeedBackend(t, New(Options{}))
	p := startWorkload(t)
	before := p.views(t)
	prof := &profiles.Profile{SchemaVersion: 1, ID: "cancel", ThreadGroups: []profiles.ThreadGroup{
		{Name: "all", Match: profiles.Match{All: true}, Treatment: profiles.Yield},
	}}
	ctx, cancel := context.WithCancel(context.Background())
	a, state, _ := applyForTest(t, ctx, plan(t, prof, p.cmd.Process.Pid))
	if got := readKernel(t, p.tids["wl-worker-0"]).Policy; got != unix.SCHED_IDLE {
		t.Fatalf("applied: policy %d, want SCHED_IDLE", got)
	}
	cancel()
	// The revert runs on the backend's goroutine: wait for it, generously
	// (a loaded machine delays it, a missing revert never removes the file).
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(state); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("state file still there a minute after cancel: not reverted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.Revert(); err != nil {
		t.Errorf("revert after cancel: %v", err)
	}
	for n, b := range before {
		if got := readKernel(t, p.tids[n]); got != b {
			t.Errorf("after cancel: %s: %v, want %v", n, got, b)
		}
	}
}

// TestApplyErrorRevertsAll: a change the kernel refuses mid-apply (an
// affinity on a CPU that does not exist) fails Apply with a message naming
// the thread, and the threads changed before it are put back.
func TestApplyErrorRevertsAll(t *testing.T) {
	schedulertest.NeedBackend(t, New(Options{}))
	needCores(t, 2)
	p := startWorkload(t)
	before := p.views(t)
	prof := &profiles.Profile{SchemaVersion: 1, ID: "bad-cpu", ThreadGroups: []profiles.ThreadGroup{
		{Name: "main", Match: profiles.Match{CommPrefix: []string{"wl-main"}}, Treatment: profiles.Latency},
		{Name: "compute", Match: profiles.Match{CommPrefix: []string{"wl-compute"}}, Treatment: profiles.Exclusive, ExclusiveCores: 1},
	}}
	pl := plan(t, prof, p.cmd.Process.Pid)
	pl.Cores.Exclusive[1] = []int{1000} // no such CPU
	state := filepath.Join(t.TempDir(), "state.json")
	_, err := New(Options{StateFile: state}).Apply(context.Background(), pl)
	if err == nil || !strings.Contains(err.Error(), "wl-compute-") || !strings.Contains(err.Error(), "set CPU affinity to 1000") {
		t.Fatalf("apply with CPU 1000: error %v, want one naming the thread and the CPUs", err)
	}
	t.Logf("error: %v", err)
	for n, b := range before {
		if got := readKernel(t, p.tids[n]); got != b {
			t.Errorf("after failed apply: %s: %v, want %v", n, got, b)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state file left after a failed apply that reverted cleanly: %v", err)
	}
}

// TestApplyRefusesExistingState: a state file left by an apply that did
// not finish is never overwritten.
func TestApplyRefusesExistingState(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	testkit.Must(t, os.WriteFile(state, []byte("{}"), 0o600))
	prof := &profiles.Profile{SchemaVersion: 1, ID: "x", ThreadGroups: []profiles.ThreadGroup{
		{Name: "all", Match: profiles.Match{All: true}, Treatment: profiles.Normal}}}
	cl, _ := profiles.Compile(prof)
	pl := scheduler.Plan{Profile: prof, Classifier: cl, Cores: scheduler.Allocation{Exclusive: make([][]int, 1)},
		Threads: func() ([]profiles.Thread, error) { t.Fatal("threads listed"); return nil, nil }}
	_, err := New(Options{StateFile: state}).Apply(context.Background(), pl)
	if !errors.Is(err, ErrStateExists) || !strings.Contains(err.Error(), state+" already exists") || !strings.Contains(err.Error(), "revert it first") {
		t.Errorf("error %v, want ErrStateExists saying the state file exists and to revert it", err)
	}
}

// TestRevertFile restores from a state file the way a crashed apply's
// successor does: threads put back, exited ones noted, reused tids not
// touched, one failure not stopping the others, the owner checked.
func TestRevertFile(t *testing.T) {
	schedulertest.NeedBackend(t, New(Options{}))
	sleeper := func() (int, uint64) {
		p := start(t, "sleep", "60")
		pid := p.cmd.Process.Pid
		s, err := scheduler.TaskStartTime(pid)
		testkit.Must(t, err)
		return pid, s
	}
	good, goodStart := sleeper()
	reused, reusedStart := sleeper()
	failing, failingStart := sleeper()
	exited := exec1(t)
	goodBefore, reusedBefore := readKernel(t, good), readKernel(t, reused)
	// What a crashed apply left: good was set to SCHED_BATCH nice 7.
	testkit.Must(t, setAttr(good, Settings{Policy: unix.SCHED_BATCH, Nice: 7}))
	self, _ := scheduler.TaskStartTime(os.Getpid())
	orig := Settings{CPUs: parseCPUs(t, goodBefore.CPUs), Policy: goodBefore.Policy, Nice: goodBefore.Nice}
	st := &State{Version: StateVersion, Backend: Name, Profile: "p", Pid: os.Getpid(), PidStart: self + 1, Threads: []Record{
		{Tid: exited, Tgid: exited, Start: 1234, Comm: "gone", Original: orig, Changed: Fields{Nice: true}},
		{Tid: good, Tgid: good, Start: goodStart, Comm: "sleep", Original: orig, Changed: Fields{Policy: true, Nice: true, Affinity: true}},
		{Tid: reused, Tgid: reused, Start: reusedStart + 1, Comm: "sleep", Original: Settings{CPUs: []int{0}, Policy: unix.SCHED_IDLE, Nice: 9},
			Changed: Fields{Policy: true, Nice: true, Affinity: true}},
		{Tid: failing, Tgid: failing, Start: failingStart, Comm: "sleep", Original: Settings{CPUs: []int{1000}}, Changed: Fields{Affinity: true}},
	}}
	path := filepath.Join(t.TempDir(), "apply-1.json")
	testkit.Must(t, writeStateFile(path, st))
	notes := &noteLog{}
	err := RevertFile(path, notes.add)
	if err == nil || !strings.Contains(err.Error(), "revert thread "+itoa(failing)) {
		t.Errorf("revert: error %v, want one naming thread %d", err, failing)
	}
	if got := readKernel(t, good); got != goodBefore {
		t.Errorf("good thread: %v, want %v", got, goodBefore)
	}
	if got := readKernel(t, reused); got != reusedBefore {
		t.Errorf("reused tid was touched: %v, want %v", got, reusedBefore)
	}
	for _, want := range []string{"1 thread(s) had exited, nothing to restore: gone×1", "thread " + itoa(reused) + " (sleep) exited and its tid now belongs to another thread"} {
		if !strings.Contains(notes.String(), want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	left, err := ReadState(path)
	if err != nil || len(left.Threads) != 1 || left.Threads[0].Tid != failing {
		t.Errorf("state file after a partial revert: %v %+v; want only thread %d left", err, left, failing)
	}

	// Retry after fixing the record: the file goes away.
	left.Threads[0].Original.CPUs = parseCPUs(t, readKernel(t, failing).CPUs)
	testkit.Must(t, writeStateFile(path, left))
	if err := RevertFile(path, nil); err != nil {
		t.Errorf("second revert: %v", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("state file after a clean revert: %v", err)
	}

	// A running owner is refused.
	st.PidStart = self
	testkit.Must(t, writeStateFile(path, st))
	if err := RevertFile(path, nil); !errors.Is(err, ErrOwnerRunning) {
		t.Errorf("revert of a running apply's state: %v, want ErrOwnerRunning", err)
	}
}

// TestProbe: as root (or with CAP_SYS_NICE) the backend is usable.
func TestProbe(t *testing.T) {
	schedulertest.NeedBackend(t, New(Options{}))
	if err := New(Options{}).Probe(); err != nil {
		t.Errorf("probe: %v", err)
	}
	if New(Options{}).Name() != "cfs" {
		t.Error("name")
	}
}
