package cfs

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// applied is a plan in force. Every method takes mu: the caller refreshes
// and reads stats from one goroutine while a cancelled context reverts from
// another.
type applied struct {
	mu        sync.Mutex
	plan      scheduler.Plan
	groups    []treatment
	exclusive []int // every exclusive group's CPUs
	statePath string
	note      func(string)
	owner     owner

	threads map[int]*thread // by tid: every thread of the target seen and still there
	// retired holds the counters of threads that are gone, by group (the
	// last entry for threads no group matched), so Stats keeps them.
	retired    []counters
	lastSample time.Time
	dirty      bool // the state file lacks a change (a recorded thread dropped)
	reverted   bool
	failed     map[int]*thread // threads whose revert failed, kept for a retry

	cpuset cpusetPlan
	kernel kernel
	// narrowed are the cgroups whose cpusets lost the exclusive CPUs, in
	// the order narrowed (children first); after Revert, those whose
	// restore failed.
	narrowed []Cpuset
}

// thread is one thread of the target as the backend tracks it.
type thread struct {
	Record
	group   int      // index in the profile's groups; -1 when none matched
	applied Settings // what the changed fields were set to
	keptCPU bool     // its affinity had no CPU outside the exclusive cores: left as it was
	inForce bool     // the changes are made (threads it creates now inherit them)
	base    counters // at first sight
	last    counters // at the latest sample
}

// counters are a thread's cumulative scheduling counters.
type counters struct {
	runtimeNs    uint64 // /proc/TID/schedstat field 1, or utime+stime
	waitNs       uint64 // /proc/TID/schedstat field 2 (0 without it)
	voluntary    uint64
	nonvoluntary uint64
}

func (c counters) sub(b counters) counters {
	d := func(x, y uint64) uint64 {
		if x < y {
			return 0
		}
		return x - y
	}
	return counters{d(c.runtimeNs, b.runtimeNs), d(c.waitNs, b.waitNs), d(c.voluntary, b.voluntary), d(c.nonvoluntary, b.nonvoluntary)}
}

func (c *counters) add(o counters) {
	c.runtimeNs += o.runtimeNs
	c.waitNs += o.waitNs
	c.voluntary += o.voluntary
	c.nonvoluntary += o.nonvoluntary
}

// statsInterval bounds how often Refresh reads every thread's counters
// (Stats always reads them): counters of threads that exit between two
// samples lose at most this much.
const statsInterval = time.Second

// Refresh lists the target's threads again: new threads are recorded and
// treated, threads whose name changed into another group are put back and
// treated anew, and threads that are gone are dropped. After Revert it
// changes nothing and returns an error wrapping scheduler.ErrReverted.
func (a *applied) Refresh() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reverted {
		return fmt.Errorf("cfs: refresh: %w", scheduler.ErrReverted)
	}
	return a.refresh()
}

// refresh does Refresh's work with mu held (or before the applied is
// shared).
func (a *applied) refresh() error {
	list, err := a.plan.Threads()
	if err != nil {
		return fmt.Errorf("cfs: list threads: %w", err)
	}
	sample := time.Since(a.lastSample) >= statsInterval
	if sample {
		a.lastSample = time.Now()
	}
	seen := make(map[int]bool, len(list))
	var fresh []profiles.Thread
	var moved []*thread
	for _, pt := range list {
		seen[pt.Tid] = true
		th, ok := a.threads[pt.Tid]
		if ok && sample {
			// A tid the kernel has reused for another thread is a new thread.
			if start, err := scheduler.TaskStartTime(pt.Tid); err != nil || start != th.Start {
				a.retire(th)
				ok = false
			} else if c, err := readCounters(pt.Tid); err == nil {
				th.last = c
			}
		}
		if !ok {
			fresh = append(fresh, pt)
			continue
		}
		th.Comm = pt.Comm
		if g := a.plan.Classifier.Group(pt); g != th.group {
			th.group = g
			moved = append(moved, th)
		}
	}
	for tid, th := range a.threads {
		if !seen[tid] {
			a.retire(th)
		}
	}

	// Record first (state file), then change.
	var admitted []*thread
	for _, pt := range fresh {
		th, err := a.admit(pt)
		if errors.Is(err, scheduler.ErrThreadGone) {
			continue
		}
		if err != nil {
			return err
		}
		if th != nil {
			admitted = append(admitted, th)
		}
	}
	for _, th := range moved {
		// Put back what the old group changed; the new group's wishes are
		// computed from the original.
		if th.Changed.any() {
			if err := restore(th.Tid, th.Original, th.Changed); err != nil && !errors.Is(err, scheduler.ErrThreadGone) {
				return fmt.Errorf("cfs: thread %d (%s) moved to another group: %w", th.Tid, th.Comm, err)
			}
		}
		th.inForce = false
		th.Changed, th.applied, th.keptCPU = a.wanted(th.group, th.Original, th.Original)
		th.Group = a.groupName(th.group)
	}
	changes := append(admitted, moved...)
	if len(changes) > 0 || a.dirty {
		if err := a.writeState(); err != nil {
			return fmt.Errorf("cfs: %w", err)
		}
		a.dirty = false
	}
	for _, th := range changes {
		if !th.Changed.any() {
			continue
		}
		if err := change(th.Tid, th.Original, th.applied, th.Changed); err != nil {
			if errors.Is(err, scheduler.ErrThreadGone) {
				continue
			}
			return fmt.Errorf("cfs: group %q: thread %d (%s): %w", a.statName(th.group), th.Tid, th.Comm, err)
		}
		th.inForce = true
	}
	if sample {
		return a.narrow()
	}
	return nil
}

// narrow takes the exclusive CPUs out of the cpusets of every cgroup in
// scope that holds no thread of the target (new cgroups included, on later
// calls): recorded in the state file first, then written.
func (a *applied) narrow() error {
	if a.cpuset.dir == "" {
		return nil
	}
	var recs []Record
	for _, th := range a.threads {
		recs = append(recs, th.Record)
	}
	done := map[string]bool{}
	for _, c := range a.narrowed {
		done[c.Path] = true
	}
	keep := keptCgroups(a.cpuset.dir, a.cpuset.v2, recs)
	cs, err := narrowCpusets(a.cpuset.dir, a.cpuset.scope, a.cpuset.v2, a.exclusive, keep, done, a.note)
	if err != nil || len(cs) == 0 {
		return err
	}
	a.narrowed = append(a.narrowed, cs...)
	if err := a.writeState(); err != nil {
		return fmt.Errorf("cfs: %w", err)
	}
	for _, c := range cs {
		if err := setCpus(c.Path, c.Set); err != nil {
			if _, gone := os.Stat(c.Path); gone != nil {
				continue // removed meanwhile
			}
			return fmt.Errorf("cfs: %w", err)
		}
	}
	return nil
}

// admit records a thread seen for the first time: its identity, original
// settings and counters, and what its group wants changed. A thread that
// cannot be treated (SCHED_DEADLINE) is tracked but left alone.
func (a *applied) admit(pt profiles.Thread) (*thread, error) {
	start, err := scheduler.TaskStartTime(pt.Tid)
	if err != nil {
		return nil, err
	}
	cur, err := readSettings(pt.Tid, a.kernel.baseSliceNs)
	if err != nil {
		return nil, fmt.Errorf("cfs: thread %d (%s): %w", pt.Tid, pt.Comm, err)
	}
	c, err := readCounters(pt.Tid)
	if err != nil {
		if scheduler.IsGone(err) {
			return nil, scheduler.ErrThreadGone
		}
		return nil, fmt.Errorf("cfs: thread %d (%s): %w", pt.Tid, pt.Comm, err)
	}
	th := &thread{
		Record: Record{Tid: pt.Tid, Tgid: pt.Tgid, Start: start, Comm: pt.Comm},
		group:  a.plan.Classifier.Group(pt),
		base:   c,
		last:   c,
	}
	th.Original = a.baseline(pt.Tgid, cur)
	th.Group = a.groupName(th.group)
	if cur.Policy == unix.SCHED_DEADLINE {
		a.note(fmt.Sprintf("cfs: thread %d (%s) is SCHED_DEADLINE: left alone", pt.Tid, pt.Comm))
	} else {
		th.Changed, th.applied, th.keptCPU = a.wanted(th.group, th.Original, cur)
		if th.keptCPU {
			a.note(fmt.Sprintf("cfs: thread %d (%s) may only run on exclusive CPUs %s: its affinity is left as it was", pt.Tid, pt.Comm, cpuString(th.Original.CPUs)))
		}
	}
	a.threads[pt.Tid] = th
	return th, nil
}

// baseline returns what to record as a thread's original settings. A
// thread that appears after Apply inherited its creator's settings, which
// may be ones this backend set: a field whose value is one this backend
// set on a thread of the same process (or, for a process whose leader is
// not tracked, of its parent process) is taken as inherited, and the
// original recorded is that process leader's.
func (a *applied) baseline(tgid int, cur Settings) Settings {
	procs := []int{tgid}
	if _, ok := a.threads[tgid]; !ok {
		if ppid := parentOf(tgid); ppid > 0 {
			procs = append(procs, ppid)
		}
	}
	for _, pg := range procs {
		leader, ok := a.threads[pg]
		if !ok {
			continue
		}
		out := cur
		for _, th := range a.threads {
			if th.Tgid != pg || !th.inForce {
				continue
			}
			if th.Changed.Affinity && slices.Equal(cur.CPUs, th.applied.CPUs) {
				out.CPUs = leader.Original.CPUs
			}
			if th.Changed.Policy && cur.Policy == th.applied.Policy && cur.RTPriority == th.applied.RTPriority {
				out.Policy, out.RTPriority, out.ResetOnFork = leader.Original.Policy, leader.Original.RTPriority, leader.Original.ResetOnFork
			}
			if th.Changed.Slice && cur.SliceNs == th.applied.SliceNs {
				out.SliceNs = leader.Original.SliceNs
			}
			if th.Changed.Nice && cur.Nice == th.applied.Nice {
				out.Nice = leader.Original.Nice
			}
		}
		return out
	}
	return cur
}

// parentOf returns a process's parent pid (stat field 4), 0 if unknown.
func parentOf(pid int) int {
	st, err := procfs.FS{}.Stat(pid)
	if err != nil {
		return 0
	}
	return st.PPID
}

// wanted says which fields of a thread currently at cur the backend sets
// for group g, and to what: orig plus what the group asks. A field is
// named when the group changes it, and also when cur differs from orig
// (a thread that inherited a setting this backend made on its creator), so
// that revert puts it back too. It also says whether an affinity that lies
// wholly on exclusive CPUs was left alone.
func (a *applied) wanted(g int, orig, cur Settings) (Fields, Settings, bool) {
	w := orig
	kept := false
	if g >= 0 && a.groups[g].cpus != nil {
		w.CPUs = a.groups[g].cpus
	} else if len(a.exclusive) > 0 {
		var off []int
		for _, c := range orig.CPUs {
			if !slices.Contains(a.exclusive, c) {
				off = append(off, c)
			}
		}
		if len(off) == 0 {
			kept = true
		} else {
			w.CPUs = off
		}
	}
	if g >= 0 {
		t := a.groups[g]
		if t.setPolicy {
			w.Policy, w.RTPriority = t.policy, t.rtPrio
			w.ResetOnFork = orig.ResetOnFork || t.resetOnFork
		}
		if t.setNice {
			w.Nice = t.nice
		}
		if t.setSlice {
			w.SliceNs = t.sliceNs
		}
	}
	policy := func(s Settings) [3]int {
		rof := 0
		if s.ResetOnFork {
			rof = 1
		}
		return [3]int{s.Policy, s.RTPriority, rof}
	}
	f := Fields{
		Affinity: !slices.Equal(w.CPUs, cur.CPUs) || !slices.Equal(orig.CPUs, cur.CPUs),
		Policy:   policy(w) != policy(cur) || policy(orig) != policy(cur),
		Nice:     w.Nice != cur.Nice || orig.Nice != cur.Nice,
		Slice:    w.SliceNs != cur.SliceNs || orig.SliceNs != cur.SliceNs,
	}
	return f, w, kept
}

// change moves a thread from orig to w in the fields f names: policy and
// slice first (one sched_setattr, which also carries nice for the fair
// policies), then nice, then affinity. A field f does not name is the
// same in w as in orig.
func change(tid int, orig, w Settings, f Fields) error {
	if f.Policy || f.Slice {
		if err := setAttr(tid, w); err != nil {
			return err
		}
	}
	if f.Nice {
		if err := setNice(tid, w.Nice); err != nil {
			return err
		}
	}
	if f.Affinity {
		if err := setAffinity(tid, w.CPUs); err != nil {
			return err
		}
	}
	return nil
}

// restore puts back the fields f of a thread's original settings. Each is
// attempted; the errors are joined.
func restore(tid int, orig Settings, f Fields) error {
	var errs []error
	if f.Policy || f.Slice {
		errs = append(errs, setAttr(tid, orig))
	}
	// sched_setattr carries nice only for the fair policies.
	if f.Nice || (f.Policy || f.Slice) && !fairPolicy(orig.Policy) {
		errs = append(errs, setNice(tid, orig.Nice))
	}
	if f.Affinity {
		errs = append(errs, setAffinity(tid, orig.CPUs))
	}
	err := errors.Join(errs...)
	if err != nil && allExited(errs) {
		return scheduler.ErrThreadGone
	}
	return err
}

func allExited(errs []error) bool {
	for _, e := range errs {
		if e != nil && !errors.Is(e, scheduler.ErrThreadGone) {
			return false
		}
	}
	return true
}

// retire drops a thread that is gone, keeping its counters for Stats.
func (a *applied) retire(th *thread) {
	a.retired[a.statIndex(th.group)].add(th.last.sub(th.base))
	delete(a.threads, th.Tid)
	if th.Changed.any() {
		a.dirty = true
	}
}

func (a *applied) statIndex(g int) int {
	if g < 0 {
		return len(a.groups)
	}
	return g
}

// statName names group g as Stats does.
func (a *applied) statName(g int) string {
	if g < 0 {
		return scheduler.Unmatched
	}
	return a.groupName(g)
}

func (a *applied) groupName(g int) string {
	if g < 0 {
		return ""
	}
	return a.plan.Profile.ThreadGroups[g].Name
}

// Stats returns each group's counters since its threads were first seen,
// then the threads no group matched. Runtime and wait are from
// /proc/TID/schedstat; preemptions are involuntary context switches; CFS
// has no dispatch queues and no SMT sibling counter.
func (a *applied) Stats() ([]scheduler.GroupStats, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reverted {
		return nil, fmt.Errorf("cfs: stats: %w", scheduler.ErrReverted)
	}
	_, noSchedstat := os.Stat("/proc/self/schedstat")
	now := time.Now()
	n := len(a.groups) + 1
	sum := slices.Clone(a.retired)
	threads := make([]int, n)
	kept := make([]int, n)
	for _, th := range a.threads {
		if c, err := readCounters(th.Tid); err == nil {
			th.last = c
		}
		i := a.statIndex(th.group)
		sum[i].add(th.last.sub(th.base))
		threads[i]++
		if th.keptCPU {
			kept[i]++
		}
	}
	out := make([]scheduler.GroupStats, n)
	for i := range out {
		s := &out[i]
		if i < len(a.groups) {
			g := a.plan.Profile.ThreadGroups[i]
			s.Group, s.Treatment = g.Name, g.Treatment
			// What the kernel got, then what it did not: the realisation
			// (treatments) Realise reports.
			s.Notes = append(s.Notes, "cfs sets "+scheduler.RealisedGroup{Settings: a.groups[i].settings()}.Summary())
			s.Notes = append(s.Notes, a.groups[i].notes...)
		} else {
			s.Group, s.Treatment = scheduler.Unmatched, profiles.Normal
		}
		s.Threads, s.At = threads[i], now
		s.RuntimeNs = sum[i].runtimeNs
		s.WaitNs = sum[i].waitNs
		s.Preemptions = sum[i].nonvoluntary
		s.Missing = append(s.Missing,
			scheduler.Unmeasured{Counter: scheduler.Dispatches, Why: "CFS has no dispatch queues (preemptions are involuntary context switches)"},
			scheduler.Unmeasured{Counter: scheduler.SiblingBusy, Why: "not measured by the CFS backend"})
		if noSchedstat != nil {
			s.Missing = append(s.Missing, scheduler.Unmeasured{Counter: scheduler.Wait, Why: "no /proc/TID/schedstat"})
			s.Notes = append(s.Notes, "runtime: utime+stime at clock-tick resolution (no /proc/TID/schedstat)")
		}
		if kept[i] > 0 {
			s.Notes = append(s.Notes, fmt.Sprintf("%d thread(s) allowed only on exclusive CPUs kept their affinity", kept[i]))
		}
	}
	return out, nil
}

// readCounters reads a thread's CPU time (from schedstat, else utime +
// stime from stat) and context switches (from status).
func readCounters(tid int) (counters, error) {
	var proc procfs.FS
	var c counters
	if ss, err := proc.Schedstat(tid); err == nil {
		c.runtimeNs, c.waitNs = ss.RunNs, ss.WaitNs
	} else {
		st, err := proc.Stat(tid)
		if err != nil {
			return c, err
		}
		c.runtimeNs = (st.Utime + st.Stime) * 1e9 / 100 // USER_HZ is 100 on every Linux in use
	}
	st, err := proc.Status(tid)
	if err != nil {
		return c, err
	}
	c.voluntary, c.nonvoluntary = st.VoluntaryCtxtSwitches, st.NonvoluntaryCtxtSwitches
	return c, nil
}

// Revert puts every changed thread back: each is checked to be the same
// thread (start time), then its changed fields are restored. Threads that
// exited are skipped with a note; a tid now used by another thread is not
// touched. One thread failing does not stop the others; the errors are
// joined. The state file is removed once nothing is left to put back, and
// rewritten with what is left otherwise. Calling Revert again retries only
// what failed.
func (a *applied) Revert() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var todo []*thread
	if !a.reverted {
		a.reverted = true
		for _, th := range a.threads {
			if th.Changed.any() {
				todo = append(todo, th)
			}
		}
		a.failed = map[int]*thread{}
	} else {
		for _, th := range a.failed {
			todo = append(todo, th)
		}
	}
	slices.SortFunc(todo, func(x, y *thread) int { return x.Tid - y.Tid })
	var errs []error
	// Threads that exited are common (a server's per-connection workers):
	// one note for all of them, not one line each.
	gone := map[string]int{}
	for _, th := range todo {
		exited, err := revertRecord(th.Record, a.note)
		if exited {
			gone[th.Comm]++
		}
		if err != nil {
			errs = append(errs, err)
			a.failed[th.Tid] = th
		} else {
			delete(a.failed, th.Tid)
		}
	}
	if len(gone) > 0 {
		a.note(exitedNote(gone))
	}
	failed, err := restoreCpusets(a.narrowed, a.note)
	a.narrowed = failed
	if err != nil {
		errs = append(errs, fmt.Errorf("cfs: %w", err))
	}
	if len(a.failed) == 0 && len(a.narrowed) == 0 {
		if err := os.Remove(a.statePath); err != nil && !os.IsNotExist(err) {
			errs = append(errs, fmt.Errorf("cfs: remove state file: %w", err))
		}
	} else if err := a.writeState(); err != nil {
		errs = append(errs, fmt.Errorf("cfs: %w", err))
	}
	return errors.Join(errs...)
}

// revertRecord restores one recorded thread if it is still the same
// thread; exited says it is gone (nothing to restore).
func revertRecord(r Record, note func(string)) (exited bool, err error) {
	start, err := scheduler.TaskStartTime(r.Tid)
	if errors.Is(err, scheduler.ErrThreadGone) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("revert thread %d (%s): %w", r.Tid, r.Comm, err)
	}
	if start != r.Start {
		note(fmt.Sprintf("thread %d (%s) exited and its tid now belongs to another thread (started at tick %d, not %d): not touched", r.Tid, r.Comm, start, r.Start))
		return false, nil
	}
	if err := restore(r.Tid, r.Original, r.Changed); err != nil {
		if errors.Is(err, scheduler.ErrThreadGone) {
			return true, nil
		}
		return false, fmt.Errorf("revert thread %d (%s) %s: %w", r.Tid, r.Comm, r.Changed, err)
	}
	return false, nil
}

// exitedNote says which threads had exited before the revert, by comm.
func exitedNote(gone map[string]int) string {
	n := 0
	var parts []string
	for _, comm := range slices.Sorted(maps.Keys(gone)) {
		n += gone[comm]
		parts = append(parts, fmt.Sprintf("%s×%d", comm, gone[comm]))
	}
	return fmt.Sprintf("%d thread(s) had exited, nothing to restore: %s", n, strings.Join(parts, " "))
}
