// Package schedulertest checks that a scheduler.Backend keeps the contract
// apply and refine rely on, in the spirit of testing/fstest.TestFS: one
// suite, run against every backend on a real kernel (the CFS backend on the
// host, the sched_ext backend inside make vmtest's VM).
package schedulertest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"temper.codes/temper-train/internal/need"
	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/internal/testkit"
	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// Profile is the contract's profile for testdata/workload: one group per
// treatment the backends change, and two threads (wl-main, wl-timer) that
// no group matches.
const Profile = `schema_version = 1
id = "backend-contract"

[[thread_groups]]
name = "compute"
match = { comm_prefix = ["wl-compute-"] }
treatment = "exclusive"
exclusive_cores = 1

[[thread_groups]]
name = "requests"
match = { comm_prefix = ["wl-acceptor", "wl-worker-"] }
treatment = "latency"

[[thread_groups]]
name = "housekeeping"
match = { comm_prefix = ["wl-logger", "wl-syncer", "wl-idle-"] }
treatment = "yield"
`

// wantThreads is how many of one workload process's threads each group of
// Profile holds, scheduler.Unmatched last.
var wantThreads = []int{2, 5, 4, 2}

// TestBackend runs the contract's checks, each on a backend newBackend
// returns (a fresh one per check, so state files and the like do not
// collide) and on testdata/workload processes it starts and stops:
//
//   - Stats: one entry per group in profile order, then scheduler.Unmatched;
//     thread counts as the profile classifies the workload; At set and
//     advancing; every counter named in Missing is zero; measured counters
//     never go down; the spinning group's runtime moves.
//   - Refresh: threads of a process that appears are classified, a process
//     that exits is dropped without an error (a thread gone is never a
//     failure).
//   - Revert: idempotent, safe from several goroutines at once alongside
//     Refresh and Stats; afterwards both wrap scheduler.ErrReverted, and
//     every thread's affinity, policy and nice are what they were before.
//   - Cancel: cancelling Apply's context reverts.
//   - Session: scheduler.Start on the backend, stopped by Stop, a cancelled
//     context and Stats at once: one revert, the closing stats read.
//
// The workload binary is $TEMPER_WORKLOAD, else testdata/workload/workload.c
// built with gcc.
func TestBackend(t *testing.T, newBackend func(t *testing.T) scheduler.Backend) {
	prof, err := profiles.Parse("contract.toml", []byte(Profile))
	if err != nil {
		t.Fatal(err)
	}
	topo, err := machine.ReadTopology("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Cores) < 2 {
		need.Unmet(t, "2 cores (one exclusive, one shared)", fmt.Sprintf("this machine has %d; run the tests on a larger one", len(topo.Cores)))
	}
	bin := testkit.Workload(t)
	env := &env{prof: prof, topo: topo, bin: bin, newBackend: newBackend}
	t.Run("Stats", env.testStats)
	t.Run("Refresh", env.testRefresh)
	t.Run("Revert", env.testRevert)
	t.Run("Cancel", env.testCancel)
	t.Run("Session", env.testSession)
}

type env struct {
	prof       *profiles.Profile
	topo       *machine.Topology
	bin        string
	newBackend func(t *testing.T) scheduler.Backend
}

// Targets is a Plan.Threads (its Threads method) over a set of processes a
// test can change while a plan is applied.
type Targets struct {
	mu   sync.Mutex
	pids []int
}

// NewTargets returns the targets pids.
func NewTargets(pids ...int) *Targets { return &Targets{pids: pids} }

// Set replaces the processes.
func (tg *Targets) Set(pids ...int) {
	tg.mu.Lock()
	tg.pids = pids
	tg.mu.Unlock()
}

// Add adds a process.
func (tg *Targets) Add(pid int) {
	tg.mu.Lock()
	tg.pids = append(tg.pids, pid)
	tg.mu.Unlock()
}

// Threads lists the threads of the processes now.
func (tg *Targets) Threads() ([]profiles.Thread, error) {
	tg.mu.Lock()
	pids := slices.Clone(tg.pids)
	tg.mu.Unlock()
	return scheduler.ListThreads(pids)
}

func (e *env) plan(t *testing.T, tg *Targets) scheduler.Plan {
	t.Helper()
	p, err := scheduler.NewPlan(e.prof, e.topo, tg.Threads)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// apply applies the plan; the test's cleanup reverts it whatever happens.
func (e *env) apply(t *testing.T, ctx context.Context, b scheduler.Backend, p scheduler.Plan) scheduler.Applied {
	t.Helper()
	start := time.Now()
	a, err := b.Apply(ctx, p)
	if err != nil {
		t.Fatalf("%s: apply: %v", b.Name(), err)
	}
	t.Logf("%s: applied in %v", b.Name(), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { a.Revert() })
	return a
}

func (e *env) testStats(t *testing.T) {
	w := StartWorkload(t, e.bin)
	tg := NewTargets(w.Pid)
	b := e.newBackend(t)
	a := e.apply(t, t.Context(), b, e.plan(t, tg))
	before := time.Now()
	time.Sleep(300 * time.Millisecond)
	if err := a.Refresh(); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	first := e.checkStats(t, a, before, 1)
	time.Sleep(500 * time.Millisecond)
	second := e.checkStats(t, a, first[0].At, 1)
	for i := range second {
		s, f := second[i], first[i]
		for _, c := range []struct {
			c         scheduler.Counter
			now, then uint64
		}{
			{scheduler.Runtime, s.RuntimeNs, f.RuntimeNs}, {scheduler.Wait, s.WaitNs, f.WaitNs},
			{scheduler.Dispatches, s.Dispatches, f.Dispatches}, {scheduler.Preemptions, s.Preemptions, f.Preemptions},
			{scheduler.SiblingBusy, s.SiblingBusy, f.SiblingBusy},
		} {
			if c.now < c.then {
				t.Errorf("group %s: %s went down from %d to %d", s.Group, c.c, c.then, c.now)
			}
		}
	}
	if second[0].RuntimeNs == first[0].RuntimeNs {
		t.Errorf("the compute group's spinning threads recorded no runtime in 0.5 s: %d ns both times", first[0].RuntimeNs)
	}
	for _, s := range second {
		t.Logf("%s: %-12s %-9s threads=%d runtime=%v wait=%v dispatches=%d preemptions=%d sibling_busy=%d missing=%v",
			b.Name(), s.Group, s.Treatment, s.Threads, time.Duration(s.RuntimeNs), time.Duration(s.WaitNs), s.Dispatches, s.Preemptions, s.SiblingBusy, s.Missing)
	}
}

// checkStats reads Stats and checks its shape: groups in order, then
// scheduler.Unmatched; n workload processes' threads; At after since;
// unmeasured counters zero.
func (e *env) checkStats(t *testing.T, a scheduler.Applied, since time.Time, n int) []scheduler.GroupStats {
	t.Helper()
	st, err := a.Stats()
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	var names []string
	for _, g := range e.prof.ThreadGroups {
		names = append(names, g.Name)
	}
	names = append(names, scheduler.Unmatched)
	var got []string
	for _, s := range st {
		got = append(got, s.Group)
	}
	if !slices.Equal(got, names) {
		t.Fatalf("stats groups %q, want %q", got, names)
	}
	for i, s := range st {
		if s.Threads != n*wantThreads[i] {
			t.Errorf("group %s: %d threads, want %d", s.Group, s.Threads, n*wantThreads[i])
		}
		if i < len(e.prof.ThreadGroups) && s.Treatment != e.prof.ThreadGroups[i].Treatment {
			t.Errorf("group %s: treatment %q, want %q", s.Group, s.Treatment, e.prof.ThreadGroups[i].Treatment)
		}
		if s.At.Before(since) || s.At.After(time.Now()) {
			t.Errorf("group %s: read at %v, not between %v and now", s.Group, s.At, since)
		}
		values := map[scheduler.Counter]uint64{scheduler.Runtime: s.RuntimeNs, scheduler.Wait: s.WaitNs,
			scheduler.Dispatches: s.Dispatches, scheduler.Preemptions: s.Preemptions, scheduler.SiblingBusy: s.SiblingBusy}
		for _, m := range s.Missing {
			v, ok := values[m.Counter]
			if !ok {
				t.Errorf("group %s: Missing names %q, not a counter", s.Group, m.Counter)
			}
			if v != 0 {
				t.Errorf("group %s: %s is %d but named missing (%s): an unmeasured counter stays zero", s.Group, m.Counter, v, m.Why)
			}
			if m.Why == "" {
				t.Errorf("group %s: %s missing without a reason", s.Group, m.Counter)
			}
		}
	}
	return st
}

func (e *env) testRefresh(t *testing.T) {
	w := StartWorkload(t, e.bin)
	tg := NewTargets(w.Pid)
	a := e.apply(t, t.Context(), e.newBackend(t), e.plan(t, tg))
	w2 := StartWorkload(t, e.bin)
	tg.Set(w.Pid, w2.Pid)
	if err := a.Refresh(); err != nil {
		t.Fatalf("refresh with a new process: %v", err)
	}
	e.checkStats(t, a, time.Time{}, 2)
	w2.Stop(syscall.SIGKILL)
	// The lister still names the dead process: its threads are gone.
	if err := a.Refresh(); err != nil {
		t.Fatalf("refresh after a process exited: %v", err)
	}
	tg.Set(w.Pid)
	if err := a.Refresh(); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	e.checkStats(t, a, time.Time{}, 1)
}

func (e *env) testRevert(t *testing.T) {
	w := StartWorkload(t, e.bin)
	before := w.settings(t)
	a := e.apply(t, t.Context(), e.newBackend(t), e.plan(t, NewTargets(w.Pid)))
	if got := w.settings(t); maps(got, before) {
		t.Logf("note: no thread's affinity, policy or nice changed while applied (the backend schedules without them)")
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 4 {
		wg.Go(func() { errs <- a.Revert() })
		wg.Go(func() {
			if _, err := a.Stats(); err != nil && !errors.Is(err, scheduler.ErrReverted) {
				errs <- fmt.Errorf("stats while reverting: %w", err)
			}
		})
		wg.Go(func() {
			if err := a.Refresh(); err != nil && !errors.Is(err, scheduler.ErrReverted) {
				errs <- fmt.Errorf("refresh while reverting: %w", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent revert: %v", err)
		}
	}
	if err := a.Revert(); err != nil {
		t.Errorf("revert again: %v", err)
	}
	if err := a.Refresh(); !errors.Is(err, scheduler.ErrReverted) {
		t.Errorf("refresh after revert: %v, want scheduler.ErrReverted", err)
	}
	if _, err := a.Stats(); !errors.Is(err, scheduler.ErrReverted) {
		t.Errorf("stats after revert: %v, want scheduler.ErrReverted", err)
	}
	after := w.settings(t)
	for tid, s := range before {
		if after[tid] != s {
			t.Errorf("thread %d after revert: %s, before apply %s", tid, after[tid], s)
		}
	}
}

func (e *env) testCancel(t *testing.T) {
	w := StartWorkload(t, e.bin)
	before := w.settings(t)
	ctx, cancel := context.WithCancel(t.Context())
	a := e.apply(t, ctx, e.newBackend(t), e.plan(t, NewTargets(w.Pid)))
	cancel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := a.Refresh()
		if errors.Is(err, scheduler.ErrReverted) {
			break
		}
		if err != nil {
			t.Fatalf("refresh after cancel: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("still applied 30 s after the context was cancelled")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.Revert(); err != nil {
		t.Errorf("revert after cancel: %v", err)
	}
	after := w.settings(t)
	for tid, s := range before {
		if after[tid] != s {
			t.Errorf("thread %d after cancel: %s, before apply %s", tid, after[tid], s)
		}
	}
}

func (e *env) testSession(t *testing.T) {
	w := StartWorkload(t, e.bin)
	before := w.settings(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s, err := scheduler.Start(ctx, e.newBackend(t), e.plan(t, NewTargets(w.Pid)), scheduler.Options{})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { s.Stop() })
	time.Sleep(300 * time.Millisecond)
	if _, err := s.Stats(); err != nil {
		t.Fatalf("session stats: %v", err)
	}
	var wg sync.WaitGroup
	sums := make([]scheduler.Summary, 3)
	for i := range sums {
		wg.Go(func() { sums[i] = s.Stop() })
		wg.Go(func() {
			if _, err := s.Stats(); err != nil && !errors.Is(err, scheduler.ErrStopped) {
				t.Errorf("stats while stopping: %v", err)
			}
		})
	}
	wg.Go(cancel)
	wg.Wait()
	sum := sums[0]
	if sum.RevertErr != nil || sum.StatsErr != nil || sum.Err != nil {
		t.Errorf("summary: revert %v, stats %v, refresh %v", sum.RevertErr, sum.StatsErr, sum.Err)
	}
	if len(sum.Stats) != len(wantThreads) || len(sum.Threads) != 13 {
		t.Errorf("summary: %d groups, %d threads; want %d groups, 13 threads", len(sum.Stats), len(sum.Threads), len(wantThreads))
	}
	if sum.Reason != scheduler.Stopped && sum.Reason != scheduler.Cancelled {
		t.Errorf("stopped because %v, want stopped or interrupted", sum.Reason)
	}
	for _, o := range sums[1:] {
		if o.Reason != sum.Reason || o.Elapsed != sum.Elapsed {
			t.Errorf("Stop calls saw different summaries: %v/%v and %v/%v", o.Reason, o.Elapsed, sum.Reason, sum.Elapsed)
		}
	}
	if _, err := s.Stats(); !errors.Is(err, scheduler.ErrStopped) {
		t.Errorf("stats after stop: %v, want scheduler.ErrStopped", err)
	}
	after := w.settings(t)
	for tid, st := range before {
		if after[tid] != st {
			t.Errorf("thread %d after stop: %s, before %s", tid, after[tid], st)
		}
	}
}

func maps(a, b map[int]settings) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// settings are a thread's scheduling settings as /proc shows them.
type settings struct {
	CPUs   string
	Policy int
	Nice   int
}

func (s settings) String() string {
	return fmt.Sprintf("CPUs %s, policy %d, nice %d", s.CPUs, s.Policy, s.Nice)
}

// Workload is a running testdata/workload process.
type Workload struct {
	Cmd     *exec.Cmd
	Pid     int
	Threads map[int]string // tid → name, as the workload announced them
	once    sync.Once
}

// NeedBackend needs root to change other processes' threads' scheduling,
// and fails the test if backend b still cannot run here (its Probe).
func NeedBackend(t testing.TB, b scheduler.Backend) {
	t.Helper()
	need.Root(t, "to change other threads' scheduling")
	if err := b.Probe(); err != nil {
		t.Fatal(err)
	}
}

// StartWorkload starts the workload binary bin (testkit.Workload) and waits
// until it is ready with its 13 threads announced. It is stopped (SIGTERM)
// and reaped when the test ends.
func StartWorkload(t *testing.T, bin string) *Workload {
	t.Helper()
	cmd := exec.Command(bin, "--dir", t.TempDir(), "--rate", "500")
	// Gone with the test binary too when Cleanup cannot run (a -timeout
	// panic).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start workload: %v", err)
	}
	w := &Workload{Cmd: cmd, Pid: cmd.Process.Pid, Threads: map[int]string{}}
	began := time.Now()
	t.Cleanup(func() {
		start := time.Now()
		w.Stop(syscall.SIGTERM)
		t.Logf("workload %d stopped in %v", w.Pid, time.Since(start).Round(time.Millisecond))
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 1 && f[0] == "ready" {
			t.Logf("workload %d ready in %v", w.Pid, time.Since(began).Round(time.Millisecond))
			go func() {
				for sc.Scan() {
				}
			}()
			if len(w.Threads) != 13 {
				t.Fatalf("workload announced %d threads, want 13", len(w.Threads))
			}
			return w
		}
		if len(f) == 3 && f[0] == "thread" {
			tid, _ := strconv.Atoi(f[1])
			w.Threads[tid] = f[2]
		}
	}
	t.Fatalf("workload exited before ready: %v", sc.Err())
	return nil
}

// Stop ends the workload with sig (SIGKILL after 10 s) and reaps it; it
// does so once, however often it is called.
func (w *Workload) Stop(sig syscall.Signal) {
	w.once.Do(func() {
		w.Cmd.Process.Signal(sig)
		done := make(chan struct{})
		go func() { w.Cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			w.Cmd.Process.Kill()
			<-done
		}
	})
}

// settings reads every announced thread's settings.
func (w *Workload) settings(t *testing.T) map[int]settings {
	t.Helper()
	var proc procfs.FS
	out := map[int]settings{}
	for tid := range w.Threads {
		st, err := proc.Stat(tid)
		if err != nil {
			t.Fatalf("thread %d: %v", tid, err)
		}
		status, err := proc.Status(tid)
		if err != nil {
			t.Fatalf("thread %d: %v", tid, err)
		}
		out[tid] = settings{CPUs: status.CPUsAllowedList, Policy: st.Policy, Nice: st.Nice}
	}
	return out
}
