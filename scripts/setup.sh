#!/usr/bin/env bash
# Installs what temper-train's build and tests need on Debian 12 and is quiet
# when everything is already there. Go itself (1.26, from go.dev or the
# machine image) must be on PATH or in /usr/local/go.
set -euo pipefail

export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null; then
	echo "setup: Go 1.26 is required and was not found on PATH or in /usr/local/go" >&2
	exit 1
fi

# command → Debian package
declare -A need=(
	[gcc]=gcc          # builds the C test workload
	[make]=make
	[gzip]=gzip
	[protoc]=protobuf-compiler # make generate only, and a check in tests
	[redis-server]=redis-server    # real-server tests of observe and analyze
	[redis-benchmark]=redis-tools  # ... and their load generator
	[memcached]=memcached          # refine/bench: the memaslap adapter's real-server test
	[memcaslap]=libmemcached-tools # ... Debian's memaslap
	[pgbench]=postgresql-client-15 # refine/bench: the pgbench adapter's real-server test
	[sysbench]=sysbench            # refine/bench: the sysbench adapter
	[mariadbd]=mariadb-server      # ... and its real-server test
	[wrk]=wrk                      # refine/bench: the wrk adapter
	[perf]=linux-perf              # make bench: the perf sched record anchor
	[qemu-system-x86_64]=qemu-system-x86 # make vmtest: the sched_ext kernel's VM
	[cpio]=cpio                    # make vmtest: its initramfs
	[zstd]=zstd                    # scripts/vm-kernel.sh --btf: the kernel image's payload
	[objcopy]=binutils             # ... and its .BTF section
	[taskset]=util-linux           # observe's SMT-sibling recording test
	[unshare]=util-linux           # temper-train job's test: the node's mount namespace
	[/usr/bin/time]=time           # make bench: peak RSS of analyze and perf
	[dot]=graphviz                 # analyze --dot: the wake graph as SVG (and its tests)
)
missing=()
for cmd in "${!need[@]}"; do
	command -v "$cmd" >/dev/null || missing+=("${need[$cmd]}")
done
# make generate: bpf2go compiles bpf/*.bpf.c with clang-19 against libbpf's headers.
command -v clang-19 >/dev/null || missing+=(clang-19)
[ -e /usr/include/bpf/bpf_helpers.h ] || missing+=(libbpf-dev)
# refine/bench's pgbench test runs a PostgreSQL server; Debian keeps its
# programs off PATH, in /usr/lib/postgresql/VERSION/bin.
if ! compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null; then
	missing+=(postgresql)
fi
# make vmtest's initramfs needs a statically linked busybox, and its static
# workload a static libc.
if ! { [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; }; then
	missing+=(busybox-static)
fi
[ -e "/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/libc.a" ] || missing+=(libc6-dev)
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})" >&2
		exit 1
	fi
	echo "setup: installing ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Kernel tracing tests read /sys/kernel/tracing; some images do not mount it.
if [ "$(id -u)" -eq 0 ] && [ ! -e /sys/kernel/tracing/events ]; then
	mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null || true
fi
go mod download
