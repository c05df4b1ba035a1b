package cfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/profiles"
	"temper.codes/temper-train/scheduler"
)

// treatment is what one thread group's threads get: the one rule from a
// group's fields to kernel settings, which Apply puts in force and Realise
// reports. A knob whose set* is false is left as each thread has it.
type treatment struct {
	cpus        []int // exclusive groups: their CPUs; nil otherwise
	setPolicy   bool
	policy      int
	rtPrio      int
	resetOnFork bool // with an RT policy: the thread's children start SCHED_OTHER at nice ≥ 0
	setNice     bool
	nice        int
	setSlice    bool
	sliceNs     uint64
	notes       []string // what the profile asks that CFS does not do, or does otherwise
}

// Bounds the kernel puts on a fair thread's slice (kernel/sched/syscalls.c
// clamps sched_runtime to 0.1..100 ms).
const (
	kernelMinSliceUs = 100
	kernelMaxSliceUs = 100_000
)

// kernel is what the running kernel offers the treatments.
type kernel struct {
	// slice: a fair thread's slice is set through sched_attr.sched_runtime
	// (EEVDF's custom slice, Linux 6.12 and later); sliceWhy says how that
	// was found out, or why not.
	slice    bool
	sliceWhy string
	// baseSliceNs is the slice of a thread that set none
	// (sysctl_sched_base_slice), as sched_getattr reports it; 0 when not
	// known. sched_getattr cannot tell a custom slice from the default one,
	// so a recorded slice equal to this is taken as the default and
	// restored as sched_runtime 0 (back to following the kernel's default).
	baseSliceNs uint64
	// rtRuntimePath is the kernel's global RT throttling budget
	// (rtRuntimePath except in tests).
	rtRuntimePath string
}

// kernel probes the running kernel.
func (b *Backend) kernel() kernel {
	k := probeSlice()
	k.rtRuntimePath = rtRuntimePath
	return k
}

// probeSlice finds out whether the kernel takes a fair thread's slice from
// sched_attr.sched_runtime. It asks the kernel rather than compare version
// numbers: the commit that made sched_setattr take the slice (Linux 6.12)
// also made sched_getattr report it, so a fair thread whose sched_runtime
// reads 0 is on a kernel without per-thread slices, and one whose
// sched_runtime is above 0 is on a kernel with them — whatever the kernel's
// version string says (distributions backport). It reads kthreadd (pid 2,
// a kernel thread that never sets a slice, so it also gives the default
// slice) and falls back to the calling thread; only when neither is a fair
// thread does it fall back to the kernel's release (uname).
func probeSlice() kernel {
	for _, pid := range []int{2, 0} {
		if pid == 2 {
			comm, err := os.ReadFile("/proc/2/comm")
			if err != nil || strings.TrimSpace(string(comm)) != "kthreadd" {
				continue // in a pid namespace, pid 2 is someone else
			}
		}
		attr, err := unix.SchedGetAttr(pid, 0)
		if err != nil || !fairPolicy(int(attr.Policy)) {
			continue
		}
		if attr.Runtime == 0 {
			return kernel{sliceWhy: "this kernel reports no slice for fair threads (sched_attr.sched_runtime needs Linux 6.12 or later)"}
		}
		k := kernel{slice: true, sliceWhy: "sched_getattr reports fair threads' slices"}
		if pid == 2 {
			k.baseSliceNs = attr.Runtime
		}
		return k
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return kernel{sliceWhy: "cannot tell whether this kernel takes a per-thread slice: " + err.Error()}
	}
	rel := unix.ByteSliceToString(u.Release[:])
	if atLeast(rel, 6, 12) {
		return kernel{slice: true, sliceWhy: "kernel " + rel + " is 6.12 or later"}
	}
	return kernel{sliceWhy: "kernel " + rel + " is older than 6.12, which first takes a fair thread's slice from sched_attr.sched_runtime"}
}

// fairPolicy reports whether p is a fair-class policy, whose sched_getattr
// carries nice and (6.12+) the slice.
func fairPolicy(p int) bool {
	return p == unix.SCHED_NORMAL || p == unix.SCHED_BATCH || p == unix.SCHED_IDLE
}

// atLeast reports whether a kernel release ("6.18.44-fc-v782") is at least
// major.minor.
func atLeast(release string, major, minor int) bool {
	f := strings.FieldsFunc(release, func(r rune) bool { return r < '0' || r > '9' })
	if len(f) < 2 {
		return false
	}
	a, err1 := strconv.Atoi(f[0])
	b, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return a > major || a == major && b >= minor
}

// treatments turns the profile's groups into what this backend does for
// each on kernel k, with the exclusive groups' CPUs from cores and other
// cgroups' cpusets handled as cs says, and returns every exclusive CPU.
//
// The rule, group by group:
//   - exclusive: the group's CPUs (whole cores);
//   - latency: nice from weight where the profile sets one that is not a
//     default thread's (NiceForWeight ≠ 0),
//     SCHED_RR with reset-on-fork at rt_priority where it sets one;
//   - batch: SCHED_BATCH; yield: SCHED_IDLE; normal: nothing of its own;
//   - every fair-class group (all but yield and RT latency) gets slice_us as
//     its slice where the profile sets one and the kernel takes it
//     (clamped to the kernel's 0.1..100 ms), so a group demoted to normal
//     keeps a slice;
//   - weight outside latency and preempt are not applied: each says so.
func treatments(p *profiles.Profile, cores scheduler.Allocation, k kernel, cs cpusetPlan) ([]treatment, []int, error) {
	var excl []int
	out := make([]treatment, len(p.ThreadGroups))
	rtChecked := false
	for i, g := range p.ThreadGroups {
		t := &out[i]
		if g.RTPriority != 0 && g.Treatment != profiles.Latency {
			return nil, nil, fmt.Errorf("thread group %q: rt_priority is for latency groups only, this one is %s", g.Name, g.Treatment)
		}
		switch g.Treatment {
		case profiles.Exclusive:
			if i >= len(cores.Exclusive) || len(cores.Exclusive[i]) == 0 {
				return nil, nil, fmt.Errorf("thread group %q: exclusive but the plan allocated it no CPUs", g.Name)
			}
			t.cpus = cores.Exclusive[i]
			excl = append(excl, t.cpus...)
		case profiles.Latency:
			// A weight that maps to nice 0 is a default thread's: nothing
			// to set, so latency at weight 100 is the same kernel state as
			// normal.
			if n := NiceForWeight(g.Weight); n != 0 {
				t.setNice, t.nice = true, n
			}
			if g.RTPriority != 0 {
				if g.RTPriority < 1 || g.RTPriority > 99 {
					return nil, nil, fmt.Errorf("thread group %q: rt_priority %d is outside 1..99", g.Name, g.RTPriority)
				}
				if !rtChecked {
					if err := checkRTBounded(k.rtRuntimePath); err != nil {
						return nil, nil, fmt.Errorf("thread group %q: %w", g.Name, err)
					}
					rtChecked = true
				}
				t.setPolicy, t.policy, t.rtPrio, t.resetOnFork = true, unix.SCHED_RR, g.RTPriority, true
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
			t.slice(g, k)
		}
		if g.Preempt {
			t.notes = append(t.notes, "preempt not applied: CFS decides wakeup preemption itself (a shorter slice makes a thread's deadline earlier, and so its wakeups likelier to preempt)")
		}
		if g.Treatment == profiles.Latency && !t.setNice && !t.setPolicy && !t.setSlice {
			t.notes = append(t.notes, "latency with nothing CFS sets (no slice_us, no rt_priority, no weight other than a default thread's): the CFS backend leaves these threads as they are")
		}
		if g.Treatment == profiles.Exclusive {
			if cs.dir != "" {
				t.notes = append(t.notes, "exclusivity through cpusets: other cgroups below "+cs.scope+" are kept off CPUs "+cpuString(t.cpus)+"; tasks in the root cpuset cgroup are not")
			} else {
				t.notes = append(t.notes, "exclusivity partial: only the workload's other threads are kept off CPUs "+cpuString(t.cpus)+"; other processes and pods, and their use of the SMT siblings, are not")
			}
		}
	}
	return out, excl, nil
}

// slice sets the group's slice from its slice_us, or notes why not.
func (t *treatment) slice(g profiles.ThreadGroup, k kernel) {
	us := g.SliceUs
	switch {
	case t.policy == unix.SCHED_IDLE:
		t.notes = append(t.notes, fmt.Sprintf("slice_us %d not applied: SCHED_IDLE threads keep the kernel's slice", us))
		return
	case t.policy == unix.SCHED_RR:
		t.notes = append(t.notes, fmt.Sprintf("slice_us %d not applied: SCHED_RR threads run for the kernel's RR time slice", us))
		return
	case !k.slice:
		t.notes = append(t.notes, fmt.Sprintf("slice_us %d not applied: %s", us, k.sliceWhy))
		return
	}
	c := min(max(us, kernelMinSliceUs), kernelMaxSliceUs)
	if c != us {
		t.notes = append(t.notes, fmt.Sprintf("slice_us %d applied as %d µs: the kernel bounds a thread's slice to %d..%d µs", us, c, kernelMinSliceUs, kernelMaxSliceUs))
	}
	t.setSlice, t.sliceNs = true, uint64(c)*1000
}

// settings lists what the treatment sets, in a fixed order, for
// scheduler.Realised.
func (t treatment) settings() []scheduler.Setting {
	var s []scheduler.Setting
	add := func(name, value string) { s = append(s, scheduler.Setting{Name: name, Value: value}) }
	if t.setPolicy {
		add("policy", policyName(t.policy))
		if t.rtPrio != 0 {
			add("rt_priority", strconv.Itoa(t.rtPrio))
		}
		if t.resetOnFork {
			add("reset_on_fork", "true")
		}
	}
	if t.setNice {
		add("nice", strconv.Itoa(t.nice))
	}
	if t.setSlice {
		add("slice", time.Duration(t.sliceNs).String())
	}
	if t.cpus != nil {
		add("cpus", cpuString(t.cpus))
	}
	return s
}

// Realise says what Apply would do to each thread group of p on topology
// t: the same rule (treatments) on this kernel, without touching a thread.
// It implements scheduler.Realiser.
func (b *Backend) Realise(p *profiles.Profile, t *machine.Topology) (scheduler.Realised, error) {
	cores, err := scheduler.Allocate(p, t)
	if err != nil {
		return scheduler.Realised{}, err
	}
	cs := b.cpusetSetup(cores)
	groups, _, err := treatments(p, cores, b.kernel(), cs)
	if err != nil {
		return scheduler.Realised{}, err
	}
	return realised(p, groups, cs), nil
}

// realised renders treatments as a scheduler.Realised.
func realised(p *profiles.Profile, groups []treatment, cs cpusetPlan) scheduler.Realised {
	r := scheduler.Realised{Backend: Name}
	if cs.dir != "" {
		r.Settings = append(r.Settings, scheduler.Setting{Name: "cpuset_scope", Value: cs.scope})
	}
	for i, g := range p.ThreadGroups {
		r.Groups = append(r.Groups, scheduler.RealisedGroup{Name: g.Name, Match: g.Match, Settings: groups[i].settings(), Notes: groups[i].notes})
	}
	return r
}

var _ scheduler.Realiser = (*Backend)(nil)
