// Package scheduler applies a workload profile to a running workload and
// reverts it: through an embedded sched_ext scheduler (scheduler/scx) or,
// on kernels without sched_ext, through CFS policy, nice and affinity
// (scheduler/cfs). Both take the same Plan; neither falls back to the other
// silently.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
)

// ErrUnsupported is wrapped by Probe errors: the backend cannot run on this
// machine (no sched_ext, another scheduler attached, missing privileges).
var ErrUnsupported = errors.New("scheduler backend not supported here")

// ErrReverted is wrapped by Refresh and Stats called after Revert: the plan
// is no longer in force and its counters are gone.
var ErrReverted = errors.New("profile already reverted")

// Plan is what a backend applies: a linted profile with compiled matchers,
// the machine's topology and the cores each exclusive group owns.
type Plan struct {
	Profile    *profiles.Profile
	Classifier *profiles.Classifier
	Topology   *machine.Topology
	Cores      Allocation
	// Threads lists the target's threads now. Backends call it when they
	// start and again on Refresh, so threads created later are classified.
	Threads func() ([]profiles.Thread, error)
}

// NewPlan compiles p's matchers and gives its exclusive groups their cores
// on topology t; threads lists the target's threads (Plan.Threads).
func NewPlan(p *profiles.Profile, t *machine.Topology, threads func() ([]profiles.Thread, error)) (Plan, error) {
	cores, err := Allocate(p, t)
	if err != nil {
		return Plan{}, err
	}
	cl, err := profiles.Compile(p)
	if err != nil {
		return Plan{}, err
	}
	return Plan{Profile: p, Classifier: cl, Topology: t, Cores: cores, Threads: threads}, nil
}

// Backend applies plans. Implementations: scheduler/scx, scheduler/cfs.
type Backend interface {
	// Name is "sched_ext" or "cfs", as profiles.MatcherKinds knows it.
	Name() string
	// Probe checks that the backend can run here; errors wrap ErrUnsupported
	// and say what is missing.
	Probe() error
	// Apply puts the plan in force. On error nothing stays changed.
	Apply(ctx context.Context, p Plan) (Applied, error)
}

// Applied is a plan in force.
type Applied interface {
	// Refresh classifies threads that appeared since the last call. After
	// Revert it returns an error wrapping ErrReverted.
	Refresh() error
	// Stats returns per-group counters since Apply, in group order, then the
	// default (unprofiled) layer last where the backend has one. After
	// Revert it returns an error wrapping ErrReverted.
	Stats() ([]GroupStats, error)
	// Revert restores what Apply changed. It is idempotent, safe to call
	// from several goroutines at once (and with Refresh and Stats), and
	// must be called on every exit path.
	Revert() error
}

// Unmatched names, in Stats, the last entry: the target's threads no
// group matched (sched_ext's default layer, whose counters also hold every
// thread outside the target). The parentheses keep it apart from any
// group's name.
const Unmatched = "(unmatched)"

// Counter names one of GroupStats' counters.
type Counter string

// The counters of GroupStats.
const (
	Runtime     Counter = "runtime"
	Wait        Counter = "wait"
	Dispatches  Counter = "dispatches"
	Preemptions Counter = "preemptions"
	SiblingBusy Counter = "sibling_busy"
)

// Unmeasured is a counter a backend cannot measure, and why.
type Unmeasured struct {
	Counter Counter
	Why     string
}

func (u Unmeasured) String() string { return string(u.Counter) + ": " + u.Why }

// GroupStats are one thread group's counters since Apply. A counter a
// backend cannot measure stays zero and is named in Missing: a zero
// counter not named there is a measurement.
type GroupStats struct {
	Group     string
	Treatment profiles.Treatment
	Threads   int    // threads assigned now
	RuntimeNs uint64 // CPU time of the group's threads
	// WaitNs is the time the group's threads spent runnable, waiting for
	// a CPU.
	WaitNs uint64
	// Dispatches counts the times the group's threads were put in a queue
	// to run (sched_ext's dispatch queues).
	Dispatches uint64
	// Preemptions counts the times a thread of the group lost its CPU
	// while it could still run.
	Preemptions uint64
	// SiblingBusy counts the times an exclusive thread ran while its SMT
	// sibling was running something else.
	SiblingBusy uint64
	Missing     []Unmeasured
	// Notes say what the backend did not apply of the group's treatment,
	// or how it measured a counter, one line each.
	Notes []string
	// At is when the counters were read: the difference of two readings
	// over the difference of their At is a rate.
	At time.Time
}

// Measures reports whether c is a measurement for this group (not named in
// Missing).
func (s GroupStats) Measures(c Counter) bool {
	for _, m := range s.Missing {
		if m.Counter == c {
			return false
		}
	}
	return true
}

// Allocation says which CPUs each exclusive group owns and which are left.
type Allocation struct {
	// Exclusive is indexed like Profile.ThreadGroups: the CPUs (every SMT
	// sibling of each owned core) of an exclusive group, nil for others.
	Exclusive [][]int
	// Shared are the CPUs of the cores nobody owns.
	Shared []int
}

// Allocate gives every exclusive group its ExclusiveCores whole cores under
// profiles.CoreBudget's rule (group order, one core always shared), taking
// cores from the highest-numbered down so that core 0, where the system's
// housekeeping tends to run, stays shared. A group that does not fit is an
// error naming it: the scheduler refuses such a plan rather than apply
// part of it (profiles.Demote, apply --demote, turns such groups into
// latency groups first).
func Allocate(p *profiles.Profile, t *machine.Topology) (Allocation, error) {
	if t == nil || len(t.Cores) == 0 {
		return Allocation{}, errors.New("allocate cores: no CPU topology")
	}
	a := Allocation{Exclusive: make([][]int, len(p.ThreadGroups))}
	budget := profiles.NewCoreBudget(len(t.Cores))
	next := len(t.Cores) - 1
	for i, g := range p.ThreadGroups {
		if g.Treatment != profiles.Exclusive {
			continue
		}
		if g.ExclusiveCores <= 0 {
			return Allocation{}, fmt.Errorf("thread group %q: exclusive without exclusive_cores", g.Name)
		}
		left := budget.Left()
		if !budget.Take(g.ExclusiveCores) {
			return Allocation{}, fmt.Errorf("thread group %q: %d exclusive cores do not fit: %d of the machine's %d cores are left and one must stay shared",
				g.Name, g.ExclusiveCores, left+1, len(t.Cores))
		}
		for n := 0; n < g.ExclusiveCores; n++ {
			a.Exclusive[i] = append(a.Exclusive[i], t.Cores[next].CPUs...)
			next--
		}
	}
	for c := 0; c <= next; c++ {
		a.Shared = append(a.Shared, t.Cores[c].CPUs...)
	}
	return a, nil
}

// Tiered is a backend whose scheduler has a treatment of BestEffort pods of
// its own, the node's tier: WithTier returns the backend whose Apply puts
// it in force for the cgroup directory besteffort (a node's
// kubepods/besteffort, in the cpu controller's hierarchy) besides the
// plan. The CFS backend has none: its tier is a cgroup knob (the rig's).
type Tiered interface {
	Backend
	WithTier(besteffort string) Backend
}
