#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for FUZZTIME each (default 10s).
# Targets are found, not listed, so a new Fuzz function is run without
# anyone remembering to add it here.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-10s}"
GO="${GO:-go}"
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
	pkg="./$(dirname "${file#./}")"
	grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | sed 's/^func //' | while read -r target; do
		echo "fuzz $pkg $target ($FUZZTIME)"
		# Minimising each new input briefly keeps short runs fuzzing rather
		# than shrinking large seeds.
		for attempt in 1 2 3; do
			if out=$("$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 1s "$pkg" 2>&1); then
				break
			fi
			# Go 1.26's fuzz coordinator can fail a target with a bare
			# "context deadline exceeded" as -fuzztime runs out, having found
			# nothing (golang/go#75804, fixed in Go 1.27). That failure, with
			# no failing input written, is run again, loudly, up to twice (a
			# loaded machine has hit it twice in a row); any other failure
			# fails at once.
			if [ "$attempt" -lt 3 ] && grep -q '^    context deadline exceeded$' <<<"$out" &&
				! grep -q 'Failing input written' <<<"$out"; then
				echo "$out" | tail -n 5
				echo "### fuzz $pkg $target: Go's fuzz-deadline race (golang/go#75804), no failing input: running it again"
				continue
			fi
			echo "$out"
			exit 1
		done
		echo "$out" | tail -n 1
	done
done
