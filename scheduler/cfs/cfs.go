// Package cfs is the scheduler backend for kernels without sched_ext: it
// puts a workload profile in force through what the fair class (CFS/EEVDF)
// and the kernel's per-thread settings offer — CPU affinity, scheduling
// policy, nice and slice — and puts every thread back exactly as it was.
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
//   - latency: nice from the group's weight where it sets one that is not a
//     default thread's (NiceForWeight), and SCHED_RR with reset-on-fork at
//     rt_priority when the profile sets one, bounded by the kernel's RT
//     throttling (refused when sched_rt_runtime_us is -1).
//   - normal: untouched.
//   - batch: SCHED_BATCH, nice kept.
//   - yield: SCHED_IDLE.
//
// Every group whose threads stay in the fair class gets slice_us as its
// threads' slice (sched_attr.sched_runtime, Linux 6.12+; noted and not set
// on older kernels). The rule is treatments (realise.go); Realise reports
// it without applying.
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
	k := b.kernel()
	cs := b.cpusetSetup(p.Cores)
	groups, excl, err := treatments(p.Profile, p.Cores, k, cs)
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
		cpuset:    cs,
		kernel:    k,
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
// CPUs of cores.
func (b *Backend) cpusetSetup(cores scheduler.Allocation) cpusetPlan {
	if !slices.ContainsFunc(cores.Exclusive, func(c []int) bool { return len(c) > 0 }) || b.opts.LeaveCpusets {
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
