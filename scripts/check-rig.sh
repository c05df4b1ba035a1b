#!/usr/bin/env bash
# check-rig.sh — issue 22's "nothing left changed", with the built binary, as
# root: refine runs in the node-shaped rig (the pod, the client, the spinners
# as BestEffort pods, the tier as cpu.idle) and is killed with SIGKILL
# mid-run, once with a --pid target and once with a -- CMD target; then
# `apply --revert` runs. Before and after, it lists what it checks:
#   - cgroups named temper-rig.* or temper-bg.* in every hierarchy;
#   - rig state files under /run/temper-train/rig and cfs state files;
#   - spinners (temper-bg-spinner) still running;
#   - the --pid target's cgroups (cpu, cpuset) and every thread's policy,
#     nice, slice and CPU affinity;
#   - the -- CMD workload: gone (it dies with the run).
# Usage: make build && scripts/check-rig.sh [WORKDIR]   (default /tmp/check-rig)
set -u
cd "$(dirname "$0")/.."
TT=${TT:-$PWD/bin/temper-train}
W=${1:-/tmp/check-rig}
[ "$(id -u)" -eq 0 ] || { echo "check-rig.sh: needs root (it makes cgroups and applies profiles)" >&2; exit 1; }
[ -x "$TT" ] || { echo "check-rig.sh: $TT missing: run make build" >&2; exit 1; }
rm -rf "$W"; mkdir -p "$W"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
gcc -O2 -Wall -pthread -o "$W/workload" testdata/workload/workload.c
P=synthesize/testdata/workload-2cpu-2c-smt1.toml
fail=0

# state PID: the process's cgroups and each thread's scheduling, one line each.
state() {
	grep -E ':(cpu|cpuset|cpu,cpuacct):' "/proc/$1/cgroup" | sort
	for t in /proc/$1/task/*; do
		printf '%s %s policy=%s nice=%s %s %s\n' "$(basename "$t")" "$(cat "$t/comm")" \
			"$(awk '{print $41}' "$t/stat")" "$(awk '{print $19}' "$t/stat")" \
			"$(awk '$1 == "se.slice" {print "slice=" $3}' "$t/sched")" \
			"$(taskset -pc "$(basename "$t")" 2>/dev/null | sed 's/.*: /cpus=/')"
	done
}
leftovers() {
	echo "cgroups: $(find /sys/fs/cgroup -maxdepth 4 \( -name 'temper-rig.*' -o -name 'temper-bg.*' \) | tr '\n' ' ')"
	echo "rig state files: $(ls /run/temper-train/rig 2>/dev/null | tr '\n' ' ')"
	echo "cfs state files: $(ls /run/temper-train/*.json 2>/dev/null | tr '\n' ' ')"
	echo "spinners: $(pgrep -f temper-bg-spinner | tr '\n' ' ')"
}
check_clean() {
	local l; l=$(leftovers)
	echo "$l"
	if echo "$l" | grep -qE ': .*[^ ]'; then echo "LEFT CHANGED"; fail=1; else echo "nothing left"; fi
}

echo "### --pid target: SIGKILL mid-run, then apply --revert"
"$W/workload" --dir "$W" --stats "$W/a.stats" >/dev/null 2>&1 & A=$!; pids+=("$A")
sleep 1
state $A >"$W/before.txt"
"$TT" refine $P --pid $A --bench "scripts/demo-bench.sh $W/a.stats 1" --adapter jsonl --backend cfs --ladder 0,2 --metric p50_ms --min-effect 95% \
	--out "$W/pid" --max-time 3m -q >"$W/pid.out" 2>&1 & K=$!
sleep 12
echo "during the run:"; leftovers
grep -E ':(cpu|cpuset|cpu,cpuacct):' "/proc/$A/cgroup"
kill -KILL $K; wait $K 2>/dev/null
"$TT" apply --revert; echo "apply --revert exit=$?"
state $A >"$W/after.txt"
if diff "$W/before.txt" "$W/after.txt"; then echo "the --pid target: cgroups and every thread's scheduling as before"; else echo "the --pid target CHANGED"; fail=1; fi
check_clean

echo "### -- CMD target: SIGKILL mid-run, then apply --revert"
"$TT" refine $P --bench "scripts/demo-bench.sh $W/c.stats 1" --adapter jsonl --backend cfs --ladder 0,2 --metric p50_ms --min-effect 95% \
	--out "$W/cmd" --max-time 3m -q -- "$W/workload" --dir "$W" --stats "$W/c.stats" >"$W/cmd.out" 2>&1 & K=$!
sleep 12
echo "during the run:"; leftovers
C=$(pgrep -f "^$W/workload --dir $W --stats $W/c.stats" | head -1)
echo "workload pid ${C:-none}: $(grep -E ':(cpu|cpu,cpuacct):' "/proc/$C/cgroup" 2>/dev/null)"
kill -KILL $K; wait $K 2>/dev/null
sleep 0.5
# A zombie (dead, not yet reaped by init) answers kill -0: read its state.
if [ -n "$C" ] && [ -r "/proc/$C/stat" ] && [ "$(awk '{print $3}' "/proc/$C/stat")" != Z ]; then echo "the -- CMD workload $C STILL RUNS"; fail=1; else echo "the -- CMD workload ${C:-?} died with the run"; fi
"$TT" apply --revert; echo "apply --revert exit=$?"
check_clean
exit $fail
