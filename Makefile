# Makefile of the gpufleet kubectl plugins. `make test` is the test command
# CI runs (.ci/run): it builds everything the tests need, from the Go module
# proxy only, then runs the unit and e2e suites.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

MODULE   := github.com/gpufleet/upgrade-plugins
PLUGINS  := kubectl-skew kubectl-deprecations kubectl-gang_drain kubectl-gpu_validate kubectl-pdb_blockers kubectl-crd_migrate
VERSION  ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.1.0-dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X $(MODULE)/pkg/cli.version=$(VERSION) -X $(MODULE)/pkg/cli.commit=$(COMMIT)
# One set of compiler inputs for everything `make test` builds in this
# module (go vet, the unit and e2e test binaries, bin/): cgo off, as the
# released binaries are, and no -trimpath outside the release targets.
# Either difference alone gives every package a different build-cache key,
# so a cold `make test` compiled the plugins' whole dependency tree (client-go,
# cli-runtime, kubectl, Helm, ...) twice. ldflags are link-only.
export CGO_ENABLED ?= 0
GOFLAGS_BUILD := -ldflags "$(LDFLAGS)"
GOFLAGS_RELEASE := -trimpath -ldflags "$(LDFLAGS)"
# Test binaries link without the symbol table and DWARF (stack traces keep
# file and line): each of the seventy-odd test binaries a `make test` links
# takes a quarter to a third less CPU (pkg/deprecations 14.0 s to 10.5 s,
# e2e/gangdrain 17.5 s to 10.8 s). Link-only, so the build cache is shared.
GOFLAGS_TEST := -ldflags "-s -w"
BIN      := bin
DIST     := dist
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
# Components of the local control plane the e2e suite needs (see
# e2e/tools/build.sh): the core (etcd, the kube binaries, KWOK) that every
# e2e package needs, then the rest: helm, the Pushgateway, Alertmanager and
# Prometheus (e2e/skew), krew, the Kueue
# and JobSet managers, and for the fleet programme's e2e (e2e/fleet) Argo's
# workflow-controller and validation and an S3 server. E2E_QUEUEING=0 leaves
# out the suites that need the Kueue and JobSet managers (e2e/gangdrain,
# e2e/queueing, e2e/demo, e2e/fleet) and skips building them.
E2E_QUEUEING ?= 1
export E2E_QUEUEING
ifeq ($(E2E_QUEUEING),0)
E2E_LATE_COMPONENTS ?= helm pushgateway alertmanager prometheus krew
E2E_EXCLUDE := gangdrain queueing demo fleet
else
E2E_LATE_COMPONENTS ?= helm pushgateway alertmanager prometheus krew kueue jobset argo versitygw
E2E_EXCLUDE :=
endif
E2E_COMPONENTS ?= core $(E2E_LATE_COMPONENTS)
# e2e/runbook pastes every provider's runbook into aws, gcloud, az (Debian's
# azure-cli, installed by e2e-deps), kubectl and the plugins. It stays out
# of `make test` until its CPU fits the CI budget (E2E_RUNBOOK=1 runs it).
# E2E_RUNBOOK=subset runs only the scenarios of E2E_RUNBOOK_SUBSET: one
# inventory a provider, chosen for the distinct commands its runbook
# pastes (e2e/runbook/doc.go gives what it covers and costs). azure-cli is
# installed only when the scenarios run include an AKS one.
E2E_RUNBOOK ?= 0
E2E_RUNBOOK_SUBSET ?= kubeadm/mixed-pools,eks/mixed-pools,gke/gpu-pools,aks/mixed-pools,capi/mixed-pools,k3s/mixed-pools,rke2/mixed-pools
ifeq ($(E2E_RUNBOOK),0)
E2E_EXCLUDE += runbook
endif
ifeq ($(E2E_RUNBOOK),subset)
export RUNBOOK_SCENARIOS := $(E2E_RUNBOOK_SUBSET)
E2E_RUNBOOK_AZ := $(findstring aks,$(E2E_RUNBOOK_SUBSET))
else
E2E_RUNBOOK_AZ := $(filter-out 0,$(E2E_RUNBOOK))
endif
# The e2e packages that need a component beyond the core run last, in this
# order (each needs what the one before needed, or what builds next), so
# that `make test` starts the suite once the core is built and builds the
# rest meanwhile (hack/test.sh).
E2E_LATE_ORDER := deprecations fleetreport skew suite queueing gangdrain rbac demo fleet
E2E_LATE_PKGS = $(addprefix $(MODULE)/e2e/,$(filter-out $(E2E_EXCLUDE),$(E2E_LATE_ORDER)))
E2E_PKGS = $(filter-out $(addprefix $(MODULE)/e2e/,$(E2E_LATE_ORDER) $(E2E_EXCLUDE)),$(shell go list -tags e2e ./e2e/...)) $(E2E_LATE_PKGS)
# e2e packages run one at a time: each starts its own control plane, and two
# cores do not hold two apiservers starting at once well.
E2E_FLAGS ?= -tags e2e -count=1 -p 1 -timeout 40m
FUZZTIME ?= 10s

.PHONY: image all build test unit-and-fuzz unit race e2e e2e-run print-late-components e2e-tools e2e-deps e2e-fleet bench vspluto lint verify fuzz fuzz-short dist krew krew-validate demo demo-down clean

all: build

## build: the six plugins, their completion scripts and the checkpoint agent into bin/
build:
	@mkdir -p $(BIN)
	go build $(GOFLAGS_BUILD) -o $(BIN)/ $(addprefix ./cmd/,$(PLUGINS)) ./cmd/democluster ./cmd/gpufleet-checkpoint-agent
	cp hack/completion/kubectl_complete-* $(BIN)/

## test: unit tests, short fuzzing, then the e2e suite against a real control plane (README's test command)
# hack/test.sh orders the work for two cores: bin/ beside the control plane's
# core, then the e2e suite as soon as the core is built, while the other
# components, the unit tests and the fuzzing fill the idle cores at lower
# priority.
test:
	hack/test.sh

unit-and-fuzz: unit
	$(MAKE) fuzz-short

## unit: go vet and the unit tests
# go test's own vet pass (a subset of the analyzers go vet has just run on
# the same packages) is off: it type-checked every package a second time.
# Inside `make test` the unit tests run at nice 15 beside the e2e suite and
# may wait long for a core: -timeout 30m keeps go test's 10-minute default
# per package from failing a slow but passing run.
unit:
	go vet ./...
	go test $(GOFLAGS_TEST) -vet=off -count=1 -timeout 30m ./...

## race: the unit tests with the race detector (a race build of the Kubernetes
## libraries costs CI minutes a fresh machine does not have, so `test` skips it)
race:
	CGO_ENABLED=1 go test -race -count=1 ./...

## e2e-tools: build the control-plane binaries into the version-keyed cache
e2e-tools:
	e2e/tools/build.sh $(E2E_COMPONENTS)

print-late-components:
	@echo $(E2E_LATE_COMPONENTS)

## e2e-deps: Debian's Chromium, which e2e/fleetreport opens the fleet page in,
## and with E2E_RUNBOOK=1 (or a subset with an AKS scenario) Debian's
## azure-cli, which e2e/runbook pastes az commands into (each installed only
## when absent; CI runs as root)
e2e-deps:
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@[ -z "$(E2E_RUNBOOK_AZ)" ] || command -v az >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends azure-cli >/dev/null; }

## e2e: the e2e suite (builds the plugins and the control plane first)
e2e: build e2e-tools e2e-deps
	$(MAKE) e2e-run

# e2e-run: the e2e suite alone, building any component it finds missing
e2e-run:
	PLUGIN_BIN_DIR=$(CURDIR)/$(BIN) go test $(GOFLAGS_TEST) $(E2E_FLAGS) $(E2E_PKGS)

## e2e-fleet: the fleet programme alone, on the real Argo workflow-controller,
## four local control planes and an S3 store (e2e/fleet; part of `make test`)
e2e-fleet: build
	e2e/tools/build.sh core kueue jobset argo versitygw
	PLUGIN_BIN_DIR=$(CURDIR)/$(BIN) go test $(GOFLAGS_TEST) $(E2E_FLAGS) ./e2e/fleet/

## bench: Go benchmarks, then the scale runs against the local control plane
bench: build e2e-tools
	go test -run '^$$' -bench . -benchmem -count=1 ./pkg/... ./plugins/...
	E2E_SCALE=1 PLUGIN_BIN_DIR=$(CURDIR)/$(BIN) go test $(E2E_FLAGS) -run 'Scale|Bench' -bench 'Scale' -benchtime 1x -v $(E2E_PKGS)
	$(MAKE) vspluto

## vspluto: kubectl deprecations against pluto v5.24.0 on the corpus x10, side by side (PLUTO_SRC=<pluto checkout> or PLUTO_BIN=<binary>)
CORPUS ?= ../shared/corpus
vspluto: build
	@pluto=$$(hack/vspluto/pluto.sh) || { rc=$$?; [[ $$rc == 3 ]] && exit 0; exit $$rc; }; \
	go run ./hack/vspluto -ours $(BIN)/kubectl-deprecations -pluto "$$pluto" -corpus $(CORPUS)

## fuzz-short: every fuzz target for a short fixed time (FUZZTIME)
fuzz-short:
	FUZZ_WORKERS=1 hack/fuzz.sh $(FUZZTIME)

## fuzz: every fuzz target for longer
fuzz:
	hack/fuzz.sh 2m

## lint: gofmt and go vet (with the e2e tag too)
lint:
	@bad=$$(gofmt -s -l $$(git ls-files '*.go')); if [[ -n "$$bad" ]]; then echo "gofmt -s would change:"; echo "$$bad"; exit 1; fi
	go vet ./...
	go vet -tags e2e ./e2e/...

## verify: lint, go.mod tidy, and the banned-pattern checks
verify: lint
	go mod tidy && git diff --exit-code go.mod go.sum
	hack/verify-patterns.sh

## image: the suite's container image (the six plugins and the checkpoint
## agent, entrypoint the agent), reproducible, one image per arch of
## IMAGE_ARCHS in an OCI index, as an OCI layout in dist/image; prints the
## index digest (pin it in rendered workflows) and pushes to IMAGE= when set
IMAGE ?=
IMAGE_ARCHS ?= amd64 arm64
image:
	rm -rf $(DIST)/image-build
	for a in $(IMAGE_ARCHS); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$a go build -trimpath -ldflags "$(LDFLAGS) -buildid=" -o $(DIST)/image-build/linux_$$a/ $(addprefix ./cmd/,$(PLUGINS)) ./cmd/gpufleet-checkpoint-agent || exit 1; \
	done
	go run ./hack/image -bin-dir $(DIST)/image-build -arch $(shell echo $(IMAGE_ARCHS) | tr ' ' ',') -out $(DIST)/image -version $(VERSION) $(if $(IMAGE),-push $(IMAGE))

## dist: release archives for every platform into dist/
dist:
	rm -rf $(DIST)/build
	for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build $(GOFLAGS_RELEASE) -o $(DIST)/build/$${os}_$${arch}/ $(addprefix ./cmd/,$(PLUGINS)); \
	done
	go run ./hack/release dist -version $(VERSION) -build $(DIST)/build -out $(DIST)

## krew: render krew-manifests/ with the version and archive checksums into dist/krew/
krew: dist
	go run ./hack/release krew -version $(VERSION) -dist $(DIST) -out $(DIST)/krew

## krew-validate: check the rendered manifests with krew's own validator
krew-validate: krew
	e2e/tools/build.sh krew-validate >/dev/null
	for m in $(DIST)/krew/*.yaml; do "$$(e2e/tools/build.sh krew-validate)/krew-v0.4.3/validate-krew-manifest" -manifest $$m -skip-install; done

## demo: start the local GPU-fleet control plane and run each plugin on it
demo: build
	hack/demo.sh up

## demo-down: stop the demo control plane
demo-down:
	hack/demo.sh down

clean:
	rm -rf $(BIN) $(DIST)
