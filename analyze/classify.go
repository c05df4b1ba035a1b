package analyze

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Class is a thread class: what a thread's behaviour says it is, and what
// synthesize gives a treatment to. Its value is the name in the JSON and
// the report.
type Class string

// The four thread classes a profile gives treatments to.
const (
	ClassSyncCompute     Class = "sync_compute"
	ClassLatencyCritical Class = "latency_critical"
	ClassIOWakeChain     Class = "io_wake_chain"
	ClassSporadic        Class = "sporadic"
)

// Classes lists the classes in the order scores are compared; on an exact
// tie the earlier wins.
func Classes() []Class {
	return []Class{ClassSyncCompute, ClassLatencyCritical, ClassIOWakeChain, ClassSporadic}
}

// Valid reports whether c is one of the four classes.
func (c Class) Valid() bool { return slices.Contains(Classes(), c) }

// Classification is behavioural only: no rule looks at a name. Each class
// has a membership score in [0, 1] built from ramps — linear between two
// thresholds, in log space for rates and durations — and the highest wins.
//
//	presence = √(ramp_log(wake rate, 3/s, 30/s) · ramp_log(CPU share, 0.02 %, 0.2 %))
//	           how much the thread is around: woken tens of times a second
//	           AND doing measurable work. A 10 Hz tick of 5 µs is not.
//	long     = ramp_log(time-weighted median run, 0.3 ms, 1 ms)
//	busy     = ramp_log(CPU share, 2 %, 20 %)
//	short    = 1 − ramp_log(run p90, 1 ms, 4 ms)
//
//	sync_compute     = long · busy
//	latency_critical = presence · short · min(1, source + hardirq · max(dispatch_source, busy))
//	io_wake_chain    = presence · short · min(1, chain + io_wake + hardirq · dispatch_chain)
//	sporadic         = max(1 − max(presence, busy),
//	                       hardirq · (1 − dispatch_source − dispatch_chain) · (1 − busy))
//	                   (1 when it never ran)
//
// source, chain, io_wake and hardirq split the thread's wakeups by what it
// was waiting for (structure.go): io_wake are wakings that ended a D wait
// (I/O completions); source are wakings out of S from outside the workload
// (network softirqs, kernel threads, other processes such as clients) or
// from a workload thread that is itself woken from outside and fans out
// (an acceptor, a dispatcher); chain are wakings from workload threads
// woken inside the workload, or converging from several entry threads onto
// one (fan-in: a log writer fed by many workers); hardirq are wakings out of
// S in hard interrupt context — the thread's own timers, or a device. A
// request-serving thread mostly waits for the outside world, one hop away
// at most; a thread in an I/O or wake chain mostly waits for the disk or for
// the workload itself. Whichever it mostly waits for wins: a database
// backend that also fsyncs its commits stays request-serving while most of
// its waits end with a client's request.
//
// A self-paced thread (woken by its own timer) is judged by what it does:
// if it hands work to request-serving threads (dispatch_source: an accept
// loop feeding a worker pool) it is latency-critical, the head of the
// request path, as the lavd heuristic makes a waker as critical as its
// wakees; if it does substantial CPU work at its own pace (busy) it is
// latency-critical too (a periodic real-time loop); otherwise it is
// housekeeping — sporadic however often it ticks.
//
// A cluster's confidence is the winning score's share of the four, shrunk
// toward 1/4 (the share when nothing tells the classes apart) by how little
// was seen: see confidence.
const (
	presRateLo, presRateHi = 3.0, 30.0
	presCPULo, presCPUHi   = 0.0002, 0.002
	longLo, longHi         = 300 * time.Microsecond, time.Millisecond
	busyLo, busyHi         = 0.02, 0.20
	shortLo, shortHi       = time.Millisecond, 4 * time.Millisecond
)

// rampLog is ramp on log10 of x; x ≤ 0 gives 0.
func rampLog(x, lo, hi float64) float64 {
	if x <= 0 {
		return 0
	}
	return ramp(math.Log10(x), math.Log10(lo), math.Log10(hi))
}

// scoreThread computes a thread's class memberships.
func scoreThread(f *Features, neverRan bool) Scores {
	if neverRan {
		return Scores{Sporadic: 1}
	}
	presence := math.Sqrt(rampLog(f.WakeRate, presRateLo, presRateHi) * rampLog(f.CPUShare, presCPULo, presCPUHi))
	long := rampLog(float64(f.RunTimeP50), float64(longLo), float64(longHi))
	busy := rampLog(f.CPUShare, busyLo, busyHi)
	short := 1 - rampLog(float64(f.Run.P90), float64(shortLo), float64(shortHi))
	selfPaced := f.HardIRQ * math.Max(0, 1-f.DispatchSource-f.DispatchChain) * (1 - busy)
	return Scores{
		SyncCompute:     round3(long * busy),
		LatencyCritical: round3(presence * short * math.Min(1, f.Source+f.HardIRQ*math.Max(f.DispatchSource, busy))),
		IOWakeChain:     round3(presence * short * math.Min(1, f.Chain+f.IOWake+f.HardIRQ*f.DispatchChain)),
		Sporadic:        round3(math.Max(1-math.Max(presence, busy), selfPaced)),
	}
}

// values lists the scores in Classes order.
func (s Scores) values() []float64 {
	return []float64{s.SyncCompute, s.LatencyCritical, s.IOWakeChain, s.Sporadic}
}

// of returns the score of one class.
func (s Scores) of(class Class) float64 {
	return s.values()[slices.Index(Classes(), class)]
}

// best returns the winning class and its share of the sum of the scores
// (0 when every score is 0).
func (s Scores) best() (Class, float64) {
	v := s.values()
	bi, sum := 0, 0.0
	for i, x := range v {
		sum += x
		if x > v[bi] {
			bi = i
		}
	}
	if sum == 0 {
		return ClassSporadic, 0
	}
	return Classes()[bi], v[bi] / sum
}

// confidencePrior is the weight, in runs, of the guess that knows nothing
// (every class equally likely). A cluster's features are medians and shares
// over its members' runs: with a few dozen runs they move a class's score
// by chance, so a cluster seen running this many times is only halfway
// from 1/4 to its score share; one seen thousands of times keeps its share
// to within a percent.
const confidencePrior = 30

// confidence is the winning class's score share (best) shrunk toward 1/4
// by the runs behind it: (runs·share + prior/4) / (runs + prior). A cluster
// whose threads never ran has confidence 1/4 however decisive its scores.
func confidence(share float64, runs int64) float64 {
	n := float64(runs)
	return round3((n*share + confidencePrior/float64(len(Classes()))) / (n + confidencePrior))
}

// classifyClusters sets each cluster's class from the mean of its members'
// scores, and records the evidence: the members' median features.
func classifyClusters(clusters []Cluster, threads []Thread) {
	byTid := map[int32][]*Thread{}
	for i := range threads {
		byTid[threads[i].Tid] = append(byTid[threads[i].Tid], &threads[i])
	}
	for ci := range clusters {
		c := &clusters[ci]
		var members []*Thread
		for i := range threads {
			if threads[i].Cluster == c.ID {
				members = append(members, &threads[i])
			}
		}
		var sum [4]float64
		for _, t := range members {
			for j, x := range t.Scores.values() {
				sum[j] += x
			}
		}
		n := float64(len(members))
		c.Scores = Scores{SyncCompute: round3(sum[0] / n), LatencyCritical: round3(sum[1] / n),
			IOWakeChain: round3(sum[2] / n), Sporadic: round3(sum[3] / n)}
		var share float64
		c.Class, share = c.Scores.best()
		c.Evidence = evidenceOf(members)
		c.Confidence = confidence(share, c.Evidence.Runs)
		c.Reason = reasonFor(c.Class, c.Evidence)
		for _, t := range members {
			t.Class = c.Class
			if t.OwnClass != c.Class {
				c.Dissent = append(c.Dissent, t.Tid)
			}
		}
	}
}

// median of v (mean of the middle two for an even count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// evidenceOf takes the median of each deciding feature over the members,
// with the sample counts behind them.
func evidenceOf(members []*Thread) Evidence {
	ev := Evidence{Threads: len(members)}
	col := func(get func(*Features) float64) float64 {
		v := make([]float64, len(members))
		for i, t := range members {
			v[i] = get(&t.Features)
		}
		return median(v)
	}
	ev.CPUShare = round4(col(func(f *Features) float64 { return f.CPUShare }))
	ev.RunTimeP50 = int64(col(func(f *Features) float64 { return float64(f.RunTimeP50) }))
	ev.RunP90 = int64(col(func(f *Features) float64 { return float64(f.Run.P90) }))
	ev.WakeRate = round3(col(func(f *Features) float64 { return f.WakeRate }))
	ev.DiskShare = round3(col(func(f *Features) float64 { return f.DiskShare }))
	ev.IOWake = round3(col(func(f *Features) float64 { return f.IOWake }))
	ev.HardIRQ = round3(col(func(f *Features) float64 { return f.HardIRQ }))
	ev.External = round3(col(func(f *Features) float64 { return f.External }))
	ev.Peer = round3(col(func(f *Features) float64 { return f.Peer }))
	ev.Source = round3(col(func(f *Features) float64 { return f.Source }))
	ev.Chain = round3(col(func(f *Features) float64 { return f.Chain }))
	ev.FanIn = round3(col(func(f *Features) float64 { return f.FanIn }))
	for _, t := range members {
		ev.Runs += t.Features.Run.N
		ev.Wakeups += t.Features.Wakeups
	}
	return ev
}

// reasonFor says in one sentence which numbers decided the class.
func reasonFor(class Class, e Evidence) string {
	n := "median of " + plural(e.Threads, "thread")
	switch class {
	case ClassSyncCompute:
		return fmt.Sprintf("CPU-bound: %.1f%% CPU, half the CPU time in runs ≥ %s (%s, %s)",
			100*e.CPUShare, fmtDur(e.RunTimeP50), n, plural(int(e.Runs), "run"))
	case ClassLatencyCritical:
		if e.HardIRQ > e.Source {
			return fmt.Sprintf("request path head: woken %.0f/s by its own timer or a device (%.0f%% of wakeups), hands work to request-serving threads, run p90 %s (%s, %s)",
				e.WakeRate, 100*e.HardIRQ, fmtDur(e.RunP90), n, plural(int(e.Wakeups), "wakeup"))
		}
		return fmt.Sprintf("request serving: woken %.0f/s, %.0f%% of wakeups from outside or an entry thread, run p90 %s (%s, %s)",
			e.WakeRate, 100*e.Source, fmtDur(e.RunP90), n, plural(int(e.Wakeups), "wakeup"))
	case ClassIOWakeChain:
		return fmt.Sprintf("wake chain / I/O: woken %.0f/s, %.0f%% of wakeups from inside the workload (fan-in %.1f), %.0f%% ending a D wait, run p90 %s (%s, %s)",
			e.WakeRate, 100*e.Chain, e.FanIn, 100*e.IOWake, fmtDur(e.RunP90), n, plural(int(e.Wakeups), "wakeup"))
	default:
		if e.WakeRate >= presRateHi && e.HardIRQ > 0.5 {
			return fmt.Sprintf("housekeeping: woken %.0f/s by its own timer (%.0f%% of wakeups), %.2f%% CPU, hands no work on (%s, %s)",
				e.WakeRate, 100*e.HardIRQ, 100*e.CPUShare, n, plural(int(e.Wakeups), "wakeup"))
		}
		return fmt.Sprintf("rarely runs: woken %.1f/s, %.3f%% CPU (%s, %s)",
			e.WakeRate, 100*e.CPUShare, n, plural(int(e.Wakeups), "wakeup"))
	}
}
