#!/usr/bin/env bash
# pluto.sh prints the path of a pluto v5.24.0 binary for hack/vspluto:
#
#   PLUTO_BIN=/path/to/pluto hack/vspluto/pluto.sh   # taken as given
#   PLUTO_SRC=/path/to/checkout hack/vspluto/pluto.sh # built, then cached
#
# The Go module proxy does not serve pluto v5.24.0 (403 "not available",
# 2026-12-04), so it is built from a checkout of its own repository,
# https://github.com/FairwindsOps/pluto at tag v5.24.0 (commit dd5ec8c),
# with the module proxy serving its dependencies, into the cache the
# control-plane components use (E2E_BIN_DIR, as e2e/tools/build.sh). The
# version and commit are stamped as pluto's release builds stamp them
# (main.version, main.commit in its cmd/pluto/main.go). Nothing of
# pluto's code enters this repository. Exits 3 with instructions when
# there is neither, 2 when the checkout is not v5.24.0.
set -euo pipefail

PLUTO_VERSION=v5.24.0
PLUTO_COMMIT=dd5ec8cccce5e42dfe8054b8250baa35546056a0

cache=${E2E_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-e2e}
out=$cache/pluto-$PLUTO_VERSION/pluto

if [[ -n ${PLUTO_BIN:-} ]]; then
	if [[ ! -x $PLUTO_BIN ]]; then
		echo "pluto.sh: PLUTO_BIN=$PLUTO_BIN is not an executable file" >&2
		exit 2
	fi
	echo "$PLUTO_BIN"
	exit 0
fi

if [[ -z ${PLUTO_SRC:-} ]]; then
	if [[ -x $out ]]; then
		echo "$out"
		exit 0
	fi
	cat >&2 <<MSG
pluto.sh: no pluto to compare against. Either
  git clone --branch $PLUTO_VERSION https://github.com/FairwindsOps/pluto /tmp/pluto
  make bench PLUTO_SRC=/tmp/pluto     # builds it into $out
or point PLUTO_BIN at a pluto $PLUTO_VERSION binary (make bench PLUTO_BIN=...).
MSG
	exit 3
fi

# The checkout must be v5.24.0 itself, unmodified: a comparison against
# another pluto is not the one the README reports.
head=$(git -C "$PLUTO_SRC" rev-parse 'HEAD^{commit}' 2>/dev/null) || {
	echo "pluto.sh: PLUTO_SRC=$PLUTO_SRC is not a git checkout of pluto; clone it with --branch $PLUTO_VERSION" >&2
	exit 2
}
if [[ $head != "$PLUTO_COMMIT" ]]; then
	echo "pluto.sh: PLUTO_SRC is at $head, not $PLUTO_VERSION ($PLUTO_COMMIT): run git -C $PLUTO_SRC checkout $PLUTO_VERSION" >&2
	exit 2
fi
if [[ -n $(git -C "$PLUTO_SRC" status --porcelain --untracked-files=no) ]]; then
	echo "pluto.sh: PLUTO_SRC has local changes; a modified pluto is not $PLUTO_VERSION (git -C $PLUTO_SRC stash)" >&2
	exit 2
fi
if [[ ! -x $out ]]; then
	echo "pluto.sh: building pluto $PLUTO_VERSION from $PLUTO_SRC into $out" >&2
	mkdir -p "$(dirname "$out")"
	# Build to a temporary name, then rename: an interrupted build leaves
	# no half-written binary that a later run would take for a cached one.
	(cd "$PLUTO_SRC" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-mod=readonly go build -trimpath \
		-ldflags "-X main.version=$PLUTO_VERSION -X main.commit=${PLUTO_COMMIT:0:7}" \
		-o "$out.tmp" ./cmd/pluto)
	mv "$out.tmp" "$out"
fi
# What the binary says about itself, checked like the checkout.
if ! "$out" version 2>/dev/null | grep -q "Version:$PLUTO_VERSION "; then
	echo "pluto.sh: $out does not report $PLUTO_VERSION; delete it and rerun" >&2
	exit 2
fi
echo "$out"
