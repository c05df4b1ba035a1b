package profiles

import "temper.codes/temper-train/machine"

// SchemaVersion is the only profile schema this package reads and writes.
const SchemaVersion = 1

// Profile is one workload profile: how to recognise the workload, the
// machine shape it was tuned on, what was measured about it, and its thread
// groups. Field order here is the order in written TOML.
type Profile struct {
	SchemaVersion int    `toml:"schema_version"`
	ID            string `toml:"id"` // [a-z0-9-]+
	Description   string `toml:"description,omitempty"`

	Fingerprint  Fingerprint   `toml:"fingerprint"`
	MachineShape Shape         `toml:"machine_shape"`
	Traits       Traits        `toml:"traits"`
	ThreadGroups []ThreadGroup `toml:"thread_groups"` // first match wins
}

// Fingerprint says which pods or processes the profile is for.
type Fingerprint struct {
	// Images are globs (path.Match syntax) on container image references,
	// e.g. "mariadb:*" or "*/percona-server:*".
	Images []string `toml:"images,omitempty"`
	// Annotation is the value of the pod annotation
	// temper.codes/workload-profile (legacy infera.io/workload-profile) that
	// selects this profile; usually the id.
	Annotation string `toml:"annotation,omitempty"`
	// ProcessNames match targets outside Kubernetes by process comm.
	ProcessNames []string `toml:"process_names,omitempty"`
}

// Shape is a machine shape (machine.Shape): zero fields match any machine;
// resolution prefers the profile whose shape fixes the most fields.
type Shape = machine.Shape

// ParseShape reads a shape key ("8cpu-4c-smt2", "any"): machine.ParseShape.
func ParseShape(key string) (Shape, error) { return machine.ParseShape(key) }

// Traits are workload-level measurements from training.
type Traits struct {
	CPURequestMillicores int     `toml:"cpu_request_millicores,omitempty"` // the pod request it was tuned for
	CPULimitMillicores   int     `toml:"cpu_limit_millicores,omitempty"`
	Threads              int     `toml:"threads,omitempty"`
	HotThreads           int     `toml:"hot_threads,omitempty"` // threads busy enough to want a core of their own
	ObservedCPUsUsed     float64 `toml:"observed_cpus_used,omitempty"`
	ThrottledFraction    float64 `toml:"throttled_fraction,omitempty"` // nr_throttled / nr_periods while observed
	// Refined records refine's final comparison of this profile against
	// stock CFS, one line per refine run that kept it: metric, medians, n,
	// p-value, the ledger.
	Refined []string `toml:"refined,omitempty"`
}

// Treatment is what a thread group gets from the scheduler.
type Treatment string

// The treatments, from most to least favoured.
const (
	// Exclusive: the group owns ExclusiveCores whole physical cores; their
	// SMT siblings stay idle and nothing else runs there.
	Exclusive Treatment = "exclusive"
	// Latency: dispatched ahead of normal work with a short slice; may
	// preempt.
	Latency Treatment = "latency"
	// Normal: what the kernel would do anyway.
	Normal Treatment = "normal"
	// Batch: throughput work, long slices, never preempts.
	Batch Treatment = "batch"
	// Yield: runs only on capacity nobody else wants.
	Yield Treatment = "yield"
)

// Treatments lists every treatment, most favoured first.
func Treatments() []Treatment { return []Treatment{Exclusive, Latency, Normal, Batch, Yield} }

// ThreadGroup is a set of threads picked by Match and the treatment they get.
type ThreadGroup struct {
	Name      string    `toml:"name"`
	Match     Match     `toml:"match"`
	Treatment Treatment `toml:"treatment"`

	// CPUFraction is the share of the pod's CPU request given to this group
	// as whole cores; ExclusiveCores = ceil(CPUFraction × request / 1000),
	// written out so lint can check it. Exclusive groups only.
	CPUFraction    float64 `toml:"cpu_fraction,omitempty"`
	ExclusiveCores int     `toml:"exclusive_cores,omitempty"`

	SliceUs int  `toml:"slice_us,omitempty"` // 0: the backend's default
	Weight  int  `toml:"weight,omitempty"`   // 1..10000, 100 = default; 0: by treatment
	Preempt bool `toml:"preempt,omitempty"`  // latency groups may preempt normal work
	// RTPriority asks the CFS backend for SCHED_RR at this priority (1..99)
	// for a latency group, bounded by the kernel's RT throttling; 0 = no.
	RTPriority int `toml:"rt_priority,omitempty"`

	// Evidence is what analyze measured for these threads when the group was
	// synthesized; hand-written profiles may leave it out.
	Evidence *Evidence `toml:"evidence,omitempty"`
}

// Evidence records the measurements a group's treatment and sizing came from.
type Evidence struct {
	Class            string   `toml:"class"` // analyze's class of the cluster(s)
	Confidence       float64  `toml:"confidence,omitempty"`
	Threads          int      `toml:"threads"`
	HotThreads       int      `toml:"hot_threads,omitempty"`
	CPUs             float64  `toml:"cpus"` // summed CPU share: 1 = one CPU busy all window
	RuntimeP50Us     float64  `toml:"runtime_p50_us,omitempty"`
	RuntimeP99Us     float64  `toml:"runtime_p99_us,omitempty"`
	WakeRateHz       float64  `toml:"wake_rate_hz,omitempty"`
	WakeLatencyP99Us float64  `toml:"wake_latency_p99_us,omitempty"`
	Families         []string `toml:"families,omitempty"`
	Trace            string   `toml:"trace,omitempty"` // the trace it was measured on
	// Arithmetic is the sizing written out, e.g.
	// "ceil(0.85 × 2250m) = ceil(1.91) = 2 cores ≤ 2 hot threads".
	Arithmetic string `toml:"arithmetic,omitempty"`
	// Refined records the refine steps accepted for this group, one line
	// each: the change, its effect with n and p-value, the ledger.
	Refined []string `toml:"refined,omitempty"`
}

// Match picks threads. Every field that is set must hold (AND); a list field
// holds when any of its entries does (OR). A Match with no field set matches
// nothing and is a lint error; use All for an explicit catch-all.
type Match struct {
	// CommPrefix: the thread's comm (≤ 15 bytes) starts with one of these.
	CommPrefix []string `toml:"comm_prefix,omitempty"`
	// CommRegex: an RE2 expression on the thread's comm (unanchored; anchor
	// it yourself). Not expressible in scx_layered.
	CommRegex string `toml:"comm_regex,omitempty"`
	// ExcludePrefix: the comm starts with none of these (an exclude-based
	// remainder: "everything but connection threads and ib_").
	ExcludePrefix []string `toml:"exclude_prefix,omitempty"`
	// PcommPrefix: the comm of the thread's process (thread-group leader)
	// starts with one of these.
	PcommPrefix []string `toml:"pcomm_prefix,omitempty"`
	// CmdlinePrefix: the process's /proc/PID/cmdline, NUL bytes read as
	// spaces, starts with one of these. This is how processes that share one
	// name tell their roles apart through their process title
	// ("postgres: walwriter", "postgres: checkpointer").
	CmdlinePrefix []string `toml:"cmdline_prefix,omitempty"`
	// GroupLeader: the thread is (true) or is not (false) its process's
	// main thread.
	GroupLeader *bool `toml:"group_leader,omitempty"`
	// CgroupPrefix: the thread's cgroup path (v2, or the v1 cpu hierarchy),
	// relative to the hierarchy root, starts with this.
	CgroupPrefix string `toml:"cgroup_prefix,omitempty"`
	// All matches every thread (a catch-all last group).
	All bool `toml:"all,omitempty"`
}

// Matcher kinds: the names of Match's fields as they appear in TOML. Lint
// checks every kind a profile uses against the backend that will apply it.
const (
	KindCommPrefix    = "comm_prefix"
	KindCommRegex     = "comm_regex"
	KindExcludePrefix = "exclude_prefix"
	KindPcommPrefix   = "pcomm_prefix"
	KindCmdlinePrefix = "cmdline_prefix"
	KindGroupLeader   = "group_leader"
	KindCgroupPrefix  = "cgroup_prefix"
	KindAll           = "all"
)

// Kinds returns the matcher kinds m uses, in declaration order.
func (m Match) Kinds() []string {
	var k []string
	add := func(set bool, kind string) {
		if set {
			k = append(k, kind)
		}
	}
	add(len(m.CommPrefix) > 0, KindCommPrefix)
	add(m.CommRegex != "", KindCommRegex)
	add(len(m.ExcludePrefix) > 0, KindExcludePrefix)
	add(len(m.PcommPrefix) > 0, KindPcommPrefix)
	add(len(m.CmdlinePrefix) > 0, KindCmdlinePrefix)
	add(m.GroupLeader != nil, KindGroupLeader)
	add(m.CgroupPrefix != "", KindCgroupPrefix)
	add(m.All, KindAll)
	return k
}
