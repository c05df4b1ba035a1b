package synthesize

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"temper.codes/temper-train/analyze"
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
// only matters if they spill, and stays the default. It is scx_layered's
// default for a group without a weight (LayeredSpec).
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

// profileWeight is the weight a synthesized group is written with: none
// (by treatment) for exclusive, latency and normal groups, so that the CFS
// backend leaves their nice at 0 — a latency group's lower nice takes its
// CPU from whoever shares the cgroup or autogroup with it, which on a test
// rig is the load generator — and batch and yield groups their weight,
// which only scx_layered uses.
func profileWeight(t profiles.Treatment) int {
	switch t {
	case profiles.Batch, profiles.Yield:
		return weightOf(t)
	}
	return 0
}

// A group yields (SCHED_IDLE on CFS: it runs only when a CPU has no other
// work) only when that cannot cost the workload anything:
//
//   - it used less than YieldMaxCPUs of a CPU: it has little to lose;
//   - its threads woke fewer than YieldMaxWakeHz times a second together:
//     an idle-class thread on a contended CPU gets weight 3 against a
//     nice-0 thread's 1024, so a 60 µs run takes about 60 × 1027 / 3 ≈
//     20 ms of wall time — the interval between wakeups at 50/s. A thread
//     that wakes more often falls behind its own wakeups as soon as a CPU is
//     busy (memcached's LRU maintainer ticks ~900 times a second and holds
//     the locks the workers take);
//   - none of its threads wakes a thread of a favoured (exclusive or
//     latency) group: a waker that waits for a CPU delays its wakee by as
//     much;
//   - it holds no main thread of a process whose other threads are
//     favoured: a main thread typically accepts the connections its workers
//     serve or handles their signals, work a short trace may not show
//     (memcached's dispatcher accepted no connection in its 5 s trace and
//     accepts every benchmark run's).
//
// Otherwise the group is normal. The last two rules (waitedOn) hold for
// batch too.
const (
	YieldMaxCPUs   = 0.05
	YieldMaxWakeHz = 50
)

// sizer hands out exclusive cores (under profiles.CoreBudget, the rule
// scheduler.Allocate and lint follow, and the node rules above) and shares
// of the pod's request, in group order.
type sizer struct {
	shape   shapeChoice
	request int                  // millicores
	real    bool                 // the request was given or declared, not inferred from use
	cores   *profiles.CoreBudget // the shape's cores
	leftBP  int                  // share of the request not yet given, in 1/10000
	node    nodeDemand
	// clients are the load generators found on the node: with any, nothing
	// is favoured and no cpuset changes.
	clients []loadGenerator
	// exclCPUs is the CPU use of the threads given exclusive cores so far.
	exclCPUs float64
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

// favoured reports whether a treatment puts a group ahead of others.
func favoured(t profiles.Treatment) bool {
	return t == profiles.Exclusive || t == profiles.Latency
}

// treat decides a group's treatment and size from its final members:
//
//   - compute (sync_compute): exclusive whole cores, one per hot thread; with
//     no hot thread, batch (a reserved core would sit mostly idle), or
//     normal where a favoured group waits on it (waitedOn);
//   - latency-critical: exclusive when it has hot threads and they fit (a
//     hot latency-critical thread suffers most from sharing a core), else
//     latency;
//   - io-chain: latency (short wakeup-driven runs along a chain);
//   - rest: yield where the yield rules allow it, else normal; normal when
//     it is the only group (nothing stood out, so nothing is made to give
//     way).
//
// With a load generator on the node no group is favoured: those that would
// be are normal. An exclusive candidate that does not fit — a request
// inferred from use or with fewer whole CPUs than cores, more hot threads
// than the node can give cores while keeping room for the rest of it, a
// shape without a core count, unknown node-wide demand, or more CPU in the
// group than its cores hold — is demoted to normal, with a warning: caging
// hot threads in too few cores is worse than sharing, and a lower nice takes
// its CPU from the neighbours (docs/synthesize.md, Demotion). Every group
// gets slice_us from its run lengths; groups is the groups decided so far,
// for the wake edges of the batch and yield rules: Profile decides the
// groups that may give way (givesWay) after all others.
func (s *sizer) treat(g *group, ms []member, onlyGroup bool, groups []*group, a *analyze.Analysis) {
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
			s.batchOrNormal(g, ms, groups, a)
			break
		}
		s.exclusiveOrDemote(g, ms, hot, cpus)
	case slotLatency:
		if hot == 0 {
			s.latency(g, fmt.Sprintf("no thread at ≥ %v CPU: latency treatment, no core of its own", HotShare))
			break
		}
		s.exclusiveOrDemote(g, ms, hot, cpus)
	case slotChain:
		s.latency(g, "")
	default:
		if onlyGroup {
			g.treatment = profiles.Normal
			g.arithmetic = append(g.arithmetic, "the only group: nothing stood out, so normal treatment")
			break
		}
		s.yieldOrNormal(g, ms, cpus, groups, a)
	}
	g.weight = profileWeight(g.treatment)
	g.preempt = g.treatment == profiles.Latency
	g.sliceUs = s.slice(g, ms)
	if len(s.clients) > 0 && g.treatment == profiles.Normal {
		// A slice shorter than the kernel's default wins the group its
		// wakeups against every other fair task: favour, which a load
		// generator on the node forbids (measured on Redis: a 250µs slice
		// on redis-server cost 26% of p99 at no background).
		g.sliceUs = 0
		g.arithmetic = append(g.arithmetic, "no slice_us: with a load generator on the node a slice shorter than the kernel's would favour this group's wakeups over it")
	}
}

// latency gives g latency treatment, or normal with a load generator on the
// node.
func (s *sizer) latency(g *group, why string) {
	if len(s.clients) > 0 {
		g.treatment = profiles.Normal
		g.arithmetic = append(g.arithmetic, fmt.Sprintf("normal, not latency: a load generator (process %s) shares the node and nothing is favoured over it", display(s.clients[0].process)))
		return
	}
	g.treatment = profiles.Latency
	if why != "" {
		g.arithmetic = append(g.arithmetic, why)
	}
}

// givesWay reports whether g may be given a treatment that puts others
// ahead of it (batch or yield): the catch-all, and a compute group without a
// hot thread. Whether it may depends on whether a favoured group waits on
// it, so Profile decides these groups last.
func givesWay(g *group, ms []member) bool {
	switch g.slot {
	case slotRest:
		return true
	case slotCompute:
		return !slices.ContainsFunc(g.members, func(i int) bool { return ms[i].hot })
	}
	return false
}

// batchOrNormal gives g batch treatment, or normal where a favoured group
// waits on it: batch work waits its turn (SCHED_BATCH never preempts on
// wakeup under CFS; under sched_ext a batch group has half a normal
// thread's weight), and a favoured thread that waits on it waits as long.
func (s *sizer) batchOrNormal(g *group, ms []member, groups []*group, a *analyze.Analysis) {
	if why := waitedOn(g, ms, groups, a); len(why) > 0 {
		g.treatment = profiles.Normal
		g.arithmetic = append(g.arithmetic, fmt.Sprintf("no thread at ≥ %v CPU, but normal, not batch: ", HotShare)+strings.Join(why, "; "))
		return
	}
	g.treatment = profiles.Batch
	g.arithmetic = append(g.arithmetic, fmt.Sprintf("no thread at ≥ %v CPU: a reserved core would sit mostly idle, so batch treatment; wakes no favoured thread", HotShare))
}

// yieldOrNormal applies the yield rules (YieldMaxCPUs) to g.
func (s *sizer) yieldOrNormal(g *group, ms []member, cpus float64, groups []*group, a *analyze.Analysis) {
	wake := 0.0
	for _, i := range g.members {
		wake += ms[i].th.Features.WakeRate
	}
	if len(g.members) == 0 {
		// Nothing measured says these threads may give way: a thread
		// that appears later (a new connection's, a helper's) is as
		// likely one others wait on.
		g.treatment = profiles.Normal
		g.arithmetic = append(g.arithmetic, "normal, not yield: no thread of the trace is in this group, so nothing measured says its threads may give way")
		return
	}
	var why []string
	if cpus >= YieldMaxCPUs {
		why = append(why, fmt.Sprintf("it uses %s CPUs (yield below %v)", trimFloat(cpus, 3), YieldMaxCPUs))
	}
	if wake >= YieldMaxWakeHz {
		why = append(why, fmt.Sprintf("its threads wake %s times/s (yield below %v)", trimFloat(wake, 1), YieldMaxWakeHz))
	}
	why = append(why, waitedOn(g, ms, groups, a)...)
	if len(why) > 0 {
		g.treatment = profiles.Normal
		g.arithmetic = append(g.arithmetic, "normal, not yield: "+strings.Join(why, "; "))
		return
	}
	g.treatment = profiles.Yield
	g.arithmetic = append(g.arithmetic, fmt.Sprintf("yield: %s CPUs < %v, %s wakeups/s < %v, wakes no favoured thread",
		trimFloat(cpus, 3), YieldMaxCPUs, trimFloat(wake, 1), YieldMaxWakeHz))
}

// waitedOn says why favoured (exclusive or latency) groups among groups
// wait on g, if they do: a thread of g wakes one of theirs (a waker that
// waits for a CPU delays its wakee by as much), or g holds the main thread
// of a process whose threads they are (a main thread typically accepts the
// connections its workers serve, work a short trace may not show). A group
// others wait on must not give way to them (batch, yield).
func waitedOn(g *group, ms []member, groups []*group, a *analyze.Analysis) []string {
	var why []string
	// Favoured groups by tid and by process.
	fav := map[int32]string{}
	favProc := map[int32]string{}
	for _, o := range groups {
		if o == g || !favoured(o.treatment) {
			continue
		}
		for _, i := range o.members {
			fav[ms[i].th.Tid] = o.name
			favProc[ms[i].th.Tgid] = o.name
		}
	}
	mine := map[int32]bool{}
	for _, i := range g.members {
		mine[ms[i].th.Tid] = true
	}
	tids := wakeTargets(a)
	var edges []string
	for _, e := range a.Graph.Edges {
		from, ok1 := tids[e.From]
		to, ok2 := tids[e.To]
		if ok1 && ok2 && mine[from] && fav[to] != "" && e.Count > 0 {
			edges = append(edges, fmt.Sprintf("%s → %s (group %s, %d wakeup%s)", display(e.From), display(e.To), fav[to], e.Count, plural(int(e.Count))))
		}
	}
	if len(edges) > 0 {
		if len(edges) > 3 {
			edges = append(edges[:3], fmt.Sprintf("and %d more", len(edges)-3))
		}
		why = append(why, "it wakes favoured threads: "+strings.Join(edges, ", "))
	}
	for _, i := range g.members {
		th := ms[i].th
		if th.Tid == th.Tgid && favProc[th.Tgid] != "" {
			why = append(why, fmt.Sprintf("it holds the main thread %s of process %d, whose threads in group %s are favoured", display(th.Comm), th.Tgid, favProc[th.Tgid]))
			break
		}
	}
	return why
}

// exclusiveOrDemote gives g its hot threads' number of whole cores, or
// demotes it to normal treatment saying why.
func (s *sizer) exclusiveOrDemote(g *group, ms []member, hot int, cpus float64) {
	n := hot
	why := ""
	avail, taken := s.cores.Left(), s.cores.Taken()
	shape := s.shape.shape
	C, T, L := shape.CoreCount(), max(shape.ThreadsPerCore, 1), shape.LogicalCPUs
	if L == 0 {
		L = C * T
	}
	shared := L - (taken+n)*T
	rest := max(s.node.busy-s.exclCPUs-cpus, 0)
	switch {
	case len(s.clients) > 0:
		why = fmt.Sprintf("a load generator (process %s) shares the node: no cpuset changes", display(s.clients[0].process))
	case C == 0:
		why = fmt.Sprintf("the shape (%s) has no core count, so whole cores cannot be reserved; pass --snapshot or a --shape with cores", shape.Key())
	case !s.real:
		why = fmt.Sprintf("the request %dm was inferred from the observed use, not promised: an inferred request buys no exclusive cores (give --request, or observe the pod)", s.request)
	case n > s.request/1000:
		why = fmt.Sprintf("%d hot thread%s need %d whole core%s and the request %dm holds %d whole CPU%s",
			n, plural(n), n, plural(n), s.request, s.request/1000, plural(s.request/1000))
	case n > avail:
		why = fmt.Sprintf("%d hot thread%s need %d whole core%s; the shape has %d cores, %d taken by earlier exclusive groups and 1 kept shared, so %d can be given; no profile can manufacture a core",
			n, plural(n), n, plural(n), C, taken, avail)
	case C-taken-n < MinSharedCores:
		why = fmt.Sprintf("C − n = %d − %d = %d cores would stay shared, fewer than %d", C, taken+n, C-taken-n, MinSharedCores)
	case shared < MinSharedCPUs:
		why = fmt.Sprintf("L − n·T = %d − %d·%d = %d logical CPUs would stay shared, fewer than %d", L, taken+n, T, shared, MinSharedCPUs)
	case int(math.Ceil(cpus-1e-9)) > n:
		why = fmt.Sprintf("the group uses %s CPUs, more than its %d hot thread%s' cores hold: its other threads would be caged with them",
			trimFloat(cpus, 3), n, plural(n))
	case !s.node.known:
		why = "the node-wide CPU use is " + s.node.source + ", so nothing shows the shared CPUs have room for the rest of the node"
	case rest > MaxSharedLoad*float64(shared):
		why = fmt.Sprintf("the rest of the node's demand %s − %s = %s CPUs does not fit in %v of the %d shared CPUs (%s)",
			trimFloat(s.node.busy, 3), trimFloat(s.exclCPUs+cpus, 3), trimFloat(rest, 3), MaxSharedLoad, shared, trimFloat(MaxSharedLoad*float64(shared), 3))
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
		g.treatment = profiles.Normal
		if len(s.clients) == 0 {
			g.warning = fmt.Sprintf("group %s (%s): demoted to normal: %s", g.name, slotClasses[g.slot], why)
		}
		g.arithmetic = append(g.arithmetic, "demoted to normal: "+why)
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
	a += fmt.Sprintf("; shape %d cores: %d taken before, %d here, %d left shared", C, taken, n, C-taken-n)
	a += fmt.Sprintf("; shared CPUs L − n·T = %d − %d·%d = %d ≥ %d; rest of the node's demand %s − %s = %s CPUs ≤ %v × %d = %s CPUs (node-wide use: %s)",
		L, taken+n, T, shared, MinSharedCPUs, trimFloat(s.node.busy, 3), trimFloat(s.exclCPUs+cpus, 3), trimFloat(rest, 3),
		MaxSharedLoad, shared, trimFloat(MaxSharedLoad*float64(shared), 3), s.node.source)
	g.arithmetic = append(g.arithmetic, a)
	s.cores.Take(n)
	s.leftBP -= bp
	s.exclCPUs += cpus
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
