#!/bin/busybox sh
# /init of the scheduler VM test's initramfs (scripts/vmtest.sh builds it).
# Every check prints one line the host parses from the serial console:
#   VMTEST PASS <name> <detail>
#   VMTEST FAIL <name> <detail>
# and the guest powers off at the end, whatever happened.

/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mount -t tracefs tracefs /sys/kernel/tracing
mount -t debugfs debugfs /sys/kernel/debug
mount -t bpf bpf /sys/fs/bpf
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
# Loopback, for the Redis server and its benchmark.
ifconfig lo 127.0.0.1 up 2>/dev/null

SCX=/sys/kernel/sched_ext
T=/bin/temper-train
up() { cut -d' ' -f1 /proc/uptime; }
pass() { echo "VMTEST PASS $*"; }
fail() { echo "VMTEST FAIL $*"; }
st() { cat $SCX/state 2>/dev/null || echo missing; }
# wait_state STATE SECONDS
wait_state() {
	i=0
	while [ "$(st)" != "$1" ] && [ $i -lt $(($2 * 10)) ]; do sleep 0.1; i=$((i + 1)); done
	[ "$(st)" = "$1" ]
}

echo "VMTEST INFO boot kernel=$(uname -r) cpus=$(nproc) smt=$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list) state=$(st) uptime=$(up)"

# vmtest.run=REGEXP on the kernel command line narrows the Go tests,
# vmtest.e2e=0 skips the CLI checks of apply and observe and vmtest.refine=0
# those of refine and train (VMTEST_RUN, VMTEST_E2E, VMTEST_REFINE in
# vmtest.sh): for working on one check.
RUN='^TestVM'
E2E=1
REFINE=1
for a in $(cat /proc/cmdline); do
	case "$a" in
	vmtest.run=*) RUN="${a#vmtest.run=}" ;;
	vmtest.e2e=*) E2E="${a#vmtest.e2e=}" ;;
	vmtest.refine=*) REFINE="${a#vmtest.refine=}" ;;
	esac
done

# ---- the backend's Go tests, against this kernel ----
echo "VMTEST INFO go-tests start uptime=$(up)"
TEMPER_VMTEST=1 TEMPER_WORKLOAD=/bin/workload TEMPER_VMTEST_PROFILE=/vmtest/profile.toml \
	/bin/scx.test -test.v -test.run "$RUN" -test.timeout 900s 2>&1 |
	while IFS= read -r line; do
		echo "$line"
		case "$line" in
		"--- PASS: "*) set -- $line; pass "go/$3" "$4" ;;
		"--- FAIL: "*) set -- $line; fail "go/$3" "$4" ;;
		"--- SKIP: "*) set -- $line; fail "go/$3" "skipped inside the VM" ;;
		esac
	done
echo "VMTEST INFO go-tests end uptime=$(up)"

# ---- end to end through the temper-train CLI ----
e2e_checks() {
# smt_check NAME DIR EXPECT: observes workload $WL1 for 3 s into DIR, analyzes
# it, and checks the analysis's SMT stacking against EXPECT (stacking or none)
# with TestAnalysisSMT.
smt_check() {
	local name=$1 dir=$2 expect=$3
	if $T observe --pid $WL1 --duration 3s --out $dir >$dir.log 2>&1 &&
		$T analyze --snapshot $dir/snapshot.json --json $dir/analysis.json $dir/trace.pftrace >/dev/null 2>&1; then
		if TEMPER_VMTEST=1 TEMPER_VMTEST_ANALYSIS=$dir/analysis.json TEMPER_VMTEST_EXPECT=$expect \
			/bin/scx.test -test.v -test.run '^TestAnalysisSMT$' >$dir.check 2>&1; then
			pass $name "$(grep -m1 'vm_test.go' $dir.check | sed 's/^ *//')"
		else
			fail $name "$(grep 'vm_test.go' $dir.check | head -n 3 | tr '\n' ' ')"
		fi
	else
		fail $name "observe/analyze failed: $(tail -n 3 $dir.log | tr '\n' ' ')"
	fi
}

have_apply=no
$T apply --help >/dev/null 2>&1 && have_apply=yes

# A profile with a matcher kind no backend knows fails before anything is
# attached.
if [ $have_apply = no ]; then
	fail e2e/unknown-matcher "temper-train has no apply command"
else
	/bin/workload --dir /tmp --rate 200 >/tmp/wl0.out 2>&1 &
	WL0=$!
	sleep 1
	out=$($T apply /vmtest/unknown-matcher.toml --backend sched_ext --pid $WL0 --for 5s 2>&1)
	rc=$?
	if [ $rc -ne 0 ] && echo "$out" | grep -q comm_glob && [ "$(st)" = disabled ]; then
		pass e2e/unknown-matcher "exit $rc, state $(st): $(echo "$out" | head -n 1)"
	else
		fail e2e/unknown-matcher "exit $rc, state $(st): $(echo "$out" | head -n 3 | tr '\n' ' ')"
	fi
	kill -INT $WL0; wait $WL0 2>/dev/null
fi

# Control: the same workload without the profile (every thread on the fair
# class) shares cores between its hot compute threads.
/bin/workload --dir /tmp --rate 200 --compute 4 >/tmp/wl1.out 2>&1 &
WL1=$!
sleep 1
smt_check e2e/control-stacking /tmp/control stacking

if [ $have_apply = no ]; then
	for c in apply-enabled layers smt-no-stacking revert-disabled; do
		fail e2e/$c "temper-train has no apply command"
	done
else
	a0=$(up)
	$T apply /vmtest/profile.toml --backend sched_ext --pid $WL1 --for 60s --stats-json /tmp/stats.json >/tmp/apply.out 2>&1 &
	AP=$!
	if wait_state enabled 30; then
		ops=$(cat $SCX/root/ops)
		if [ "$ops" = temper_layered ]; then
			pass e2e/apply-enabled "state enabled, root/ops $ops, $(awk -v a=$a0 -v b=$(up) 'BEGIN{printf "%.1f", b-a}') s after starting apply"
		else
			fail e2e/apply-enabled "root/ops is $ops"
		fi
	else
		fail e2e/apply-enabled "state $(st) 30 s after apply: $(tail -n 3 /tmp/apply.out | tr '\n' ' ')"
	fi
	sleep 1
	smt_check e2e/smt-no-stacking /tmp/applied none
	# Ctrl-C: apply reverts and exits.
	kill -INT $AP
	wait $AP
	rc=$?
	echo "VMTEST INFO apply output:"
	sed 's/^/    apply: /' /tmp/apply.out
	TEMPER_VMTEST=1 TEMPER_VMTEST_STATS=/tmp/stats.json TEMPER_VMTEST_PID=$WL1 \
		/bin/scx.test -test.v -test.run '^TestApplyOutputLayers$' >/tmp/layers.check 2>&1
	if [ $? -eq 0 ]; then
		pass e2e/layers "$(grep -m1 'vm_test.go' /tmp/layers.check | sed 's/^ *//')"
	else
		fail e2e/layers "$(grep 'vm_test.go' /tmp/layers.check | head -n 3 | tr '\n' ' ')"
	fi
	if wait_state disabled 30 && [ $rc -eq 0 ]; then
		pass e2e/revert-disabled "apply exited $rc on SIGINT, state $(st)"
	else
		fail e2e/revert-disabled "apply exited $rc, state $(st)"
	fi
fi
kill -INT $WL1 2>/dev/null; wait $WL1 2>/dev/null
}
[ "$E2E" = 0 ] || e2e_checks

[ "$REFINE" = 0 ] || . /vmtest/refine.sh

echo "VMTEST INFO done uptime=$(up)"
sync
poweroff -f
