# The scheduler VM test's checks of refine and train through the sched_ext
# backend, sourced by init.sh (its pass, fail, st, wait_state, up, T and SCX).
# The runs are as short as a run can be (ladder 0,2, the least final, a trial
# budget): the VM's CPUs are emulated (TCG), so what they show is that every
# part works, not how fast or how well.
#
#   e2e/train-demo           train --backend sched_ext on the demo workload with
#                            its jsonl benchmark: ledger, REPORT.md's ladder, the
#                            scheduler attached for every profile trial and
#                            detached between arms, the BPF scheduler's group stats
#   e2e/train-redis          the same with Redis under redis-benchmark (only
#                            where the image has them: /bin/redis-server), with
#                            the seeds' three arms: stock (detached), tier only
#                            (the scheduler with no group and its BestEffort
#                            tier) and tier + profile
#   e2e/refine-kill-detached refine SIGKILLed mid-trial: the kernel detaches the
#                            scheduler, the target's threads are back on CFS
#   e2e/refine-kill-reaped   apply --revert leaves no rig cgroup and no spinner
#   e2e/refine-resume        refine --resume finishes: the cut-off trial re-run
#                            (marked rerun), no other trial repeated
#   e2e/refine-sched_ext     the killed and resumed run as e2e/train-demo checks
#                            it, and a step's mechanism check computed from the
#                            group stats
#
# Each run's REPORT.md and ledger go to the console between
# "VMTEST FILE BEGIN name" and "VMTEST FILE END name" (each line prefixed
# "VMTEST FILE|"); vmtest.sh saves them on the host.

LADDER=0,2
RF=/tmp/rf
# part NAME: whether vmtest.refine (1: all) asks for demo, kill or redis.
part() {
	[ "$REFINE" = 1 ] && return 0
	case ",$REFINE," in *",$1,"*) return 0 ;; esac
	return 1
}
mkdir -p $RF

# rcheck NAME TEST VAR=VALUE...: runs scx.test's TEST on a run's files and
# reports e2e/NAME with its last log line (its summary), or its errors.
rcheck() {
	local name=$1 test=$2
	shift 2
	env TEMPER_VMTEST=1 "$@" /bin/scx.test -test.v -test.run "^$test\$" >$RF/$name.check 2>&1
	local rc=$?
	sed 's/^/    /' $RF/$name.check
	if [ $rc -eq 0 ] && grep -q "^--- PASS: $test" $RF/$name.check; then
		pass e2e/$name "$(grep 'vmrefine_test.go' $RF/$name.check | tail -n 1 | sed 's/^ *//')"
	else
		fail e2e/$name "$(grep -E 'vmrefine_test.go|panic' $RF/$name.check | head -n 4 | tr '\n' ' ')"
	fi
}

# vm_file NAME PATH: the file to the console for vmtest.sh to save as NAME.
vm_file() {
	[ -f "$2" ] || return 0
	echo "VMTEST FILE BEGIN $1"
	sed 's/^/VMTEST FILE|/' "$2"
	echo "VMTEST FILE END $1"
}

# ladder_table FILE: REPORT.md's background ladder, for the log.
ladder_table() {
	[ -f "$1" ] && sed -n '/^## Background ladder/,/^## /p' "$1" | sed '$d' | sed 's/^/    report: /'
}

# Every change of sched_ext's state, timed, for the checks to hold the
# ledgers' trials against.
TEMPER_VMTEST=1 TEMPER_VMTEST_WATCH=$RF/states.log /bin/scx.test -test.run '^TestWatchSchedExt$' -test.timeout 0 >$RF/watch.out 2>&1 &
WATCH=$!
sleep 1

# train_check NAME DIR TRAIN-ARGS...: train with --backend sched_ext, the
# ladder and the least final, then its checks; $TRAIN_TIER is --no-tier
# (two arms) unless a part sets it empty (three). $TRAIN_LADDER and
# $TRAIN_MAX (default $LADDER and 36 trials) let a part whose synthesized
# profile has many one-step moves keep its first rung inside the budget:
# refine refuses a budget that cannot hold one rung and the final.
TRAIN_TIER=--no-tier
train_check() {
	local name=$1 dir=$2 ladder=${TRAIN_LADDER:-$LADDER}
	shift 2
	local t0=$(up)
	echo "VMTEST INFO $name start uptime=$t0"
	$T train --out $dir --backend sched_ext $TRAIN_TIER --ladder $ladder --final-n 4 --max-trials ${TRAIN_MAX:-36} \
		--seed 16 --duration 5s -q "$@" >$dir.out 2>&1
	local rc=$?
	echo "VMTEST INFO $name: train exited $rc after $(awk -v a=$t0 -v b=$(up) 'BEGIN{printf "%.0f", b-a}') s; its last lines:"
	tail -n 25 $dir.out | sed 's/^/    train: /'
	ladder_table $dir/refine/REPORT.md
	vm_file $name.REPORT.md $dir/refine/REPORT.md
	vm_file $name.ledger.jsonl $dir/refine/ledger.jsonl
	if [ ! -f $dir/refine/ledger.jsonl ]; then
		fail e2e/$name "train exited $rc without a ledger: $(tail -n 3 $dir.out | tr '\n' ' ')"
		return
	fi
	rcheck $name TestRefineRun TEMPER_VMTEST_RUN_DIR=$dir/refine TEMPER_VMTEST_STATES=$RF/states.log TEMPER_VMTEST_LADDER=$ladder
}

# The demo's synthesized profile has 8 to 29 one-step moves, depending on
# what its 5 s trace shows under TCG: one level (two spinners) and 40 trials
# hold the first rung of 29 and the final.
TRAIN_LADDER=2 TRAIN_MAX=40
part demo && train_check train-demo $RF/demo --id demo-workload \
	--bench "/bin/demo-bench.sh $RF/demo.stats 1" --adapter jsonl --metric p50_ms --min-effect 20% --warmup 500ms \
	-- /bin/workload --dir $RF --rate 200 --stats $RF/demo.stats
TRAIN_LADDER= TRAIN_MAX=

# ---- SIGKILL mid-trial, revert, resume ----
# The planted profile puts the demo workload's request workers on spare
# capacity only (yield) while its compute pool and the spinners keep the
# CPUs busy: taking the workers back to normal is a step the race takes, so
# the mechanism check runs on it. Two runs per candidate in the race's first
# rung (--race-n 2) put a block at each level into it: the plant hurts most
# where the spinners fill the CPUs. The budget (52 trials) holds that rung,
# the second whole and the least final: with two of the second's six blocks
# (38 trials) the step rule read the winner over two trials of a noise that
# swings p50 from 1 to 600 ms at bg=2 under TCG, and took no step in one run
# of two.
kill_checks() {
	K=$RF/kill
	mkdir -p $K
	/bin/workload --dir $K --rate 200 --compute 2 --stats $K/wl.stats >$K/wl.out 2>&1 &
	WLK=$!
	sleep 1
	# A 2 s window: the planted yield group waits up to the scheduler's 1 s
	# starvation bound for a CPU, and a 1 s window could then see no request.
	kbench="/bin/demo-bench.sh $K/wl.stats 2"
	echo "VMTEST INFO refine-kill start uptime=$(up)"
	$T refine /vmtest/refine.toml --pid $WLK --backend sched_ext --no-tier --out $K/run \
		--bench "$kbench" --adapter jsonl --metric p50_ms --min-effect 2% \
		--ladder $LADDER --race-n 2 --final-n 4 --max-trials 52 --warmup 500ms --seed 7 -q >$K/refine.out 2>&1 &
	RP=$!
	# Kill once three trials are recorded, in a trial of a profile arm with the
	# scheduler enabled.
	led=$K/run/ledger.jsonl
	mid_trial() {
		[ -f $led ] && [ "$(grep -c '"type":"trial_end"' $led)" -ge 3 ] &&
			tail -n 1 $led | grep -q '"type":"trial_start"' && ! tail -n 1 $led | grep -q '"candidate":"stock' &&
			[ "$(st)" = enabled ]
	}
	i=0
	while ! mid_trial && kill -0 $RP 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.1; i=$((i + 1)); done
	if mid_trial; then
		before="state $(st), root/ops $(cat $SCX/root/ops), enable_seq $(cat $SCX/enable_seq 2>/dev/null); target threads' ext.enabled: $(grep -h ext.enabled /proc/$WLK/task/*/sched | awk '{print $NF}' | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')"
		mid_trial && kill -KILL $RP
		wait $RP 2>/dev/null
		echo "VMTEST INFO refine SIGKILLed at uptime=$(up) in $(tail -n 1 $led | cut -c1-200); before the kill: $before; when wait returned: state $(st)"
		cp $led $K/killed.jsonl
		echo "VMTEST INFO after the kill: $(grep -c '"type":"trial_start"' $led) trial starts, $(grep -c '"type":"trial_end"' $led) ends in the ledger"
		rcheck refine-kill-detached TestKilledRefine TEMPER_VMTEST_PID=$WLK TEMPER_VMTEST_EXPECT=detached
		# (the bracket keeps grep from matching its own command line)
		left() {
			echo "rig cgroups: $(ls -d /sys/fs/cgroup/temper-rig.* 2>/dev/null | wc -l), spinner cgroups: $(find /sys/fs/cgroup -type d -name 'temper-bg.*' 2>/dev/null | wc -l), spinners: $(grep -l 'temper-bg-spinne[r]' /proc/[0-9]*/cmdline 2>/dev/null | wc -l), target in a rig: $(grep -c temper-rig /proc/$WLK/cgroup)"
		}
		lb=$(left)
		$T apply --revert >$K/revert.out 2>&1
		rrc=$?
		sed 's/^/    revert: /' $K/revert.out
		la=$(left)
		if [ $rrc -eq 0 ] && [ "$la" = "rig cgroups: 0, spinner cgroups: 0, spinners: 0, target in a rig: 0" ]; then
			pass e2e/refine-kill-reaped "after the kill: $lb; apply --revert exited 0: $la"
		else
			fail e2e/refine-kill-reaped "after the kill: $lb; apply --revert exited $rrc: $la"
		fi
		r0=$(up)
		$T refine /vmtest/refine.toml --pid $WLK --backend sched_ext --no-tier --bench "$kbench" --adapter jsonl \
			--resume $led -q >$K/resume.out 2>&1
		rc=$?
		echo "VMTEST INFO refine --resume exited $rc after $(awk -v a=$r0 -v b=$(up) 'BEGIN{printf "%.0f", b-a}') s; its last lines:"
		tail -n 25 $K/resume.out | sed 's/^/    resume: /'
		ladder_table $K/run/REPORT.md
		vm_file refine-kill.REPORT.md $K/run/REPORT.md
		vm_file refine-kill.ledger.jsonl $led
		rcheck refine-resume TestResumedLedger TEMPER_VMTEST_KILLED=$K/killed.jsonl TEMPER_VMTEST_LEDGER=$led
		rcheck refine-sched_ext TestRefineRun TEMPER_VMTEST_RUN_DIR=$K/run TEMPER_VMTEST_STATES=$RF/states.log \
			TEMPER_VMTEST_LADDER=$LADDER TEMPER_VMTEST_MECHANISM=1
	else
		why="refine exited before a profile trial was under way: $(tail -n 3 $K/refine.out | tr '\n' ' ')"
		kill -0 $RP 2>/dev/null && why="no profile trial under way after 300 s (state $(st))" && kill -KILL $RP
		for c in refine-kill-detached refine-kill-reaped refine-resume refine-sched_ext; do fail e2e/$c "$why"; done
	fi
	kill -INT $WLK 2>/dev/null; wait $WLK 2>/dev/null
}
part kill && kill_checks

if part redis && [ -x /bin/redis-server ]; then
	TRAIN_TIER=
	train_check train-redis $RF/redis --id redis --min-effect 20% --warmup 1s \
		--bench 'redis-benchmark -h 127.0.0.1 -p 26500 -c 10 -n 2000 -t get --csv' \
		-- redis-server --bind 127.0.0.1 --port 26500 --save '' --appendonly no --dir /tmp
fi

kill $WATCH 2>/dev/null; wait $WATCH 2>/dev/null
