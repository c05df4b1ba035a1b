package synthesize

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"temper.codes/temper-train/profiles"
)

// HotShare is the CPU share (of one CPU, over the trace window) from which a
// thread is hot: busy enough that a physical core of its own pays for
// itself. An exclusive core costs the node a whole core — two logical CPUs
// with SMT2 — so the thread must keep it busy a good part of the time; and
// below about a third of a CPU a thread seldom waits for one under the
// kernel's own scheduler (with a core busy a fraction ρ of the time, the
// expected wait grows as ρ/(1−ρ): 0.43 of a run at ρ = 0.3, 9 runs at 0.9).
// analyze's SMT lint uses a lower bar (0.1) because it looks for any
// stacking worth reporting, not for threads worth a core.
const HotShare = 0.3

// Slice bounds. slice_us is the group's p90 run length rounded up to a
// multiple of sliceStepUs, so that nine runs in ten finish within one slice
// and are not cut short, kept between minSliceUs (below that, switching —
// a few µs directly, tens of µs refilling caches — costs more than a tenth
// of the slice; a slice longer than a group's runs costs its own threads
// nothing) and maxSliceUs (scx_layered's default
// slice: no group holds a CPU longer than the default would). Batch groups
// get maxSliceUs: their runs are throughput work that gains nothing from
// being cut.
const (
	sliceStepUs = 50
	minSliceUs  = 250
	maxSliceUs  = 20_000
)

// weightOf is the layer weight by treatment (1..10000, 100 = default):
// latency work is favoured two to one when CPUs are contended, batch and
// yield work gives way (yield ten to one, but never starves: a weight is a
// share, not a priority). Exclusive groups own their cores, so their weight
// only matters if they spill, and stays the default.
func weightOf(t profiles.Treatment) int {
	switch t {
	case profiles.Latency:
		return 200
	case profiles.Batch:
		return 50
	case profiles.Yield:
		return 10
	}
	return 100
}

// sizer hands out exclusive cores (under profiles.CoreBudget, the rule
// scheduler.Allocate and lint follow) and shares of the pod's request, in
// group order.
type sizer struct {
	shape   shapeChoice
	request int                  // millicores
	cores   *profiles.CoreBudget // the shape's cores
	leftBP  int                  // share of the request not yet given, in 1/10000
}

// group is one thread group as sized.
type group struct {
	slot       int
	name       string
	members    []int
	match      profiles.Match
	treatment  profiles.Treatment
	cores      int
	fractionBP int // cpu_fraction in 1/10000
	sliceUs    int
	weight     int
	preempt    bool
	arithmetic []string
	warning    string
}

// treat decides a group's treatment and size from its final members:
//
//   - compute (sync_compute): exclusive whole cores, one per hot thread; with
//     no hot thread, batch (a reserved core would sit mostly idle);
//   - latency-critical: exclusive when it has hot threads and they fit (a
//     hot latency-critical thread suffers most from sharing a core), else
//     latency;
//   - io-chain: latency (short wakeup-driven runs along a chain);
//   - rest: yield, or normal when it is the only group (nothing stood out,
//     so nothing is made to give way).
//
// An exclusive candidate that does not fit — more hot threads than the
// shape can give cores with one left shared, a shape without a core count,
// a request too small, or more CPU in the group than its cores hold — is
// demoted to latency, with a warning: caging hot threads in too few cores is
// worse than sharing (docs/synthesize.md, Demotion).
func (s *sizer) treat(g *group, ms []member, onlyGroup bool) {
	hot, cpus := 0, 0.0
	for _, i := range g.members {
		cpus += ms[i].th.Features.CPUShare
		if ms[i].hot {
			hot++
		}
	}
	switch g.slot {
	case slotCompute:
		if hot == 0 {
			g.treatment = profiles.Batch
			g.arithmetic = append(g.arithmetic, fmt.Sprintf("no thread at ≥ %v CPU: a reserved core would sit mostly idle, so batch treatment", HotShare))
			break
		}
		s.exclusiveOrDemote(g, ms, hot, cpus)
	case slotLatency:
		if hot == 0 {
			g.treatment = profiles.Latency
			g.arithmetic = append(g.arithmetic, fmt.Sprintf("no thread at ≥ %v CPU: latency treatment, no core of its own", HotShare))
			break
		}
		s.exclusiveOrDemote(g, ms, hot, cpus)
	case slotChain:
		g.treatment = profiles.Latency
	default:
		g.treatment = profiles.Yield
		if onlyGroup {
			g.treatment = profiles.Normal
			g.arithmetic = append(g.arithmetic, "the only group: nothing stood out, so normal treatment")
		}
	}
	g.weight = weightOf(g.treatment)
	g.preempt = g.treatment == profiles.Latency
	g.sliceUs = s.slice(g, ms)
}

// exclusiveOrDemote gives g its hot threads' number of whole cores, or
// demotes it to latency treatment saying why.
func (s *sizer) exclusiveOrDemote(g *group, ms []member, hot int, cpus float64) {
	n := hot
	why := ""
	avail, taken := s.cores.Left(), s.cores.Taken()
	switch {
	case s.shape.shape.CoreCount() == 0:
		why = fmt.Sprintf("the shape (%s) has no core count, so whole cores cannot be reserved; pass --snapshot or a --shape with cores", s.shape.shape.Key())
	case n > avail:
		why = fmt.Sprintf("%d hot thread%s need %d whole core%s; the shape has %d cores, %d taken by earlier exclusive groups and 1 kept shared, so %d can be given; no profile can manufacture a core",
			n, plural(n), n, plural(n), s.shape.shape.CoreCount(), taken, avail)
	case int(math.Ceil(cpus-1e-9)) > n:
		why = fmt.Sprintf("the group uses %s CPUs, more than its %d hot thread%s' cores hold: its other threads would be caged with them",
			trimFloat(cpus, 3), n, plural(n))
	}
	var bp, step int
	if why == "" {
		var ok bool
		if bp, step, ok = profiles.CPUFractionFor(n, s.request, s.leftBP); !ok {
			why = fmt.Sprintf("request %dm cannot give %d whole core%s: ceil(f × %s) = %d needs a cpu_fraction f of more than %s, and %s of the request is left",
				s.request, n, plural(n), cpusOf(s.request), n, decimal(int64(n-1)*10_000_000/int64(s.request), 4), decimal(int64(s.leftBP), 4))
		}
	}
	if why != "" {
		g.treatment = profiles.Latency
		g.warning = fmt.Sprintf("group %s (%s): demoted to latency: %s", g.name, slotClasses[g.slot], why)
		g.arithmetic = append(g.arithmetic, "demoted to latency: "+why)
		return
	}
	g.treatment = profiles.Exclusive
	g.cores, g.fractionBP = n, bp
	a := fmt.Sprintf("%d hot thread%s (cpu_share ≥ %v: %s); request %dm; cpu_fraction %s → %s",
		n, plural(n), HotShare, hotList(g, ms), s.request, decimal(int64(bp), 4), sizing(bp, s.request))
	if up := bp + step; up <= s.leftBP {
		if c := profiles.ExclusiveCoresFor(float64(up)/10000, s.request); c > n {
			a += fmt.Sprintf(" (%s would give %s for %d hot thread%s)", decimal(int64(up), 4), sizing(up, s.request), n, plural(n))
		}
	}
	a += fmt.Sprintf("; shape %d cores: %d taken before, %d here, %d left shared", s.shape.shape.CoreCount(), taken, n, s.shape.shape.CoreCount()-taken-n)
	g.arithmetic = append(g.arithmetic, a)
	s.cores.Take(n)
	s.leftBP -= bp
}

// hotList names a group's hot threads with their CPU shares, busiest
// first, at most four.
func hotList(g *group, ms []member) string {
	var hot []*member
	for _, i := range g.members {
		if ms[i].hot {
			hot = append(hot, &ms[i])
		}
	}
	slices.SortStableFunc(hot, func(a, b *member) int { return cmp.Compare(b.th.Features.CPUShare, a.th.Features.CPUShare) })
	var names []string
	for i, m := range hot {
		if i == 4 {
			names = append(names, fmt.Sprintf("and %d more", len(hot)-4))
			break
		}
		names = append(names, fmt.Sprintf("%s %s", display(m.th.Comm), trimFloat(m.th.Features.CPUShare, 3)))
	}
	return strings.Join(names, ", ")
}

// sizing writes ceil(f × request) out exactly: f has at most four decimals
// and the request three (millicores), so the product has at most seven.
func sizing(bp, request int) string {
	p := int64(bp) * int64(request) // 1e-7 CPUs
	n := profiles.ExclusiveCoresFor(float64(bp)/10000, request)
	return fmt.Sprintf("ceil(%s × %s) = ceil(%s) = %d core%s", decimal(int64(bp), 4), cpusOf(request), decimal(p, 7), n, plural(n))
}

// cpusOf writes millicores as CPUs: 2250 → "2.25".
func cpusOf(milli int) string { return decimal(int64(milli), 3) }

// decimal writes v / 10^scale without trailing zeros.
func decimal(v int64, scale int) string {
	s := strconv.FormatInt(v, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for len(s) <= scale {
		s = "0" + s
	}
	whole, frac := s[:len(s)-scale], strings.TrimRight(s[len(s)-scale:], "0")
	if neg {
		whole = "-" + whole
	}
	if frac == "" {
		return whole
	}
	return whole + "." + frac
}

// slice picks slice_us: the median of the members' p90 run lengths,
// rounded up to a multiple of sliceStepUs and kept within
// [minSliceUs, maxSliceUs]; batch groups get maxSliceUs; a group without
// observed runs gets none (the backend's default).
func (s *sizer) slice(g *group, ms []member) int {
	if g.treatment == profiles.Batch {
		g.arithmetic = append(g.arithmetic, fmt.Sprintf("slice %dµs: batch work is not cut short", maxSliceUs))
		return maxSliceUs
	}
	var p90 []int64
	for _, i := range g.members {
		if r := ms[i].th.Features.Run; r.N > 0 && r.P90 > 0 {
			p90 = append(p90, r.P90)
		}
	}
	if len(p90) == 0 {
		g.arithmetic = append(g.arithmetic, "slice: no runs observed, the backend's default")
		return 0
	}
	med := medianInt(p90)
	us := int(math.Ceil(med / 1000))
	rounded := (us + sliceStepUs - 1) / sliceStepUs * sliceStepUs
	out := min(max(rounded, minSliceUs), maxSliceUs)
	g.arithmetic = append(g.arithmetic, fmt.Sprintf("slice %dµs: median p90 run %s of %d thread%s, rounded up to %dµs steps within [%d, %d]µs",
		out, fmtUs(med), len(p90), plural(len(p90)), sliceStepUs, minSliceUs, maxSliceUs))
	return out
}

// medianInt is the median of v (the mean of the middle two for an even
// count).
func medianInt(v []int64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return (float64(s[n/2-1]) + float64(s[n/2])) / 2
}

// fmtUs writes nanoseconds as microseconds with at most one decimal.
func fmtUs(ns float64) string { return trimFloat(ns/1000, 1) + "µs" }
