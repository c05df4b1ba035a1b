package profiles

import (
	"fmt"
	"path"
	"slices"
)

// LintOptions say where a profile will run.
type LintOptions struct {
	// Backend is "sched_ext", "cfs" or "scx-layered"; "" checks against
	// every backend temper-train ships (ShippedBackends).
	Backend string
	// Shape is the machine the profile will run on; nil means the profile's
	// own machine_shape.
	Shape *Shape
	// RequestMillicores is the pod's CPU request; 0 means the profile's
	// traits.cpu_request_millicores.
	RequestMillicores int
	// LimitMillicores is the pod's CPU limit (cpu.max as millicores); 0
	// means the profile's traits.cpu_limit_millicores, and neither: no
	// limit, or unknown, which lint does not check.
	LimitMillicores int
	// Demote turns "an exclusive group needs more cores than the machine
	// has" from an error into a warning that the group will be demoted to
	// latency treatment (see Demote).
	Demote bool
	// Strict promotes every warning to an error.
	Strict bool
	// RTRuntime says whether the target's cgroup lets its threads run
	// SCHED_RR (the CFS backend's rt_priority); the zero value is unknown
	// and not checked. The caller finds it out (cfs.RTRuntimeOf).
	RTRuntime RTRuntime
}

// RTRuntime says whether a target's threads may run at an RT priority.
// With RT group scheduling (CONFIG_RT_GROUP_SCHED, cgroup v1's
// cpu.rt_runtime_us) the kernel refuses SCHED_RR with EPERM in a cgroup
// given no RT runtime, which is every new cgroup's default: lint says so
// before apply gets that far.
type RTRuntime struct {
	// Checked is false when nobody looked: lint then does not check.
	Checked bool
	// Available: SCHED_RR is allowed (no RT group scheduling, cgroup v2,
	// or RT runtime in the target's cgroup).
	Available bool
	// Why says what decided, e.g. "cgroup /kubepods/pod1 has
	// cpu.rt_runtime_us 0".
	Why string
}

// Lint checks that p is sound for the machine and backend opt describes:
// matchers the backend has, regexes RE2 accepts, prefixes the kernel's
// 15-byte comm can hold, no group made unreachable by an earlier one, and
// exclusive sizing that follows the arithmetic and fits the machine's cores
// with one left shared. Every rule that cannot be checked (no shape, no
// request) says so as a warning rather than passing silently. Findings come
// in a stable order: profile-level first, then group by group.
func Lint(p *Profile, opt LintOptions) []Finding {
	l := &linter{p: p, opt: opt}
	l.run()
	if opt.Strict {
		for i := range l.fs {
			l.fs[i].Severity = Error
		}
	}
	return l.fs
}

type linter struct {
	p        *Profile
	opt      LintOptions
	backends []string
	shape    Shape
	request  int
	fs       []Finding
}

func (l *linter) add(sev Severity, group int, field, format string, args ...any) {
	f := Finding{Severity: sev, Group: group, Field: field, Message: fmt.Sprintf(format, args...)}
	if group >= 0 {
		f.GroupName = l.p.ThreadGroups[group].Name
	}
	l.fs = append(l.fs, f)
}

func (l *linter) errorf(group int, field, format string, args ...any) {
	l.add(Error, group, field, format, args...)
}

func (l *linter) warnf(group int, field, format string, args ...any) {
	l.add(Warning, group, field, format, args...)
}

// hint sets the last finding's Option and Hint.
func (l *linter) hint(o Option, hint string) {
	l.fs[len(l.fs)-1].Option, l.fs[len(l.fs)-1].Hint = o, hint
}

func (l *linter) run() {
	p := l.p
	if p == nil {
		l.fs = append(l.fs, Finding{Severity: Error, Group: -1, Message: "no profile"})
		return
	}
	l.backends = ShippedBackends()
	if l.opt.Backend != "" {
		if _, err := MatcherKinds(l.opt.Backend); err != nil {
			l.errorf(-1, "", "%v", err)
			return
		}
		l.backends = []string{l.opt.Backend}
	}
	l.request = p.Traits.CPURequestMillicores
	if l.opt.RequestMillicores != 0 {
		l.request = l.opt.RequestMillicores
	}
	l.header()
	l.machine()
	l.traits()
	l.fingerprint()
	if len(p.ThreadGroups) == 0 {
		l.errorf(-1, "thread_groups", "no thread groups: the profile would change nothing; add at least one [[thread_groups]]")
	}
	for i := range p.ThreadGroups {
		l.group(i)
	}
	l.reachability()
	l.cores()
	l.layered()
}

func (l *linter) header() {
	if l.p.SchemaVersion != SchemaVersion {
		l.errorf(-1, "schema_version", "%d is not supported; this temper-train writes schema_version = %d", l.p.SchemaVersion, SchemaVersion)
	}
	if !idPattern.MatchString(l.p.ID) {
		l.errorf(-1, "id", "%q is not a valid id: use lowercase letters, digits and '-' ([a-z0-9-]+)", l.p.ID)
	}
}

// machine checks the profile's shape and picks the shape to lint against.
func (l *linter) machine() {
	own := l.p.MachineShape
	if err := own.Check(); err != nil {
		l.errorf(-1, "machine_shape", "impossible shape: %v", err)
	}
	l.shape = own
	if s := l.opt.Shape; s != nil {
		if err := s.Check(); err != nil {
			l.errorf(-1, "machine_shape", "the machine to check against is impossible: %v", err)
		}
		if !own.Matches(*s) {
			l.warnf(-1, "machine_shape", "the profile is keyed to %s but is checked for a %s machine; resolution would not pick it there", own.Key(), s.Key())
		}
		l.shape = *s
	}
}

func (l *linter) traits() {
	t := l.p.Traits
	for _, c := range []struct {
		field string
		v     float64
	}{
		{"traits.cpu_request_millicores", float64(t.CPURequestMillicores)},
		{"traits.cpu_limit_millicores", float64(t.CPULimitMillicores)},
		{"traits.threads", float64(t.Threads)},
		{"traits.hot_threads", float64(t.HotThreads)},
		{"traits.observed_cpus_used", t.ObservedCPUsUsed},
		{"traits.throttled_fraction", t.ThrottledFraction},
	} {
		if c.v < 0 {
			l.errorf(-1, c.field, "%v is negative", c.v)
		}
	}
	if t.ThrottledFraction > 1 {
		l.errorf(-1, "traits.throttled_fraction", "%v is more than 1 (it is nr_throttled / nr_periods)", t.ThrottledFraction)
	}
	if t.CPULimitMillicores > 0 && t.CPURequestMillicores > t.CPULimitMillicores {
		l.errorf(-1, "traits.cpu_request_millicores", "request %dm is above the limit %dm; Kubernetes does not allow that", t.CPURequestMillicores, t.CPULimitMillicores)
	}
	if t.Threads > 0 && t.HotThreads > t.Threads {
		l.errorf(-1, "traits.hot_threads", "%d hot threads out of %d threads", t.HotThreads, t.Threads)
	}
	if l.opt.RequestMillicores < 0 {
		l.errorf(-1, "", "the request to check against is negative (%dm)", l.opt.RequestMillicores)
	}
	if l.opt.LimitMillicores < 0 {
		l.errorf(-1, "", "the limit to check against is negative (%dm)", l.opt.LimitMillicores)
	}
}

func (l *linter) fingerprint() {
	for i, g := range l.p.Fingerprint.Images {
		field := fmt.Sprintf("fingerprint.images[%d]", i)
		if g == "" {
			l.errorf(-1, field, "empty image pattern; remove it or write a glob like \"mysql:*\"")
			continue
		}
		if _, err := path.Match(g, ""); err != nil {
			l.errorf(-1, field, "%q is not a valid glob (path.Match syntax: *, ?, [a-z], \\ to escape): %v", g, err)
		}
	}
	for i, n := range l.p.Fingerprint.ProcessNames {
		field := fmt.Sprintf("fingerprint.process_names[%d]", i)
		switch {
		case n == "":
			l.errorf(-1, field, "empty process name")
		case len(n) > maxComm:
			l.errorf(-1, field, "%q is %d bytes; a process comm holds at most %d, so it can never match", n, len(n), maxComm)
		}
	}
}

// group checks one group's own fields. It runs for every group, the last
// (often a remainder) included.
func (l *linter) group(i int) {
	g := &l.p.ThreadGroups[i]
	if g.Name == "" {
		l.errorf(i, "name", "empty; every group needs a name (backends and stats report groups by name)")
	}
	for j := range i {
		if l.p.ThreadGroups[j].Name == g.Name && g.Name != "" {
			l.errorf(i, "name", "duplicate of thread_groups[%d]; group names must be unique", j)
			break
		}
	}
	if !slices.Contains(Treatments(), g.Treatment) {
		l.errorf(i, "treatment", "unknown treatment %q (known: %s)", g.Treatment, treatmentList())
	}
	l.match(i)
	l.fields(i)
}

// fields checks the scheduling knobs and which treatments they belong to.
func (l *linter) fields(i int) {
	g := &l.p.ThreadGroups[i]
	if g.Weight != 0 && (g.Weight < 1 || g.Weight > 10000) {
		l.errorf(i, "weight", "%d is outside 1..10000 (100 is the default; leave it out to weigh by treatment)", g.Weight)
	}
	if g.SliceUs != 0 && (g.SliceUs < MinSliceUs || g.SliceUs > MaxSliceUs) {
		l.errorf(i, "slice_us", "%d µs is outside %d..%d µs; leave it out for the backend's default", g.SliceUs, MinSliceUs, MaxSliceUs)
	}
	if g.RTPriority != 0 {
		switch {
		case g.RTPriority < 0 || g.RTPriority > 99:
			l.errorf(i, "rt_priority", "%d is outside 0..99", g.RTPriority)
		case g.Treatment != Latency:
			l.errorf(i, "rt_priority", "only latency groups may run as SCHED_RR; a %s group at RT priority would starve everything else", g.Treatment)
		case l.opt.RTRuntime.Checked && !l.opt.RTRuntime.Available && slices.Contains(l.backends, BackendCFS):
			l.errorf(i, "rt_priority", "the target's threads cannot run SCHED_RR: %s, so the kernel would refuse it (EPERM); give that cgroup RT runtime or drop rt_priority", l.opt.RTRuntime.Why)
		}
	}
	if g.Preempt && g.Treatment != Latency && g.Treatment != Exclusive {
		l.warnf(i, "preempt", "ignored: only latency and exclusive groups preempt, this one is %s", g.Treatment)
	}
	if g.CPUFraction != 0 && !(g.CPUFraction > 0 && g.CPUFraction <= 1) { // NaN too
		l.errorf(i, "cpu_fraction", "%v is outside (0, 1]: it is the share of the pod's request given to the group", g.CPUFraction)
	}
	if g.Treatment != Exclusive {
		if g.CPUFraction != 0 {
			l.warnf(i, "cpu_fraction", "ignored: only exclusive groups own cores, this one is %s", g.Treatment)
		}
		if g.ExclusiveCores != 0 {
			l.warnf(i, "exclusive_cores", "ignored: only exclusive groups own cores, this one is %s", g.Treatment)
		}
	}
	if e := g.Evidence; e != nil {
		if e.Threads < 0 || e.HotThreads < 0 || e.CPUs < 0 || e.Confidence < 0 || e.Confidence > 1 {
			l.errorf(i, "evidence", "negative counts or a confidence outside 0..1")
		}
		if e.Threads > 0 && e.HotThreads > e.Threads {
			l.errorf(i, "evidence.hot_threads", "%d hot threads out of %d threads", e.HotThreads, e.Threads)
		}
	}
}

// Bounds of slice_us: below 50 µs a slice is mostly context-switch cost;
// above 100 ms the group would hog a CPU for human-visible time.
const (
	MinSliceUs = 50
	MaxSliceUs = 100_000
)
