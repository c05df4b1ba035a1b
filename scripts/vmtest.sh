#!/usr/bin/env bash
# The scheduler VM test (make vmtest): boots a kernel with sched_ext under
# qemu (TCG: no KVM needed) with a busybox initramfs holding a static
# temper-train, the static C test workload, the scheduler/scx test binary and
# testdata/vmtest, runs the checks in the guest's /init, and reads their
# verdicts from the serial console.
#
# The guest prints one line per check: `VMTEST PASS name detail` or
# `VMTEST FAIL name detail`; files it hands back (the refine runs' REPORT.md
# and ledgers) come between `VMTEST FILE BEGIN name` and `VMTEST FILE END
# name` and are saved in $VMTEST_OUT. This script fails on any FAIL, on an expected
# check that never reported, on a guest panic (after one retry: TCG has been
# seen to crash a guest once in ~40 attach cycles) and on a timeout.
#
#   VMTEST_TIMEOUT   seconds for one boot (default 2700)
#   VMTEST_KEEP=1    keep the work directory (initramfs, console log)
#   VMTEST_RUN=RE    only the Go tests matching RE; VMTEST_E2E=0 skips the
#                    CLI checks of apply and observe (both for working on one
#                    check: the summary then lists the others as missing)
#   VMTEST_REFINE=1  adds refine and train through sched_ext (about 16 min
#                    under TCG; testdata/vmtest/refine.sh): they are expected
#                    only then. VMTEST_REFINE=demo,kill,redis runs those parts
#                    only. Default 0: make vmtest-refine runs them alone (the
#                    length of CI's whole budget's third is too much for every
#                    run of make test). With redis-server and redis-benchmark on this
#                    machine they run Redis too (copied into the image with
#                    their libraries).
#   VMTEST_BASE=0    runs (and expects) none of the checks above, only the
#                    refine parts VMTEST_REFINE asks for: make vmtest-refine
#   VMTEST_OUT       where the refine runs' REPORT.md and ledgers are saved
#                    (default /tmp/temper-vmtest-out)
#   TEMPER_CACHE     where scripts/vm-kernel.sh caches the kernel
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
GO="${GO:-go}"
timeout_s="${VMTEST_TIMEOUT:-2700}"
refine="${VMTEST_REFINE:-0}"
if [ "${VMTEST_BASE:-1}" = 0 ]; then
	VMTEST_RUN='^$' VMTEST_E2E=0
fi
out="${VMTEST_OUT:-/tmp/temper-vmtest-out}"

log() { echo "vmtest: $*" >&2; }
die() { log "$*"; exit 1; }

for cmd in qemu-system-x86_64 cpio gzip gcc; do
	command -v "$cmd" >/dev/null || die "$cmd is missing (scripts/setup.sh installs qemu-system-x86, cpio, gzip, gcc)"
done
busybox=""
for b in /bin/busybox /usr/bin/busybox; do
	# ldd fails on a statically linked binary
	if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then busybox="$b"; break; fi
done
[ -n "$busybox" ] || die "no static busybox (apt-get install busybox-static)"
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || die "no static libc for the workload (apt-get install libc6-dev)"

t0=$EPOCHREALTIME
# since T prints the seconds since T (an $EPOCHREALTIME).
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
kdir=$(scripts/vm-kernel.sh) || die "no kernel with sched_ext (see the message above)"
log "kernel $(cat "$kdir/version") from $kdir"

work=$(mktemp -d /tmp/temper-vmtest.XXXXXX)
if [ "${VMTEST_KEEP:-}" = 1 ]; then
	log "keeping $work"
else
	trap 'rm -rf "$work"' EXIT
fi
root="$work/root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,run,vmtest}

log "building static binaries"
make --no-print-directory build >/dev/null
cp bin/temper-train "$root/bin/temper-train"
gcc -O2 -Wall -pthread -static -o "$root/bin/workload" testdata/workload/workload.c
CGO_ENABLED=0 "$GO" test -c -trimpath -o "$root/bin/scx.test" ./scheduler/scx
cp -r testdata/vmtest/. "$root/vmtest/"
cp scripts/demo-bench.sh "$root/bin/demo-bench.sh"
# copy_dynamic BIN: BIN and the shared libraries it loads, at their paths.
copy_dynamic() {
	local f
	for f in $(ldd "$1" | awk '$1 ~ /^\// { print $1 } $3 ~ /^\// { print $3 }'); do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
	done
}
# A shell that does not read its name from argv[0] (busybox does): refine's
# spinners run as `temper-bg-spinner -c LOOP`.
shell=$(readlink -f /bin/sh)
case "$shell" in */busybox) die "/bin/sh is busybox; the image needs a real shell (dash or bash)" ;; esac
copy_dynamic "$shell"
cp -L "$shell" "$root/bin/sh"
# An awk with math (busybox's has none): scripts/demo-bench.sh's histogram.
awk=$(readlink -f "$(command -v awk)")
case "$awk" in */busybox) die "awk is busybox's; the image needs gawk or mawk" ;; esac
copy_dynamic "$awk"
cp -L "$awk" "$root/bin/awk"
redis=no
if [ "$refine" != 0 ] && command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
	for b in redis-server redis-benchmark; do
		copy_dynamic "$(command -v $b)"
		cp -L "$(command -v $b)" "$root/bin/$b"
	done
	redis=yes
elif [ "$refine" != 0 ]; then
	log "no redis-server and redis-benchmark here (apt-get install redis-server redis-tools): the Redis check is skipped"
fi
cp "$busybox" "$root/bin/busybox"
cp testdata/vmtest/init.sh "$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initrd.gz"
log "initramfs $(du -h "$work/initrd.gz" | cut -f1), built in $(since "$t0") s"

# boot runs the guest once; its console goes to $1.
boot() {
	timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 \
		-accel tcg,thread=single -cpu max -m 1024 \
		-smp 4,sockets=1,cores=2,threads=2 \
		-kernel "$kdir/vmlinuz" -initrd "$work/initrd.gz" \
		-append "console=ttyS0 quiet panic=-1 oops=panic loglevel=4${VMTEST_RUN:+ vmtest.run=$VMTEST_RUN}${VMTEST_E2E:+ vmtest.e2e=$VMTEST_E2E} vmtest.refine=$refine" \
		-nographic -no-reboot -monitor none </dev/null >"$1" 2>&1
}

expected=(
	go/TestVMApplyRevert
	go/TestVMSecondSchedulerRefused
	go/TestVMVerifierRejection
	go/TestVMEjectionReported
	go/TestVMKfuncWorkaround
	go/TestVMYieldNotStarved
	go/TestVMBatchShare
	go/TestVMContextCancelDetaches
	go/TestVMContract
	go/TestVMSwitchover
	go/TestVMCeiling
	go/TestVMTier
	go/TestVMTierWakeup
	e2e/unknown-matcher
	e2e/apply-enabled
	e2e/layers
	e2e/smt-no-stacking
	e2e/revert-disabled
	e2e/control-stacking
)
[ "${VMTEST_BASE:-1}" != 0 ] || expected=()
# part NAME: whether VMTEST_REFINE (1: all) asks for demo, kill or redis.
part() { [ "$refine" = 1 ] || [[ ",$refine," == *",$1,"* ]]; }
if [ "$refine" != 0 ]; then
	! part demo || expected+=(e2e/train-demo)
	! part kill || expected+=(e2e/refine-kill-detached e2e/refine-kill-reaped e2e/refine-resume e2e/refine-sched_ext)
	[ $redis = no ] || ! part redis || expected+=(e2e/train-redis)
fi

attempt=1
while :; do
	console="$work/console.$attempt.log"
	log "booting the VM (attempt $attempt; console in $console)"
	b0=$EPOCHREALTIME
	set +e
	boot "$console"
	rc=$?
	set -e
	took=$(since "$b0")
	tr -d '\r' <"$console" >"$console.txt"
	if grep -qE 'Kernel panic|BUG: |Oops|general protection fault' "$console.txt" && [ $attempt -eq 1 ]; then
		log "guest crashed after $took s; retrying once. Its last lines:"
		grep -E 'Kernel panic|BUG: |Oops|RIP:' "$console.txt" | head -n 5 >&2
		attempt=2
		continue
	fi
	break
done

# Guest output for the record: the check lines, the Go tests' logs and
# apply's closing report.
grep -E '^(VMTEST|    |=== RUN|--- )' "$console.txt" | grep -v '^VMTEST FILE' || true

# The files the guest handed back.
mkdir -p "$out"
rm -f "$out"/*.REPORT.md "$out"/*.ledger.jsonl
awk -v dir="$out" '
/^VMTEST FILE BEGIN / { name = $4; next }
/^VMTEST FILE END / { if (name != "") close(dir "/" name); name = ""; next }
name != "" && sub(/^VMTEST FILE\|/, "") { print > (dir "/" name) }' "$console.txt"
[ -z "$(ls "$out")" ] || log "saved in $out: $(ls "$out" | tr '\n' ' ')"

fail=0
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
	log "TIMEOUT: the guest did not power off within $timeout_s s"
	fail=1
fi
if grep -qE 'Kernel panic|BUG: |Oops|general protection fault' "$console.txt"; then
	log "GUEST CRASH:"
	grep -E -A3 'Kernel panic|BUG: |Oops|general protection fault' "$console.txt" | head -n 20 >&2
	fail=1
fi
echo
echo "== vmtest summary (kernel $(cat "$kdir/version"), boot attempt $attempt, $took s in the VM) =="
for name in "${expected[@]}"; do
	line=$(grep -E "^VMTEST (PASS|FAIL) $name( |$)" "$console.txt" | tail -n 1 || true)
	if [ -z "$line" ]; then
		printf '  %-34s MISSING\n' "$name"
		fail=1
		continue
	fi
	verdict=$(echo "$line" | cut -d' ' -f2)
	detail=$(echo "$line" | cut -d' ' -f4-)
	printf '  %-34s %s %s\n' "$name" "$verdict" "$detail"
	[ "$verdict" = PASS ] || fail=1
done
# Checks the guest reported that this list does not expect still count.
while read -r extra; do
	printf '  %-34s FAIL (unexpected check)\n' "$extra"
	fail=1
done < <(grep -E '^VMTEST FAIL ' "$console.txt" | cut -d' ' -f3 | sort -u | while read -r n; do
	printf '%s\n' "${expected[@]}" | grep -qx "$n" || echo "$n"; done)
total=$(since "$t0")
if [ $fail -ne 0 ]; then
	echo "vmtest: FAILED after $total s (console log: $console.txt${VMTEST_KEEP:+, kept})"
	[ "${VMTEST_KEEP:-}" = 1 ] || cp "$console.txt" /tmp/temper-vmtest-console.log && echo "vmtest: console copied to /tmp/temper-vmtest-console.log"
	exit 1
fi
echo "vmtest: all ${#expected[@]} checks passed in $total s"
