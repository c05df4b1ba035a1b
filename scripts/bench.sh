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
GOMAXPROCS=1 go test -run '^$' -bench 'Decode' -benchmem -count "${COUNT:-3}" ./observe | tee "$out"
echo
awk '
function metric(line, unit,   i, n, f) { n = split(line, f, /[ \t]+/); for (i = 2; i <= n; i++) if (f[i] == unit) return f[i-1]; return "" }
/^BenchmarkDecodeCompactSched/ { cs_n++; cs += metric($0, "events/s"); cs_a += metric($0, "allocs/op"); cs_b = metric($0, "bytes/event") }
/^BenchmarkDecodeFtraceText/   { tx_n++; tx += metric($0, "events/s") }
/^BenchmarkDecodeMemory\/events=500000/  { m1 = metric($0, "peak-heap-MiB") }
/^BenchmarkDecodeMemory\/events=5000000/ { m10 = metric($0, "peak-heap-MiB") }
/^BenchmarkRecordDecode/ { rd_n++; rd += metric($0, "ns/event"); rd_a += metric($0, "allocs/event"); rd_b = metric($0, "bytes/event") }
END {
	cs /= cs_n; tx /= tx_n
	printf "compact_sched decode   %6.2f M events/s per core  (target 20 M: ratio %.2f)  %.4f allocs/event  %.1f bytes/event on disk\n", cs/1e6, cs/20e6, cs_a/cs_n/1e6, cs_b
	printf "ftrace text decode     %6.2f M events/s per core  (%.2fx slower than compact_sched)\n", tx/1e6, cs/tx
	printf "peak heap, 10x longer  %6.2f MiB vs %.2f MiB  (ratio %.2f; 1.0 = flat in trace length)\n", m10, m1, m10/m1
	if (rd_n) printf "record decode+write    %6.1f ns/event per core (%.2f M events/s)  %.4f allocs/event  %.1f bytes/event on disk  (raw ring records -> Perfetto, no kernel)\n", rd/rd_n, 1e3/(rd/rd_n), rd_a/rd_n, rd_b
}' "$out"
rd_ns=$(awk '/^BenchmarkRecordDecode/ { for (i = 2; i <= NF; i++) if ($i == "ns/event") { s += $(i-1); n++ } } END { if (n) printf "%.1f", s / n }' "$out")
RECORD_DECODE_NS=$rd_ns scripts/bench-tracer.sh
