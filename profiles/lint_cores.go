package profiles

import (
	"fmt"
	"math"
)

// ExclusiveCoresFor is the sizing rule for exclusive groups: the group's
// share of the pod's request, rounded up to whole cores,
// ceil(fraction × requestMillicores / 1000). The product is rounded to a
// thousandth of a millicore first so that binary floating point does not
// push an exact multiple of 1000 over the edge (0.8 × 2500 is 2000, two
// cores, though float64 says 2000.0000000000002). 0.85 × 2250 = 1912.5 →
// 2 cores; 0.9 × 2250 = 2025 → 3.
func ExclusiveCoresFor(fraction float64, requestMillicores int) int {
	if fraction <= 0 || requestMillicores <= 0 || math.IsNaN(fraction) || math.IsInf(fraction, 0) {
		return 0
	}
	micro := math.Round(fraction * float64(requestMillicores) * 1000) // thousandths of a millicore
	return max(1, int(math.Ceil(micro/1e6)))
}

// sizing writes out ExclusiveCoresFor's arithmetic for messages.
func sizing(fraction float64, request int) string {
	return fmt.Sprintf("ceil(%v × %dm) = ceil(%.4g) = %d", fraction, request,
		math.Round(fraction*float64(request)*1000)/1e6, ExclusiveCoresFor(fraction, request))
}

// Demote returns a copy of p for a machine of the given shape in which
// every exclusive group that does not fit (CoreBudget) gets latency treatment
// instead, keeping its matchers and dropping its core sizing, and a note for
// each demotion. On a machine too small for a critical group, latency
// treatment bounds the damage; caging the group in the cores there are
// does not (docs/synthesize.md, Demotion). p is not changed.
func Demote(p *Profile, shape Shape) (*Profile, []string) {
	q := *p
	q.ThreadGroups = append([]ThreadGroup(nil), p.ThreadGroups...)
	cores := shape.CoreCount()
	if cores == 0 {
		return &q, nil
	}
	fits, _ := ExclusiveFits(p, cores)
	var notes []string
	for i := range q.ThreadGroups {
		g := &q.ThreadGroups[i]
		if g.Treatment != Exclusive || fits[i] {
			continue
		}
		notes = append(notes, fmt.Sprintf("group %q: %d exclusive cores do not fit a %d-core machine with one core shared: demoted to latency", g.Name, g.ExclusiveCores, cores))
		g.Treatment = Latency
		g.CPUFraction = 0
		g.ExclusiveCores = 0
	}
	return &q, notes
}

// cores checks exclusive sizing and fit, then SMT stacking for every group.
func (l *linter) cores() {
	gs := l.p.ThreadGroups
	cores := l.shape.CoreCount()
	fits, left := ExclusiveFits(l.p, cores)
	taken, exclusiveHot := 0, 0
	for i := range gs {
		if gs[i].Treatment != Exclusive {
			continue
		}
		l.exclusive(i, cores, fits[i], left[i])
		if fits[i] {
			taken += gs[i].ExclusiveCores
		}
		exclusiveHot += max(gs[i].ExclusiveCores, hotThreads(&gs[i]))
	}
	l.totalHot()
	l.limit()
	if cores == 0 {
		return
	}
	l.smt(cores-taken, exclusiveHot)
}

// exclusive checks one exclusive group's sizing and whether it fits.
func (l *linter) exclusive(i, cores int, fits bool, left int) {
	g := &l.p.ThreadGroups[i]
	n := g.ExclusiveCores
	if n <= 0 {
		l.errorf(i, "exclusive_cores", "an exclusive group needs exclusive_cores > 0 (= ceil(cpu_fraction × request))")
		return
	}
	switch {
	case g.CPUFraction == 0:
		l.warnf(i, "cpu_fraction", "not set: exclusive_cores = %d cannot be checked against the pod's request", n)
	case l.request <= 0:
		l.warnf(i, "exclusive_cores", "cannot check against cpu_fraction: no CPU request")
		l.hint(OptionRequest, "set traits.cpu_request_millicores or %s")
	case g.CPUFraction > 0 && g.CPUFraction <= 1:
		if want := ExclusiveCoresFor(g.CPUFraction, l.request); want != n {
			l.errorf(i, "exclusive_cores", "%d, but %s; write exclusive_cores = %d or change cpu_fraction", n, sizing(g.CPUFraction, l.request), want)
		}
	}
	if e := g.Evidence; e != nil {
		if e.HotThreads > 0 && n > e.HotThreads {
			l.errorf(i, "exclusive_cores", "%d cores for %d hot threads: the extra cores sit idle (the three-cores-for-a-two-thread-server mistake); lower cpu_fraction so that ceil(cpu_fraction × request) ≤ %d", n, e.HotThreads, e.HotThreads)
		} else if e.Threads > 0 && n > e.Threads {
			l.errorf(i, "exclusive_cores", "%d cores for a group of %d threads: the extra cores can never be used", n, e.Threads)
		}
	}
	switch {
	case cores == 0:
		l.warnf(i, "exclusive_cores", "cannot check that %d whole cores fit: the machine's core count is unknown", n)
		l.hint(OptionShape, "set machine_shape.cores, or lint with %s")
	case fits:
	case n > cores-1:
		l.tooBig(i, "needs %d whole cores but a %d-core machine can give at most %d (one core stays shared for everything else); no profile can manufacture a core", n, cores, cores-1)
	default:
		l.tooBig(i, "%d whole cores do not fit: the exclusive groups before it take %d of the machine's %d cores and one must stay shared", n, cores-1-left, cores)
	}
}

// tooBig reports an exclusive group that does not fit: an error (the
// profile cannot be applied as it is), or with LintOptions.Demote a
// warning that it will be demoted, which is what Demote does.
func (l *linter) tooBig(i int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l.opt.Demote {
		l.warnf(i, "exclusive_cores", "%s: it will be demoted to latency treatment", msg)
		l.hint(OptionDemote, "%s")
		return
	}
	l.errorf(i, "exclusive_cores", "%s: apply refuses it", msg)
	l.hint(OptionDemote, "%s gives the group latency treatment instead")
}

// totalHot checks the exclusive groups together against the workload's hot
// threads.
func (l *linter) totalHot() {
	hot := l.p.Traits.HotThreads
	if hot <= 0 {
		return
	}
	sum := exclusiveCores(l.p)
	if sum > hot {
		l.errorf(-1, "traits.hot_threads", "the exclusive groups own %d cores in total but the workload has %d hot threads: the extra cores sit idle", sum, hot)
	}
}

// limit checks the exclusive groups together against the pod's CPU limit.
// An exclusive core runs its group on one CPU (its siblings stay idle), so
// n exclusive cores can use n CPUs; a pod limited below that cannot use
// them all: CFS throttles it at its quota, and the sched_ext scheduler's
// ceiling (derived from cpu.max) holds it there too, so the cores the
// limit cannot pay for sit idle, kept from everything else.
func (l *linter) limit() {
	limit := l.p.Traits.CPULimitMillicores
	if l.opt.LimitMillicores > 0 {
		limit = l.opt.LimitMillicores
	}
	if limit <= 0 {
		return
	}
	sum := exclusiveCores(l.p)
	if sum*1000 > limit {
		l.warnf(-1, "traits.cpu_limit_millicores", "the exclusive groups own %d cores (%d CPUs of running) but the pod is limited to %.3g CPUs (%dm): the limit, enforced by CFS and by the sched_ext scheduler's ceiling alike, leaves at least %.3g of those CPUs idle and kept from other work; lower cpu_fraction or raise the limit",
			sum, sum, float64(limit)/1000, limit, float64(sum*1000-limit)/1000)
	}
}

func hotThreads(g *ThreadGroup) int {
	if g.Evidence == nil {
		return 0
	}
	return g.Evidence.HotThreads
}

// smt looks for hot threads that will share a physical core. It visits
// every group — exclusive, non-exclusive and the remainder, last group
// included — and then the threads no group's evidence accounts for, because
// the product once shipped a placement linter that skipped exactly the
// layers where unprofiled work lives. shared is the number of cores left
// after the exclusive groups; exclusiveHot the hot threads the exclusive
// groups account for.
func (l *linter) smt(shared, exclusiveHot int) {
	tpc := l.shape.SMTWidth()
	sharedHot := 0
	for i := range l.p.ThreadGroups {
		g := &l.p.ThreadGroups[i]
		hot := hotThreads(g)
		if hot == 0 {
			continue
		}
		if g.Treatment == Exclusive {
			if n := g.ExclusiveCores; n > 0 && hot > n {
				if tpc > 1 {
					l.warnf(i, "exclusive_cores", "%d hot threads on %d exclusive cores: %d will run on the cores' SMT siblings, two hot threads per core", hot, n, hot-n)
				} else {
					l.warnf(i, "exclusive_cores", "%d hot threads time-share %d exclusive cores", hot, n)
				}
			}
			continue
		}
		sharedHot += hot
		l.crowded(i, hot, shared, tpc)
	}
	// Hot threads outside every group's evidence (unprofiled threads, a
	// remainder without evidence) land on the shared cores too.
	if rest := l.p.Traits.HotThreads - exclusiveHot; rest > sharedHot {
		l.crowded(-1, rest, shared, tpc)
	}
}

// crowded warns when hot threads outnumber the shared cores.
func (l *linter) crowded(i, hot, shared, tpc int) {
	field := "evidence.hot_threads"
	who := "its"
	if i < 0 {
		field, who = "traits.hot_threads", "the workload's non-exclusive"
	}
	switch {
	case shared <= 0:
		return // the fit check has already reported it
	case hot > shared*max(tpc, 1):
		l.warnf(i, field, "%s %d hot threads outnumber the %d CPUs of the %d cores left shared: they will queue", who, hot, shared*max(tpc, 1), shared)
	case tpc > 1 && hot > shared:
		l.warnf(i, field, "%s %d hot threads share the %d cores left after exclusive groups: with SMT%d some will run on sibling hyperthreads of one core", who, hot, shared, tpc)
	}
}

// CPUFractionFor is ExclusiveCoresFor run backwards, the one inverse of the
// core rule: the cpu_fraction, in ten-thousandths (basis points), that makes
// ceil(fraction × request) exactly cores, taking the largest multiple of
// 0.05 at most maxBP that does, else of 0.01, 0.001, 0.0001 (a large request
// leaves a narrow window: (cores−1)/request < f ≤ cores/request). The
// largest gives the group as much of the request as its cores allow. It
// also returns the step the fraction is a multiple of; ok is false when no
// fraction up to maxBP gives exactly cores.
func CPUFractionFor(cores, requestMillicores, maxBP int) (bp, step int, ok bool) {
	if cores <= 0 || requestMillicores <= 0 {
		return 0, 0, false
	}
	maxBP = min(maxBP, 10000)
	for _, step := range []int{500, 100, 10, 1} {
		for k := maxBP / step; k >= 1; k-- {
			bp := k * step
			c := ExclusiveCoresFor(float64(bp)/10000, requestMillicores)
			if c < cores {
				break
			}
			if c == cores {
				return bp, step, true
			}
		}
	}
	return 0, 0, false
}

// exclusiveCores is the whole cores the profile's exclusive groups own
// together.
func exclusiveCores(p *Profile) int {
	sum := 0
	for _, g := range p.ThreadGroups {
		if g.Treatment == Exclusive && g.ExclusiveCores > 0 {
			sum += g.ExclusiveCores
		}
	}
	return sum
}
