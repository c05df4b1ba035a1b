#!/usr/bin/env bash
# Records the real-server traces analyze's tests read (testdata/traces/servers/):
# each server from Debian, under its own load tool, traced with
# `temper-train observe` for a few seconds in the middle of the load.
#
#   scripts/record-servers.sh [mariadb|postgres|postgres-async|redis|memcached ...]   (root)
#
# The tests' expectations come from each server's documented thread roles,
# never from what analyze happens to print. Redis and memcached name their
# threads by role; MariaDB (every thread "mariadbd") and PostgreSQL (every
# process "postgres") do not, so for them roles.tsv (tid → role) is taken
# from the server's own account while the trace runs: MariaDB's
# performance_schema.threads, PostgreSQL's process titles.
#
# Needs: mariadb-server sysbench postgresql-15 redis-server redis-tools
# memcached libmemcached-tools (apt-get install ...). CI does not run this:
# the traces are committed, so the analysis tests need no servers.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
[ "$(id -u)" -eq 0 ] || { echo "record-servers: tracing needs root" >&2; exit 1; }

OUT=testdata/traces/servers
DUR=${DUR:-5s}      # trace length
LOAD=${LOAD:-16}    # load length in seconds; the trace starts 3 s in
WORK=$(mktemp -d /tmp/record-servers.XXXXXX)
chmod 755 "$WORK"
trap 'cleanup' EXIT
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}

make --no-print-directory build >/dev/null
TT=$PWD/bin/temper-train

need() { command -v "$1" >/dev/null || { echo "record-servers: $1 not found (apt-get install $2)" >&2; exit 1; }; }

# observe NAME PID: trace PID's process tree for $DUR into $OUT/NAME.
observe() {
	local name=$1 pid=$2 dir=$WORK/obs-$1
	"$TT" observe --pid "$pid" --duration "$DUR" --out "$dir" -q --top 0 > "$WORK/$name.summary"
	mkdir -p "$OUT/$name"
	gzip -9 -c "$dir/trace.pftrace" > "$OUT/$name/trace.pftrace.gz"
	cp "$dir/snapshot.json" "$OUT/$name/snapshot.json"
	echo "record-servers: $name: $(grep '^events' "$WORK/$name.summary")"
}

wait_for() { # wait_for SECONDS COMMAND...
	local n=$1; shift
	for _ in $(seq $((n * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "record-servers: timed out waiting for: $*" >&2; exit 1
}

# MariaDB 10.11 (InnoDB) under sysbench oltp_read_write, 8 client threads.
# Every MariaDB thread is named "mariadbd"; performance_schema.threads maps
# each OS thread id to its role (thread/sql/one_connection: a client
# connection; thread/innodb/*: InnoDB's page cleaner and its task pool, which
# runs asynchronous I/O completions, purge and background work; the rest are
# housekeeping: manager, signal handler, timers, Aria checkpoints).
rec_mariadb() {
	need mariadbd mariadb-server; need sysbench sysbench
	local d=$WORK/mariadb sock=$WORK/mariadb.sock
	mariadb-install-db --no-defaults --datadir="$d" --user=root >/dev/null
	mariadbd --no-defaults --datadir="$d" --socket="$sock" --skip-networking --user=root \
		--innodb-buffer-pool-size=256M --performance-schema=ON > "$WORK/mariadb.log" 2>&1 &
	pids+=($!); local pid=$!
	wait_for 30 mariadb -S "$sock" -uroot -e 'select 1'
	mariadb -S "$sock" -uroot -e 'create database sbtest'
	local sb=(sysbench oltp_read_write --mysql-socket="$sock" --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=20000)
	"${sb[@]}" prepare >/dev/null
	"${sb[@]}" --threads=8 --time="$LOAD" run > "$WORK/sysbench.out" &
	local load=$!
	sleep 3
	(sleep 2; mariadb -S "$sock" -uroot -N -e \
		'select THREAD_OS_ID, NAME from performance_schema.threads where THREAD_OS_ID is not null order by THREAD_OS_ID' \
		> "$WORK/mariadb.roles") &
	local roles=$!
	observe mariadb "$pid"
	wait "$roles" "$load"
	mv "$WORK/mariadb.roles" "$OUT/mariadb/roles.tsv"
	grep -E 'transactions:|95th' "$WORK/sysbench.out" | sed 's/^ */record-servers: mariadb: sysbench /'
	kill "$pid"; wait "$pid" 2>/dev/null || true
}

# PostgreSQL 15 under pgbench (TPC-B like), 8 clients. Every process is named
# "postgres"; its process title says its role: "postgres: <user> <db> <client>
# <state>" for a client backend, "postgres: walwriter", "checkpointer",
# "background writer", "autovacuum launcher", "logical replication launcher".
#
# rec_postgres [NAME [SETTING...]]: NAME is the output directory (default
# postgres), each SETTING a server -c option.
rec_postgres() {
	local name=${1:-postgres}
	local settings=()
	for s in "${@:2}"; do settings+=(-c "$s"); done
	local bin=/usr/lib/postgresql/15/bin
	[ -x $bin/postgres ] || { echo "record-servers: $bin/postgres not found (apt-get install postgresql-15)" >&2; exit 1; }
	need pgbench postgresql-client-15
	local d=$WORK/pg
	mkdir -p "$d" && chown postgres "$d"
	runuser -u postgres -- $bin/initdb -D "$d/data" -A trust >/dev/null
	# setpriv execs (runuser would stay the parent), so $! is the postmaster.
	setpriv --reuid=postgres --regid=postgres --init-groups $bin/postgres -D "$d/data" -k "$d" -c listen_addresses='' "${settings[@]}" > "$WORK/pg.log" 2>&1 &
	pids+=($!); local pid=$!
	wait_for 30 runuser -u postgres -- psql -h "$d" -c 'select 1' postgres
	runuser -u postgres -- pgbench -h "$d" -i -s 10 -q postgres >/dev/null 2>&1
	runuser -u postgres -- pgbench -h "$d" -c 8 -j 2 -T "$LOAD" postgres > "$WORK/pgbench.out" 2>&1 &
	local load=$!
	sleep 3
	(sleep 2; ps -o pid=,args= --ppid "$pid" | sed 's/^ *//; s/ /\t/' > "$WORK/pg.roles"; printf '%s\tpostgres: postmaster\n' "$pid" >> "$WORK/pg.roles") &
	local roles=$!
	observe "$name" "$pid"
	wait "$roles" "$load" || true
	sort -n "$WORK/pg.roles" > "$OUT/$name/roles.tsv"
	grep -E '^tps|latency average' "$WORK/pgbench.out" | sed "s/^/record-servers: $name: pgbench /"
	kill -INT "$pid"; wait "$pid" 2>/dev/null || true # fast shutdown
	rm -rf "$d"
}

# The same with synchronous_commit = off: the backends no longer flush their
# own commit records; each wakes the WAL writer, which writes and flushes
# them (PostgreSQL docs, "Asynchronous Commit"), so the WAL writer works in
# the window.
rec_postgres_async() { rec_postgres postgres-async synchronous_commit=off; }

# Redis 7 under redis-benchmark (SET/GET, 20 clients), AOF on with
# everysec fsync so the background threads have their documented work: the
# main thread serves every command (event loop); bio_aof fsyncs the AOF,
# bio_close_file closes files, bio_lazy_free frees memory lazily.
rec_redis() {
	need redis-server redis-server; need redis-benchmark redis-tools
	local port=16379
	redis-server --port $port --bind 127.0.0.1 --save '' --appendonly yes --appendfsync everysec \
		--dir "$WORK" > "$WORK/redis.log" 2>&1 &
	pids+=($!); local pid=$!
	wait_for 10 redis-cli -p $port ping
	redis-benchmark -p $port -c 20 -n 100000000 -t set,get -r 100000 -d 256 -q > "$WORK/redis-bench.out" 2>&1 &
	local load=$!
	sleep 3
	observe redis "$pid"
	kill $load 2>/dev/null || true
	kill "$pid"; wait "$pid" 2>/dev/null || true
}

# memcached 1.6 (4 worker threads) under memaslap (libmemcached's load
# generator: 2 threads, 64 concurrent connections, 9:1 get:set): mc-worker
# threads serve connections; mc-log, mc-lrumaint, mc-slabmaint,
# mc-itemcrawler and mc-assocmaint are background maintainers; the main
# thread accepts connections and hands them to workers.
rec_memcached() {
	need memcached memcached; need memcaslap libmemcached-tools
	local port=11299
	memcached -u nobody -t 4 -p $port -l 127.0.0.1 -U 0 -m 256 > "$WORK/memcached.log" 2>&1 &
	pids+=($!); local pid=$!
	wait_for 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
	memcaslap -s 127.0.0.1:$port -T 2 -c 64 -t "${LOAD}s" > "$WORK/memaslap.out" 2>&1 &
	local load=$!
	sleep 3
	observe memcached "$pid"
	wait "$load" || true
	grep -E '^Run time|TPS' "$WORK/memaslap.out" | tail -2 | sed 's/^/record-servers: memcached: memaslap /'
	kill "$pid"; wait "$pid" 2>/dev/null || true
}

servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(mariadb postgres postgres-async redis memcached)
for s in "${servers[@]}"; do
	case $s in
	mariadb | postgres | redis | memcached) "rec_$s" ;;
	postgres-async) rec_postgres_async ;;
	*) echo "record-servers: unknown server $s (mariadb, postgres, postgres-async, redis, memcached)" >&2; exit 2 ;;
	esac
done
