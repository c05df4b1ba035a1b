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
		if ! out=$("$GO" test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 1s "$pkg" 2>&1); then
			echo "$out"
			exit 1
		fi
		echo "$out" | tail -n 1
	done
done
