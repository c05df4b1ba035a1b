#!/bin/sh
# demo-bench.sh STATSFILE [SECONDS] — the demo's benchmark: reads the request
# latency histogram the demo workload keeps (bin/workload --stats STATSFILE),
# waits SECONDS (default 2), reads it again and prints, as JSON lines for
# temper-train refine's jsonl adapter, the window's request rate and the
# median, p90 and p99 latency of the requests completed in the window
# (interpolated within the histogram's 12.5%-wide buckets). The workload's
# acceptor issues requests at a fixed rate, so the load is open-loop.
set -eu
stats=${1:?usage: demo-bench.sh STATSFILE [SECONDS]}
secs=${2:-2}
[ -r "$stats" ] || { echo "demo-bench.sh: $stats: no stats file (is bin/workload running with --stats $stats?)" >&2; exit 1; }
before=$(cat "$stats")
sleep "$secs"
after=$(cat "$stats")
# The workload rewrites the file every 100 ms from a thread that a loaded
# machine may hold back: wait (up to 5 s) for a snapshot newer than the first;
# the window is measured between the snapshots' own timestamps.
tries=0
while [ "$(printf '%s\n' "$after" | head -n 1)" = "$(printf '%s\n' "$before" | head -n 1)" ] && [ "$tries" -lt 100 ]; do
	sleep 0.05
	after=$(cat "$stats")
	tries=$((tries + 1))
done
printf '%s\n--\n%s\n' "$before" "$after" | awk '
function lo(b,   o) { if (b < 8) return b; o = int(b / 8) + 2; return (2 ^ o) * (1 + (b % 8) / 8) }
$1 == "--" { second = 1; next }
$1 == "time_ns" { if (second) t1 = $2 / 1e9; else t0 = $2 / 1e9; next }
$1 == "requests" { if (second) r1 = $2; else r0 = $2; next }
{ if (second) h1[$1] = $2; else h0[$1] = $2 }
END {
	n = 0; max = -1
	for (b in h1) { d[b] = h1[b] - h0[b]; n += d[b]; if (d[b] > 0 && b + 0 > max) max = b + 0 }
	if (t1 <= t0) { print "demo-bench.sh: the stats file did not change in the window (is the workload stopped?)" > "/dev/stderr"; exit 1 }
	if (n <= 0) { print "demo-bench.sh: no requests completed in the window (is the workload stopped?)" > "/dev/stderr"; exit 1 }
	split("0.5 0.9 0.99", qs, " "); split("p50_ms p90_ms p99_ms", names, " ")
	for (i = 1; i <= 3; i++) {
		want = qs[i] * n; c = 0
		for (b = 0; b <= max; b++) {
			if (!(b in d) || d[b] <= 0) continue
			if (c + d[b] >= want) { v = lo(b) + (lo(b + 1) - lo(b)) * (want - c) / d[b]; break }
			c += d[b]
		}
		printf "{\"metric\": \"%s\", \"value\": %.6f, \"unit\": \"ms\"}\n", names[i], v / 1e6
	}
	printf "{\"metric\": \"throughput\", \"value\": %.3f, \"unit\": \"ops/s\"}\n", (r1 - r0) / (t1 - t0)
}'
