// Package profiles owns the workload profile: schema v1 (profile.go), the
// matchers that assign threads to thread groups (match.go), strict loading
// (Parse, Load, LoadDir), deterministic writing (Marshal), lint (Lint), the
// resolution of a pod to a profile (Resolve) and the builtin profiles
// (Builtins, Builtin), embedded from builtin/*.toml.
//
// # Schema v1
//
// A profile is a TOML file:
//
//	schema_version = 1                  # required; the only version there is
//	id = "llama-cpp"                    # required; [a-z0-9-]+
//	description = "..."
//
//	[fingerprint]                       # how a pod is matched to the profile
//	images = ["*/llama.cpp:*"]          # path.Match globs on container images
//	annotation = "llama-cpp"            # value of temper.codes/workload-profile
//	process_names = ["llama-server"]    # comms, for targets outside Kubernetes
//
//	[machine_shape]                     # the machine the tuning is for
//	logical_cpus = 8                    # every field optional: absent = any
//	cores = 4
//	threads_per_core = 2
//	numa_nodes = 1
//
//	[traits]                            # workload-level measurements
//	cpu_request_millicores = 2250
//	cpu_limit_millicores = 2250
//	threads = 12
//	hot_threads = 2
//	observed_cpus_used = 1.9
//	throttled_fraction = 0.0
//
//	[[thread_groups]]                   # first match wins
//	name = "inference"                  # required, unique
//	match = { comm_prefix = ["llama"] } # see Matchers
//	treatment = "exclusive"             # exclusive | latency | normal | batch | yield
//	cpu_fraction = 0.85                 # exclusive: share of the request as whole cores
//	exclusive_cores = 2                 # exclusive: ceil(cpu_fraction × request)
//	slice_us = 5000                     # 50..100000; absent: the backend's default
//	weight = 200                        # 1..10000; absent: by treatment
//	preempt = true                      # latency and exclusive groups
//	rt_priority = 10                    # latency groups on CFS: SCHED_RR 1..99
//	[thread_groups.evidence]            # what analyze measured (optional)
//	class = "sync_compute"
//	threads = 2
//	hot_threads = 2
//	cpus = 1.9
//
// Keys are matched exactly (case matters), unknown keys are errors, integers
// are accepted where floats are expected, floats must be finite, and a
// machine_shape field written as 0 is an error (leave it out to match any
// machine). Parse reports the first problem in the file as a *ParseError
// "file:line: key: message" wrapping ErrSyntax, ErrUnknownKey, ErrType,
// ErrMissing, ErrSchemaVersion or ErrInvalid.
//
// Marshal writes the keys in the order above, every section header present,
// match as an inline table and evidence as a [thread_groups.evidence]
// sub-table; Parse(Marshal(p)) equals p.
//
// # Matchers
//
// Within a match every matcher that is set must hold (AND); a list holds
// when any entry does (OR). A match with no matcher matches nothing.
//
//	comm_prefix     the thread's comm (≤ 15 bytes) starts with one of these
//	comm_regex      RE2 expression on the comm, unanchored
//	exclude_prefix  the comm starts with none of these
//	pcomm_prefix    the comm of the thread's process starts with one of these
//	cmdline_prefix  /proc/PID/cmdline (NULs as spaces) starts with one of these
//	group_leader    the thread is (true) or is not (false) its process's main thread
//	cgroup_prefix   the thread's cgroup path starts with this
//	all             every thread
//
// The sched_ext and cfs backends match in Go with the Classifier and have
// every kind; an export to scx_layered has no comm_regex and no
// cmdline_prefix (MatcherKinds).
//
// # Lint rules
//
// Lint reports Findings (Error or Warning, the group, the field). A rule
// that cannot be checked says so as a warning; none is skipped silently.
//
//   - Every matcher kind exists in the backend (with no backend named, in
//     every backend temper-train ships: sched_ext and cfs).
//   - A match is not empty; comm_regex compiles under RE2, and look-around
//     is called out as such; comm, exclude and pcomm prefixes are at most 15
//     bytes (a longer one can never match a comm); exclude_prefix has no ""
//     and does not exclude every comm_prefix of its own group.
//   - No group is unreachable: a group every thread of which an earlier
//     group provably takes (an earlier all, an earlier shorter prefix with
//     no other condition, an exclude-only remainder that lets none of its
//     prefixes through) is an error. The check is sound: what it cannot
//     prove it does not report. A catch-all that is not last is a warning.
//   - Exclusive groups: exclusive_cores > 0; exclusive_cores =
//     ExclusiveCoresFor(cpu_fraction, request) = ceil(cpu_fraction × request
//     / 1000), computed without floating-point drift (0.85 × 2250m → 2,
//     0.9 × 2250m → 3); no more cores than evidence.hot_threads, and all
//     exclusive cores together no more than traits.hot_threads; the groups
//     fit the machine's physical cores (with SMT the siblings stay idle, so
//     cores are counted, not CPUs) with one core left shared. A group that
//     does not fit is an error, or with LintOptions.Demote a warning that
//     Demote will give it latency treatment.
//   - SMT stacking is checked for every group, the last (the remainder)
//     included, and for the hot threads no group's evidence accounts for:
//     more hot threads than exclusive cores, or than the cores left shared,
//     means two hot threads on the siblings of one core.
//   - weight 1..10000, slice_us 50..100000, rt_priority 0..99 and only on
//     latency groups, cpu_fraction in (0, 1]; cpu_fraction, exclusive_cores
//     and preempt on a treatment that ignores them are warnings.
//   - machine_shape is possible (logical_cpus = cores × threads_per_core,
//     at most 8 threads per core, ...); group names are unique and not
//     empty; fingerprint image globs compile with path.Match.
//   - For scx_layered, at most 16 layers (groups plus the remainder).
//
// # Resolution
//
// Resolve picks a pod's profile: the annotation temper.codes/workload-profile
// (legacy infera.io/workload-profile) beats image globs, which beat process
// names; an annotation naming no profile is an error. Among the profiles
// with the chosen id only those whose machine_shape matches the machine
// count; a file profile replaces a builtin with the same id and shape key;
// the most specific shape wins; ties are broken deterministically and the
// Choice's Explanation says how each step went. LoadDir reads a profiles
// tree laid out as <id>/<shape-key>.toml and checks that each file's path
// agrees with its id and shape.
package profiles
