#!/usr/bin/env bash
# make bench: runs the decode benchmarks once and prints each figure beside
# its target. Throughput is per core (GOMAXPROCS=1): the decoder is one
# goroutine, and per-core numbers project to bigger machines. Then, as root,
# scripts/bench-tracer.sh measures what tracing costs a live workload (it
# prints NOT RUN otherwise); BenchmarkRecordDecode's ns/event goes next to
# its end-to-end user-space cost per event.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
GOMAXPROCS=1 go test -run '^$' -bench 'Decode' -benchmem -count "${COUNT:-3}" ./observe ./observe/record | tee "$out"
# analyze's benchmarks (whole analysis of a synthetic Perfetto trace, the
# analysis alone on decoded events, peak heap 1x vs 10x), also per core.
GOMAXPROCS=1 go test -run '^$' -bench 'Analyze' -benchmem -count "${COUNT:-3}" ./analyze | tee -a "$out"
echo
awk '
function metric(line, unit,   i, n, f) { n = split(line, f, /[ \t]+/); for (i = 2; i <= n; i++) if (f[i] == unit) return f[i-1]; return "" }
/^BenchmarkDecodeCompactSched/ { cs_n++; cs += metric($0, "events/s"); cs_a += metric($0, "allocs/op"); cs_b = metric($0, "bytes/event") }
/^BenchmarkDecodeFtraceText/   { tx_n++; tx += metric($0, "events/s") }
/^BenchmarkDecodeMemory\/events=500000[^0-9]/  { m1 = metric($0, "peak-heap-MiB") }
/^BenchmarkDecodeMemory\/events=5000000[^0-9]/ { m10 = metric($0, "peak-heap-MiB") }
/^BenchmarkRecordDecode/ { rd_n++; rd += metric($0, "ns/event"); rd_a += metric($0, "allocs/event"); rd_b = metric($0, "bytes/event") }
# analyze: medians, the machine being shared (an_med sorts a copy)
function an_med(a, n,   s, i, j, t) { for (i = 1; i <= n; i++) s[i] = a[i]; for (i = 2; i <= n; i++) { t = s[i]; for (j = i - 1; j >= 1 && s[j] > t; j--) s[j + 1] = s[j]; s[j + 1] = t }; return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
/^BenchmarkAnalyze\/threads=300[ \t]/  { a3++; a3r[a3] = metric($0, "events/s"); a3c[a3] = metric($0, "events/cpu-s"); a3a[a3] = metric($0, "allocs/event") }
/^BenchmarkAnalyze\/threads=3000[ \t]/ { a30++; a30r[a30] = metric($0, "events/s"); a30c[a30] = metric($0, "events/cpu-s"); a30a[a30] = metric($0, "allocs/event") }
/^BenchmarkAnalyzeEvents[ \t]/          { ae++; aer[ae] = metric($0, "events/s"); aec[ae] = metric($0, "events/cpu-s") }
/^BenchmarkAnalyzeStream[ \t]/          { as++; asr[as] = metric($0, "events/s"); asc[as] = metric($0, "events/cpu-s") }
/^BenchmarkAnalyzeMemory\/events=500000[ \t]/  { am1 = metric($0, "peak-heap-MiB") }
/^BenchmarkAnalyzeMemory\/events=5000000[ \t]/ { am10 = metric($0, "peak-heap-MiB") }
END {
	cs /= cs_n; tx /= tx_n
	printf "compact_sched decode   %6.2f M events/s per core  (target 20 M: ratio %.2f)  %.4f allocs/event  %.1f bytes/event on disk\n", cs/1e6, cs/20e6, cs_a/cs_n/1e6, cs_b
	printf "ftrace text decode     %6.2f M events/s per core  (%.2fx slower than compact_sched)\n", tx/1e6, cs/tx
	printf "peak heap, 10x longer  %6.2f MiB vs %.2f MiB  (ratio %.2f; 1.0 = flat in trace length)\n", m10, m1, m10/m1
	if (rd_n) printf "record decode+write    %6.1f ns/event per core (%.2f M events/s)  %.4f allocs/event  %.1f bytes/event on disk  (raw ring records -> Perfetto, no kernel)\n", rd/rd_n, 1e3/(rd/rd_n), rd_a/rd_n, rd_b
	if (a3) printf "analyze, 300 threads   %6.2f M events/s per core  (target 10 M: ratio %.2f; %.2f M per CPU-second)  %.4f allocs/event  (whole analysis of a 1M-event Perfetto trace; medians)\n", an_med(a3r, a3)/1e6, an_med(a3r, a3)/10e6, an_med(a3c, a3)/1e6, an_med(a3a, a3)
	if (a30) printf "analyze, 3000 threads  %6.2f M events/s per core  (target 10 M: ratio %.2f; %.2f M per CPU-second)  %.4f allocs/event  (clustering grows with threads)\n", an_med(a30r, a30)/1e6, an_med(a30r, a30)/10e6, an_med(a30c, a30)/1e6, an_med(a30a, a30)
	if (ae) printf "analyze, no decoder    %6.2f M events/s per core  (%.2f M per CPU-second; events already decoded)\n", an_med(aer, ae)/1e6, an_med(aec, ae)/1e6
	if (as) printf "analyze, stream only   %6.2f M events/s per core  (%.2f M per CPU-second; thread states, features, wake edges: %.1f ns/event)\n", an_med(asr, as)/1e6, an_med(asc, as)/1e6, 1e9/an_med(asc, as)
	if (am10) printf "analyze peak heap, 10x %6.2f MiB vs %.2f MiB  (ratio %.2f; 1.0 = flat; live heap of the whole process, the goroutine generating the trace included)\n", am10, am1, am10/am1
}' "$out"
rd_ns=$(awk '/^BenchmarkRecordDecode/ { for (i = 2; i <= NF; i++) if ($i == "ns/event") { s += $(i-1); n++ } } END { if (n) printf "%.1f", s / n }' "$out")
RECORD_DECODE_NS=$rd_ns scripts/bench-tracer.sh
scripts/bench-analyze.sh
# What a refine decision costs in trials (race + sequential final, planted
# 15% effect, 5% noise, 10% minimum effect; in-process benchmark): decisions
# per hour for a 3 s benchmark, and the ratio to the anchor, one fixed-n
# comparison at the n the final was sized to.
go test -run '^$' -bench '^BenchmarkDecisions$' -benchtime 40x ./refine | awk '
function metric(line, unit,   i, n, f) { n = split(line, f, /[ \t]+/); for (i = 2; i <= n; i++) if (f[i] == unit) return f[i-1]; return "" }
/^BenchmarkDecisions/ { printf "refine decisions       %6.1f trials per decision: %.1f decisions/hour for a 3 s benchmark  (anchor, one fixed-n comparison: ratio %.2f)  kept %.0f%% at a planted 1.5x minimum effect\n", metric($0, "trials/decision"), metric($0, "decisions/hour@3s"), metric($0, "x-fixed-n"), 100*metric($0, "kept/decision") }'
# refine's own cost on the CFS backend (root; NOT RUN otherwise): apply +
# revert of a profile on the demo workload, one spinner's start + stop, and
# the trials per hour that leaves a 1-second benchmark beside the same
# figure with no cost of refine's own (the anchor).
go test -run '^$' -bench 'RefineSwitchover' -benchtime 20x ./cmd/temper-train | grep -E 'Benchmark|NOT RUN' || true
# The same switch-over on the sched_ext backend, inside make vmtest's VM (this
# kernel has no sched_ext). Its CPUs are emulated (TCG): the figure shows the
# switch-over works and its order, not a node's cost.
{ VMTEST_RUN='^TestVMSwitchover$' VMTEST_E2E=0 scripts/vmtest.sh 2>&1 || true; } |
	grep -E 'switch-over \(apply|--- (PASS|FAIL): TestVMSwitchover' ||
	echo "sched_ext switch-over: NOT RUN (the VM test did not report it; make vmtest says why)"
