package cfs

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/scheduler"
)

// Settings are the scheduling settings of one thread that this backend may
// change and must put back: its CPU affinity, policy with RT priority,
// nice and slice.
type Settings struct {
	CPUs       []int `json:"cpus"`        // sched_getaffinity, sorted
	Policy     int   `json:"policy"`      // SCHED_OTHER 0, SCHED_FIFO 1, SCHED_RR 2, SCHED_BATCH 3, SCHED_IDLE 5, ...
	RTPriority int   `json:"rt_priority"` // 1..99 for SCHED_FIFO and SCHED_RR, else 0
	Nice       int   `json:"nice"`
	// SliceNs is a fair thread's slice (sched_attr.sched_runtime, Linux
	// 6.12+); 0 is the kernel's default, which is how a thread that set
	// none is recorded and restored.
	SliceNs uint64 `json:"slice_ns,omitempty"`
	// ResetOnFork is SCHED_FLAG_RESET_ON_FORK, which sched_setattr would
	// otherwise clear.
	ResetOnFork bool `json:"reset_on_fork,omitempty"`
}

// Fields names which of a thread's settings the backend changed; revert
// puts back only those, so what the workload changes itself meanwhile in
// the others is left alone.
type Fields struct {
	Affinity bool `json:"affinity,omitempty"`
	Policy   bool `json:"policy,omitempty"` // policy, RT priority and reset-on-fork
	Nice     bool `json:"nice,omitempty"`
	Slice    bool `json:"slice,omitempty"`
}

func (f Fields) any() bool { return f.Affinity || f.Policy || f.Nice || f.Slice }

// String lists the fields, e.g. "affinity+nice".
func (f Fields) String() string {
	var s []string
	if f.Affinity {
		s = append(s, "affinity")
	}
	if f.Policy {
		s = append(s, "policy")
	}
	if f.Nice {
		s = append(s, "nice")
	}
	if f.Slice {
		s = append(s, "slice")
	}
	if len(s) == 0 {
		return "nothing"
	}
	return strings.Join(s, "+")
}

// policyName names a policy as the kernel's headers do.
func policyName(p int) string { return machine.PolicyName(p) }

// readSettings reads tid's current settings with sched_getaffinity and
// sched_getattr. A slice equal to baseSliceNs, the kernel's default (0:
// unknown), is recorded as the default.
func readSettings(tid int, baseSliceNs uint64) (Settings, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		return Settings{}, sysErr("read CPU affinity", err)
	}
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		return Settings{}, sysErr("read scheduling policy", err)
	}
	s := Settings{
		CPUs:        cpuList(&set),
		Policy:      int(attr.Policy),
		RTPriority:  int(attr.Priority),
		Nice:        int(attr.Nice),
		ResetOnFork: attr.Flags&unix.SCHED_FLAG_RESET_ON_FORK != 0,
	}
	if fairPolicy(s.Policy) && attr.Runtime != baseSliceNs {
		s.SliceNs = attr.Runtime
	}
	return s, nil
}

// setAffinity sets tid's CPU affinity.
func setAffinity(tid int, cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(tid, &set); err != nil {
		if errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("set CPU affinity to %s: %w (the CPUs are outside the thread's cpuset cgroup or offline)", cpuString(cpus), err)
		}
		return sysErr("set CPU affinity to "+cpuString(cpus), err)
	}
	return nil
}

// setAttr sets tid's policy, RT priority, reset-on-fork and, for the fair
// policies, nice and slice, with one sched_setattr: it sets them all, so
// callers pass the values to keep as well as those to change. Slice 0 is
// the kernel's default; kernels before 6.12 ignore the slice.
func setAttr(tid int, s Settings) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: uint32(s.Policy), Priority: uint32(s.RTPriority), Nice: int32(s.Nice), Runtime: s.SliceNs}
	if s.ResetOnFork {
		attr.Flags = unix.SCHED_FLAG_RESET_ON_FORK
	}
	if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
		what := "set policy " + policyName(s.Policy)
		if s.RTPriority > 0 {
			what += " priority " + strconv.Itoa(s.RTPriority)
		}
		if s.SliceNs > 0 {
			what += " slice " + strconv.FormatUint(s.SliceNs/1000, 10) + " µs"
		}
		if errors.Is(err, unix.EPERM) && (s.Policy == unix.SCHED_RR || s.Policy == unix.SCHED_FIFO) {
			return fmt.Errorf("%s: %w (needs CAP_SYS_NICE, and with CONFIG_RT_GROUP_SCHED a cpu.rt_runtime_us above 0 in the thread's cgroup)", what, err)
		}
		return sysErr(what, err)
	}
	return nil
}

// setNice sets one thread's nice: setpriority(PRIO_PROCESS) on a tid acts on
// that thread alone.
func setNice(tid, nice int) error {
	if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil {
		return sysErr("set nice "+strconv.Itoa(nice), err)
	}
	return nil
}

// sysErr wraps a failed system call on a thread with what was being done
// and, where it helps, what to do. Callers name the thread.
func sysErr(what string, err error) error {
	switch {
	case errors.Is(err, unix.ESRCH):
		return fmt.Errorf("%s: %w", what, scheduler.ErrThreadGone)
	case errors.Is(err, unix.EPERM):
		return fmt.Errorf("%s: %w (needs root or CAP_SYS_NICE)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func cpuList(set *unix.CPUSet) []int {
	var out []int
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

// cpuString formats CPUs as a kernel CPU list, e.g. "0-3,6".
func cpuString(cpus []int) string { return machine.FormatCPUList(cpus) }

// intersect returns the CPUs in both a and b, sorted.
func intersect(a, b []int) []int {
	var out []int
	for _, c := range a {
		if slices.Contains(b, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// rtRuntimePath is the kernel's global RT throttling budget.
const rtRuntimePath = "/proc/sys/kernel/sched_rt_runtime_us"

// checkRTBounded refuses SCHED_RR when RT throttling is off: with
// sched_rt_runtime_us = -1 a spinning RR thread could starve the CPU's
// fair-class work (kernel threads included) without bound.
// path is rtRuntimePath except in tests.
func checkRTBounded(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("rt_priority needs the kernel's RT throttling: read %s: %w", path, err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("read %s: %q: %w", path, b, err)
	}
	if v < 0 {
		return fmt.Errorf("rt_priority refused: %s is -1, so SCHED_RR threads would run unbounded; set it to a budget (the default is 950000 of sched_rt_period_us 1000000) or drop rt_priority from the profile", path)
	}
	return nil
}
