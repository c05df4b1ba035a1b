package scx

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/profiles"
)

// CPU ceilings.
//
// While a sched_ext scheduler is attached the kernel does not enforce
// cpu.max: CFS bandwidth control charges the runtime of fair-class threads
// only, and a thread of the BPF scheduler never runs there. A pod limited
// below what its layers allocate (a 0.5-CPU pod whose threads get whole
// CPUs) would then run above its limit. So the scheduler enforces the
// limits itself: every cgroup above the target's threads that has a quota
// (cpu.max on v2, cpu.cfs_quota_us and cpu.cfs_period_us on v1) becomes a
// ceiling, and the BPF side keeps, per ceiling, a runtime budget of quota
// per period that every run of a thread under it draws down; a thread
// whose budget is spent waits, off every CPU, until the next period
// refills it (bpf/scheduler.bpf.c, "CPU ceilings").
//
// A runtime budget, not a cap on how many CPUs the cgroup's threads may
// hold at once: a CPU count cannot express 0.5 CPU or 1.5 CPUs, and a
// kubelet limit is any number of millicores. A budget bounds consumption
// to quota/period CPUs exactly, over any number of CPUs, as CFS does.
//
// The limits are read when the profile is applied and, for cgroups first
// seen then, on Refresh; a cpu.max changed later takes effect at the next
// apply. A thread counts once Apply or Refresh has listed it: one started
// in between runs unbounded until the next Refresh (the kernel's own
// bandwidth control would charge it from its first run).

// Limits of the BPF side (bpf/scheduler.h).
const (
	maxCeilings     = 8 // TS_MAX_CEILINGS
	maxTaskCeilings = 4 // TS_MAX_TASK_CEILINGS
	noCeiling       = 0xffffffff
)

// defaultCeilingTick is how often the refill timer runs when the ceilings
// found give no shorter period: the kubelet's (and the kernel's default)
// CFS period.
const defaultCeilingTick = 100 * time.Millisecond

// ErrTooManyCeilings is wrapped when the target's threads sit under more
// limited cgroups than the scheduler has ceilings for.
var ErrTooManyCeilings = errors.New("more limited cgroups than the sched_ext scheduler has ceilings")

// Ceiling is one limited cgroup the scheduler bounds: its threads together
// run at most Quota per Period.
type Ceiling struct {
	// Cgroup is the cgroup's path relative to its hierarchy's root, as
	// /proc/PID/cgroup prints it.
	Cgroup string
	Quota  time.Duration
	Period time.Duration
}

// CPUs is the ceiling in CPUs: quota / period.
func (c Ceiling) CPUs() float64 {
	if c.Period <= 0 {
		return 0
	}
	return float64(c.Quota) / float64(c.Period)
}

func (c Ceiling) String() string {
	return fmt.Sprintf("%s: %.3g CPUs (%v per %v)", c.Cgroup, c.CPUs(), c.Quota, c.Period)
}

// CeilingStats are a ceiling's counters since Apply.
type CeilingStats struct {
	Ceiling
	// Charged is the runtime the scheduler charged to the ceiling.
	Charged time.Duration
	// Throttles counts the times a thread was held for want of budget.
	Throttles uint64
}

// ceilingState mirrors struct ts_ceiling.
type ceilingState struct {
	QuotaNs     uint64
	PeriodNs    uint64
	BudgetNs    int64
	PeriodStart uint64
	Throttles   uint64
	ChargedNs   uint64
}

// taskCeilings mirrors struct ts_task_ceilings.
type taskCeilings struct {
	Idx [maxTaskCeilings]uint32
}

// limitReader reads the limits above a cgroup; a func so that tests can
// stand in for the cgroup filesystem.
type limitReader func(rel string) ([]Ceiling, error)

// hierarchyLimits returns the limitReader of the hierarchy whose paths
// profiles.Thread.Cgroup holds: the v1 cpu controller's when it is mounted,
// else cgroup v2's (procfs.Cgroups.CPU picks the same way).
func hierarchyLimits() (limitReader, error) {
	h, err := cgroup.Find()
	if err != nil {
		return nil, err
	}
	return func(rel string) ([]Ceiling, error) { return limitsAbove(h.Root, h.Version, rel) }, nil
}

// limitsAbove returns the limited cgroups from rel up to (not including)
// the hierarchy's root at root, nearest first: the kernel enforces every
// level's limit, so a thread draws on each of them.
func limitsAbove(root string, version int, rel string) ([]Ceiling, error) {
	var out []Ceiling
	for p := filepath.Clean("/" + rel); p != "/"; p = filepath.Dir(p) {
		cpu, err := cgroup.ReadCPUFiles(version, filepath.Join(root, p), "")
		if errors.Is(err, fs.ErrNotExist) {
			continue // the cgroup went away while we looked
		}
		if err != nil {
			return nil, fmt.Errorf("CPU limit of cgroup %s: %w", p, err)
		}
		b := cpu.Bandwidth
		if b == nil || b.Unlimited || b.PeriodUsec <= 0 || b.QuotaUsec <= 0 {
			continue
		}
		out = append(out, Ceiling{Cgroup: p, Quota: time.Duration(b.QuotaUsec) * time.Microsecond, Period: time.Duration(b.PeriodUsec) * time.Microsecond})
	}
	return out, nil
}

// ceilingTable numbers the limited cgroups above the target's threads, in
// the order they were first seen; a slot, once given, keeps its cgroup
// while the scheduler is loaded (the BPF side holds its budget there).
type ceilingTable struct {
	read   limitReader
	slots  []Ceiling
	index  map[string]int      // Ceiling.Cgroup → slot
	chains map[string][]uint32 // thread cgroup → its slots, nearest first
}

func newCeilingTable(read limitReader) *ceilingTable {
	return &ceilingTable{read: read, index: map[string]int{}, chains: map[string][]uint32{}}
}

// assign returns, for every thread under a limited cgroup, the slots it
// draws on; cgroups not seen before get slots at the end of t.slots.
func (t *ceilingTable) assign(threads []profiles.Thread) (map[uint32]taskCeilings, error) {
	out := map[uint32]taskCeilings{}
	for _, th := range threads {
		if th.Cgroup == "" {
			continue
		}
		chain, ok := t.chains[th.Cgroup]
		if !ok {
			limits, err := t.read(th.Cgroup)
			if err != nil {
				return nil, err
			}
			if len(limits) > maxTaskCeilings {
				return nil, fmt.Errorf("thread %d (cgroup %s) sits under %d limited cgroups; the sched_ext scheduler follows at most %d: %w",
					th.Tid, th.Cgroup, len(limits), maxTaskCeilings, ErrTooManyCeilings)
			}
			for _, l := range limits {
				slot, ok := t.index[l.Cgroup]
				if !ok {
					if len(t.slots) == maxCeilings {
						return nil, fmt.Errorf("cgroup %s: %d limited cgroups already: %w", l.Cgroup, maxCeilings, ErrTooManyCeilings)
					}
					slot = len(t.slots)
					t.slots = append(t.slots, l)
					t.index[l.Cgroup] = slot
				}
				chain = append(chain, uint32(slot))
			}
			t.chains[th.Cgroup] = chain
		}
		if len(chain) == 0 {
			continue
		}
		tc := taskCeilings{Idx: [maxTaskCeilings]uint32{noCeiling, noCeiling, noCeiling, noCeiling}}
		copy(tc.Idx[:], chain)
		out[uint32(th.Tid)] = tc
	}
	return out, nil
}

// tick is the refill timer's interval: the shortest period among the
// ceilings, defaultCeilingTick when there are none yet.
func (t *ceilingTable) tick() time.Duration {
	tick := defaultCeilingTick
	for _, c := range t.slots {
		tick = min(tick, c.Period)
	}
	return tick
}

// state is the kernel record a new slot starts from: a full budget, and a
// period start of 0, which the first refill moves to the period under way.
func (c Ceiling) state() ceilingState {
	return ceilingState{QuotaNs: uint64(c.Quota), PeriodNs: uint64(c.Period), BudgetNs: int64(c.Quota)}
}
