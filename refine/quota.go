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
// outside CFS (sched_ext), whose tasks never charge the kernel's quota
// and are held by the scheduler's ceiling instead.
func enforcement(backend, hash string) string {
	if hash == StockHash || hash == StockHash+TierSuffix || backend == cfs.Name || backend == "" {
		return report.EnforcedCFS
	}
	return fmt.Sprintf(report.EnforcedCeiling, backend)
}

// quotaRows are the quota parity table's rows: per level and arm (hashes,
// in the ladder's order, named by names), the medians of the pod's CPU
// usage over the trials the ladder shows for that cell (trials, by arm and
// level). Arms without a usage record at a level get no row.
func quotaRows(backend string, ladder []int, hashes, names []string, columns []string, trials func(hash string, bg int) []ledger.TrialEnd) []report.QuotaRow {
	var rows []report.QuotaRow
	for _, bg := range ladder {
		for i, h := range hashes {
			var cores, quota, periods, throttled, throttledS []float64
			vals := map[string][]float64{}
			for _, t := range trials(h, bg) {
				if t.CPU == nil {
					continue
				}
				u := *t.CPU
				cores, quota = append(cores, u.Cores()), append(quota, u.Quota)
				periods, throttled = append(periods, float64(u.Periods)), append(throttled, float64(u.Throttled))
				throttledS = append(throttledS, u.ThrottledS)
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
				row.Enforced = enforcement(backend, h)
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
