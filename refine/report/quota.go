package report

import (
	"fmt"
	"io"
	"strings"
)

// What holds an arm's pod to its quota (QuotaRow.Enforced). The kernel
// does not enforce cpu.max on sched_ext tasks; temper's embedded
// scheduler holds them to a ceiling it derives from it (docs/scheduler.md),
// unless run without (--no-ceilings).
const (
	EnforcedCFS = "kernel (CFS bandwidth)"
	// EnforcedCeiling takes the ceiling in CPUs and the backend's name.
	EnforcedCeiling = "the scheduler's ceiling, %.3g CPUs (%s), not the kernel"
	// EnforcedNone takes the backend's name: its arm ran with no ceiling
	// (ceilings off, or none the scheduler saw), so nothing held the pod
	// to its quota.
	EnforcedNone = "none: not limited (%s ignores cpu.max)"
	// EnforcedUnrecorded takes the backend's name: a ledger that did not
	// record the ceiling its arm ran under.
	EnforcedUnrecorded = "the scheduler (%s; its ceiling not recorded), not the kernel"
)

// QuotaRow is one arm at one background level of the quota parity table
// (seed 003's): what the target's pod cgroup consumed against its CPU
// limit, as medians over the trials of that cell of the ladder.
type QuotaRow struct {
	Bg  int
	Arm string // the arm's name, as in Report.Arms
	N   int    // trials with a usage record
	// Cores is the CPUs the pod consumed: its usage over the benchmark's
	// wall time.
	Cores float64
	// Quota is the pod's limit in CPUs (cpu.max: quota / period); 0: none.
	Quota float64
	// Enforced says what holds the pod to Quota: EnforcedCFS, or when the
	// arm ran outside CFS (sched_ext tasks never charge the kernel's
	// quota) EnforcedCeiling with the ceiling it ran under, EnforcedNone
	// without one, or EnforcedUnrecorded; "" without a quota.
	Enforced string
	// Periods and Throttled are CFS bandwidth control's nr_periods and
	// nr_throttled over one trial, ThrottledS its throttled time in
	// seconds.
	Periods, Throttled, ThrottledS float64
	// Values are the medians of the ladder's metrics (Report.Columns).
	Values map[string]float64
}

// limited says whether any row had a CPU limit in force.
func (r Report) limited() bool {
	for _, q := range r.Quota {
		if q.Quota > 0 {
			return true
		}
	}
	return false
}

// unenforced says whether any arm ran with its quota not enforced by
// the kernel.
func (r Report) unenforced() bool {
	for _, q := range r.Quota {
		if q.Quota > 0 && q.Enforced != EnforcedCFS {
			return true
		}
	}
	return false
}

// unlimited says whether any arm with a quota ran with nothing holding
// its pod to it (EnforcedNone).
func (r Report) unlimited() bool {
	none, _, _ := strings.Cut(EnforcedNone, "%")
	for _, q := range r.Quota {
		if q.Quota > 0 && strings.HasPrefix(q.Enforced, none) {
			return true
		}
	}
	return false
}

// quota writes the quota parity table: per level and arm, the cores the
// pod consumed against its quota and what enforced it, with the throttle
// counters and the ladder's metrics. Without a limit it shows consumption
// only: whether an arm's gain came with more CPU is the question either
// way.
func (r Report) quota(w io.Writer) {
	if len(r.Quota) == 0 {
		return
	}
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	cols := r.Columns
	if len(cols) == 0 {
		cols = []string{r.Rule.Metric}
	}
	if r.limited() {
		p("## Quota parity: CPU consumed against the pod's limit\n\n")
	} else {
		p("## CPU consumed by the pod\n\n")
	}
	p("Medians over the trials of each ladder cell (the final's, for an arm in it), n trials each: the pod cgroup's CPU usage (cpu.stat usage_usec; cpuacct.usage on cgroup v1) over the benchmark's wall time is the cores consumed;")
	if r.limited() {
		p(" throttled periods are CFS bandwidth control's nr_throttled of nr_periods in one trial, and throttled time the time the pod's tasks were held off the CPU for it.")
	} else {
		p(" the pod has no CPU limit, so nothing throttles it: consumption only, to show whether an arm's gain came with more CPU.")
	}
	p("\n\n| bg spinners | arm | cores consumed | quota (cores) | enforced by | throttled periods | throttled time |")
	sep := "|---|---|---|---|---|---|---|"
	for _, c := range cols {
		p(" %s |", cellText(c))
		sep += "---|"
	}
	p(" n |\n%s---|\n", sep)
	for _, q := range r.Quota {
		quota, enforced, periods, throttled := "none", "—", "—", "—"
		if q.Quota > 0 {
			quota, enforced = fmt.Sprintf("%.3g", q.Quota), q.Enforced
			periods = fmt.Sprintf("%.4g of %.4g", q.Throttled, q.Periods)
			throttled = fmt.Sprintf("%.3g s", q.ThrottledS)
		}
		p("| %d | %s | %.3f | %s | %s | %s | %s |", q.Bg, cellText(q.Arm), q.Cores, quota, enforced, periods, throttled)
		for _, c := range cols {
			v, ok := q.Values[c]
			if !ok {
				p(" — |")
				continue
			}
			p(" %s |", num(v))
		}
		p(" %d |\n", q.N)
	}
	p("\n")
	if !r.limited() {
		return
	}
	if r.unenforced() {
		p("**The arms are not limit-identical**: %s. An arm the kernel does not limit is bounded by what its scheduler gives it; compare its cores consumed with the quota before crediting its gain to the profile.", quotaCaveat)
		if r.unlimited() {
			p(" An arm whose enforcer is \"none\" ran without that ceiling (--no-ceilings, or no limit the scheduler saw): nothing held it to the quota.")
		}
		p("\n\n")
		return
	}
	p("Every arm ran on CFS, so the quota bound them alike. Under sched_ext it would not: %s; a sched_ext arm's consumption must be measured, as here, to compare it with a CFS arm.\n\n", quotaCaveat)
}

// quotaCaveat is why a sched_ext arm is not kernel-limited.
const quotaCaveat = "the kernel does not enforce cpu.max while a sched_ext scheduler is attached (CFS bandwidth control charges the quota only on the fair class's accounting path, which sched_ext tasks never take; their throttle counters stay still); temper's embedded scheduler holds a pod to a ceiling it derives from cpu.max, a runtime budget per period, which is its own mechanism, not the kernel's"
