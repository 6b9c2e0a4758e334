#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module for the given time each
# (default 10s): hack/fuzz.sh 10s. Go runs one fuzz target per invocation,
# so each is run on its own; the seed corpora in testdata/fuzz always run as
# part of the ordinary unit tests too.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-10s}
total=0
found=0
execs=0
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for t in $targets; do
		total=$((total + 1))
		echo "fuzz: $pkg $t for $time" >&2
		log=$(mktemp)
		ok=0
		# Go 1.26's fuzz coordinator can report the end of -fuzztime itself
		# as a failure, "context deadline exceeded", when a worker is busy
		# at that moment (golang/go#75804, fixed in Go 1.27); it writes no
		# failing input. Such a run is tried again, twice at most. Anything
		# else that fails, or a failing input written, counts at once.
		for try in 1 2 3; do
			if go test -run '^$' -fuzz "^${t}\$" -fuzztime "$time" "$pkg" >"$log" 2>&1; then
				ok=1
				break
			fi
			if ! grep -q '^    context deadline exceeded$' "$log" || grep -qE 'Failing input written|panic:|^[[:space:]]+[[:alnum:]_]+_test\.go:[0-9]+:' "$log"; then
				break
			fi
			echo "fuzz: $t: the fuzzing engine stopped on its own deadline (golang/go#75804), no failing input; again" >&2
		done
		if [[ $ok -eq 0 ]]; then
			cat "$log"
			found=$((found + 1))
		else
			n=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
			execs=$((execs + ${n:-0}))
			echo "fuzz: $t: ${n:-0} executions" >&2
		fi
		rm -f "$log"
	done
done
echo "fuzz: $total target(s), $execs executions, $found failing" >&2
[[ $found -eq 0 ]]
