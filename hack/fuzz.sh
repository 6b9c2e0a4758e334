#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module for the given time each
# (default 10s): hack/fuzz.sh 10s. The seed corpora in testdata/fuzz always
# run as part of the ordinary unit tests too.
#
# Go fuzzes one target per run, and `go test -fuzz` links a new
# coverage-instrumented test binary every time. So the targets are read
# from the source (func FuzzXxx in the package's test files, not by linking
# each package's test binary to ask it with -list), each package's
# instrumented binary is built once, and that binary runs once per target,
# in the package's directory and with the fuzz cache `go test` itself would
# pass (-test.fuzzcachedir=$GOCACHE/fuzz/<import path>). Failing inputs go
# to the package's testdata/fuzz as with `go test -fuzz`.
#
# What is instrumented: `go test -fuzz` compiles every package the test
# binary holds, the standard library and client-go, Helm and the rest
# included, a second time with coverage counters (-d=libfuzzer, the one
# flag it adds). On a cold cache that second build of the dependency tree
# cost more CPU than the fuzzing itself. The counters that guide the
# fuzzing are wanted in the code under test: this module's packages and
# yaml.v3, the parser plainYAML and the List reader are held to. So only
# those are compiled with -d=libfuzzer, through -gcflags patterns, and
# every other package is the one the unit tests already built. The
# binary fuzzes as `go test -fuzz` would, guided by those counters.
#
# FUZZ_WORKERS sets how many workers fuzz each target (-test.parallel;
# default: one per CPU, as `go test -fuzz`). `make fuzz-short`, the smoke
# run inside `make test`, uses one: on two cores the fuzzing was the last
# four minutes of a cold run with both cores busy, and one worker still
# runs several times the executions the fully instrumented binaries did.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-10s}
workers=()
if [[ -n ${FUZZ_WORKERS:-} ]]; then
	workers=(-test.parallel "$FUZZ_WORKERS")
fi
fuzzcache=$(go env GOCACHE)/fuzz
instrument=()
case $(go env GOARCH) in
amd64 | arm64) # where cmd/go instruments for fuzzing (internal/platform.FuzzInstrumented)
	instrument=(-gcflags="$(go list -m)/...=-d=libfuzzer" -gcflags="go.yaml.in/yaml/v3=-d=libfuzzer")
	;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
total=0
found=0
execs=0
while read -r pkg dir files; do
	targets=$(cd "$dir" && sed -n 's/^func \(Fuzz[A-Z0-9_][A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' $files | sort -u)
	[[ -n $targets ]] || continue
	bin=$work/$(echo "$pkg" | tr / _).test
	echo "fuzz: building the instrumented test binary of $pkg" >&2
	# Linked without the symbol table and DWARF, as `make test` links every
	# test binary: fuzzing needs neither, and the link takes a quarter to a
	# third less CPU (see GOFLAGS_TEST in the Makefile).
	go test -c "${instrument[@]}" -ldflags "-s -w" -o "$bin" "$pkg"
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
			if (cd "$dir" && "$bin" -test.run '^$' -test.fuzz "^${t}\$" -test.fuzztime "$time" -test.fuzzcachedir "$fuzzcache/$pkg" "${workers[@]}" -test.paniconexit0) >"$log" 2>&1; then
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
	rm -f "$bin"
done < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}{{end}}' ./...)
echo "fuzz: $total target(s), $execs executions, $found failing" >&2
[[ $found -eq 0 ]]
