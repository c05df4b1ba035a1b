// Package cfs is the scheduler backend for kernels without sched_ext: it
// puts a workload profile in force through what the fair class (CFS/EEVDF)
// and the kernel's per-thread settings offer — CPU affinity, scheduling
// policy and nice — and puts every thread back exactly as it was.
//
// What each treatment does:
//
//   - exclusive: the group's threads get the group's CPUs (whole cores, SMT
//     siblings included, from scheduler.Allocate); every other thread of the
//     workload is moved off those CPUs; and, as the kubelet's static CPU
//     manager does for a Guaranteed pod, every other cgroup in the cpuset
//     hierarchy (v1 or v2; Options.CpusetScope narrows where) loses those
//     CPUs from its cpuset.cpus while applied, recorded in the state file
//     and restored exactly on revert. Tasks in the root cpuset cgroup cannot
//     be kept off that way and may still run there.
//   - latency: nice from the group's weight (NiceForWeight; -5 without one),
//     and SCHED_RR at rt_priority when the profile sets one, bounded by the
//     kernel's RT throttling (refused when sched_rt_runtime_us is -1).
//   - normal: untouched.
//   - batch: SCHED_BATCH, nice kept.
//   - yield: SCHED_IDLE.
//
// Before changing a thread the backend records its original settings in a
// state file (written atomically, rewritten on every change), so that
// RevertFile can restore them after the applying process was killed.
package cfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/internal/procfs"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// Name is the backend's name, as profiles' matcher kinds know it.
const Name = "cfs"

// DefaultStateDir holds the state files of running applies: tmpfs, so a
// reboot (which resets every thread anyway) clears them.
const DefaultStateDir = "/run/temper-train"

// StatePath is the default state file of the apply running as process pid.
func StatePath(dir string, pid int) string {
	return filepath.Join(dir, "apply-"+strconv.Itoa(pid)+".json")
}

// Options configure a Backend.
type Options struct {
	// StateFile is where Apply records each changed thread's original
	// settings before changing it. Empty means
	// StatePath(DefaultStateDir, os.Getpid()).
	StateFile string
	// Note receives one-line messages worth showing the user: what CFS
	// cannot do for a group, threads that exited or were left alone. Nil
	// drops them.
	Note func(msg string)
	// CgroupRoot is where the cgroup hierarchies are mounted
	// (DefaultCgroupRoot when empty).
	CgroupRoot string
	// CpusetScope is the cgroup directory (in the cpuset hierarchy) below
	// which other cgroups lose the exclusive CPUs while a profile with
	// exclusive groups is applied; empty means the whole hierarchy, as the
	// kubelet's static CPU manager does for every other pod. Tests narrow
	// it to cgroups of their own.
	CpusetScope string
	// LeaveCpusets keeps the backend from narrowing other cgroups'
	// cpusets: exclusive groups then only keep the workload's own other
	// threads off their CPUs.
	LeaveCpusets bool
}

// Backend is the CFS backend. It implements scheduler.Backend.
type Backend struct {
	opts Options
}

// New returns a CFS backend.
func New(opts Options) *Backend { return &Backend{opts: opts} }

// Name returns "cfs".
func (b *Backend) Name() string { return Name }

// Probe checks that this process may change other threads' affinity,
// policy and nice: that takes CAP_SYS_NICE.
func (b *Backend) Probe() error {
	caps, err := procfs.EffectiveCaps()
	if err != nil {
		return fmt.Errorf("cfs backend: %w: %v", scheduler.ErrUnsupported, err)
	}
	return scheduler.CheckPrivileges(caps, Name, "changing other processes' thread affinity, policy and nice", procfs.CapSysNice)
}

// treatment is what one thread group's threads get.
type treatment struct {
	cpus      []int // exclusive groups: their CPUs; nil otherwise
	setPolicy bool
	policy    int
	rtPrio    int
	setNice   bool
	nice      int
	notes     []string // what the profile asks that CFS does not do
}

// Apply checks the plan, records and changes every current thread of the
// target, and returns the plan in force. On error everything it changed is
// put back. Cancelling ctx reverts.
func (b *Backend) Apply(ctx context.Context, p scheduler.Plan) (scheduler.Applied, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.Profile == nil || p.Classifier == nil || p.Threads == nil {
		return nil, fmt.Errorf("cfs: incomplete plan (profile, classifier and thread lister are required)")
	}
	if len(p.Cores.Exclusive) != len(p.Profile.ThreadGroups) {
		return nil, fmt.Errorf("cfs: plan's core allocation has %d groups, profile %q has %d", len(p.Cores.Exclusive), p.Profile.ID, len(p.Profile.ThreadGroups))
	}
	groups, excl, err := treatments(p)
	if err != nil {
		return nil, err
	}
	state := b.opts.StateFile
	if state == "" {
		state = StatePath(DefaultStateDir, os.Getpid())
	}
	self, err := scheduler.TaskStartTime(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("cfs: %w", err)
	}
	a := &applied{
		cpuset:    b.cpusetSetup(excl),
		plan:      p,
		groups:    groups,
		exclusive: excl,
		statePath: state,
		note:      b.opts.Note,
		owner:     owner{Pid: os.Getpid(), Start: self},
		threads:   map[int]*thread{},
		retired:   make([]counters, len(groups)+1),
	}
	if a.note == nil {
		a.note = func(string) {}
	}
	for i, g := range p.Profile.ThreadGroups {
		if g.Treatment != profiles.Exclusive {
			continue
		}
		if a.cpuset.dir != "" {
			a.note(fmt.Sprintf("cfs: group %q gets CPUs %s (whole cores); the workload's other threads are moved off them, and every other cgroup below %s loses them from its cpuset; tasks in the root cpuset cgroup can still run there", g.Name, cpuString(groups[i].cpus), a.cpuset.scope))
			groups[i].notes = slices.DeleteFunc(groups[i].notes, func(n string) bool { return strings.HasPrefix(n, "exclusivity partial") })
			groups[i].notes = append(groups[i].notes, "exclusivity through cpusets: other cgroups below "+a.cpuset.scope+" are kept off CPUs "+cpuString(groups[i].cpus)+"; tasks in the root cpuset cgroup are not")
			continue
		}
		a.note(fmt.Sprintf("cfs: group %q gets CPUs %s (whole cores); the workload's other threads are moved off them, but CFS cannot keep other processes or pods off them or their SMT siblings", g.Name, cpuString(groups[i].cpus)))
	}
	// The state file exists before the first change, so a crash at any
	// point leaves a record of what to put back.
	if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
		return nil, fmt.Errorf("cfs: %w: %w", ErrStateDir, err)
	}
	if _, err := os.Lstat(state); err == nil {
		return nil, fmt.Errorf("cfs: state file %s %w", state, ErrStateExists)
	}
	if err := a.writeState(); err != nil {
		return nil, fmt.Errorf("cfs: %w", err)
	}
	if err := a.refresh(); err != nil {
		if rerr := a.Revert(); rerr != nil {
			return nil, fmt.Errorf("%w; and reverting: %v", err, rerr)
		}
		return nil, err
	}
	context.AfterFunc(ctx, func() { a.Revert() })
	return a, nil
}

// cpusetPlan is where the backend narrows other cgroups' cpusets; dir is
// "" when it does not.
type cpusetPlan struct {
	dir, scope string
	v2         bool
}

// cpusetSetup decides whether and where other cgroups lose the exclusive
// CPUs excl.
func (b *Backend) cpusetSetup(excl []int) cpusetPlan {
	if len(excl) == 0 || b.opts.LeaveCpusets {
		return cpusetPlan{}
	}
	root := b.opts.CgroupRoot
	if root == "" {
		root = DefaultCgroupRoot
	}
	dir, v2, ok := cpusets(root)
	if !ok {
		return cpusetPlan{}
	}
	scope := dir
	if b.opts.CpusetScope != "" {
		scope = b.opts.CpusetScope
	}
	return cpusetPlan{dir: dir, scope: scope, v2: v2}
}

// treatments turns the profile's groups into what this backend does for
// each, and returns every exclusive CPU.
func treatments(p scheduler.Plan) ([]treatment, []int, error) {
	var excl []int
	out := make([]treatment, len(p.Profile.ThreadGroups))
	rtChecked := false
	for i, g := range p.Profile.ThreadGroups {
		t := &out[i]
		if g.RTPriority != 0 && g.Treatment != profiles.Latency {
			return nil, nil, fmt.Errorf("thread group %q: rt_priority is for latency groups only, this one is %s", g.Name, g.Treatment)
		}
		switch g.Treatment {
		case profiles.Exclusive:
			if len(p.Cores.Exclusive[i]) == 0 {
				return nil, nil, fmt.Errorf("thread group %q: exclusive but the plan allocated it no CPUs", g.Name)
			}
			t.cpus = p.Cores.Exclusive[i]
			excl = append(excl, t.cpus...)
		case profiles.Latency:
			t.setNice, t.nice = true, NiceForWeight(g.Weight)
			if g.RTPriority != 0 {
				if g.RTPriority < 1 || g.RTPriority > 99 {
					return nil, nil, fmt.Errorf("thread group %q: rt_priority %d is outside 1..99", g.Name, g.RTPriority)
				}
				if !rtChecked {
					if err := checkRTBounded(rtRuntimePath); err != nil {
						return nil, nil, fmt.Errorf("thread group %q: %w", g.Name, err)
					}
					rtChecked = true
				}
				t.setPolicy, t.policy, t.rtPrio = true, unix.SCHED_RR, g.RTPriority
			}
		case profiles.Normal:
		case profiles.Batch:
			t.setPolicy, t.policy = true, unix.SCHED_BATCH
		case profiles.Yield:
			t.setPolicy, t.policy = true, unix.SCHED_IDLE
		default:
			return nil, nil, fmt.Errorf("thread group %q: unknown treatment %q", g.Name, g.Treatment)
		}
		if g.Weight != 0 && g.Treatment != profiles.Latency {
			t.notes = append(t.notes, fmt.Sprintf("weight %d not applied: the CFS backend maps weight to nice for latency groups only", g.Weight))
		}
		if g.SliceUs != 0 {
			t.notes = append(t.notes, fmt.Sprintf("slice_us %d not applied: the CFS backend sets no per-thread time slice", g.SliceUs))
		}
		if g.Preempt {
			t.notes = append(t.notes, "preempt not applied: CFS decides wakeup preemption itself (a latency group's lower nice makes it likelier)")
		}
		if g.Treatment == profiles.Exclusive {
			t.notes = append(t.notes, "exclusivity partial: only the workload's other threads are kept off CPUs "+cpuString(t.cpus)+"; other processes and pods, and their use of the SMT siblings, are not")
		}
	}
	return out, excl, nil
}
