#!/usr/bin/env bash
# demo.sh starts the local demo control plane (a real kube-apiserver,
# controllers and KWOK-simulated H100 nodes; see e2e/README.md), runs each
# plugin found in bin/ against it once, and leaves the cluster up.
#
#   hack/demo.sh          start (building what is missing) and run the plugins
#   hack/demo.sh down     stop the cluster and remove its state
#   hack/demo.sh status   say whether it runs
#
# DEMO_DIR (default .demo) holds the kubeconfig, pid file and logs.
# DEMO_KUEUE=1 / DEMO_JOBSET=1 also run the Kueue / JobSet managers (built on
# first use; Kueue does not come up outside the cluster yet, see e2e/README.md).
# DEMO_ARGS_<plugin> (for example DEMO_ARGS_pdb_blockers="--node h100-c-0")
# overrides the arguments a plugin is run with.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
dir=${DEMO_DIR:-.demo}
bin=${BIN_DIR:-bin}

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

up_args=(--dir "$dir")
[[ -n ${DEMO_KUEUE:-} ]] && up_args+=(--kueue)
[[ -n ${DEMO_JOBSET:-} ]] && up_args+=(--jobset)
"$democluster" up "${up_args[@]}"
kubeconfig=$(cd "$dir" && pwd)/kubeconfig
# Plugins that shell out to kubectl, or report its version, get the one that
# matches the demo apiserver.
cache=${E2E_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-e2e}
for kd in "$cache"/kubernetes-*/; do
	[[ -x $kd/kubectl ]] && PATH=${kd%/}:$PATH
done
export PATH

bold=$'\e[1m' dim=$'\e[2m' reset=$'\e[0m'
if [[ ! -t 1 || -n ${NO_COLOR:-} ]]; then bold='' dim='' reset=''; fi

# Default arguments per plugin for the demo scenario.
declare -A args=(
	[skew]=""
	[deprecations]=""
	[pdb_blockers]=""
	[gang_drain]=""
	[gpu_validate]=""
	[crd_migrate]=""
)
for p in skew deprecations pdb_blockers gang_drain gpu_validate crd_migrate; do
	name=${p//_/-}
	exe=$bin/kubectl-$p
	echo
	if [[ ! -x $exe ]]; then
		echo "${bold}== kubectl $name${reset} ${dim}(skipped: $exe is not built yet)${reset}"
		continue
	fi
	override=DEMO_ARGS_$p
	read -r -a extra <<<"${!override-${args[$p]}}"
	echo "${bold}== kubectl $name ${extra[*]}${reset}"
	rc=0
	"$exe" --kubeconfig "$kubeconfig" "${extra[@]}" || rc=$?
	[[ $rc -eq 0 ]] || echo "${dim}(kubectl $name exited $rc)${reset}"
done

cat <<MSG

The demo cluster keeps running. Try:
  export KUBECONFIG=$kubeconfig
  kubectl get nodes -L cloud.google.com/gke-nodepool
  PATH=\$PWD/$bin:\$PATH kubectl skew
Stop it with: make demo-down   (or hack/demo.sh down)
MSG
