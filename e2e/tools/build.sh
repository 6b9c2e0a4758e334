#!/usr/bin/env bash
# build.sh builds the control-plane binaries the e2e harness and `make demo`
# run, from the Go module proxy only, into a cache keyed by version:
#
#   e2e/tools/build.sh [core|kueue|jobset|krew|krew-validate|helm|pushgateway|alertmanager|prometheus|argo|versitygw|capi|kubeadmcheck|all]...
#
# core = etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl and kwok; helm is the helm client e2e/deprecations drives; argo
# is Argo Workflows' workflow-controller, its CRDs and validate (Argo's own
# template validation) for e2e/fleet; versitygw is the S3-compatible
# server the fleet store runs on there, with the conditional writes
# (If-Match, If-None-Match) its compare-and-swap needs. The
# cache lives outside the work tree (E2E_BIN_DIR, default
# $HOME/.cache/gpufleet-e2e) so fresh clones on the same machine reuse it;
# the Go build cache makes a rebuild after a version bump a re-link for
# everything that did not change. Prints the cache directory.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${E2E_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-e2e}

KUBE_VERSION=v1.37.2
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
KUEUE_VERSION=v0.17.0
JOBSET_VERSION=v0.11.1
KREW_VERSION=v0.4.3
HELM_VERSION=v4.3.2
PUSHGATEWAY_VERSION=v1.11.5
ALERTMANAGER_VERSION=v0.35.0
# Prometheus v0.316.0 requires automemlimit v1.0.0, whose
# WithRefreshInterval takes a context (memlimit/memlimit.go) where
# Alertmanager v0.35.0's cmd/alertmanager/main.go calls the v0.7.5 form:
# in one module they do not both compile, so Prometheus stays at v0.315.1.
PROMETHEUS_VERSION=v0.315.1
ARGO_VERSION=v3.7.15
VERSITYGW_VERSION=v1.8.0
CAPI_VERSION=v1.14.0

log() { echo "build.sh: $*" >&2; }

# usual NAME: how long a cold build of NAME usually takes on two quiet
# cores, for the progress lines. kube-apiserver (about 17 min), Kueue (213 s)
# and JobSet (118 s) were measured on a quiet two-core machine (README.md,
# e2e/README.md); the others are estimates from the rest of a 22-minute cold
# `make demo`. On a busy machine every figure grows: kube-apiserver took 67
# minutes and kube-controller-manager 15 with eight other builds running.
usual() {
	case $1 in
	kube-apiserver) echo "about 17 min" ;;
	kube-controller-manager) echo "about 3 min" ;;
	kube-scheduler) echo "about 1 min" ;;
	kubectl) echo "about 2 min" ;;
	etcd) echo "about 2 min" ;;
	kwok) echo "about 2 min" ;;
	kueue) echo "about 3.5 min" ;;
	jobset) echo "about 2 min" ;;
	krew) echo "about 1 min" ;;
	pushgateway) echo "about 1.5 min" ;;
	alertmanager) echo "about 1.5 min after the pushgateway" ;;
	prometheus) echo "about 4 min after the alertmanager" ;;
	workflow-controller) echo "about 7 min" ;;
	validate) echo "about 2 min" ;;
	kubeadmcheck) echo "about 1 min after core" ;;
	versitygw) echo "about 2.5 min" ;;
	*) echo "under a minute" ;;
	esac
}

# elapsed SECONDS prints 1m05s.
elapsed() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# build MODULE_DIR OUT PKG [LDFLAGS [TAGS]]: builds PKG inside the tools
# module MODULE_DIR into OUT unless OUT already exists.
build() {
	local mod=$1 out=$2 pkg=$3 ldflags=${4:-} tags=${5:-}
	if [[ -x $out ]]; then return; fi
	mkdir -p "$(dirname "$out")"
	local start=$SECONDS name
	name=$(basename "$out")
	# One line as each component starts and ends: elapsed since build.sh
	# started, and the usual time, so a first build is visibly working.
	log "[$(elapsed $SECONDS)] building $name (usually $(usual "$name") on two cores; $pkg)"
	(cd "$here/$mod" && CGO_ENABLED=0 go build -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg")
	mv "$out.tmp" "$out"
	log "[$(elapsed $SECONDS)] built $name in $(elapsed $((SECONDS - start))) (usually $(usual "$name"))"
}

kube_ldflags() {
	local v=${KUBE_VERSION#v} minor
	minor=$(echo "$v" | cut -d. -f2)
	local p
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		printf -- '-X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=2026-01-01T00:00:00Z ' \
			"$p" "$KUBE_VERSION" "$p" "$p" "$minor" "$p" "$p"
	done
}

core() {
	local kd=$cache/kubernetes-$KUBE_VERSION
	build kube "$kd/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$(kube_ldflags)"
	build kube "$kd/kube-controller-manager" k8s.io/kubernetes/cmd/kube-controller-manager "$(kube_ldflags)"
	build kube "$kd/kube-scheduler" k8s.io/kubernetes/cmd/kube-scheduler "$(kube_ldflags)"
	build kube "$kd/kubectl" k8s.io/kubernetes/cmd/kubectl "$(kube_ldflags)"
	build etcd "$cache/etcd-$ETCD_VERSION/etcd" go.etcd.io/etcd/server/v3
	build kwok "$cache/kwok-$KWOK_VERSION/kwok" sigs.k8s.io/kwok/cmd/kwok \
		"-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
	# KWOK's Stage objects ship in the module; copy them next to the binary.
	local src
	src=$(moddir kwok sigs.k8s.io/kwok)
	if [[ ! -d $cache/kwok-$KWOK_VERSION/stage ]]; then
		cp -r "$src/kustomize/stage" "$cache/kwok-$KWOK_VERSION/stage.tmp"
		chmod -R u+w "$cache/kwok-$KWOK_VERSION/stage.tmp"
		mv "$cache/kwok-$KWOK_VERSION/stage.tmp" "$cache/kwok-$KWOK_VERSION/stage"
	fi
}

# kubeadmcheck checks kubeadm command lines with kubeadm's own command
# tree and version policy, from the same Kubernetes release (e2e/runbook).
kubeadmcheck() {
	build kube "$cache/kubernetes-$KUBE_VERSION/kubeadmcheck" ./kubeadmcheck
}

# moddir TOOLS_MODULE MODULE: the directory of MODULE (at the version the
# tools module TOOLS_MODULE pins) in the module cache, downloaded first:
# `go list -m -f {{.Dir}}` prints an empty Dir for a module not yet in the
# cache, which a fresh machine's cache is until a build fetched it.
moddir() {
	local dir
	dir=$(cd "$here/$1" && go mod download -json "$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	if [[ -z $dir || ! -d $dir ]]; then
		echo "build.sh: go mod download $2 (e2e/tools/$1) gave no directory" >&2
		return 1
	fi
	echo "$dir"
}

crds() { # crds MODULE_DIR MODULE PATH DEST
	local src
	src=$(moddir "$1" "$2")
	if [[ ! -d $4 ]]; then
		mkdir -p "$4.tmp" && cp -r "$src/$3/." "$4.tmp/" && chmod -R u+w "$4.tmp" && mv "$4.tmp" "$4"
	fi
}

kueue() {
	build kueue "$cache/kueue-$KUEUE_VERSION/kueue" sigs.k8s.io/kueue/cmd/kueue
	crds kueue sigs.k8s.io/kueue config/components/crd/bases "$cache/kueue-$KUEUE_VERSION/crds"
}

jobset() {
	build jobset "$cache/jobset-$JOBSET_VERSION/jobset" sigs.k8s.io/jobset
	crds jobset sigs.k8s.io/jobset config/components/crd/bases "$cache/jobset-$JOBSET_VERSION/crds"
}

krew() {
	build krew "$cache/krew-$KREW_VERSION/krew" sigs.k8s.io/krew/cmd/krew \
		"-X sigs.k8s.io/krew/internal/version.gitTag=$KREW_VERSION"
}

# krew's manifest validator, for make krew-validate only: the tests never
# run it, so `make test` does not build it.
krew_validate() {
	krew
	build krew "$cache/krew-$KREW_VERSION/validate-krew-manifest" sigs.k8s.io/krew/cmd/validate-krew-manifest
}

helm() {
	build helm "$cache/helm-$HELM_VERSION/helm" helm.sh/helm/v4/cmd/helm \
		"-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
}

# pushgateway is the Prometheus Pushgateway e2e/fleetreport pushes the fleet
# report to (the server a CronJob's push lands on). It shares the tools
# module e2e/tools/prometheus with the Alertmanager and Prometheus, so
# their common packages compile once.
pushgateway() {
	build prometheus "$cache/pushgateway-$PUSHGATEWAY_VERSION/pushgateway" github.com/prometheus/pushgateway \
		"-X github.com/prometheus/common/version.Version=${PUSHGATEWAY_VERSION#v}"
}

# alertmanager is the Alertmanager whose API v2 the alerts gate reads
# (e2e/skew TestAlertsGate). Its ui package embeds the built web UI (`//go:embed
# app/dist` in alertmanager@v0.35.0 ui/web.go), which the module as the
# proxy serves it does not contain (the UI is built with npm at release),
# so it does not compile as is. Only the API is used: the module is copied
# out of the module cache, given a placeholder page where the UI would be,
# and built from the copy through a replace in a scratch copy of the tools
# module's go.mod (-modfile), leaving the committed go.mod as it is.
alertmanager() {
	local out=$cache/alertmanager-$ALERTMANAGER_VERSION/alertmanager
	if [[ -x $out ]]; then return; fi
	local src=$cache/alertmanager-$ALERTMANAGER_VERSION/src scratch
	if [[ ! -f $src/go.mod ]]; then
		local mod
		mod=$(moddir prometheus github.com/prometheus/alertmanager)
		mkdir -p "$(dirname "$src")"
		rm -rf "$src.tmp"
		cp -r "$mod" "$src.tmp"
		chmod -R u+w "$src.tmp"
		local d
		for d in elm mantine; do
			mkdir -p "$src.tmp/ui/app/dist/$d"
			printf '<!doctype html><title>Alertmanager</title><p>Built without its web UI: the API is at /api/v2/.</p>\n' >"$src.tmp/ui/app/dist/$d/index.html"
		done
		rm -rf "$src"
		mv "$src.tmp" "$src"
	fi
	scratch=$(mktemp -d)
	cp "$here/prometheus/go.mod" "$here/prometheus/go.sum" "$scratch/"
	echo "replace github.com/prometheus/alertmanager => $src" >>"$scratch/go.mod"
	GOFLAGS="${GOFLAGS:-} -modfile=$scratch/go.mod" build prometheus "$out" github.com/prometheus/alertmanager/cmd/alertmanager \
		"-X github.com/prometheus/common/version.Version=${ALERTMANAGER_VERSION#v}"
	rm -rf "$scratch"
}

# prometheus is a Prometheus server for a PromQL check to query, scraping
# the local apiserver and a test's exporter through static_configs (e2e/skew
# TestPromQLGate). remove_all_sd leaves out every service discovery but the
# file and HTTP ones (prometheus@v0.315.1 plugins/plugin_*.go carry
# `//go:build !remove_all_sd || enable_<name>_sd`, plugins/minimum.go keeps
# file and http), and without the builtinassets tag the UI is not compiled
# in (web/ui/ui.go): the API is all the tests use.
prometheus() {
	build prometheus "$cache/prometheus-$PROMETHEUS_VERSION/prometheus" github.com/prometheus/prometheus/cmd/prometheus \
		"-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}" remove_all_sd
}

argo() {
	local d=$cache/argo-$ARGO_VERSION
	build argo "$d/workflow-controller" github.com/argoproj/argo-workflows/v3/cmd/workflow-controller \
		"-X github.com/argoproj/argo-workflows/v3.version=$ARGO_VERSION"
	build argo "$d/validate" ./validate
	crds argo github.com/argoproj/argo-workflows/v3 manifests/base/crds/minimal "$d/crds"
}

# capi is Cluster API's CRDs, from the module as the Go module proxy serves
# it (e2e/tools/capi pins it; nothing is built): e2e/fleet applies
# Cluster and MachineDeployment to a local control plane, e2e/runbook
# those, Machine and KubeadmControlPlane.
capi() {
	local src
	src=$(moddir capi sigs.k8s.io/cluster-api)
	local d=$cache/capi-$CAPI_VERSION/crds
	if [[ ! -d $d ]]; then
		mkdir -p "$d.tmp" && cp "$src"/core/config/crd/bases/cluster.x-k8s.io_*.yaml "$d.tmp/" && chmod -R u+w "$d.tmp" && mv "$d.tmp" "$d"
	fi
	# KubeadmControlPlane's CRDs (the kubeadm control-plane provider ships
	# in the same module), for e2e/runbook; a directory of their own, so
	# that a cache built before them gets them too.
	d=$cache/capi-$CAPI_VERSION/controlplane-crds
	if [[ ! -d $d ]]; then
		mkdir -p "$d.tmp" && cp "$src"/controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_*.yaml "$d.tmp/" && chmod -R u+w "$d.tmp" && mv "$d.tmp" "$d"
	fi
}

# versitygw is the Versity S3 Gateway (posix backend: objects are files
# under a directory, their ETags extended attributes or sidecar files),
# the S3 server e2e/fleet keeps the store on. Its posix backend checks
# If-Match and If-None-Match on PutObject while it holds the object's
# publish lock (v1.8.0 backend/posix/posix.go checkPutPreconditions), so
# the store's compare-and-swap is proved on a production gateway rather
# than a test fake (pkg/fleetrun TestBlobStoreVersityGW, e2e/fleet). Its
# cold build (empty GOCACHE, modules already downloaded) took 196 s user +
# 55 s system CPU, 11m27s wall at 36% CPU on two cores shared with other
# builds (load about 18): about two and a half minutes on two quiet cores.
versitygw() {
	build versitygw "$cache/versitygw-$VERSITYGW_VERSION/versitygw" github.com/versity/versitygw/cmd/versitygw \
		"-X main.Version=$VERSITYGW_VERSION"
}

# locked NAME: runs component NAME holding a lock on it in the cache, so
# that two build.sh runs at once (`make test` builds the components its
# later e2e packages need while the first ones already run, and the e2e
# harness runs build.sh for whatever it finds missing) never build one
# binary twice or into one another's files: the second waits, then finds
# the binaries there.
locked() {
	mkdir -p "$cache"
	(
		flock 9
		"$@"
	) 9>"$cache/.build-$1.lock"
}

[[ $# -gt 0 ]] || set -- core
for what in "$@"; do
	case $what in
	core | kueue | jobset | krew | helm | pushgateway | alertmanager | prometheus | argo | versitygw | capi | kubeadmcheck) locked "$what" ;;
	krew-validate) locked krew_validate ;;
	all) for c in core kueue jobset krew_validate helm pushgateway alertmanager prometheus argo versitygw capi kubeadmcheck; do locked "$c"; done ;;
	*) echo "build.sh: unknown component $what (want core, kueue, jobset, krew, krew-validate, helm, pushgateway, alertmanager, prometheus, argo, versitygw, capi, kubeadmcheck or all)" >&2; exit 2 ;;
	esac
done
echo "$cache"
