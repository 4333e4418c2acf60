# installstrategy development targets. See docs/DEVELOPMENT.md.
#
#   make tools          build the local control-plane binaries (cached; the first
#                       build takes several minutes)
#   make flux-tools     build Flux's source-controller and kustomize-controller
#                       from source (cached per pin; hack/flux.sh)
#   make cluster-up     start the local cluster; prints `export KUBECONFIG=...`
#   make cluster-env    print the export lines of the running cluster
#   make cluster-down   stop it and remove its state
#   make test           start a cluster of its own, run go test ./... and
#                       test-extra against it, always tear it down
#   make unit           the tests that need no cluster (go test -short), no
#                       cluster started (its time: docs/DEVELOPMENT.md)
#   make verify         gofmt and go vet
#   make fuzz           the fuzz targets, FUZZ_COUNT inputs each
#   make fuzz-long      every fuzz target for 1,000,000 inputs (not in make test)
#   make refusal-cost   the cost of refusing the worst input of each untrusted
#                       entry point, against issue 39's bound (not in make test)
#   make soak           on a cluster of its own: the operator SIGKILLed during
#                       SOAK_CRASH_ROUNDS upgrades, and SOAK_FAULT_ROUNDS upgrades
#                       with 10% of its requests failing (not in make test)
#   make bench          benchmarks beside their baselines
#   make bench-cluster  the cluster benchmarks (idle resync, apply beside
#                       kubectl and Helm 4, 100 Installations) on a cluster
#                       of their own; not in make test
#   make bench-fleet    N Installations tracking one OCI tag, beside Flux's
#                       per-poll cost, on a cluster of their own; not in make test
#   make bench-virt-operator  KubeVirt's own virt-operator and ours side by side
#                       (install, upgrade) on clusters of their own; needs the
#                       virt-operator binaries (make virt-operator-build); not
#                       in make test
#   make build          the plugin, the operator and its chart renderer into _output/bin
#   make release        release archives (linux, darwin; amd64, arm64),
#                       SHA256SUMS and the krew manifest into _output/release
#   make demo           a tour (see README.md)
#   make deploy         install the operator into the cluster of $KUBECONFIG:
#                       config/default with image IMG, server-side applied,
#                       waits until the CRD is Established and the operator
#                       Available (no kubectl needed)
#   make undeploy       remove it again, CRD last; refused while Installations
#                       exist, unless KEEP_CRD=true (keeps the CRD and them)
#   make images         build the operator image IMG without Docker (Go and
#                       go-containerregistry) into $(IMAGES_DIR) as a tarball,
#                       and load it into the real node of the cluster in
#                       CLUSTER_STATE_DIR when one runs
#   make docker-build   build the operator image IMG (needs a Docker daemon)
#   make docker-push    push IMG
#
# Variables (override on the command line or in the environment):
#   TOOLS_DIR           where the binaries are (default: a per-pin cache folder,
#                       see hack/tools.sh)
#   CLUSTER_STATE_DIR   state of `make cluster-up` (default _output/cluster)
#   TEST_CLUSTER_STATE_DIR  state of the cluster of `make test` (default _output/test-cluster)
#   NODES               fake nodes of cluster-up (default 3)
#   REAL_NODE           false: cluster-up without the real node (default true)
#   GOTESTFLAGS         flags of go test (default: -count=1 -timeout=25m -p 1)
#   GOTESTPKGS          packages of go test (default ./...)
#   IMG                 the operator image of deploy and docker-build (default
#                       ghcr.io/installstrategy/installstrategy-operator:$(VERSION))
#   VERSION             its tag (default: git describe --tags --always --dirty)
#   DEPLOY_FLAGS        more flags of deploy/undeploy, e.g. --context NAME,
#                       --kubeconfig FILE, --timeout 5m (see go run ./hack/deploy)

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO ?= go
ifeq ($(origin TOOLS_DIR),undefined)
TOOLS_DIR := $(shell hack/tools.sh dir)
endif
CLUSTER_STATE_DIR ?= $(CURDIR)/_output/cluster
TEST_CLUSTER_STATE_DIR ?= $(CURDIR)/_output/test-cluster
NODES ?= 3
# REAL_NODE=false: cluster-up without the real node (see docs/DEVELOPMENT.md).
REAL_NODE ?= true
# -p 1: test packages share one cluster, and several install the same product
# (whose CRDs and ClusterRoles have fixed names), so they run one at a time.
GOTESTFLAGS ?= -count=1 -timeout=25m -p 1
GOTESTPKGS ?= ./...
LOCALCLUSTER := $(CURDIR)/_output/bin/localcluster
TEST_KUBECONFIG_ENV := INSTALLSTRATEGY_TEST_KUBECONFIG

export TOOLS_DIR GO GOTESTFLAGS GOTESTPKGS LOCALCLUSTER

.PHONY: help
help:
	@sed -n '1,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

.PHONY: tools
tools: ## Build (or reuse) the control-plane binaries in $(TOOLS_DIR).
	@hack/tools.sh build >/dev/null

# flux-tools: Flux's source-controller and kustomize-controller, built from
# their source at the pins of hack/flux (a module of its own) with their
# CRDs, into a cache folder keyed by the pins (hack/flux.sh); make test
# builds them too (test/e2e's Flux test runs them).
.PHONY: flux-tools
flux-tools:
	@hack/flux.sh build >/dev/null

.PHONY: localcluster
localcluster:
	@$(GO) build -o $(LOCALCLUSTER) ./hack/localcluster

.PHONY: cluster-up
cluster-up: tools localcluster ## Start the local cluster (state in $(CLUSTER_STATE_DIR)).
	@$(LOCALCLUSTER) up --state-dir "$(CLUSTER_STATE_DIR)" --nodes "$(NODES)" --real-node="$(REAL_NODE)"

.PHONY: cluster-env
cluster-env: localcluster
	@$(LOCALCLUSTER) env --state-dir "$(CLUSTER_STATE_DIR)"

.PHONY: cluster-down
cluster-down: localcluster
	@$(LOCALCLUSTER) down --state-dir "$(CLUSTER_STATE_DIR)"

# test: hack/test.sh builds the tools, starts three clusters
# ($(TEST_CLUSTER_STATE_DIR) with the real node, -b and -c without), runs
# go test ./... in three shards on them and test-extra on the first, and
# tears them down on every exit (success, failure, Ctrl-C).
.PHONY: test
test:
	@TEST_CLUSTER_STATE_DIR="$(TEST_CLUSTER_STATE_DIR)" hack/test.sh

# unit: the tests that need no cluster, in parallel (go test -short:
# testtier.Heavy skips every test that reaches a cluster through testenv.New
# or testenv.ToolsDir, and those marked heavy by hand). CI=true and no test
# cluster, so a test that needs one without saying so fails instead of
# skipping. make test runs every test, these included. Go's test cache is
# kept: after an edit only the packages it reaches run again;
# UNITFLAGS=-count=1 runs everything. -p 4 (go's default is one per core):
# links overlap tests that wait on a subprocess or a timer. test/e2e and
# test/cluster are left out of the default list: every test there needs a
# cluster, and linking their binaries only to skip them cost ~6% of a cold
# run's CPU. Unit tests live beside their subject, not there.
UNITFLAGS ?=
UNITPKGS = $(if $(filter ./...,$(GOTESTPKGS)),$(filter-out ./test/e2e ./test/cluster,$(shell $(GO) list -f '.{{slice .ImportPath (len .Module.Path)}}' ./...)),$(GOTESTPKGS))
.PHONY: unit
unit:
	env -u $(TEST_KUBECONFIG_ENV) CI=true $(GO) test -short -p 4 $(UNITFLAGS) $(UNITPKGS)

# test-repeat runs `make test` RUNS times in a row on a clean clone of
# HEAD (the flake rate; hack/test-repeat.sh). Not part of make test.
RUNS ?= 3
.PHONY: test-repeat
test-repeat:
	@RUNS="$(RUNS)" OUT="$(or $(OUT),_output/test-repeat)" hack/test-repeat.sh

# test-go runs go test against the cluster named by
# INSTALLSTRATEGY_TEST_KUBECONFIG (hack/test.sh sets it).
.PHONY: test-go
test-go:
	$(GO) test $(GOTESTFLAGS) $(GOTESTPKGS)

# ---------------------------------------------------------------------------
# HOOK: extra test steps, run by `make test` after go test, against the same
# cluster (INSTALLSTRATEGY_TEST_KUBECONFIG and TOOLS_DIR are set). Add short
# fuzz runs and the like here as further recipe lines, e.g.
#	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=20s ./pkg/strategy
# ---------------------------------------------------------------------------
# Fuzz targets run for a fixed number of inputs (not a duration, so the
# run costs the same on every machine); their saved failing inputs in
# testdata/fuzz already ran as regression tests in test-go.
FUZZ_COUNT ?= 2000x

.PHONY: test-extra
test-extra: fuzz

.PHONY: fuzz
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzParse$$' -fuzztime=$(FUZZ_COUNT) ./pkg/strategy
	$(GO) test -run='^$$' -fuzz='^FuzzFastPath$$' -fuzztime=$(FUZZ_COUNT) ./pkg/strategy
	$(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZ_COUNT) ./pkg/codec
	$(GO) test -run='^$$' -fuzz='^FuzzGate$$' -fuzztime=$(FUZZ_COUNT) ./pkg/trust
	$(GO) test -run='^$$' -fuzz='^FuzzParseChunks$$' -fuzztime=$(FUZZ_COUNT) ./pkg/store
	$(GO) test -run='^$$' -fuzz='^FuzzDecodeRelease$$' -fuzztime=$(FUZZ_COUNT) ./pkg/helmrelease
	$(GO) test -run='^$$' -fuzz='^FuzzOpenRevision$$' -fuzztime=$(FUZZ_COUNT) ./pkg/history
	$(GO) test -run='^$$' -fuzz='^FuzzPull$$' -fuzztime=$(FUZZ_COUNT) ./pkg/oci
	$(GO) test -run='^$$' -fuzz='^FuzzHelmArchive$$' -fuzztime=$(FUZZ_COUNT) ./pkg/render

# refusal-cost: what refusing the worst input found for each untrusted
# entry point costs (alloc, CPU, peak RSS), each in a process of its own,
# against issue 39's bound (256 MB peak RSS, 10 s CPU); not in make test.
.PHONY: refusal-cost
refusal-cost:
	$(GO) run ./hack/refusalcost

# fuzz-long: every fuzz target for a million inputs (docs/RELIABILITY.md).
.PHONY: fuzz-long
fuzz-long:
	@$(MAKE) --no-print-directory fuzz FUZZ_COUNT=1000000x

# soak: the long loops of docs/RELIABILITY.md on a cluster of its own
# (hack/test.sh), each round checked for convergence.
SOAK_CRASH_ROUNDS ?= 50
SOAK_FAULT_ROUNDS ?= 20

.PHONY: soak
soak:
	@TEST_CLUSTER_STATE_DIR="$(TEST_CLUSTER_STATE_DIR)" TEST_TARGETS=soak-go hack/test.sh

.PHONY: soak-go
soak-go:
	INSTALLSTRATEGY_CRASH_ROUNDS=$(SOAK_CRASH_ROUNDS) $(GO) test -count=1 -timeout=0 -v -run '^TestOperatorKilledMidUpgradeConverges$$' ./test/e2e
	INSTALLSTRATEGY_FAULT_ROUNDS=$(SOAK_FAULT_ROUNDS) $(GO) test -count=1 -timeout=0 -v -run '^TestUpgradesConvergeThroughFaults$$' ./test/e2e

# test-real-dump: issue 40 with KubeVirt's own virt-operator (build tag
# realdump; not in make test): its images dumping on the real node for the
# example's upgrade and rollback by imageTag and its refused delete, and its
# binary installing KubeVirt before the example takes over; issue 42's CRD
# rollback from KubeVirt main to v1.7.4 (TestKubeVirtCRDRollbackOnRealNode).
# VIRT_OPERATOR_BINARIES is a folder of virt-operator-v1.8.4,
# virt-operator-v1.9.0, virt-operator-v1.7.4 and virt-operator-MAIN (MAIN:
# kubeVirtMain of test/e2e/kubevirt_crdrollback_realnode_test.go), built by
# ../shared/tools/virtoperator/build.sh (docs/UPGRADES.md says how for MAIN).
VIRT_OPERATOR_BINARIES ?=
.PHONY: test-real-dump
test-real-dump:
	@test -n "$(VIRT_OPERATOR_BINARIES)" || { echo "set VIRT_OPERATOR_BINARIES to the folder of virt-operator-v1.8.4, -v1.9.0, -v1.7.4 and KubeVirt main's (../shared/tools/virtoperator/build.sh)" >&2; exit 2; }
	@TEST_CLUSTER_STATE_DIR="$(TEST_CLUSTER_STATE_DIR)" VIRT_OPERATOR_BINARIES="$(abspath $(VIRT_OPERATOR_BINARIES))" TEST_TARGETS=test-real-dump-go hack/test.sh

.PHONY: test-real-dump-go
test-real-dump-go:
	$(GO) test -tags realdump -count=1 -timeout=60m -v -run '^(TestKubeVirtUpgradeByImageTagOnRealNode|TestVirtOperatorInstallTakenOverOnRealNode|TestKubeVirtCRDRollbackOnRealNode)$$' ./test/e2e

# bench runs the benchmarks; each measures its baseline in the same run and
# reports x-speedup and alloc-ratio (see docs/PERFORMANCE.md).
.PHONY: bench
bench:
	$(GO) test -run='^$$' -bench=. -benchtime=5x ./pkg/codec

# bench-cluster runs the benchmarks that need a cluster (idle resync cost,
# apply beside kubectl and Helm 4, 100 Installations in one operator) on a
# cluster of their own, like make test; not in make test. BENCH_CLUSTER
# selects them (a -bench regexp over both packages); BENCH_CLUSTER_TIME is
# -benchtime of pkg/engine's. BenchmarkApply needs kubectl on PATH and
# builds hack/benchhelm (Helm 4 SDK, a module of its own) once per pin into
# the user cache folder; kubectl's 5,000-object rounds take about 17 minutes
# each (client-go's 5 requests per second). BenchmarkManyInstallations
# (test/e2e) is minutes per round, so it runs one round (-benchtime 1x).
BENCH_CLUSTER ?= IdleResync|Apply$$|ManyInstallations
BENCH_CLUSTER_TIME ?= 3x
.PHONY: bench-cluster
bench-cluster:
	@TEST_TARGETS=bench-cluster-run TEST_CLUSTER_STATE_DIR="$(CURDIR)/_output/bench-cluster" hack/test.sh

.PHONY: bench-cluster-run
bench-cluster-run:
	$(GO) test -run='^$$' -bench='$(BENCH_CLUSTER)' -benchtime=$(BENCH_CLUSTER_TIME) -timeout=240m ./pkg/engine
	$(GO) test -run='^$$' -bench='$(BENCH_CLUSTER)' -benchtime=1x -timeout=60m ./test/e2e

# bench-fleet runs BenchmarkOCIFleet (test/e2e) on a cluster of its own, like
# make test; not in make test: BENCH_FLEET_SIZES Installations (one round
# each, a fresh operator per size), each in its own namespace with its own
# oci source, all tracking one tag of a registry on loopback (polled every
# BENCH_FLEET_INTERVAL), beside a Flux-like baseline against the same
# registry (docs/PERFORMANCE.md, "Fleets: OCI sources").
BENCH_FLEET_SIZES ?= 10,25
BENCH_FLEET_INTERVAL ?= 2s
.PHONY: bench-fleet
bench-fleet:
	@TEST_TARGETS=bench-fleet-run TEST_CLUSTER_STATE_DIR="$(CURDIR)/_output/bench-fleet" hack/test.sh

.PHONY: bench-fleet-run
bench-fleet-run:
	INSTALLSTRATEGY_FLEET_SIZES='$(BENCH_FLEET_SIZES)' INSTALLSTRATEGY_FLEET_INTERVAL='$(BENCH_FLEET_INTERVAL)' \
		$(GO) test -run='^$$' -bench='^BenchmarkOCIFleet$$' -benchtime=1x -timeout=60m -v ./test/e2e

# bench-scale: the cost curves of issue #24 on a cluster of its own (not in
# make test). BenchmarkApply's synthetic product at each size of
# BENCH_SCALE_OBJECTS ConfigMaps applied by kubectl --server-side, Helm 4 and
# the plugin (every size printed as ratios against the other two in the same
# run), then BenchmarkManyInstallations at each size of
# BENCH_SCALE_INSTALLATIONS (every size against one Installation in the same
# run). Long: kubectl applies at client-go's 5 requests per second (43
# minutes for 20,000 objects measured), and 1,000 Installations deploy 16,000
# objects. BENCH_SCALE_PEERS chooses the peers (kubectl,helm); a peer that
# fails at a size is recorded as failed and the curve goes on. Smaller
# curves: e.g.
# make bench-scale BENCH_SCALE_OBJECTS=1000,5000 BENCH_SCALE_INSTALLATIONS=10,100
# make bench-scale BENCH_SCALE_OBJECTS=20000 BENCH_SCALE_PEERS=helm BENCH_SCALE_INSTALLATIONS=
BENCH_SCALE_OBJECTS ?= 1000,5000,20000
BENCH_SCALE_INSTALLATIONS ?= 10,100,1000
BENCH_SCALE_PEERS ?= kubectl,helm
.PHONY: bench-scale
bench-scale:
	@TEST_TARGETS=bench-scale-run TEST_CLUSTER_STATE_DIR="$(CURDIR)/_output/bench-scale" hack/test.sh

.PHONY: bench-scale-run
bench-scale-run:
	$(if $(BENCH_SCALE_OBJECTS),INSTALLSTRATEGY_BENCH_SYNTHETIC_SIZES='$(BENCH_SCALE_OBJECTS)' \
		INSTALLSTRATEGY_BENCH_PEERS='$(BENCH_SCALE_PEERS)' \
		$(GO) test -run='^$$' -bench='^BenchmarkApply$$/^synthetic-' -benchtime=1x -timeout=600m -v ./pkg/engine)
	$(if $(BENCH_SCALE_INSTALLATIONS),INSTALLSTRATEGY_MANY_INSTALLATIONS='$(BENCH_SCALE_INSTALLATIONS)' \
		$(GO) test -run='^$$' -bench='^BenchmarkManyInstallations$$' -benchtime=1x -timeout=600m -v ./test/e2e)

# bench-virt-operator runs hack/sidebyside: KubeVirt's own virt-operator
# (built from the release tags by ../shared/tools/virtoperator/build.sh:
# make virt-operator-build KV_MIRROR=<git dir of kubevirt/kubevirt>), our
# operator and the example operator (examples/kubevirt-operator), each as a
# local process on a fresh local cluster, from the same strategies; prints
# every side, the ratios to virt-operator and the KubeVirt CR statuses of
# virt-operator and the example compared (docs/PERFORMANCE.md, "Side by side
# with virt-operator"; docs/EMBEDDING.md, "Compared with virt-operator").
# Not in make test.
VO_BIN ?= /tmp/vo-bin
VO_SRC_PREFIX ?= /tmp/vo
VO_FROM ?= v1.8.4
VO_TO ?= v1.9.0
VO_ROUNDS ?= 2
VO_FLAGS ?=
VO_TOOLS ?= $(CURDIR)/../shared/tools/virtoperator
KUBEVIRT_TESTDATA ?= $(CURDIR)/../shared/testdata/kubevirt

.PHONY: bench-virt-operator
bench-virt-operator: tools
	$(GO) run ./hack/sidebyside --rounds $(VO_ROUNDS) --from $(VO_FROM) --to $(VO_TO) \
		--vo-bin "$(VO_BIN)" --kubevirt-src "$(VO_SRC_PREFIX)" --testdata "$(KUBEVIRT_TESTDATA)" \
		--state-dir "$(CURDIR)/_output/sidebyside-cluster" --out "$(CURDIR)/_output/sidebyside" $(VO_FLAGS)

# virt-operator-build builds virt-operator $(VO_FROM) and $(VO_TO) into
# $(VO_BIN) with the shared recipe (a worktree per tag of $(KV_MIRROR) at
# $(VO_SRC_PREFIX)-TAG; about 5 minutes cold on 2 cores).
.PHONY: virt-operator-build
virt-operator-build:
	@test -n "$(KV_MIRROR)" || { echo "set KV_MIRROR to a git directory of github.com/kubevirt/kubevirt" >&2; exit 1; }
	KV_MIRROR="$(KV_MIRROR)" VO_BIN="$(VO_BIN)" VO_SRC_PREFIX="$(VO_SRC_PREFIX)" "$(VO_TOOLS)/build.sh" $(VO_TO) $(VO_FROM)

# Build stamps: version, commit and the commit's date (not the build's, so
# that rebuilding a commit gives the same binary), into internal/buildinfo.
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 1970-01-01T00:00:00Z)
BUILDINFO := github.com/installstrategy/installstrategy/internal/buildinfo
STAMP = -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(BUILD_DATE)

.PHONY: build
build: ## Build the plugin, the operator and its chart renderer into _output/bin (static, as released).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(STAMP)" -o _output/bin/ ./cmd/...

# release: hack/release.sh builds the plugin and the operator for
# RELEASE_PLATFORMS (stripped, -trimpath, CGO_ENABLED=0, stamped with
# RELEASE_VERSION), one tarball each with LICENSE, SHA256SUMS, and the krew
# manifest installstrategy.yaml generated from them by hack/krew, into
# RELEASE_DIR. RELEASE_VERSION must be vMAJOR.MINOR.PATCH[-PRE] (krew's
# rule); it defaults to the latest v* tag, else v0.0.0-<commit>.
RELEASE_DIR ?= $(CURDIR)/_output/release
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_VERSION ?= $(shell git describe --tags --match 'v[0-9]*' --exact-match 2>/dev/null || echo v0.0.0-$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown))

.PHONY: release
release: ## Release archives, SHA256SUMS and the krew manifest into $(RELEASE_DIR).
	@VERSION="$(RELEASE_VERSION)" COMMIT="$(COMMIT)" BUILD_DATE="$(BUILD_DATE)" \
		RELEASE_DIR="$(RELEASE_DIR)" RELEASE_PLATFORMS="$(RELEASE_PLATFORMS)" hack/release.sh

# demo: hack/demo.sh builds what it needs, starts a cluster of its own in
# _output/demo-cluster, runs the operator against it, installs the sample
# product at v1.0.0, upgrades it to v1.1.0 with live progress, and always
# tears everything down; then a short plugin tour on real KubeVirt strategies.
.PHONY: demo
demo:
	@hack/demo.sh

# ---------------------------------------------------------------------------
# The operator in a cluster. hack/deploy (logic in internal/deploy) renders
# config/default with kustomize's Go API, so neither kubectl nor kustomize
# is needed; internal/deploy's tests run it the same way against the local
# cluster. See docs/DEVELOPMENT.md.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMG ?= ghcr.io/installstrategy/installstrategy-operator:$(VERSION)
KEEP_CRD ?= false
DEPLOY_FLAGS ?=

.PHONY: deploy
deploy: ## Install the operator (image IMG) into the cluster of $KUBECONFIG.
	$(GO) run ./hack/deploy deploy --image "$(IMG)" --local-cluster "$(CLUSTER_STATE_DIR)" $(DEPLOY_FLAGS)

.PHONY: undeploy
undeploy: ## Remove what deploy installed (KEEP_CRD=true keeps the CRD).
	$(GO) run ./hack/deploy undeploy --keep-crd=$(KEEP_CRD) $(DEPLOY_FLAGS)

# images: hack/images (logic in internal/images) builds the operator image
# from the Go binary the way ko does, with no Docker and no registry: one
# layer with the static binary, user 65532, entrypoint as in the Dockerfile
# (a development build unless PRODUCT_VERSION is set, like the Dockerfile's
# VERSION argument), tagged IMG, written to $(IMAGES_DIR)/*.tar (`docker
# load`, `ctr images import`), and imported into the real node of the
# cluster in $(CLUSTER_STATE_DIR) when it runs.
IMAGES_DIR ?= $(CURDIR)/_output/images
PRODUCT_VERSION ?=

.PHONY: images
images: ## Build the operator image IMG as a tarball; load it into the local cluster's real node.
	$(GO) run ./hack/images --image "$(IMG)" --product-version "$(PRODUCT_VERSION)" \
		--version "$(VERSION)" --commit "$(COMMIT)" --date "$(BUILD_DATE)" \
		--out "$(IMAGES_DIR)" --load-into "$(CLUSTER_STATE_DIR)"

# The Dockerfile builds the same image where Docker runs; this machine and
# CI have no Docker, so these targets fail with a message there.
.PHONY: docker-check
docker-check:
	@command -v docker >/dev/null 2>&1 || { echo "docker: not installed; build the image where Docker runs (see Dockerfile), push it, and run make deploy IMG=<that image>" >&2; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "docker: no Docker daemon answers (docker info failed); start one, or build the image elsewhere and run make deploy IMG=<that image>" >&2; exit 1; }

.PHONY: docker-build
docker-build: docker-check ## Build the operator image IMG.
	docker build -t "$(IMG)" .

.PHONY: docker-push
docker-push: docker-check ## Push the operator image IMG.
	docker push "$(IMG)"

.PHONY: verify
verify: ## gofmt and go vet over the root module.
	@out="$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go'))"; \
	if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

.PHONY: clean
clean: cluster-down
	rm -rf _output

# ---------------------------------------------------------------------------
# API code generation. controller-gen is pinned in its own module,
# hack/tools/controller-gen (`go tool` builds it once into the Go build
# cache). api/v1alpha1's TestGeneratedFilesUpToDate runs the same commands
# and fails when the committed files are stale: after changing api/, run
# `make generate manifests` and commit the result.
CONTROLLER_GEN_MOD := hack/tools/controller-gen
CONTROLLER_GEN_PATHS := paths=./api/...

.PHONY: generate
generate: ## DeepCopy methods of api/ (zz_generated.deepcopy.go).
	cg="$$(cd $(CONTROLLER_GEN_MOD) && $(GO) tool -n controller-gen)"; \
	"$$cg" object $(CONTROLLER_GEN_PATHS)

.PHONY: manifests
manifests: ## The Installation CRD (config/crd/bases) and the operator's RBAC (config/rbac/role.yaml).
	cg="$$(cd $(CONTROLLER_GEN_MOD) && $(GO) tool -n controller-gen)"; \
	"$$cg" crd rbac:roleName=installstrategy-operator $(CONTROLLER_GEN_PATHS) \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
