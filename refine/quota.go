package refine

import (
	"fmt"
	"time"

	"temper.codes/temper-train/internal/cgroup"
	"temper.codes/temper-train/refine/ledger"
	"temper.codes/temper-train/refine/report"
	"temper.codes/temper-train/refine/stats"
	"temper.codes/temper-train/scheduler/cfs"
)

// usageNote keys the one note that the pod's CPU usage could not be read.
const usageNote = " cpu usage"

// usageBefore reads the target pod's CPU accounting before a trial's
// benchmark; ok is false when there is none (no Env.Usage, or it failed).
func (e *engine) usageBefore() (s cgroup.CPUStat, ok bool) {
	if e.env.Usage == nil {
		return s, false
	}
	s, err := e.env.Usage()
	if err != nil {
		e.usageFailed(err)
		return s, false
	}
	return s, true
}

// usageOver is what the pod consumed over a benchmark of length wall since
// the reading before (ok: there is one); nil when it could not be read.
func (e *engine) usageOver(before cgroup.CPUStat, ok bool, wall time.Duration) *ledger.CPUUsage {
	if !ok || wall <= 0 {
		return nil
	}
	after, err := e.env.Usage()
	if err != nil {
		e.usageFailed(err)
		return nil
	}
	d := after.Sub(before)
	return &ledger.CPUUsage{Wall: wall.Seconds(), Usage: d.Usage.Seconds(), Quota: d.Limit,
		Periods: d.Periods, Throttled: d.Throttled, ThrottledS: d.ThrottledTime.Seconds()}
}

// ceilingOf records in u the ceiling the arm in force held the pod to,
// when its session runs the pod outside CFS (Ceilinged). Without a usage
// record there is no row to show it in; a ceiling that cannot be read is
// left unrecorded (nil: the table says so) and noted once.
func (e *engine) ceilingOf(u *ledger.CPUUsage) {
	c, ok := e.sess.(Ceilinged)
	if u == nil || !ok {
		return
	}
	v, err := c.Ceiling()
	if err != nil {
		if !e.noted[ceilingNote] {
			e.noted[ceilingNote] = true
			e.note("the scheduler's CPU ceiling could not be read (%v): the quota parity table says so for the trials without it", err)
		}
		return
	}
	u.Ceiling = &v
}

// ceilingNote keys the one note that a ceiling could not be read.
const ceilingNote = " cpu ceiling"

// usageFailed notes, once a run, that the pod's usage is not recorded: a
// trial without it still counts, the quota parity table only lacks it.
func (e *engine) usageFailed(err error) {
	if e.noted[usageNote] {
		return
	}
	e.noted[usageNote] = true
	e.note("the pod's CPU usage could not be read (%v): the quota parity table lacks the trials without it", err)
}

// enforcement says what holds an arm's pod to its quota on backend: CFS
// bandwidth control, except for a profile arm of a backend that runs it
// outside CFS (sched_ext), whose tasks never charge the kernel's quota:
// the scheduler's ceiling does, as its trials recorded it (ceilings, in
// CPUs, 0 for none; their median), or nothing does. An arm whose trials
// recorded none is from a ledger that did not record it.
func enforcement(backend, hash string, ceilings []float64) string {
	switch {
	case hash == StockHash || hash == StockHash+TierSuffix || backend == cfs.Name || backend == "":
		return report.EnforcedCFS
	case len(ceilings) == 0:
		return fmt.Sprintf(report.EnforcedUnrecorded, backend)
	}
	if c := medianOf(ceilings); c > 0 {
		return fmt.Sprintf(report.EnforcedCeiling, c, backend)
	}
	return fmt.Sprintf(report.EnforcedNone, backend)
}

// quotaRows are the quota parity table's rows: per level and arm (hashes,
// in the ladder's order, named by names), the medians of the pod's CPU
// usage over the trials the ladder shows for that cell (trials, by arm and
// level). Arms without a usage record at a level get no row.
func quotaRows(backend string, ladder []int, hashes, names []string, columns []string, trials func(hash string, bg int) []ledger.TrialEnd) []report.QuotaRow {
	var rows []report.QuotaRow
	for _, bg := range ladder {
		for i, h := range hashes {
			var cores, quota, periods, throttled, throttledS, ceilings []float64
			vals := map[string][]float64{}
			for _, t := range trials(h, bg) {
				if t.CPU == nil {
					continue
				}
				u := *t.CPU
				cores, quota = append(cores, u.Cores()), append(quota, u.Quota)
				periods, throttled = append(periods, float64(u.Periods)), append(throttled, float64(u.Throttled))
				throttledS = append(throttledS, u.ThrottledS)
				if u.Ceiling != nil {
					ceilings = append(ceilings, *u.Ceiling)
				}
				for _, c := range columns {
					if v, ok := t.Metrics[c]; ok {
						vals[c] = append(vals[c], v)
					}
				}
			}
			if len(cores) == 0 {
				continue
			}
			row := report.QuotaRow{Bg: bg, Arm: names[i], N: len(cores), Cores: medianOf(cores), Quota: medianOf(quota),
				Periods: medianOf(periods), Throttled: medianOf(throttled), ThrottledS: medianOf(throttledS), Values: map[string]float64{}}
			if row.Quota > 0 {
				row.Enforced = enforcement(backend, h, ceilings)
			}
			for c, v := range vals {
				row.Values[c] = medianOf(v)
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// medianOf is the sample median, as the ladder's cells have it.
func medianOf(x []float64) float64 { return stats.Median(x, 0.95).Center }
