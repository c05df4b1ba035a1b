#!/usr/bin/env bash
# scripts/bench-tracer.sh (run by make bench through scripts/bench.sh): what
# tracing costs a context-switch-heavy workload, measured end to end.
#
# The workload is `perf bench sched pipe`: two tasks ping-ponging a byte over
# a pair of pipes, nearly nothing but wakeups and context switches. It runs
# REPS times in each mode, the modes interleaved (base, perf, observe,
# tracefs, base, perf, ...) so that drift on the machine hits all alike:
#
#   base     no tracing
#   perf     perf sched record (system-wide, as people use it)
#   observe  bin/temper-train observe --pid on the benchmark: tracing is
#            attached before the benchmark starts (it waits on a FIFO) and
#            the benchmark's own timing covers only traced work
#   tracefs  sched_switch + sched_waking into a private tracefs instance, no
#            reader: the kernel's own tracer, for reference
#
# then the same with the pipe pair pinned to CPU 0 (base, perf, observe:
# steadier, see section below), then under observe at the highest event
# rate this machine makes (two threaded pipe pairs at once), with BPF
# run-time statistics on.
#
# Speed is reported, never asserted: a MISS does not fail. The script exits
# non-zero only when a measurement is broken (a tool failed, output did not
# parse). Without root or perf it prints a NOT RUN line and exits 0.
#
# Environment:
#   LOOPS      round trips per run (default 100000)
#   REPS       repetitions of each mode (default 7)
#   MAX_LOOPS  round trips per pipe pair in the max-rate runs (default 200000)
#   RECORD_DECODE_NS  BenchmarkRecordDecode's ns/event, printed alongside
#   BIN        the temper-train binary (default bin/temper-train)
#   BIN_B      a second build, e.g. with a proposed change: measured as one
#              more interleaved mode (A/B)
#   MODES      a subset of "base perf observe tracefs max" (experiments; the
#              summary needs base and observe)
#   PINNED_REPS  repetitions of the same-CPU section (default 5; 0: skip)
#   PIN_CPU=N  run the main section's pipe pair on CPU N only (and skip the
#              same-CPU section)
#   KEEP=1     keep the work directory; VERBOSE=1 print the raw results
set -euo pipefail
cd "$(dirname "$0")/.."

LOOPS=${LOOPS:-100000}
REPS=${REPS:-7}
MAX_LOOPS=${MAX_LOOPS:-200000}
BIN=${BIN:-bin/temper-train}
BIN_B=${BIN_B:-}
PIPE=(perf bench sched pipe -l "$LOOPS")
if [ -n "${PIN_CPU:-}" ]; then PIPE=(taskset -c "$PIN_CPU" "${PIPE[@]}"); fi
MODES=${MODES:-base perf observe tracefs max}
PINNED_REPS=${PINNED_REPS:-5}

notrun() {
	echo
	echo "################################################################################"
	echo "###  TRACER BENCHMARK NOT RUN: $*"
	echo "###  (overhead vs perf sched record, lost events, cost per event: run make bench as root)"
	echo "################################################################################"
	exit 0
}
broken() {
	echo "BROKEN MEASUREMENT: $*" >&2
	exit 1
}

[ "$(id -u)" = 0 ] || notrun "needs root (BPF tracer, perf sched record, tracefs)"
command -v perf >/dev/null 2>&1 || notrun "perf not installed (Debian: apt-get install linux-perf)"
perf bench sched pipe -l 10 >/dev/null 2>&1 || notrun "perf bench sched pipe does not run here"
[ -x "$BIN" ] || make --no-print-directory build >/dev/null
want() { case " $MODES " in *" $1 "*) return 0 ;; esac; return 1; }

tmp=$(mktemp -d /tmp/temper-bench.XXXXXX)
R=$tmp/results
: >"$R"
started=()  # pids this script started, for cleanup
tracefs=""
inst=""
bpf_stats_old=""
cleanup() {
	local p
	for p in "${started[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	if [ -n "$inst" ] && [ -d "$inst" ]; then
		echo 0 >"$inst/tracing_on" 2>/dev/null || true
		rmdir "$inst" 2>/dev/null || true
	fi
	if [ -n "$bpf_stats_old" ]; then
		echo "$bpf_stats_old" >/proc/sys/kernel/bpf_stats_enabled 2>/dev/null || true
	fi
	if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# ops/s of every `perf bench sched pipe` report in $1 (one per line).
ops_of() {
	awk '/ops\/sec/ { print $1; n++ } END { if (!n) exit 1 }' "$1"
}

# The gate: wait on a FIFO, run the command, report "status start_ns end_ns"
# through a second FIFO, then stay alive until a third is written, so the
# tracer's user-space CPU can be read while it is still running.
cat >"$tmp/gated.sh" <<'EOF'
#!/bin/sh
go=$1 done=$2 end=$3 out=$4
shift 4
read _ <"$go"
t0=$(date +%s%N)
"$@" >"$out" 2>&1
st=$?
t1=$(date +%s%N)
echo "$st $t0 $t1" >"$done"
read _ <"$end"
EOF
chmod +x "$tmp/gated.sh"

# CPU time (ns) of all threads of process $1, its context switches, and the
# run time and run count of its BPF programs (non-zero with bpf_stats on).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
ctx_switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { s += $2 } END { printf "%.0f\n", s }'; }
bpf_runtime() { cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^run_time_ns:/ { t += $2 } /^run_cnt:/ { c += $2 } END { printf "%.0f %.0f\n", t, c }'; }

# observe_run LABEL REP BINARY CMD...: CMD under BINARY observe, gated. Appends
#   LABEL REP ops events bytes lost cpu_ns wall_ns ctxsw bpf_ns bpf_runs startup_cpu_ns
observe_run() {
	local label=$1 rep=$2 bin=$3
	shift 3
	local d=$tmp/$label.$rep
	mkdir -p "$d"
	mkfifo "$d/go" "$d/done" "$d/end"
	"$tmp/gated.sh" "$d/go" "$d/done" "$d/end" "$d/bench.out" "$@" &
	local tpid=$!
	started+=("$tpid")
	"$bin" observe --pid "$tpid" --duration 30m --top 5 --out "$d/out" >"$d/observe.out" 2>"$d/observe.err" &
	local opid=$!
	started+=("$opid")
	local i
	for ((i = 0; i < 600; i++)); do
		grep -q '^tracing ' "$d/observe.err" 2>/dev/null && break
		kill -0 "$opid" 2>/dev/null || broken "observe exited before attaching: $(cat "$d/observe.err")"
		sleep 0.05
	done
	[ "$i" -lt 600 ] || broken "observe did not attach within 30 s"
	local c0 x0 b0
	c0=$(cpu_ns "$opid")
	x0=$(ctx_switches "$opid")
	b0=$(bpf_runtime "$opid")
	timeout 60 sh -c 'echo go >"$1"' sh "$d/go" || broken "$label: the gated benchmark is gone"
	local st t0 t1 line
	line=$(timeout 1800 cat "$d/done") || broken "$label: the benchmark did not finish in 30 min"
	read -r st t0 t1 <<<"$line"
	[ "$st" = 0 ] || broken "$label: benchmark failed (status $st): $(cat "$d/bench.out")"
	sleep 0.3 # observe drains the ring buffer every 100 ms at the latest
	local c1 x1 b1
	c1=$(cpu_ns "$opid")
	x1=$(ctx_switches "$opid")
	b1=$(bpf_runtime "$opid")
	echo end >"$d/end"
	wait "$tpid" || true
	wait "$opid" || broken "observe failed: $(tail -5 "$d/observe.err")"
	started=()
	local ops events lost bytes sev
	ops=$(ops_of "$d/bench.out" | awk '{ s += $1 } END { printf "%.0f\n", s }') || broken "$label: no ops/sec in $(cat "$d/bench.out")"
	local ev
	ev=$(tr -d ' \n\t' <"$d/out/snapshot.json" | grep -o '"events":{[^}]*}') || broken "no events in $d/out/snapshot.json"
	events=$(echo "$ev" | grep -o '"total":[0-9]*' | cut -d: -f2) || broken "no events.total in $d/out/snapshot.json"
	lost=$(echo "$ev" | grep -o '"lost_per_cpu":\[[0-9,]*\]' | tr -cs '0-9' ' ' |
		awk '{ for (i = 1; i <= NF; i++) s += $i } END { printf "%.0f\n", s }') || broken "no events.lost_per_cpu in $d/out/snapshot.json"
	[ -n "$events" ] && [ -n "$lost" ] || broken "cannot read events/lost from $d/out/snapshot.json"
	sev=$(awk '$1 == "events" { print $2; exit }' "$d/observe.out")
	[ "$sev" = "$events" ] || broken "observe printed $sev events, snapshot.json says $events"
	bytes=$(stat -c %s "$d/out/trace.pftrace")
	echo "$label $rep $ops $events $bytes $lost $((c1 - c0)) $((t1 - t0)) $((x1 - x0)) $(echo "$b0 $b1" | awk '{ printf "%.0f %.0f", $3 - $1, $4 - $2 }') $c0" >>"$R"
	rm -rf "$d"
}

# The runners below take REP and a label prefix and run the workload CUR.
# base REP ops
base_run() {
	"${CUR[@]}" >"$tmp/base.out" 2>&1 || broken "perf bench failed: $(cat "$tmp/base.out")"
	local ops
	ops=$(ops_of "$tmp/base.out") || broken "no ops/sec in $(cat "$tmp/base.out")"
	echo "${2}base $1 $ops" >>"$R"
}

# perf REP ops samples bytes switches wakings lost
perf_run() {
	local f=$tmp/perf.data
	perf sched record -o "$f" -- "${CUR[@]}" >"$tmp/perf.out" 2>&1 ||
		broken "perf sched record failed: $(tail -5 "$tmp/perf.out")"
	local ops stats
	ops=$(ops_of "$tmp/perf.out") || broken "no ops/sec in $(cat "$tmp/perf.out")"
	stats=$(perf report -i "$f" --stats 2>/dev/null) || broken "perf report --stats failed"
	local counts
	counts=$(echo "$stats" | awk '
		/^Aggregated stats/ { agg = 1; next }
		/stats:$/ { agg = 0; tp = $1; next }
		agg && /SAMPLE events:/ && !samples { samples = $3 }
		agg && /^ *LOST events:/ { lost = $3 }
		tp == "sched:sched_switch" && /SAMPLE events:/ { sw = $3 }
		tp == "sched:sched_waking" && /SAMPLE events:/ { wk = $3 }
		END { if (!samples) exit 1; printf "%s %s %s %s\n", samples, sw + 0, wk + 0, lost + 0 }') ||
		broken "no sample count in perf report --stats"
	local prefix=$2
	set -- "$1" $counts
	echo "${prefix}perf $1 $ops $2 $(stat -c %s "$f") $3 $4 $5" >>"$R"
	rm -f "$f"
}

# tracefs REP ops events bytes entries
tracefs_run() {
	echo 0 >"$inst/tracing_on"
	: >"$inst/trace"
	echo 1 >"$inst/tracing_on"
	"${CUR[@]}" >"$tmp/tracefs.out" 2>&1 || broken "perf bench failed"
	echo 0 >"$inst/tracing_on"
	local ops
	ops=$(ops_of "$tmp/tracefs.out") || broken "no ops/sec in $(cat "$tmp/tracefs.out")"
	echo "${2}tracefs $1 $ops $(cat "$inst"/per_cpu/cpu*/stats | awk '
		/^entries:/ { e += $2 } /^overrun:/ { o += $2 } /^bytes:/ { b += $2 }
		END { printf "%.0f %.0f %.0f\n", e + o, b, e }')" >>"$R"
}

for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	if [ -d "$d/instances" ]; then tracefs=$d; break; fi
done
if [ -n "$tracefs" ] && want tracefs; then
	inst=$tracefs/instances/temper-bench-$$
	if mkdir "$inst" 2>/dev/null && echo 1 >"$inst/events/sched/sched_switch/enable" &&
		echo 1 >"$inst/events/sched/sched_waking/enable"; then
		echo 0 >"$inst/tracing_on"
	else
		rmdir "$inst" 2>/dev/null || true
		inst=""
	fi
fi

# section PREFIX REPS TRACEFS CMD...: REPS interleaved repetitions of the
# modes with CMD as the workload; TRACEFS=1 includes the tracefs mode.
section() {
	local prefix=$1 reps=$2 with_tracefs=$3 rep modes="" m t_start
	shift 3
	CUR=("$@")
	for m in base perf observe; do
		if want $m; then modes="$modes $m"; fi
	done
	[ -z "$BIN_B" ] || modes="$modes observe_b"
	[ -z "$inst" ] || [ "$with_tracefs" = 0 ] || modes="$modes tracefs"
	echo "${CUR[*]}: modes interleaved (${modes# }) x $reps; load average $(cut -d' ' -f1-3 /proc/loadavg) ..."
	t_start=$(date +%s)
	for ((rep = 1; rep <= reps; rep++)); do
		! want base || base_run "$rep" "$prefix"
		! want perf || perf_run "$rep" "$prefix"
		! want observe || observe_run "${prefix}observe" "$rep" "$BIN" "${CUR[@]}"
		[ -z "$BIN_B" ] || observe_run "${prefix}observe_b" "$rep" "$BIN_B" "${CUR[@]}"
		[ -z "$inst" ] || [ "$with_tracefs" = 0 ] || tracefs_run "$rep" "$prefix"
		printf '  rep %d/%d done (%ds)\n' "$rep" "$reps" $(($(date +%s) - t_start))
	done
}

echo
section "" "$REPS" 1 "${PIPE[@]}"
# The same with both tasks on CPU 0: no cross-CPU wakeups, so a steadier
# figure (which CPUs the scheduler puts the pair on changes events per round
# trip and the cost per event from run to run).
if [ -z "${PIN_CPU:-}" ] && [ "$PINNED_REPS" -gt 0 ]; then
	section p_ "$PINNED_REPS" 0 taskset -c 0 "${PIPE[@]}"
fi

# The highest event rate: two threaded pipe pairs, one per CPU, under
# observe, with BPF run-time statistics on (they cost a little, so only here).
if want max; then
	if [ -w /proc/sys/kernel/bpf_stats_enabled ]; then
		bpf_stats_old=$(cat /proc/sys/kernel/bpf_stats_enabled)
		echo 1 >/proc/sys/kernel/bpf_stats_enabled
	fi
	echo "max event rate: 2 x perf bench sched pipe -T -l $MAX_LOOPS at once under observe, x 2 ..."
	for rep in 1 2; do
		observe_run max "$rep" "$BIN" sh -c "perf bench sched pipe -T -l $MAX_LOOPS & perf bench sched pipe -T -l $MAX_LOOPS & wait"
	done
	if [ -n "$bpf_stats_old" ]; then
		echo "$bpf_stats_old" >/proc/sys/kernel/bpf_stats_enabled
		bpf_stats_old=""
	fi
fi
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

[ "${VERBOSE:-0}" = 1 ] && cat "$R"
echo
awk -v loops="$LOOPS" -v gons="${RECORD_DECODE_NS:-}" -v load_end="$load_end" -v bin_b="$BIN_B" \
	-v pipe="${PIPE[*]}" -v maxloops="$MAX_LOOPS" '
function add(key, v) { vals[key, ++cnt[key]] = v }
# sorted copy of key values into s[1..n]; returns n
function sorted(key,   n, i, j, t) {
	n = cnt[key]
	for (i = 1; i <= n; i++) s[i] = vals[key, i]
	for (i = 2; i <= n; i++) { t = s[i]; for (j = i - 1; j >= 1 && s[j] > t; j--) s[j + 1] = s[j]; s[j + 1] = t }
	return n
}
# p-quantile, linear between order statistics; -1 when there are no values
function q(key, p,   n, x, i) { n = sorted(key); if (!n) return -1; x = 1 + p * (n - 1); i = int(x); return i >= n ? s[n] : s[i] + (x - i) * (s[i + 1] - s[i]) }
function med(key) { return q(key, 0.5) }
function sum(key,   i, t) { for (i = 1; i <= cnt[key]; i++) t += vals[key, i]; return t }
function verdict(ok) { return ok ? "PASS" : "MISS" }
function max0(x) { return x > 0 ? x : 0 }
# one table row: median ops/s, IQR, kept (ratio of medians), kept (median of per-repetition ratios)
function row(name, k, b) {
	printf "  %-22s %8.0f %8.0f..%-8.0f %5.2f  %5.2f", name, med(k ".ops"), q(k ".ops", .25), q(k ".ops", .75), med(k ".ops") / b, med(k ".pair")
}
# the table of section sec ("" or "p")
function table(sec, title,   b) {
	b = med(sec "base.ops")
	printf "%s: %d interleaved repetitions per mode\n", title, cnt[sec "base.ops"]
	printf "  %-22s %8s %18s %5s  %5s  %9s %11s %5s\n", "mode", "ops/s", "IQR (p25..p75)", "kept", "pair", "events/op", "bytes/event", "lost"
	printf "  %-22s %8.0f %8.0f..%-8.0f %5.2f  %5.2f\n", "no tracing", b, q(sec "base.ops", .25), q(sec "base.ops", .75), 1, 1
	if (cnt[sec "perf.ops"]) { row("perf sched record", sec "perf", b); printf "  %9.2f %11.1f %5d  (samples; switch+waking %.2f/op)\n", med(sec "perf.epo"), med(sec "perf.bpe"), sum(sec "perf.lost"), med(sec "perf.swk") }
	row("temper-train observe", sec "obs", b); printf "  %9.2f %11.1f %5d\n", med(sec "obs.epo"), med(sec "obs.bpe"), sum(sec "obs.lost")
	if (cnt[sec "obsb.ops"]) { row("observe, BIN_B", sec "obsb", b); printf "  %9.2f %11.1f %5d  (%s)\n", med(sec "obsb.epo"), med(sec "obsb.bpe"), sum(sec "obsb.lost"), bin_b }
	if (cnt[sec "tfs.ops"]) { row("raw tracefs", sec "tfs", b); printf "  %9.2f %11.1f %5s  (reference: no reader, system-wide)\n", med(sec "tfs.epo"), med(sec "tfs.bpe"), "-" }
}
# the cost lines of an observe mode; returns the projected events/s
function cost(sec, k, name,   b, epo, kern, user, tot, proj) {
	b = med(sec "base.ops"); k = sec k
	epo = med(k ".epo")
	kern = (1 / med(k ".ops") - 1 / b) * 1e9 / epo
	user = med(k ".user")
	tot = max0(kern) + user
	proj = tot > 0 ? 2e9 / tot : 0
	printf "  %s: %.0f events/s sustained (median), %d events lost in %d runs, %.0f events per context switch of observe\n", name, med(k ".rate"), sum(k ".lost"), cnt[k ".ops"], med(k ".epw")
	printf "  cost per event: in-kernel, critical path (1/ops_traced - 1/ops_base) / %.2f events/op = %7.1f ns%s\n", epo, kern, kern < 0 ? "  (NOISE: traced ran faster; counted as 0)" : ""
	printf "                  user space, observe CPU / events (IQR %.0f..%.0f)          = %7.1f ns\n", q(k ".user", .25), q(k ".user", .75), user
	if (gons != "" && k == "obs") printf "                  (BenchmarkRecordDecode, decode+write without the kernel:   %7.1f ns)\n", gons
	printf "                  total %.1f ns/event -> sustains %.0fk events/s on 2 CPUs\n", tot, proj / 1e3
	return proj
}
{
	sec = ""; lab = $1
	if (lab ~ /^p_/) { sec = "p"; lab = substr(lab, 3) }
	k = (lab == "observe") ? "obs" : (lab == "observe_b") ? "obsb" : (lab == "tracefs") ? "tfs" : lab
	K = sec k
}
k == "base" { base[sec, $2] = $3 }
k != "max" { add(K ".ops", $3); if ((sec, $2) in base) add(K ".pair", $3 / base[sec, $2]) }
k == "perf"    { add(K ".epo", $4 / loops); add(K ".bpe", $5 / $4); add(K ".swk", ($6 + $7) / loops); add(K ".lost", $8) }
k == "tfs"     { add(K ".epo", $4 / loops); add(K ".bpe", $6 ? $5 / $6 : 0) }
k == "obs" || k == "obsb" || k == "max" {
	add(K ".events", $4); add(K ".epo", $4 / loops); add(K ".bpe", $5 / $4); add(K ".lost", $6)
	add(K ".user", $7 / $4); add(K ".rate", $4 / ($8 / 1e9)); add(K ".epw", $9 ? $4 / $9 : $4)
	if ($11 > 0) { add(K ".bpfrun", $10 / $11); add(K ".bpfev", $10 / $4) }
}
END {
	b = med("base.ops")
	if (b <= 0 || cnt["obs.ops"] == 0) { print "BROKEN MEASUREMENT: no results for base or observe" > "/dev/stderr"; exit 1 }
	table("", "tracer overhead, " pipe " (1 op = 1 round trip)")
	printf "  (kept: median ops/s over no tracing; pair: median of each repetition%ss ratio to its own no-tracing run)\n", "\047"
	if (cnt["obsb.ops"]) cost("", "obsb", "observe, BIN_B")
	proj = cost("", "obs", "observe")
	kept = med("obs.ops") / b
	if (cnt["pbase.ops"] && cnt["pobs.ops"]) {
		printf "\n"
		table("p", "same, both tasks on CPU 0 (taskset -c 0)")
		if (cnt["pobsb.ops"]) cost("p", "obsb", "observe, BIN_B")
		pproj = cost("p", "obs", "observe")
	}
	if (cnt["max.events"]) {
		printf "\nmax rate, 2 x perf bench sched pipe -T -l %d at once (%d runs): %.0f events/s (best %.0f), %d lost, %.2f bytes/event,\n", maxloops, cnt["max.events"], med("max.rate"), q("max.rate", 1), sum("max.lost"), med("max.bpe")
		printf "  user space %.1f ns/event, %.0f events per context switch of observe", med("max.user"), med("max.epw")
		if (cnt["max.bpfrun"]) printf "; BPF run time (bpf_stats on) %.0f ns per program run, %.0f ns per event", med("max.bpfrun"), med("max.bpfev")
		printf "\n"
	}
	if (load_end + 0 >= 0.5) printf "NOTE: load average %s at the end: other work on the machine adds noise\n", load_end
	maxlost = sum("obs.lost") + sum("pobs.lost") + sum("max.lost")
	maxrate = cnt["max.rate"] ? q("max.rate", 1) : q("obs.rate", 1)
	printf "\ntargets (from the first table)  measured     target\n"
	printf "  throughput kept              %8.2f     >= 0.85            %s", kept, verdict(kept >= 0.85)
	if (cnt["pobs.ops"]) printf "   (same CPU: %.2f)", med("pobs.ops") / med("pbase.ops")
	printf "\n"
	if (cnt["perf.ops"]) { pkept = med("perf.ops") / b; printf "  loss vs perf sched record    %8.2f     <= 0.5 x %.2f      %s\n", 1 - kept, 1 - pkept, verdict(1 - kept <= (1 - pkept) / 2) }
	printf "  lost events (up to %4.0fk/s)  %8d     0                  %s\n", maxrate / 1e3, maxlost, verdict(maxlost == 0)
	printf "  sustainable events/s         %7.0fk     >= 500k            %s", proj / 1e3, verdict(proj >= 500e3)
	if (pproj) printf "   (same CPU: %.0fk)", pproj / 1e3
	printf "\n"
	printf "  bytes/event on disk          %8.1f     <= 10              %s\n", med("obs.bpe"), verdict(med("obs.bpe") <= 10)
}' "$R"
