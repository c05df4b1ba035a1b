#!/usr/bin/env bash
# Builds etcd and kube-apiserver from the Go module proxy for the tests that
# need a real Kubernetes API server (target), and prints the directory
# holding the two binaries. Point the tests at it with KUBE_BINS=<that dir>;
# without KUBE_BINS they look in the same default place this script uses.
#
# The binaries are cached outside the repository, keyed by version:
#   ${TEMPER_CACHE:-$HOME/.cache/temper-train}/kube/etcd-<ver>_kube-apiserver-<ver>/
# A second run finds them there and only prints the directory. A cold build
# takes about 7.5 minutes on 2 cores.
#
# Neither module builds with `go install` (both have replace directives that
# point into their own repositories), so for each one this script copies the
# module source out of the module cache, replaces each local replace
# directive by a requirement on the published version of that module, removes
# go.work and the toolchain line, and builds it as a main module.
#
# With --dir it only prints that directory, built or not (the tests use this
# to find the binaries).
#
# Environment: ETCD_VERSION, KUBE_VERSION override the pinned versions;
# TEMPER_CACHE moves the cache. Go 1.26 must be on PATH or in /usr/local/go.
set -euo pipefail

ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
# The staging modules (k8s.io/api, k8s.io/apiserver, ...) are published as
# v0.X.Y for Kubernetes v1.X.Y.
KUBE_STAGING_VERSION="v0.${KUBE_VERSION#v1.}"

export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null; then
	echo "kube-bins: Go 1.26 is required and was not found on PATH or in /usr/local/go" >&2
	exit 1
fi

cache="${TEMPER_CACHE:-$HOME/.cache/temper-train}/kube"
out="$cache/etcd-${ETCD_VERSION}_kube-apiserver-${KUBE_VERSION}"
if [ "${1:-}" = "--dir" ]; then
	echo "$out"
	exit 0
fi
if [ -x "$out/etcd" ] && [ -x "$out/kube-apiserver" ]; then
	echo "$out"
	exit 0
fi
mkdir -p "$cache"
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# The build must not see the caller's module settings (this repository's
# GOFLAGS, a go.work above the copy, a newer toolchain download).
export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=mod

# unpin MODDIR STAGINGVERSION: drop every replace directive of the go.mod in
# MODDIR. A replace that points into the module's own repository (./ or ../)
# becomes a requirement on the published STAGINGVERSION of that module, as
# long as the module is required at all (etcd also "replaces" modules it
# forbids, which it does not require).
unpin() {
	local dir="$1" version="$2" old new required
	(
		cd "$dir"
		required="$(go mod edit -json | awk -F'"' '/"Require"/ {r=1} /"Exclude"|"Replace"|"Retract"|"Tool"/ {r=0} r && /"Path"/ {print $4}')"
		go mod edit -json |
			awk -F'"' '/"Replace"/ {r=1} /"Exclude"|"Retract"|"Tool"/ {r=0}
				r && /"Old"/ {side="old"} r && /"New"/ {side="new"}
				r && /"Path"/ {if (side=="old") old=$4; else print old " " $4}' |
			while read -r old new; do
				go mod edit -dropreplace="$old"
				case "$new" in
				./* | ../*)
					if grep -qxF "$old" <<<"$required"; then
						go mod edit -require="$old@$version"
					fi
					;;
				esac
			done
		rm -f go.work go.work.sum
		go mod edit -toolchain=none
	)
}

# fetch MODULE VERSION DEST: copy the module's source to DEST, writable.
fetch() {
	local dir
	dir="$(go mod download -json "$1@$2" | awk -F'"' '/"Dir"/ {print $4}')"
	if [ -z "$dir" ] || [ ! -d "$dir" ]; then
		echo "kube-bins: go mod download $1@$2 gave no source directory" >&2
		exit 1
	fi
	cp -r "$dir" "$3"
	chmod -R u+w "$3"
}

start=$SECONDS
echo "kube-bins: building etcd $ETCD_VERSION and kube-apiserver $KUBE_VERSION into $out (cold: ~7.5 min on 2 cores)" >&2

fetch go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "$work/etcd"
unpin "$work/etcd" "$ETCD_VERSION"
(cd "$work/etcd" && go build -trimpath -o "$work/bin/etcd" .)
echo "kube-bins: etcd built after $((SECONDS - start)) s" >&2

fetch k8s.io/kubernetes "$KUBE_VERSION" "$work/kubernetes"
unpin "$work/kubernetes" "$KUBE_STAGING_VERSION"
(cd "$work/kubernetes" && go build -trimpath -o "$work/bin/kube-apiserver" ./cmd/kube-apiserver)
echo "kube-bins: kube-apiserver built after $((SECONDS - start)) s" >&2

"$work/bin/etcd" --version >/dev/null
"$work/bin/kube-apiserver" --version >/dev/null

# Publish both binaries at once so a half-finished build is never found.
rm -rf "$out"
mv "$work/bin" "$out"
echo "$out"
