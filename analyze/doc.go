// Package analyze turns a scheduling trace into an understanding of a
// workload's thread structure: per-thread behaviour, who wakes whom, which
// threads belong together, what kind of scheduling treatment each group
// needs, and where placement already goes wrong.
//
// The trace streams once through observe.Sched (trace_processor's
// thread-state semantics). Per thread, a fixed-size accumulator
// (features.go) keeps CPU time, run-length and wake-latency sketches
// (sketch.go: exact up to 32 samples, then log buckets within ±2.2 %),
// switch-out states, migrations and CPUs; a map counts waker→wakee pairs.
// Memory grows with threads and wake pairs, never with events.
//
// After the stream:
//   - target.go picks the target threads: the snapshot's tgids, --pid (with
//     the processes they fork inside the trace), --process (every process of
//     that name: one multi-threaded server or many single-threaded
//     backends), or every user thread, kernel threads told apart by
//     isKernelThread (parent kthreadd, state I, kernel comm prefixes);
//   - threads.go builds the per-thread features; family.go groups threads
//     by normalised name ("ib_io_rd-3" → "ib_io_rd");
//   - graph.go builds the wake graph (gonum graph/simple) with outside
//     wakers aggregated (interrupt, kernel thread, process <name>);
//     structure.go splits each thread's wakeups by what it waited for
//     (requests from outside, the workload itself, I/O completions, peers);
//     chains.go finds wake chains and hubs; community.go runs Louvain
//     (graph/community) with a fixed seed;
//   - latency.go scores latency criticality the way scx_lavd does;
//   - cluster.go and kmeans.go cluster threads on standardised log-scaled
//     features plus graph structure, choosing k by silhouette;
//   - classify.go scores threads and clusters as sync_compute,
//     latency_critical, io_wake_chain or sporadic from behaviour alone;
//   - lint.go checks SMT stacking of hot threads (needs the snapshot's
//     topology) and CFS bandwidth throttling (the snapshot's cgroup);
//   - report.go, json.go (schema temper-train/analysis/v1) and dot.go write
//     the results.
//
// Everything is deterministic: fixed seeds, sorted orders, no map order in
// any output. The same input gives byte-identical JSON.
package analyze
