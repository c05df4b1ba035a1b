#!/usr/bin/env bash
# canary-redis.sh — the canary loop on a real server: Redis from Debian on
# 127.0.0.1:$PORT (default 26510) under redis-benchmark, the CFS backend,
# $CYCLES (default 5) cycles every $INTERVAL (default 3m), a fire drill at
# cycle 3 (testdata/drills/redis-harmful.toml: every redis thread under
# SCHED_IDLE) that the guard check must roll back, and every profile that
# passes committed to a git repository of profiles in a temporary directory.
# It ends with the loop's ledger, cycle by cycle, and `git log --stat` of the
# profiles repository. Needs root (BPF tracing, scheduling); run it on a
# quiet machine: the default sizes take about 15 minutes.
#
# Sizes (environment): PORT CYCLES INTERVAL DURATION (observe per cycle)
# MAX_TIME (refine's budget per cycle) REQUESTS (per benchmark run) BG (CPU
# spinners in every trial) METRIC MIN_EFFECT FINAL_N (the guard check's runs per arm, and refine's final's)
# WARMUP OUT (output directory, default a new temp dir).
# A quick check of the machinery, not a measurement:
#   CYCLES=5 INTERVAL=1s DURATION=2s MAX_TIME=15s REQUESTS=2000 FINAL_N=4 \
#   WARMUP=200ms scripts/canary-redis.sh
set -euo pipefail
cd "$(dirname "$0")/.."

[ "$(id -u)" -eq 0 ] || { echo "canary-redis.sh traces with BPF and changes scheduling: run it as root" >&2; exit 1; }
scripts/setup.sh

PORT=${PORT:-26510}
CYCLES=${CYCLES:-5}
INTERVAL=${INTERVAL:-3m}
DURATION=${DURATION:-5s}
MAX_TIME=${MAX_TIME:-100s}
REQUESTS=${REQUESTS:-20000}
BG=${BG:-2}
FINAL_N=${FINAL_N:-8}
WARMUP=${WARMUP:-1s}
# The median: with BestEffort spinners on both CPUs redis-benchmark's p99 is
# bimodal (a run that meets a spinner's slice or not) and varies 50-100%
# between stock runs of a few seconds; its median varies 5-10%.
METRIC=${METRIC:-p50_ms}
MIN_EFFECT=${MIN_EFFECT:-10%}
OUT=${OUT:-$(mktemp -d /tmp/canary-redis.XXXXXX)}

export PATH="$PATH:/usr/local/go/bin"
mkdir -p bin
CGO_ENABLED=0 go build -trimpath -o bin/temper-train ./cmd/temper-train

redis_pid=
cleanup() {
	if [ -n "$redis_pid" ]; then
		kill "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
	fi
}
trap cleanup EXIT
mkdir -p "$OUT/redis"
redis-server --bind 127.0.0.1 --port "$PORT" --save '' --appendonly no --dir "$OUT/redis" --logfile "$OUT/redis/redis.log" &
redis_pid=$!
for _ in $(seq 50); do
	redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null 2>&1 && break
	sleep 0.1
done
redis-cli -h 127.0.0.1 -p "$PORT" ping >/dev/null || { echo "canary-redis.sh: redis-server did not answer on 127.0.0.1:$PORT" >&2; exit 1; }

repo="$OUT/profiles-repo"
git init -q "$repo"
git -C "$repo" config user.name "temper-train canary"
git -C "$repo" config user.email "canary@localhost"
git -C "$repo" commit -q --allow-empty -m "profiles repository"

echo "canary-redis.sh: redis-server pid $redis_pid on 127.0.0.1:$PORT; output in $OUT"
status=0
bin/temper-train canary --pid "$redis_pid" --id redis --backend cfs \
	--cycles "$CYCLES" --interval "$INTERVAL" --duration "$DURATION" --max-failures 3 \
	--bench "redis-benchmark -h 127.0.0.1 -p $PORT -c 20 -n $REQUESTS -t get --csv" \
	--metric "$METRIC" --min-effect "$MIN_EFFECT" --guard throughput:-5% --background "$BG" \
	--max-time "$MAX_TIME" --final-n "$FINAL_N" \
	--warmup "$WARMUP" -q \
	--drill 3:testdata/drills/redis-harmful.toml \
	--git-commit "$repo" --out "$OUT/canary" || status=$?

echo
echo "== the loop's ledger ($OUT/canary/canary.jsonl), cycle by cycle"
jq -r 'select(.type == "cycle") |
	"\(.line)",
	(.drift // [] | .[] | "    drift: \(.)"),
	(.check // [] | .[] | "    check: \(.)"),
	"    ledger: \(.ledger)" + (if .commit then "  commit: \(.commit)" else "" end)' "$OUT/canary/canary.jsonl"
jq -r 'select(.type == "end") | "end: \(.reason)"' "$OUT/canary/canary.jsonl"
echo
echo "== git log --stat ($repo)"
git -C "$repo" log --stat
exit "$status"
