package analyze

import (
	"cmp"
	"fmt"
	"slices"

	"temper.codes/temper-train/machine"
	"temper.codes/temper-train/observe/snapshot"
)

// Lint holds placement findings: SMT stacking of hot threads and CFS
// bandwidth throttling.
type Lint struct {
	SMT SMTLint `json:"smt"`
	CFS CFSLint `json:"cfs_bandwidth"`
}

// SMTLint is the SMT-stacking check. For every pair of hot target threads
// (CPU share ≥ hotShare) it measures how long they ran at the same time on
// two hardware threads of one physical core (Together), and how much of that
// while some other core was entirely idle (WithIdleCore): time the pair
// could have had a core each. Share is WithIdleCore over the less busy
// thread's running time.
//
// Idleness comes from the trace: a CPU is idle from a switch to the idle
// task until its next recorded switch. In an unfiltered trace that is
// exact. observe's tracer records every switch on a CPU whose sibling runs
// a target thread, but not switches among other tasks elsewhere, so a CPU
// last seen going idle may have run something unrecorded since: in such
// traces WithIdleCore is an upper bound.
type SMTLint struct {
	Status     string    `json:"status"` // what was checked, or why nothing could be
	Checked    bool      `json:"checked"`
	Cores      int       `json:"cores,omitempty"`
	PerCore    int       `json:"threads_per_core,omitempty"`
	HotThreads []int32   `json:"hot_threads"`
	Pairs      []SMTPair `json:"pairs"` // pairs that shared a core, most first
	Findings   []string  `json:"findings"`
}

// SMTPair is one pair of hot threads that ran on sibling hyperthreads.
type SMTPair struct {
	A, B         int32     `json:"-"`
	Threads      [2]string `json:"threads"`
	TogetherNs   int64     `json:"together_ns"`
	WithIdleCore int64     `json:"with_idle_core_ns"`
	Share        float64   `json:"share"`
}

// CFSLint is the CFS bandwidth check from the snapshot's cgroup counters.
type CFSLint struct {
	Status         string   `json:"status"`
	Cgroup         string   `json:"cgroup,omitempty"`
	QuotaCPUs      float64  `json:"quota_cpus,omitempty"` // 0: unlimited or unknown
	PeriodUs       int64    `json:"period_us,omitempty"`
	WindowNs       int64    `json:"window_ns,omitempty"` // snapshot begin → end
	Periods        *int64   `json:"periods,omitempty"`
	Throttled      *int64   `json:"throttled_periods,omitempty"`
	ThrottledNs    *int64   `json:"throttled_ns,omitempty"`
	UsageNs        *int64   `json:"usage_ns,omitempty"`
	UsedCPUs       float64  `json:"used_cpus,omitempty"`       // usage / window
	QuotaUsed      float64  `json:"quota_used,omitempty"`      // used CPUs / quota CPUs
	ThrottledShare float64  `json:"throttled_share,omitempty"` // throttled / periods
	Findings       []string `json:"findings"`
}

// hotShare is the CPU share from which a thread counts as hot.
const hotShare = 0.10

// smtTracker follows which thread each CPU runs and accumulates, per pair of
// threads, their time together on sibling hardware threads. Memory grows
// with the pairs that actually shared a core, not with events.
type smtTracker struct {
	coreOf    []int   // CPU → core index, -1 unknown
	cores     [][]int // core → CPUs
	cur       []int   // CPU → UTID running; 0 idle; -1 unknown
	idle      []int   // core → CPUs known idle
	idleCores int     // cores with every CPU idle
	stacked   []int   // cores with two or more CPUs running threads
	last      int64
	pairs     map[[2]int]*smtAcc
}

// smtAcc is one pair's time together on a core, and of it with an idle core.
type smtAcc struct{ together, withIdle int64 }

// newSMTTracker returns a tracker for a topology with SMT, or nil when the
// topology has none.
func newSMTTracker(t *machine.Topology) *smtTracker {
	if t == nil {
		return nil
	}
	smt := false
	for _, c := range t.Cores {
		if len(c.CPUs) > 1 {
			smt = true
		}
	}
	if !smt {
		return nil
	}
	maxCPU := 0
	for _, c := range t.Cores {
		for _, cpu := range c.CPUs {
			maxCPU = max(maxCPU, cpu)
		}
	}
	s := &smtTracker{coreOf: make([]int, maxCPU+1), cur: make([]int, maxCPU+1), pairs: map[[2]int]*smtAcc{}}
	for i := range s.coreOf {
		s.coreOf[i], s.cur[i] = -1, -1
	}
	for ci, c := range t.Cores {
		s.cores = append(s.cores, slices.Clone(c.CPUs))
		for _, cpu := range c.CPUs {
			s.coreOf[cpu] = ci
		}
	}
	s.idle = make([]int, len(s.cores))
	return s
}

// advance accounts the time since the last event to the pairs stacked now.
func (s *smtTracker) advance(ts int64) {
	if s.last == 0 || ts <= s.last {
		if s.last == 0 {
			s.last = ts
		}
		return
	}
	dt := ts - s.last
	s.last = ts
	for _, core := range s.stacked {
		cpus := s.cores[core]
		for i, a := range cpus {
			for _, b := range cpus[i+1:] {
				ua, ub := s.cur[a], s.cur[b]
				if ua <= 0 || ub <= 0 || ua == ub {
					continue
				}
				key := [2]int{min(ua, ub), max(ua, ub)}
				acc := s.pairs[key]
				if acc == nil {
					acc = &smtAcc{}
					s.pairs[key] = acc
				}
				acc.together += dt
				if s.idleCores > 0 {
					acc.withIdle += dt
				}
			}
		}
	}
}

// set records that cpu now runs utid (0: idle).
func (s *smtTracker) set(cpu int32, utid int) {
	if int(cpu) >= len(s.coreOf) || s.coreOf[cpu] < 0 {
		return
	}
	core := s.coreOf[cpu]
	wasFull := s.idle[core] == len(s.cores[core])
	if s.cur[cpu] == 0 {
		s.idle[core]--
	}
	s.cur[cpu] = utid
	if utid == 0 {
		s.idle[core]++
	}
	isFull := s.idle[core] == len(s.cores[core])
	switch {
	case wasFull && !isFull:
		s.idleCores--
	case !wasFull && isFull:
		s.idleCores++
	}
	running := 0
	for _, c := range s.cores[core] {
		if s.cur[c] > 0 {
			running++
		}
	}
	i := slices.Index(s.stacked, core)
	switch {
	case running >= 2 && i < 0:
		s.stacked = append(s.stacked, core)
	case running < 2 && i >= 0:
		s.stacked = slices.Delete(s.stacked, i, i+1)
	}
}

// Statuses of the lint checks that need Options.Snapshot and were given
// none (or one without the machine's topology).
const (
	StatusNoTopology = "no SMT information: no snapshot with the machine's topology"
	StatusNoSnapshot = "no snapshot: CFS bandwidth unknown"
)

// smtLint reports the SMT check for the target's hot threads.
func smtLint(snap *snapshot.Snapshot, s *smtTracker, threads []Thread, nodeName func(utid int) string) SMTLint {
	l := SMTLint{HotThreads: []int32{}, Pairs: []SMTPair{}, Findings: []string{}}
	switch {
	case snap == nil || snap.Topology == nil:
		l.Status = StatusNoTopology
		return l
	case s == nil:
		l.Status = fmt.Sprintf("no SMT on this machine: %d cores, one hardware thread each", len(snap.Topology.Cores))
		return l
	}
	l.Checked = true
	l.Cores = len(s.cores)
	for _, c := range s.cores {
		l.PerCore = max(l.PerCore, len(c))
	}
	hot := map[int]*Thread{}
	for i := range threads {
		if threads[i].Features.CPUShare >= hotShare {
			hot[threads[i].utid] = &threads[i]
			l.HotThreads = append(l.HotThreads, threads[i].Tid)
		}
	}
	for key, acc := range s.pairs {
		a, b := hot[key[0]], hot[key[1]]
		if a == nil || b == nil {
			continue
		}
		less := min(a.Features.RunNs, b.Features.RunNs)
		p := SMTPair{A: a.Tid, B: b.Tid, Threads: [2]string{nodeName(key[0]), nodeName(key[1])},
			TogetherNs: acc.together, WithIdleCore: acc.withIdle}
		if less > 0 {
			p.Share = round3(float64(acc.withIdle) / float64(less))
		}
		l.Pairs = append(l.Pairs, p)
	}
	slices.SortFunc(l.Pairs, func(x, y SMTPair) int {
		if c := cmp.Compare(y.WithIdleCore, x.WithIdleCore); c != 0 {
			return c
		}
		if c := cmp.Compare(x.A, y.A); c != 0 {
			return c
		}
		return cmp.Compare(x.B, y.B)
	})
	l.Status = fmt.Sprintf("checked %d hot threads (≥ %.0f%% CPU) on %d cores × %d hardware threads",
		len(l.HotThreads), 100*hotShare, l.Cores, l.PerCore)
	for _, p := range l.Pairs {
		if p.Share >= 0.05 {
			l.Findings = append(l.Findings, fmt.Sprintf("%s and %s shared one core for %s while another core was idle: %.0f%% of the less busy one's run time",
				p.Threads[0], p.Threads[1], fmtDur(p.WithIdleCore), 100*p.Share))
		}
	}
	if len(l.HotThreads) < 2 {
		l.Status += "; fewer than two hot threads, so no pair to stack"
	}
	return l
}

// cfsLint reports CFS bandwidth control from the snapshot's cgroup.
func cfsLint(snap *snapshot.Snapshot) CFSLint {
	l := CFSLint{Findings: []string{}}
	if snap == nil {
		l.Status = StatusNoSnapshot
		return l
	}
	cg := snap.CPUCgroup()
	if cg == nil {
		l.Status = "the snapshot recorded no cgroup"
		return l
	}
	l.Cgroup = cg.Path
	reading := cg.End
	if reading == nil {
		reading = cg.Begin
	}
	if reading != nil && reading.Bandwidth != nil {
		l.QuotaCPUs = round3(reading.Bandwidth.CPUs())
		l.PeriodUs = reading.Bandwidth.PeriodUsec
	}
	if cg.Begin == nil || cg.End == nil {
		l.Status = fmt.Sprintf("cgroup %s: no begin and end readings, so no deltas", cg.Path)
		return l
	}
	d, err := cg.Delta()
	if err != nil {
		l.Status = fmt.Sprintf("cgroup counters unusable: %v", err)
		return l
	}
	l.Periods, l.Throttled, l.ThrottledNs, l.UsageNs = d.Periods, d.Throttled, d.ThrottledNs, d.UsageNs
	if snap.Taken.End != nil {
		l.WindowNs = snap.Taken.End.MonotonicNs - snap.Taken.Begin.MonotonicNs
	}
	if l.UsageNs != nil && l.WindowNs > 0 {
		l.UsedCPUs = round3(float64(*l.UsageNs) / float64(l.WindowNs))
	}
	if l.QuotaCPUs > 0 && l.UsedCPUs > 0 {
		l.QuotaUsed = round3(l.UsedCPUs / l.QuotaCPUs)
	}
	if l.Periods != nil && l.Throttled != nil && *l.Periods > 0 {
		l.ThrottledShare = round3(float64(*l.Throttled) / float64(*l.Periods))
	}
	switch {
	case l.QuotaCPUs == 0:
		l.Status = fmt.Sprintf("cgroup %s: no CPU quota (unlimited); used %.2f CPUs", cg.Path, l.UsedCPUs)
	default:
		l.Status = fmt.Sprintf("cgroup %s: quota %.2f CPUs per %d µs; used %.2f CPUs (%.0f%% of quota)",
			cg.Path, l.QuotaCPUs, l.PeriodUs, l.UsedCPUs, 100*l.QuotaUsed)
	}
	if l.Throttled != nil && *l.Throttled > 0 {
		var tns int64
		if l.ThrottledNs != nil {
			tns = *l.ThrottledNs
		}
		l.Findings = append(l.Findings, fmt.Sprintf("throttled in %d of %d periods (%.0f%%), %s in total over %s",
			*l.Throttled, derefOr(l.Periods, 0), 100*l.ThrottledShare, fmtDur(tns), fmtDur(l.WindowNs)))
	}
	if l.QuotaUsed >= 0.9 {
		l.Findings = append(l.Findings, fmt.Sprintf("consumption at %.0f%% of the quota: bursts will be throttled", 100*l.QuotaUsed))
	}
	return l
}

func derefOr(p *int64, def int64) int64 {
	if p == nil {
		return def
	}
	return *p
}
