#!/usr/bin/env bash
# Runs issue 16's real-server check: for each server from Debian, `temper-train
# train` against the running server under its real load tool, CFS backend,
# background ladder 0,1,2,4: observe → analyze → synthesize → refine against
# stock CFS, writing the ledger, REPORT.md and the refined profile.
#
#   scripts/ladder-servers.sh [redis|memcached|postgres ...]   (root; a quiet machine)
#
#   OUT       where each run's directory goes (default /tmp/ladder)
#   MAXTIME   refine's wall-time budget per server (default 12m)
#   LADDER    the background levels (default 0,1,2,4)
#   SEED      the ABBA order's seed (default 16)
#   EXTRA     more train flags (e.g. "--equivalence 3%" with LADDER=0)
#   REDIS_N   GETs per Redis trial (default 50000)
#
# Each run takes MAXTIME plus about a minute. The benchmarks compare
# arms measured alongside each other, but a machine busy with other work
# raises the noise until calibration refuses: run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
[ "$(id -u)" -eq 0 ] || { echo "ladder-servers: tracing and scheduling need root" >&2; exit 1; }
OUT=${OUT:-/tmp/ladder}
MAXTIME=${MAXTIME:-12m}
LADDER=${LADDER:-0,1,2,4}
SEED=${SEED:-16}
EXTRA=${EXTRA:-}          # more train flags, e.g. "--equivalence 3%"
REDIS_N=${REDIS_N:-50000} # GETs per trial (300000: ~5.5 s, p99 noise ~8%)
WORK=$(mktemp -d /tmp/ladder-servers.XXXXXX)
chmod 755 "$WORK"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
make --no-print-directory build >/dev/null
TT=$PWD/bin/temper-train
need() { command -v "$1" >/dev/null || { echo "ladder-servers: $1 not found (apt-get install $2)" >&2; exit 1; }; }
wait_for() { # wait_for SECONDS COMMAND...
	local n=$1; shift
	for _ in $(seq $((n * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "ladder-servers: timed out waiting for: $*" >&2; exit 1
}
# train NAME ARGS...: one train run into $OUT/NAME; its ladder table is printed.
train() {
	local name=$1; shift
	rm -rf "${OUT:?}/$name"
	mkdir -p "$OUT"
	echo "ladder-servers: $name: train $*"
	"$TT" train --id "$name" --out "$OUT/$name" --backend cfs --ladder "$LADDER" \
		--max-time "$MAXTIME" --seed "$SEED" --duration 5s $EXTRA "$@" || echo "ladder-servers: $name: train exited $?"
	[ -f "$OUT/$name/refine/REPORT.md" ] && sed -n '/^## Background ladder/,/^## /p' "$OUT/$name/refine/REPORT.md" | sed '$d'
}
# Redis 7 under redis-benchmark GET, 20 clients (closed loop: the tool has no rate option).
run_redis() {
	need redis-server redis-server; need redis-benchmark redis-tools
	train redis --min-effect 20% \
		--bench "redis-benchmark -h 127.0.0.1 -p 26500 -c 20 -n $REDIS_N -t get --csv" \
		-- redis-server --bind 127.0.0.1 --port 26500 --save '' --appendonly no
}
# memcached 1.6, 4 worker threads, under memaslap (90% get). memaslap's
# percentiles come from a power-of-two histogram (too coarse to compare at
# a few percent), so the metric is its exact mean latency, throughput guarded.
# In the node rig its mean latency at four spinners varies 37% from run to run
# (1.4826·MAD/median of 8): at a 10% minimum effect calibration refuses (110
# trials per arm), so the minimum effect is 20%.
run_memcached() {
	need memcached memcached; need memcaslap libmemcached-tools
	train memcached --metric mean_ms --min-effect 20% \
		--bench 'memcaslap -s 127.0.0.1:26520 -T 2 -c 16 -t 3s -S 1h' \
		-- memcached -l 127.0.0.1 -p 26520 -U 0 -t 4 -u nobody
}
# PostgreSQL 15 under pgbench (TPC-B like, scale 10, 4 clients), closed loop,
# synchronous_commit off. Open loop was tried first and refused by
# calibration, p99 noise far above any effect worth finding (docs/
# refine-results.md has the figures): at 300/s the CPUs idle most of the time
# and a wake-up from idle on this VM is slow and uneven; at 1500/s the
# schedule lag builds up near saturation. Closed loop has neither: its tail
# understates queueing (coordinated omission), as the report says.
run_postgres() {
	local bin=/usr/lib/postgresql/15/bin
	[ -x $bin/postgres ] || { echo "ladder-servers: $bin/postgres not found (apt-get install postgresql-15)" >&2; exit 1; }
	need pgbench postgresql-client-15
	local d=$WORK/pg
	mkdir -p "$d" && chown postgres "$d"
	runuser -u postgres -- $bin/initdb -D "$d/data" -A trust >/dev/null
	# setpriv execs (runuser would stay the parent), so $! is the postmaster.
	setpriv --reuid=postgres --regid=postgres --init-groups $bin/postgres -D "$d/data" -k "$d" -c listen_addresses='' -c synchronous_commit=off > "$WORK/pg.log" 2>&1 &
	pids+=($!); local pid=$!
	wait_for 30 pgbench -h "$d" -U postgres -i -s 10 -q postgres
	train postgres --pid "$pid" --min-effect 20% \
		--bench "pgbench -h $d -U postgres -c 4 -j 2 -T 4 postgres"
	kill -INT "$pid"; wait "$pid" 2>/dev/null || true # fast shutdown
}
for s in "${@:-redis memcached postgres}"; do
	for n in $s; do
		case $n in
		redis | memcached | postgres) "run_$n" ;;
		*) echo "ladder-servers: unknown server $n (redis, memcached, postgres)" >&2; exit 2 ;;
		esac
	done
done
