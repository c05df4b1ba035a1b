#!/usr/bin/env bash
# scripts/bench-analyze.sh (run by make bench through scripts/bench.sh): how
# fast temper-train analyze reads a real trace, against perf sched timehist
# reading a capture of the same run, and whether its memory stays flat as
# the trace grows.
#
# The workload is `perf bench sched pipe -l LOOPS`: two tasks ping-ponging a
# byte over a pair of pipes, nearly nothing but wakeups and context switches
# (a few million events at the default LOOPS). It runs once, recorded by two
# recorders at the same time:
#
#   temper-train observe -- perf sched record -o perf.data -- perf bench ...
#
#   - perf sched record records the machine (perf.data), which perf sched
#     timehist reads;
#   - observe, our BPF tracer, follows perf and the benchmark it forks and
#     writes trace.pftrace (Perfetto), which analyze reads.
#
# Why this anchor: analyze cannot read perf.data (its readers take Perfetto
# and ftrace text; `perf script` output is neither), and converting one
# capture to the other's format would time the converter's choices. So each
# tool reads what its own recorder made of the same run. The captures differ
# in what they hold: perf's adds sched_stat_runtime and sched_migrate_task
# samples and every task on the machine; observe's holds the workload's
# threads and what they meet. Each tool's events/s counts its own input
# (perf: the SAMPLE events of `perf report --stats`; analyze: .trace.events
# of its --json), and the time each takes for the same run is printed too.
#
# The workload is recorded twice this way: LOOPS round trips, and LONG times
# as many (the large trace the targets are judged on; a fixed start-up cost of
# ~20 ms weighs on the short one).
#
# On each trace the tools are then timed REPS times, interleaved (timehist,
# analyze, analyze -1, timehist, ...) so drift on the machine hits all alike,
# and medians are reported:
#   - analyze      as a user runs it: with every CPU of the machine (it decodes
#                  the trace on one goroutine while it analyses on another; see
#                  observe.ReadAhead);
#   - analyze -1   with GOMAXPROCS=1: one CPU, the "per core" figure (perf sched
#                  timehist is single-threaded).
# Wall-clock rates are the headline (the issue's definition); rates per
# CPU-second (user + system time, from GNU time) are printed beside them
# because on a shared machine other load inflates wall time more than CPU
# time. On a VM the gain from the second CPU also depends on where the host
# puts the vCPUs, so compare figures of one run only.
#
# Memory: the peak RSS of analyze (GNU time's "Maximum resident set size") on
# both traces. Flat means the ratio stays near 1.
#
# Speed is reported, never asserted: a MISS does not fail. The script exits
# non-zero only when a measurement is broken (a tool failed, output did not
# parse). Without root, perf or GNU time it prints a NOT RUN line and exits 0.
#
# Environment:
#   LOOPS  round trips of the pipe benchmark (default 300000)
#   REPS   timed runs of each tool (default 3; at least 3 for a median)
#   LONG   the large trace is LONG x LOOPS round trips (default 10; 0 skips it)
#   BIN    the temper-train binary (default bin/temper-train)
#   KEEP=1 keep the work directory; VERBOSE=1 print the raw results
set -euo pipefail
cd "$(dirname "$0")/.."

LOOPS=${LOOPS:-300000}
REPS=${REPS:-3}
LONG=${LONG:-10}
BIN=${BIN:-bin/temper-train}
TIME=/usr/bin/time

notrun() {
	echo
	echo "################################################################################"
	echo "###  ANALYZE BENCHMARK NOT RUN: $*"
	echo "###  (analyze events/s and RSS vs perf sched timehist: run make bench as root)"
	echo "################################################################################"
	exit 0
}
broken() {
	echo "BROKEN MEASUREMENT: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || notrun "needs root (BPF tracer, perf sched record)"
command -v perf >/dev/null 2>&1 || notrun "perf not installed (Debian: apt-get install linux-perf)"
perf bench sched pipe -l 10 >/dev/null 2>&1 || notrun "perf bench sched pipe does not run here"
[ -x "$TIME" ] || notrun "GNU time ($TIME) not installed: it measures peak RSS (Debian: apt-get install time)"
[ "$REPS" -ge 1 ] || broken "REPS=$REPS"
[ -x "$BIN" ] || make --no-print-directory build >/dev/null

tmp=$(mktemp -d /tmp/temper-bench-analyze.XXXXXX)
R=$tmp/results
: >"$R"
cleanup() {
	if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# record DIR LOOPS [PERF]: the pipe benchmark under observe into DIR; with
# PERF=1 also under perf sched record into DIR/perf.data.
record() {
	local dir=$1 loops=$2 with_perf=${3:-0}
	local cmd=(perf bench sched pipe -l "$loops")
	if [ "$with_perf" = 1 ]; then
		cmd=(perf sched record -o "$dir/perf.data" -- "${cmd[@]}")
	fi
	mkdir -p "$dir"
	"$BIN" observe --out "$dir/obs" --duration 60m --top 1 -q -- "${cmd[@]}" >"$dir/record.out" 2>&1 ||
		broken "recording failed: $(tail -5 "$dir/record.out")"
	[ -s "$dir/obs/trace.pftrace" ] || broken "observe wrote no trace: $(tail -5 "$dir/record.out")"
	if [ "$with_perf" = 1 ]; then
		[ -s "$dir/perf.data" ] || broken "perf sched record wrote no perf.data: $(tail -5 "$dir/record.out")"
	fi
}

# timed LABEL REP EVENTS CMD...: runs CMD under GNU time and appends
#   LABEL REP events wall_s user_s sys_s maxrss_kb
# EVENTS is a number, or "json:FILE" to read .trace.events from analyze's JSON.
timed() {
	local label=$1 rep=$2 events=$3
	shift 3
	"$TIME" -f '%e %U %S %M' -o "$tmp/time.out" "$@" >/dev/null 2>"$tmp/cmd.err" ||
		broken "$label failed: $(tail -5 "$tmp/cmd.err")"
	case $events in
	json:*)
		events=$(tr -d ' \n\t' <"${events#json:}" | grep -o '"trace":{[^}]*}' | grep -o '"events":[0-9]*' | cut -d: -f2) ||
			broken "$label: no .trace.events in ${events#json:}"
		;;
	esac
	[ -n "$events" ] && [ "$events" -gt 0 ] || broken "$label: no event count"
	local t
	t=$(tail -1 "$tmp/time.out")
	[[ $t =~ ^[0-9.]+\ [0-9.]+\ [0-9.]+\ [0-9]+$ ]] || broken "$label: GNU time printed '$t'"
	echo "$label $rep $events $t" >>"$R"
}

# bench NAME DIR: times the tools on the recording in DIR, REPS times interleaved.
bench() {
	local name=$1 dir=$2 perf_events rep
	perf_events=$(perf report -i "$dir/perf.data" --stats 2>/dev/null | awk '
		/^Aggregated stats/ { agg = 1; next }
		/stats:$/ { agg = 0 }
		agg && /SAMPLE events:/ { print $3; exit }') || true
	[ -n "$perf_events" ] && [ "$perf_events" -gt 0 ] || broken "no SAMPLE count in perf report --stats for $dir/perf.data"
	local analyze=("$BIN" analyze "$dir/obs/trace.pftrace" --snapshot "$dir/obs/snapshot.json" --json "$dir/a.json")
	for ((rep = 1; rep <= REPS; rep++)); do
		timed "$name.timehist" "$rep" "$perf_events" perf sched timehist -i "$dir/perf.data"
		timed "$name.analyze" "$rep" "json:$dir/a.json" "${analyze[@]}"
		GOMAXPROCS=1 timed "$name.analyze1" "$rep" "json:$dir/a.json" "${analyze[@]}"
		printf '  %s: rep %d/%d done (%ds)\n' "$name" "$rep" "$REPS" $(($(date +%s) - t_start))
	done
	tr -d ' \n\t' <"$dir/a.json" | grep -o '"trace":{[^}]*}' | grep -o '"lost_events":[0-9]*' | cut -d: -f2 >"$dir/lost" || echo "?" >"$dir/lost"
	rm -f "$dir/perf.data"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)
echo "analyze vs perf sched timehist: recording perf bench sched pipe -l $LOOPS under perf sched record and temper-train observe at once ..."
record "$tmp/short" "$LOOPS" 1
bench short "$tmp/short"
if [ "$LONG" -gt 0 ]; then
	echo "recording perf bench sched pipe -l $((LOOPS * LONG)) ($LONG x as long) the same way ..."
	record "$tmp/long" $((LOOPS * LONG)) 1
	bench long "$tmp/long"
fi
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
[ "${VERBOSE:-0}" = 1 ] && cat "$R"
echo
awk -v loops="$LOOPS" -v long="$LONG" -v cpus="$(nproc)" -v lost_short="$(cat "$tmp/short/lost")" \
	-v lost_long="$(cat "$tmp/long/lost" 2>/dev/null || echo -)" -v load_start="$load_start" -v load_end="$load_end" '
function add(key, v) { vals[key, ++cnt[key]] = v }
function med(key,   n, i, j, t, s) {
	n = cnt[key]
	if (!n) return -1
	for (i = 1; i <= n; i++) s[i] = vals[key, i]
	for (i = 2; i <= n; i++) { t = s[i]; for (j = i - 1; j >= 1 && s[j] > t; j--) s[j + 1] = s[j]; s[j + 1] = t }
	return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2
}
function verdict(ok) { return ok ? "PASS" : "MISS" }
{
	add($1 ".events", $3); add($1 ".wall", $4); add($1 ".cpu", $5 + $6); add($1 ".rss", $7 / 1024)
	add($1 ".rate", $4 > 0 ? $3 / $4 : 0); add($1 ".cpurate", $5 + $6 > 0 ? $3 / ($5 + $6) : 0)
}
function row(name, k) {
	printf "  %-26s %10d %8.2f %10.2f M %8.2f %10.2f M %9.1f MiB\n", name, med(k ".events"), med(k ".wall"), med(k ".rate") / 1e6,
		med(k ".cpu"), med(k ".cpurate") / 1e6, med(k ".rss")
}
function table(t, n, lost) {
	printf "\n%s trace: perf bench sched pipe -l %d recorded by both at once; %d timed runs of each, interleaved, medians\n", t, n, cnt[t ".analyze.rate"]
	printf "  %-26s %10s %8s %12s %8s %12s %13s\n", "tool (input)", "events", "wall s", "events/s", "CPU s", "events/CPU-s", "peak RSS"
	row("perf sched timehist", t ".timehist")
	row("temper-train analyze", t ".analyze"); row("temper-train analyze -1", t ".analyze1")
	printf "  (perf.data: every task on the machine, sched_stat_runtime and sched_migrate_task included; observe trace.pftrace: the workload and what it meets, %s events lost in recording; analyze: %d CPUs, analyze -1: GOMAXPROCS=1)\n", lost, cpus
	printf "  analyze / timehist: %.2fx events/s (-1: %.2fx; per CPU-second %.2fx); the same run takes timehist %.2f s, analyze %.2f s (%.2fx as fast), analyze -1 %.2f s (%.2fx)\n",
		med(t ".analyze.rate") / med(t ".timehist.rate"), med(t ".analyze1.rate") / med(t ".timehist.rate"), med(t ".analyze1.cpurate") / med(t ".timehist.cpurate"),
		med(t ".timehist.wall"), med(t ".analyze.wall"), med(t ".timehist.wall") / med(t ".analyze.wall"), med(t ".analyze1.wall"), med(t ".timehist.wall") / med(t ".analyze1.wall")
}
END {
	if (!cnt["short.timehist.rate"] || !cnt["short.analyze.rate"]) { print "BROKEN MEASUREMENT: no results" > "/dev/stderr"; exit 1 }
	printf "analyze vs perf sched timehist (shared, noisy machine: load average %s at the start, %s at the end; the per-CPU-second rates are the steadier figures)\n", load_start, load_end
	table("short", loops, lost_short)
	big = "short"
	if (cnt["long.analyze.rate"]) { table("long", loops * long, lost_long); big = "long" }
	ratio = med(big ".analyze.rate") / med(big ".timehist.rate"); percore = med(big ".analyze1.rate")
	printf "\ntargets, on the %s trace (%d events)       measured     target\n", big, med(big ".analyze.events")
	printf "  analyze vs perf sched timehist, events/s   %7.2fx     >= 10x          %s   (analyze -1: %.2fx; time for the same run: %.2fx)\n",
		ratio, verdict(ratio >= 10), med(big ".analyze1.rate") / med(big ".timehist.rate"), med(big ".timehist.wall") / med(big ".analyze.wall")
	printf "  analyze events/s per core (GOMAXPROCS=1)  %6.2f M     >= 10 M         %s   (per CPU-second: %.2f M; short trace: %.2f M)\n",
		percore / 1e6, verdict(percore >= 10e6), med(big ".analyze1.cpurate") / 1e6, med("short.analyze1.rate") / 1e6
	if (cnt["long.analyze.rss"]) {
		r = med("long.analyze.rss") / med("short.analyze.rss")
		printf "  peak RSS, %2dx longer trace                 %7.2fx     <= 1.25x (flat) %s   (%.1f -> %.1f MiB; GOMAXPROCS=1: %.1f -> %.1f MiB)\n", long, r, verdict(r <= 1.25),
			med("short.analyze.rss"), med("long.analyze.rss"), med("short.analyze1.rss"), med("long.analyze1.rss")
	}
}' "$R"
