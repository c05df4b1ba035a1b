#!/bin/sh
# planted-bench.sh TID [SECONDS] — a jsonl benchmark with a planted effect for
# the canary tests: it waits SECONDS (default 0.2), then reports p99_ms from
# how thread TID is really scheduled right now (read from /proc): 1.0 under
# stock CFS, 0.6 with a fair slice shorter than the kernel's default (a
# latency group's slice_us) or a negative nice (a weight > 100), 3.0 under
# SCHED_IDLE (a yield group), each with 3% multiplicative noise. The
# scheduling is applied and reverted by the real backend; only the effect on
# the number is planted.
set -eu
tid=${1:?usage: planted-bench.sh TID [SECONDS]}
sleep "${2:-0.2}"
stat=$(cat "/proc/$tid/stat") || { echo "planted-bench.sh: thread $tid is gone" >&2; exit 1; }
# The default slice is kthreadd's (pid 2 never gets one of its own).
slice=$(awk '$1 == "se.slice" { print $3 }' "/proc/$tid/sched" 2>/dev/null || true)
default=$(awk '$1 == "se.slice" { print $3 }' /proc/2/sched 2>/dev/null || true)
noise=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
# fields after the ") " that ends comm: nice is field 19, policy field 41.
printf '%s\n' "${stat##*) }" | awk -v r="$noise" -v slice="${slice:-0}" -v def="${default:-0}" '{
	nice = $17; policy = $39; f = 1.0
	if (policy == 5) f = 3.0; else if (nice < 0 || (slice > 0 && def > 0 && slice < def)) f = 0.6
	v = f * (1 + 0.03 * (2 * r / 65535 - 1))
	printf "{\"metric\": \"p99_ms\", \"value\": %.6f, \"unit\": \"ms\"}\n", v
	printf "{\"metric\": \"throughput\", \"value\": 1000, \"unit\": \"req/s\"}\n"
}'
