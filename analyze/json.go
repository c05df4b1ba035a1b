package analyze

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"temper.codes/temper-train/internal/atomicfile"
)

// Schema identifies the JSON layout of an Analysis. A change that removes or
// redefines a field gets a new version; adding fields does not.
const Schema = "temper-train/analysis/v1"

// Analysis is everything analyze learned about a workload from one trace. It
// is the JSON document (`--json`) and the input of the terminal report and
// the DOT graph. Slices are in a fixed order and no map is iterated to build
// it, so the same input gives byte-identical JSON.
type Analysis struct {
	Schema   string       `json:"schema"`
	Trace    TraceMeta    `json:"trace"`
	Target   TargetMeta   `json:"target"`
	Threads  []Thread     `json:"threads"`  // target threads, by family then tid
	Families []FamilyStat `json:"families"` // by name
	Clusters []Cluster    `json:"clusters"` // by id
	Graph    WakeGraph    `json:"graph"`
	Lint     Lint         `json:"lint"`
	Notes    []string     `json:"notes"` // caveats the numbers come with
}

// TraceMeta describes the trace and how complete it is.
type TraceMeta struct {
	Path          string `json:"path"`
	Format        string `json:"format"`
	Gzip          bool   `json:"gzip"`
	KernelRelease string `json:"kernel_release,omitempty"`
	NumCPUs       int    `json:"num_cpus,omitempty"` // as the trace recorded it; 0 if not
	CPUsSeen      int    `json:"cpus_seen"`          // CPUs with events
	FirstTSNs     int64  `json:"first_ts_ns"`
	LastTSNs      int64  `json:"last_ts_ns"`
	WindowNs      int64  `json:"window_ns"` // last − first: the denominator of every rate
	Events        int64  `json:"events"`
	LostEvents    int64  `json:"lost_events"`
	LostGaps      int64  `json:"lost_gaps"`
	Cropped       int64  `json:"cropped_events"`
	Spurious      int64  `json:"spurious_wakings"`
	Mismatched    int64  `json:"mismatched_switches"` // switch-outs of tasks not known to run: a filtered trace
	ThreadsSeen   int    `json:"threads_seen"`        // all threads (UTIDs) in the trace
}

// TargetMeta says which threads were analysed and why.
type TargetMeta struct {
	Mode        string `json:"mode"` // snapshot, pid, process or all
	Tgids       []int  `json:"tgids,omitempty"`
	Process     string `json:"process,omitempty"`
	Description string `json:"description"`
	Threads     int    `json:"threads"`
	Processes   int    `json:"processes"`
}

// Dist is a distribution of durations in nanoseconds with its sample count.
// Quantiles are nearest-rank, exact when Exact (few samples), else within
// ±2.2 % (see Sketch).
type Dist struct {
	N     int64   `json:"n"`
	P50   int64   `json:"p50_ns"`
	P90   int64   `json:"p90_ns"`
	P99   int64   `json:"p99_ns"`
	Mean  float64 `json:"mean_ns"`
	Max   int64   `json:"max_ns"`
	Exact bool    `json:"exact"`
	// sketch holds the distribution itself for pictures (Bins); it is not
	// part of the JSON, so a decoded Dist has none.
	sketch *Sketch
}

// Dist summarises the sketch's samples and keeps a copy of the sketch, so
// the Dist can give its Bins.
func (s *Sketch) Dist() Dist {
	keep := *s
	keep.counts = slices.Clone(s.counts)
	return Dist{N: s.Count(), P50: s.Quantile(0.5), P90: s.Quantile(0.9), P99: s.Quantile(0.99),
		Mean: round3(s.Mean()), Max: s.Max(), Exact: s.Exact(), sketch: &keep}
}

// Bins returns the samples behind d by increasing value (see Sketch.Bins),
// or nil when d holds no distribution: an analysis decoded from JSON
// carries only the quantiles.
func (d Dist) Bins() []Bin {
	if d.sketch == nil {
		return nil
	}
	return d.sketch.Bins()
}

// Features are one thread's measured behaviour over the window.
type Features struct {
	CPUShare float64 `json:"cpu_share"` // running time / window (1 = one CPU)
	RunNs    int64   `json:"run_ns"`
	// Run is the on-CPU run length (switch-in to switch-out) distribution;
	// RunTimeP50 the run length half of the CPU time is spent in runs at
	// least as long as (time-weighted median). OpenRuns were cut by the end
	// of the trace and are in RunNs but not in Run.
	Run        Dist  `json:"run"`
	RunTimeP50 int64 `json:"run_time_weighted_p50_ns"`
	OpenRuns   int64 `json:"open_runs"`
	// UntimedRuns are runs whose switch-in or switch-out the trace missed
	// (a filtered or lossy recording): their lengths are in neither Run nor
	// RunNs.
	UntimedRuns int64 `json:"untimed_runs"`

	Wakeups     int64   `json:"wakeups"` // wakings that made it runnable
	WakeRate    float64 `json:"wake_rate_per_s"`
	WakeLatency Dist    `json:"wake_latency"` // waking → running

	// Switch-outs by prev_state: Preempted (R, R+: involuntary), Sleep (S),
	// Disk (D), Other; shares are of all switch-outs.
	SwitchOuts   int64   `json:"switch_outs"`
	Preempted    int64   `json:"preempted"`
	Sleep        int64   `json:"sleep"`
	Disk         int64   `json:"disk"`
	Other        int64   `json:"other"`
	PreemptShare float64 `json:"preempt_share"`
	SleepShare   float64 `json:"sleep_share"`
	DiskShare    float64 `json:"disk_share"`
	// Time in each state after a switch-out or wakeup.
	RunnableNs int64 `json:"runnable_ns"` // R after a wakeup
	PreemptNs  int64 `json:"preempted_wait_ns"`
	SleepNs    int64 `json:"sleep_ns"`
	DiskNs     int64 `json:"disk_ns"`

	Migrations int64 `json:"migrations"` // consecutive runs on different CPUs
	CPUs       []int `json:"cpus"`       // CPUs it ran on

	WakesOut     int64   `json:"wakes_out"` // wakings it performed (not in interrupt context)
	WakesOutRate float64 `json:"wakes_out_per_s"`

	// Graph structure of its wakeups, as shares of Wakeups (see
	// structure.go): from outside the workload (External); ending a D wait
	// (IOWake); out of S in hard interrupt context (HardIRQ: timers, device
	// completions); mutual with a workload peer (Peer); from a workload
	// thread itself woken from outside (Entry) or from inside (Inner).
	// FanIn is the effective number of distinct workload wakers (inverse
	// Simpson index). Source: waits ended by requests (external out of S,
	// entry wakes not converging from many threads); Chain: waits ended by
	// the workload itself (inner, converging entry wakes). DispatchSource and
	// DispatchChain: the share of the thread's own wakings that go to
	// request-serving or chain threads, weighted by how much they are so.
	External float64 `json:"external_share"`
	IOWake   float64 `json:"io_wake_share"`
	HardIRQ  float64 `json:"hardirq_share"`
	Peer     float64 `json:"peer_share"`
	Entry    float64 `json:"entry_share"`
	Inner    float64 `json:"inner_share"`
	FanIn    float64 `json:"fan_in"`
	Source   float64 `json:"source"`
	Chain    float64 `json:"chain"`

	DispatchSource float64 `json:"dispatch_source"`
	DispatchChain  float64 `json:"dispatch_chain"`
}

// Thread is one target thread.
type Thread struct {
	Tid      int32    `json:"tid"`
	Tgid     int32    `json:"tgid"`
	Comm     string   `json:"comm"`
	Process  string   `json:"process"`
	Cmdline  string   `json:"cmdline,omitempty"` // its process's command line, from the snapshot
	Family   string   `json:"family"`
	Cluster  int      `json:"cluster"`
	Class    Class    `json:"class"` // the cluster's class
	OwnClass Class    `json:"own_class"`
	Scores   Scores   `json:"own_scores"`
	Features Features `json:"features"`
	LatCrit  LatCrit  `json:"latency_criticality"`
	WokenBy  []Peer   `json:"woken_by"` // top wakers
	Wakes    []Peer   `json:"wakes"`    // top wakees
	// ProcessWakers are its wakeups by user processes outside the workload,
	// softirq wakings counted as the process they interrupted (see
	// processWakers): a load generator on the node shows here.
	ProcessWakers []Peer     `json:"process_wakers"`
	NeverRan      bool       `json:"never_ran"`
	Kernel        bool       `json:"kernel_thread,omitempty"`
	SnapDelta     *ProcDelta `json:"proc_delta,omitempty"` // from the snapshot, when it has both halves
	utid          int
}

// ProcDelta is what /proc counted for the thread over the snapshot window,
// to set beside the trace's own counts.
type ProcDelta struct {
	Voluntary    int64 `json:"voluntary_ctxt_switches"`
	Nonvoluntary int64 `json:"nonvoluntary_ctxt_switches"`
	CPUNs        int64 `json:"cpu_ns"` // utime + stime
}

// Peer is one side of a wake edge, seen from a thread.
type Peer struct {
	Node  string  `json:"node"` // graph node id
	Count int64   `json:"count"`
	Share float64 `json:"share"` // of the thread's wakeups (woken_by) or wakes performed (wakes)
}

// LatCrit is a latency-criticality score in the manner of scx_lavd: Own from
// the thread's wait and wake frequencies, run length and priority; Final
// after one hop of propagation along dominant wake edges (a wakee inherits
// its waker's score, a waker takes its wakees' maximum). Normalised is Final
// as a percentage of the workload's highest.
type LatCrit struct {
	WaitFreq   float64 `json:"wait_freq_per_s"`
	WakeFreq   float64 `json:"wake_freq_per_s"`
	RuntimeF   float64 `json:"runtime_factor"`
	WeightF    float64 `json:"weight_factor"`
	Own        float64 `json:"own"`
	Final      float64 `json:"final"`
	Via        string  `json:"inherited_from,omitempty"`
	Normalised float64 `json:"normalised"`
}

// FamilyStat is one thread family: threads sharing a normalised name.
type FamilyStat struct {
	Family   string  `json:"family"`
	Threads  int     `json:"threads"`
	Clusters []int   `json:"clusters"` // more than one: the family split
	CPUShare float64 `json:"cpu_share"`
}

// Scores are the four class memberships, each in [0, 1].
type Scores struct {
	SyncCompute     float64 `json:"sync_compute"`
	LatencyCritical float64 `json:"latency_critical"`
	IOWakeChain     float64 `json:"io_wake_chain"`
	Sporadic        float64 `json:"sporadic"`
}

// Evidence are the cluster's median features: the numbers that decided its
// class, with the number of threads they are medians of.
type Evidence struct {
	Threads    int     `json:"threads"`
	CPUShare   float64 `json:"cpu_share"`
	RunTimeP50 int64   `json:"run_time_weighted_p50_ns"`
	RunP90     int64   `json:"run_p90_ns"`
	Runs       int64   `json:"runs"` // total run samples behind the medians
	WakeRate   float64 `json:"wake_rate_per_s"`
	Wakeups    int64   `json:"wakeups"`
	DiskShare  float64 `json:"disk_share"`
	IOWake     float64 `json:"io_wake_share"`
	HardIRQ    float64 `json:"hardirq_share"`
	External   float64 `json:"external_share"`
	Peer       float64 `json:"peer_share"`
	Source     float64 `json:"source"`
	Chain      float64 `json:"chain"`
	FanIn      float64 `json:"fan_in"`
}

// Cluster is a group of threads with similar behaviour, and its class.
type Cluster struct {
	ID         int           `json:"id"`
	Class      Class         `json:"class"`
	Confidence float64       `json:"confidence"` // winning score / sum of scores, shrunk toward 1/4 with few runs
	Scores     Scores        `json:"scores"`     // mean of the members' scores
	Evidence   Evidence      `json:"evidence"`
	Reason     string        `json:"reason"`
	Members    []int32       `json:"members"` // tids
	Families   []FamilyCount `json:"families"`
	Dissent    []int32       `json:"dissenting_members,omitempty"` // members whose own class differs
	CPUShare   float64       `json:"cpu_share"`                    // sum over members
}

// FamilyCount is how many threads of a family a cluster holds.
type FamilyCount struct {
	Family string `json:"family"`
	Count  int    `json:"count"`
}

// Write encodes a as indented JSON.
func (a *Analysis) Write(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(a); err != nil {
		return fmt.Errorf("encode analysis: %w", err)
	}
	return nil
}

// WriteFile writes the JSON to path atomically: a reader sees the old file
// or the complete new one.
func (a *Analysis) WriteFile(path string) error {
	if err := atomicfile.Write(path, 0o644, a.Write); err != nil {
		return fmt.Errorf("analysis %s: %w", path, err)
	}
	return nil
}
