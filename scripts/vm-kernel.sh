#!/usr/bin/env bash
# Provides a kernel with sched_ext for the scheduler VM test and prints the
# directory that holds it (vmlinuz, config, version).
#
#   scripts/vm-kernel.sh          resolve, download if needed, print the dir
#   scripts/vm-kernel.sh --btf    also extract the kernel's raw BTF (vmlinux.btf)
#
# Debian's stable kernels lack CONFIG_SCHED_CLASS_EXT; sid's has it. The
# current sid version is resolved with apt against a private source list and
# state directory under the cache (the machine's own apt configuration is
# never touched), its linux-binary (vmlinuz) and linux-base (config) packages
# are downloaded, the config is checked for CONFIG_SCHED_CLASS_EXT=y, and the
# result is cached in ${TEMPER_CACHE:-~/.cache/temper-train}/kernel/<ver>/.
# When sid cannot be reached and a cached kernel exists, the newest cached
# one is used, and the script says so.
set -euo pipefail

want_btf=false
for a in "$@"; do
	case "$a" in
	--btf) want_btf=true ;;
	*) echo "usage: $0 [--btf]" >&2; exit 2 ;;
	esac
done

cache="${TEMPER_CACHE:-$HOME/.cache/temper-train}"
kdir="$cache/kernel"
st="$cache/apt-sid"
mkdir -p "$kdir" "$st/lists/partial" "$st/cache/archives/partial"

log() { echo "vm-kernel: $*" >&2; }

# The sid mirror: the same URI as the machine's own Debian source.
mirror=""
for f in /etc/apt/sources.list.d/*.sources; do
	[ -e "$f" ] || continue
	mirror=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i ~ /\/debian\/?$/) { print $i; exit } }' "$f")
	[ -n "$mirror" ] && break
done
if [ -z "$mirror" ]; then
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -e "$f" ] || continue
		mirror=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^https?:.*\/debian\/?$/) { print $i; exit } }' "$f")
		[ -n "$mirror" ] && break
	done
fi
mirror="${mirror:-http://deb.debian.org/debian}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] $mirror sid main" >"$st/sid.list"

aptopts=(-o "Dir::Etc::SourceList=$st/sid.list" -o "Dir::Etc::SourceParts=-"
	-o "Dir::State::Lists=$st/lists" -o "Dir::Cache=$st/cache"
	-o "APT::Sandbox::User=root" -o "Acquire::Languages=none"
	-o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
	-o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false")

# newest_cached prints the directory of the newest cached kernel, if any.
newest_cached() {
	local d
	d=$(ls -1d "$kdir"/*/ 2>/dev/null | sed 's:/$::' | sort -V | tail -n 1)
	[ -n "$d" ] && [ -s "$d/vmlinuz" ] && echo "$d"
}

ver=""
# Package lists younger than 6 hours are current enough (sid's kernel moves
# every few weeks); otherwise refresh them. --error-on=any: a failed
# download is a failure, not stale lists quietly kept.
fresh=$(find "$st/lists" -maxdepth 1 -name '*_sid_InRelease' -mmin -360 2>/dev/null | head -n 1)
if [ -n "$fresh" ] || apt-get "${aptopts[@]}" -qq --error-on=any update >"$st/update.log" 2>&1; then
	# linux-image-amd64 depends on linux-image-<ver>, whose kernel is in
	# linux-binary-<ver> and whose config is in linux-base-<ver>.
	ver=$({ apt-cache "${aptopts[@]}" depends linux-image-amd64 2>/dev/null || true; } |
		sed -n 's/^ *Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -n 1)
	[ -n "$ver" ] || log "could not resolve the sid kernel version from linux-image-amd64 (see apt-cache depends)"
else
	log "cannot reach Debian sid at $mirror ($(tail -n 1 "$st/update.log"))"
fi

if [ -z "$ver" ]; then
	if d=$(newest_cached); then
		log "using the cached kernel $(basename "$d") (sid unreachable or unresolved)"
		dir="$d"
	else
		log "no kernel with sched_ext: sid unreachable and nothing cached in $kdir; check the network and retry"
		exit 1
	fi
else
	dir="$kdir/$ver"
	if [ -s "$dir/vmlinuz" ] && [ -s "$dir/config" ]; then
		:
	else
		log "downloading sid kernel $ver (linux-binary + linux-base, ~15 MB)"
		tmp=$(mktemp -d "$kdir/.dl.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		(cd "$tmp" && apt-get "${aptopts[@]}" -qq download "linux-binary-$ver" "linux-base-$ver" >/dev/null)
		for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
		src="$tmp/root/usr/lib/modules/$ver"
		[ -s "$src/vmlinuz" ] || { log "linux-binary-$ver has no usr/lib/modules/$ver/vmlinuz; Debian's packaging changed"; exit 1; }
		[ -s "$src/config" ] || src_cfg=$(ls "$tmp"/root/boot/config-* 2>/dev/null | head -n 1)
		cfg="${src_cfg:-$src/config}"
		[ -s "$cfg" ] || { log "linux-base-$ver has no kernel config; Debian's packaging changed"; exit 1; }
		if ! grep -qx 'CONFIG_SCHED_CLASS_EXT=y' "$cfg"; then
			log "sid kernel $ver is built without CONFIG_SCHED_CLASS_EXT=y; no usable kernel"
			exit 1
		fi
		mkdir -p "$tmp/out"
		cp "$src/vmlinuz" "$tmp/out/vmlinuz"
		cp "$cfg" "$tmp/out/config"
		echo "$ver" >"$tmp/out/version"
		rm -rf "$dir"
		mv "$tmp/out" "$dir"
	fi
fi

if ! grep -qx 'CONFIG_SCHED_CLASS_EXT=y' "$dir/config"; then
	log "$dir/config lacks CONFIG_SCHED_CLASS_EXT=y"
	exit 1
fi

if $want_btf && [ ! -s "$dir/vmlinux.btf" ]; then
	# The bzImage payload is zstd: decompress from the first zstd frame
	# magic (28 b5 2f fd); trailing data after the frame is harmless.
	off=$({ LC_ALL=C grep -obUaP '\x28\xb5\x2f\xfd' "$dir/vmlinuz" || true; } | head -n 1 | cut -d: -f1)
	[ -n "$off" ] || { log "no zstd payload in $dir/vmlinuz"; exit 1; }
	tail -c +$((off + 1)) "$dir/vmlinuz" | zstd -dcq 2>/dev/null >"$dir/vmlinux.tmp" || true
	objcopy -O binary --only-section=.BTF "$dir/vmlinux.tmp" "$dir/vmlinux.btf.tmp"
	rm -f "$dir/vmlinux.tmp"
	[ -s "$dir/vmlinux.btf.tmp" ] || { log "no .BTF section in the kernel image"; exit 1; }
	mv "$dir/vmlinux.btf.tmp" "$dir/vmlinux.btf"
fi

echo "$dir"
