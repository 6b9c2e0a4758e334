#!/usr/bin/env bash
# verify-patterns.sh rejects code patterns the project does not allow.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
check() { # check DESCRIPTION PATTERN PATHSPEC...
	local what=$1 pat=$2
	shift 2
	local hits
	hits=$(git grep -nE "$pat" -- "$@" || true)
	if [[ -n $hits ]]; then
		echo "verify-patterns: $what:" >&2
		echo "$hits" >&2
		fail=1
	fi
}
# Libraries and plugins write to the streams they are given, never to the process's own.
check "os.Stdout/os.Stderr outside cmd/, hack/ and e2e/" 'os\.Std(out|err)\b' 'pkg/*.go' 'plugins/*.go' ':!*_test.go' ':!**/internal/gen/**'
# Tests decide colour through cli.Colorizer, never by mutating the global.
check "color.NoColor mutated" 'color\.NoColor *=' '*.go'
# Domain libraries never exit the process.
check "os.Exit in pkg/ or plugins/" 'os\.Exit\(' 'pkg/*.go' 'plugins/*.go' ':!**/internal/gen/**'
# No placeholders presented as done.
check "unimplemented stubs" 'panic\("not implemented|TODO: ?implement' '*.go'
# Product code never depends on the tests: nothing outside e2e/ imports e2e/
# (the local control plane the demo ships is pkg/localcluster).
check "an import of e2e/ outside e2e/" '"github\.com/gpufleet/upgrade-plugins/e2e(/[^"]*)?"' '*.go' ':!e2e/**'
# No build output or other large file is committed: a tracked file over 1 MB
# outside testdata/ fails (every clone downloads it).
big=$(git ls-files -z | { grep -zv -e '^testdata/' -e '/testdata/' || true; } | xargs -0 -r stat -c '%s %n' -- 2>/dev/null | awk '$1 > 1048576 {print "  " $2 " (" $1 " bytes)"}')
if [[ -n $big ]]; then
	echo "verify-patterns: committed files over 1 MB outside testdata/ (build outputs belong in .gitignore):" >&2
	echo "$big" >&2
	fail=1
fi
exit $fail
