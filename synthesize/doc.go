// Package synthesize turns an analysis (analyze's JSON, schema
// temper-train/analysis/v1) into a workload profile (profiles, schema v1):
// which threads form which thread group, what treatment each group gets, and
// how big it is, with the measurements and the arithmetic written into the
// profile so a reader can check every number.
//
// Profile reads top-down in the order it decides things:
//
//  1. shape.go: the machine shape, from the snapshot's topology, else
//     --shape, else the trace's CPU count (logical CPUs only), else an
//     error; it must agree with the CPUs the trace saw.
//  2. request.go: the pod's CPU request, from --request, else the pod's
//     container requests in the snapshot, else the cgroup's CFS quota, else
//     the observed CPU use rounded up to whole CPUs (inferred: it buys no
//     exclusive cores).
//  3. plan.go: every analysed thread wants the group of its cluster's class
//     (sync_compute → "compute", latency_critical → "latency-critical",
//     io_wake_chain → "io-chain", sporadic → the catch-all "rest").
//  4. matchers.go: comm prefixes from the thread families, made disjoint:
//     a group whose matcher would also catch another group's thread gets an
//     exclude_prefix, or a group_leader or pcomm_prefix condition, and when
//     no matcher can tell two families apart they are merged into one group
//     (said so in the description). The remainder is `all = true`, last.
//  5. sizing.go and node.go: treatments and sizes from the final members:
//     exclusive whole cores for hot threads (cpu_share ≥ HotShare) when the
//     request is real, two cores and two CPUs stay shared and the rest of
//     the node's measured demand fits in MaxSharedLoad of them,
//     cpu_fraction chosen so that ceil(cpu_fraction × request) is exactly
//     that many cores; otherwise normal (demotion, with a warning); latency
//     without a nice; yield only for quiet groups that wake no favoured
//     thread; nothing favoured when a load generator shares the node;
//     slice_us from the members' p90 run length.
//  6. evidence.go: per-group evidence and workload traits from the analysis.
//  7. selfcheck.go: the profile is compiled with profiles.Compile and every
//     analysed thread must land in the group synthesized for it; then
//     profiles.Lint must report no errors.
//
// Result.Portfolio holds the profile with its conservative and moderate
// alternatives (portfolio.go), for a caller to race.
//
// Write renders the profile with profiles.Marshal under a generated header
// and writes profiles/<id>/<shape-key>.toml atomically. LayeredSpec exports
// scx_layered's JSON layer spec and HelmValues the agent chart's values.
//
// Everything is deterministic: inputs are sorted, no map is iterated into an
// output, numbers are rounded to fixed precision, so the same analysis gives
// byte-identical files.
package synthesize
