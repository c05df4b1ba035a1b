package synthesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"temper.codes/temper-train/analyze"
	"temper.codes/temper-train/observe/snapshot"
)

// maxMillicores bounds a request: 10000 CPUs is more than any node has.
const maxMillicores = 10_000_000

// requestChoice is the pod's CPU request and limit a profile is sized for,
// with where each came from.
type requestChoice struct {
	milli       int
	source      string
	limit       int // 0: none known
	limitSource string
	// inferred: the request is the observed use rounded up, not one the
	// pod was promised; it sizes nothing exclusive.
	inferred bool
}

// chooseRequest picks the request exclusive cores are sized against:
// --request; else the sum of the pod's container requests the snapshot
// recorded; else the cgroup's CFS quota (for a Guaranteed pod the limit is
// the request); else the observed CPU use of the analysed threads rounded up
// to whole CPUs (never below one), which says how much the workload used,
// not what it was promised: the arithmetic says so, and such a request
// buys no exclusive cores. The limit comes from
// the containers' limits (when every container has one) or the cgroup quota.
func chooseRequest(a *analyze.Analysis, opt Options, observed float64) (requestChoice, error) {
	var r requestChoice
	quota, quotaSource := cgroupQuota(a, opt.Snapshot)
	pod := (*snapshot.Pod)(nil)
	if opt.Snapshot != nil {
		pod = opt.Snapshot.Pod
	}

	switch req, parts := podCPU(pod, false); {
	case opt.RequestMillicores < 0:
		return r, tagged(ErrRequest, "request %dm is negative", opt.RequestMillicores)
	case opt.RequestMillicores > 0:
		r.milli, r.source = opt.RequestMillicores, "--request"
	case req > 0:
		r.milli, r.source = req, fmt.Sprintf("the pod's container requests in the snapshot (%s)", parts)
	case quota > 0:
		r.milli, r.source = quota, quotaSource+"; the limit stands in for the request"
	default:
		cpus := max(1, int(math.Ceil(observed-1e-9)))
		r.milli, r.inferred = cpus*1000, true
		r.source = fmt.Sprintf("the observed CPU use: %s CPUs rounded up to %d whole CPU%s (no --request, and no pod request or CFS quota in the snapshot); inferred, so it buys no exclusive cores",
			trimFloat(observed, 3), cpus, plural(cpus))
	}

	if lim, parts := podCPU(pod, true); lim > 0 {
		r.limit, r.limitSource = lim, fmt.Sprintf("the pod's container limits in the snapshot (%s)", parts)
	} else if quota > 0 {
		r.limit, r.limitSource = quota, quotaSource
	}
	if r.limit > 0 && r.milli > r.limit {
		return r, tagged(ErrRequest, "request %dm (from %s) is above the CPU limit %dm (from %s); Kubernetes does not allow that: give a request at or below the limit",
			r.milli, r.source, r.limit, r.limitSource)
	}
	return r, nil
}

// podCPU sums the pod's container requests (limits: every container must
// have one, or the pod has no aggregate limit) and lists the parts.
func podCPU(pod *snapshot.Pod, limits bool) (int, string) {
	if pod == nil {
		return 0, ""
	}
	var sum int64
	var parts []string
	for _, c := range pod.Containers {
		v := c.CPURequestMilli
		if limits {
			v = c.CPULimitMilli
			if v <= 0 {
				return 0, ""
			}
		}
		if v > 0 {
			sum += v
			parts = append(parts, fmt.Sprintf("%s %dm", c.Name, v))
		}
	}
	if sum <= 0 || sum > maxMillicores {
		return 0, ""
	}
	return int(sum), strings.Join(parts, " + ")
}

// cgroupQuota is the CFS quota of the target's cgroup in millicores (0 when
// unlimited or unknown): the snapshot's cpu.max (or cfs_quota_us /
// cfs_period_us), else what the analysis' CFS lint recorded from it.
func cgroupQuota(a *analyze.Analysis, snap *snapshot.Snapshot) (int, string) {
	if snap != nil {
		if cg := snap.CPUCgroup(); cg != nil {
			for _, r := range []*snapshot.CgroupCPU{cg.Begin, cg.End} {
				if r == nil || r.Bandwidth == nil || r.Bandwidth.Unlimited || r.Bandwidth.QuotaUsec <= 0 || r.Bandwidth.PeriodUsec <= 0 {
					continue
				}
				b := r.Bandwidth
				milli := int(math.Ceil(float64(b.QuotaUsec) * 1000 / float64(b.PeriodUsec)))
				if milli <= 0 || milli > maxMillicores {
					continue
				}
				return milli, fmt.Sprintf("the cgroup's CFS quota in the snapshot (%d µs per %d µs = %dm)", b.QuotaUsec, b.PeriodUsec, milli)
			}
		}
	}
	if q := a.Lint.CFS.QuotaCPUs; q > 0 && q*1000 <= maxMillicores {
		milli := int(math.Round(q * 1000))
		if milli > 0 {
			return milli, fmt.Sprintf("the cgroup's CFS quota the analysis recorded (%s CPUs = %dm)", trimFloat(q, 3), milli)
		}
	}
	return 0, ""
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// trimFloat formats x with at most prec decimals and no trailing zeros.
func trimFloat(x float64, prec int) string {
	s := strconv.FormatFloat(x, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}
