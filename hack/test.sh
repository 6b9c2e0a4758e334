#!/usr/bin/env bash
# test.sh is `make test`, README's test command and what CI runs on a
# possibly fresh two-core machine: the unit tests, short fuzzing, and the
# e2e suite against a real control plane, every component built from the
# Go module proxy.
#
# On a cold machine almost all of it is compiling, and two cores are the
# limit, so the work is ordered by what the e2e suite, the longest chain,
# waits for:
#
#   1. bin/ (the plugins: the main module's dependency tree, which the unit
#      tests then reuse) beside the control plane's core (etcd, the kube
#      binaries, KWOK), both at full priority;
#   2. once bin/ is built, the unit tests and the fuzzing start at low
#      priority (nice 15): they fill the cores that links and waits leave
#      idle and give way to everything else;
#   3. once the core is built, the e2e suite starts, its packages that need
#      only the core first, while the other components (helm, Pushgateway,
#      krew, Kueue, JobSet, ...) build beside it at nice 5. A package that
#      reaches a component still building waits for it: e2e/tools/build.sh
#      holds a lock on each component, and the harness runs build.sh for
#      whatever it finds missing.
#
# Every line of output carries the name of its lane (build, core, unit,
# tools, e2e). The run goes on when a lane fails, so that one run reports
# every failure, and exits 1 when any did.
set -euo pipefail
cd "$(dirname "$0")/.."

make=(make --no-print-directory)
start=$SECONDS
failed=()

# Every lane's output is also kept in one log, so that a failed run ends
# with the failing tests' names: CI shows only the last lines of a run.
log=$(mktemp -t make-test.XXXXXX)
trap 'rm -f "$log"' EXIT

# lane NAME CMD...: runs CMD with each output line prefixed by NAME.
lane() {
	local name=$1
	shift
	"$@" > >(sed -u "s/^/$name| /" | tee -a "$log") 2>&1
}

# finish NAME PID: waits for a lane and records its failure.
finish() {
	if wait "$2"; then
		printf 'test.sh: %s done at %dm%02ds\n' "$1" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60))
	else
		printf 'test.sh: %s FAILED at %dm%02ds\n' "$1" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60))
		failed+=("$1")
	fi
}

"${make[@]}" e2e-deps

lane build "${make[@]}" build &
build=$!
lane core "${make[@]}" e2e-tools E2E_COMPONENTS=core &
core=$!

finish build "$build"
unit=
if [[ ${#failed[@]} -eq 0 ]]; then
	lane unit nice -n 15 "${make[@]}" unit-and-fuzz &
	unit=$!
fi
finish core "$core"

if [[ ${#failed[@]} -eq 0 ]]; then
	late=$("${make[@]}" -s print-late-components)
	lane tools nice -n 5 "${make[@]}" e2e-tools E2E_COMPONENTS="$late" &
	tools=$!
	lane e2e "${make[@]}" e2e-run &
	e2e=$!
	finish e2e "$e2e"
	finish tools "$tools"
fi
if [[ -n $unit ]]; then
	finish unit "$unit"
fi

if [[ ${#failed[@]} -gt 0 ]]; then
	echo "test.sh: what failed (the whole output is above):" >&2
	# Each failing test with the first line of each of its messages (a
	# message's later lines, such as a logged command's output, are left
	# out: they would push the failures themselves off the end), and each
	# failing package, panic and make error.
	awk -v indent=-1 '
		{ rest = substr($0, index($0, "|") + 2) }
		match(rest, /^ *--- FAIL/) { indent = RLENGTH - 8; n = 0; print; next }
		indent >= 0 && n < 12 && rest ~ ("^" sprintf("%" (indent + 4) "s", "") "[^ ]+[.]go:[0-9]+: ") { print; n++; next }
		match(rest, /^ */) && RLENGTH <= indent && rest ~ /^ *(--- |=== |ok |FAIL|PASS)/ { indent = -1 }
		rest ~ /^(FAIL[ \t]|panic:|.*[*][*][*] )/ { print }
	' "$log" | tail -n 60 >&2 || true
	echo "test.sh: FAILED: ${failed[*]}" >&2
	exit 1
fi
printf 'test.sh: all passed in %dm%02ds\n' $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60))
