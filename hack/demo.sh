#!/usr/bin/env bash
# demo.sh runs the demo: it builds what is missing of the local control plane
# (one line per component as it starts and ends), starts it with the
# GPU-fleet scenario of testdata/demo (see testdata/demo/scenario.yaml), walks
# the runbook of upgrading node pool h100-c with the plugins in bin/ (each
# command printed before its output and exit code, each step's -o json in
# .demo/evidence/), and leaves the cluster up.
#
#   hack/demo.sh          (re)start the demo cluster and run the runbook
#   hack/demo.sh down     stop the cluster and remove its state
#   hack/demo.sh status   say whether it runs
#
# DEMO_DIR (default .demo) holds the kubeconfig, pid file, logs and evidence.
# The Kueue and JobSet managers run by default: the training gang needs them.
# DEMO_QUEUEING=0 leaves them out. Otherwise the demo never drops the gang on
# its own: a manager that fails to build is built again once, one that fails
# to start is started again (democluster), and if it still fails the demo
# stops with an error naming it and its log.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${DEMO_DIR:-.demo}
bin=${BIN_DIR:-bin}
queueing=${DEMO_QUEUEING:-1}

democluster=$bin/democluster
if [[ ! -x $democluster ]]; then
	democluster=$dir/democluster
	mkdir -p "$dir"
	go build -o "$democluster" ./cmd/democluster
fi

case ${1:-up} in
down)
	exec "$democluster" down --dir "$dir"
	;;
status)
	exec "$democluster" status --dir "$dir"
	;;
up) ;;
*)
	echo "usage: hack/demo.sh [up|down|status]" >&2
	exit 2
	;;
esac

began=$SECONDS
# The control plane, built once into a cache outside the work tree.
# build.sh prints a line per component as it starts and ends; with
# everything cached it prints nothing.
echo "== Control-plane binaries (cached in ${E2E_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-e2e}; a first build takes about 25 minutes on two cores)"
e2e/tools/build.sh core >/dev/null
up_args=(--dir "$dir")
if [[ $queueing != 0 ]]; then
	mkdir -p "$dir"
	for c in kueue jobset; do
		log=$dir/build-$c.log
		for try in 1 2; do
			if e2e/tools/build.sh "$c" 2> >(tee "$log" >&2) >/dev/null; then
				break
			fi
			if [[ $try == 2 ]]; then
				echo "demo: building $c failed twice (its log: $log). The demo's training gang needs Kueue and JobSet:" >&2
				echo "demo: fix the build and run make demo again, or run the demo without the gang: DEMO_QUEUEING=0 make demo" >&2
				exit 1
			fi
			echo "demo: building $c failed (its log: $log); trying once more" >&2
		done
	done
	up_args+=(--kueue --jobset)
else
	echo "(DEMO_QUEUEING=0: no Kueue, no JobSet, no training gang)"
fi

# A fresh cluster every time: the runbook changes it.
if "$democluster" status --dir "$dir" | grep -q "running (pid"; then
	echo "== Restarting the demo cluster for a fresh scenario"
	"$democluster" down --dir "$dir" >/dev/null
fi
echo "== Demo cluster"
"$democluster" up "${up_args[@]}"

"$democluster" runbook --dir "$dir" --bin "$bin"

# Paths as a person pastes them: relative ones from the repository root.
shown() { if [[ $1 == /* ]]; then echo "$1"; else echo "\$PWD/$1"; fi; }
cat <<MSG

The demo took $((SECONDS - began)) s. The demo cluster keeps running. Try:
  export KUBECONFIG=$(shown "$dir/kubeconfig") PATH=$(shown "$bin"):\$PATH
  kubectl skew
  kubectl get nodes -L cloud.google.com/gke-nodepool
Stop it with: make demo-down   (or hack/demo.sh down)
MSG
