#!/usr/bin/env bash
# check-safety.sh — what issue 26 asks to see, with the built binary, as root:
#   1. refine --resume on the ledger of a run that is still alive is refused
#      before anything is touched (the live ledger byte-identical, no "cut off"
#      note, the live run still running);
#   2. a second refine on another target while the first owns the node refuses;
#   3. resuming a SIGKILLed run's ledger with another --pid or another --bench
#      refuses in one line; apply --revert then leaves nothing behind;
#   4. a gzip bomb of one endless ftrace text line fails fast in little memory.
# Usage: make build && scripts/check-safety.sh [WORKDIR]   (default /tmp/check-safety)
set -u
cd "$(dirname "$0")/.."
TT=${TT:-$PWD/bin/temper-train}
W=${1:-/tmp/check-safety}
[ "$(id -u)" -eq 0 ] || { echo "check-safety.sh: needs root (it applies profiles and starts spinners)" >&2; exit 1; }
[ -x "$TT" ] || { echo "check-safety.sh: $TT missing: run make build" >&2; exit 1; }
rm -rf "$W"; mkdir -p "$W"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null' EXIT
gcc -O2 -Wall -pthread -o "$W/workload" testdata/workload/workload.c
P=synthesize/testdata/workload-2cpu-2c-smt1.toml
"$W/workload" --dir "$W" --stats "$W/a.stats" >/dev/null 2>&1 & A=$!; pids+=("$A")
"$W/workload" --dir "$W" --stats "$W/b.stats" >/dev/null 2>&1 & B=$!; pids+=("$B")
sleep 1
BENCH="scripts/demo-bench.sh $W/a.stats 1"

echo "### 1. resume of a live run's ledger"
"$TT" refine $P --pid $A --bench "$BENCH" --adapter jsonl --backend cfs --background 1 --out "$W/live" --max-time 2m -q \
	>"$W/live.out" 2>"$W/live.err" & L=$!; pids+=("$L")
sleep 6
cp "$W/live/ledger.jsonl" "$W/before.jsonl"
"$TT" refine $P --pid $A --bench "$BENCH" --adapter jsonl --resume "$W/live/ledger.jsonl"; echo "resume exit=$?"
cp "$W/live/ledger.jsonl" "$W/after.jsonl"
same=$(cmp -n "$(stat -c %s "$W/before.jsonl")" "$W/before.jsonl" "$W/after.jsonl" >/dev/null && echo none || echo SOME)
echo "live ledger: $(wc -l <"$W/before.jsonl") lines before, $(wc -l <"$W/after.jsonl") after; bytes of the first copy changed: $same"
echo "'cut off' notes in the live ledger: $(grep -c 'cut off' "$W/after.jsonl")"
echo "live run still alive: $(kill -0 $L 2>/dev/null && echo yes || echo no)"

echo "### 2. a second refine on another target"
"$TT" refine $P --pid $B --bench "scripts/demo-bench.sh $W/b.stats 1" --adapter jsonl --backend cfs --out "$W/second" -q
echo "second exit=$?"
kill -INT $L; wait $L; echo "live run exit=$? (SIGINT)"; tail -n 1 "$W/live.err"

echo "### 3. resume a SIGKILLed run's ledger with another --pid and another --bench"
"$TT" refine $P --pid $A --bench "$BENCH" --adapter jsonl --backend cfs --background 1 --out "$W/killed" --max-time 2m -q \
	>/dev/null 2>&1 & K=$!
sleep 8; kill -KILL $K; wait $K 2>/dev/null
"$TT" refine $P --pid $B --bench "$BENCH" --adapter jsonl --resume "$W/killed/ledger.jsonl"; echo "other --pid exit=$?"
"$TT" refine $P --pid $A --bench "scripts/demo-bench.sh $W/a.stats 2" --adapter jsonl --resume "$W/killed/ledger.jsonl"; echo "other --bench exit=$?"
"$TT" apply --revert; echo "apply --revert exit=$?"
echo "left in /run/temper-train: $(ls /run/temper-train 2>/dev/null | tr '\n' ' ')(node.lease stays, unlocked); temper-bg cgroups: $(find /sys/fs/cgroup -maxdepth 3 -name 'temper-bg*' | wc -l)"

echo "### 4. gzip bomb"
{ zcat testdata/traces/workload-tracefs.txt.gz | head -1000; head -c 1000000000 /dev/zero; } | gzip -1 >"$W/z.txt.gz"
/usr/bin/time -v "$TT" trace summary "$W/z.txt.gz" 2>"$W/time.txt" >/dev/null; echo "exit=$?"
grep -E 'temper-train:|Elapsed|Maximum resident' "$W/time.txt"
