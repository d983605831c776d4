# projection-recovery — the two commands a user needs are `make demo` and `make test`.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

CONTROLLER_TOOLS_VERSION ?= v0.23.0
HELM_VERSION ?= v3.22.0
LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
# Built tools are kept outside the clone (a clean clone has no bin/) and
# linked into bin/, like the control plane: built once per machine.
TOOLS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/projection-recovery/tools
# One build variant for everything that is not -race: the image's (static,
# trimmed). vet, the tests, `make build`, the demo, the binaries the tests
# build and the image then share every compiled package; with default flags
# the image compiled every dependency a third time. The -race packages set
# CGO_ENABLED=1 themselves (the race detector needs cgo).
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(GOFLAGS)) -trimpath)
export KUBEBUILDER_ASSETS ?= $(LOCALBIN)/k8s
# The version stamped into the binaries (manager --version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# Benchmark sizes (events) for `make bench`; `make test` runs the small defaults.
BENCH_EVENTS ?= 1000000
# How many times `make bench` runs the benchmarks the machine's noise can
# decide (store catch-up and re-verification, live projector); the table
# shows the median and range.
BENCH_COUNT ?= 1

.PHONY: all
all: build

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC manifests and the chart's copies (CRDs, RBAC, admission policies, base.sql, health.lua).
	$(CONTROLLER_GEN) rbac:roleName=projection-recovery-manager crd paths=./api/... paths=./controllers/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	hack/chart-copies.sh

.PHONY: verify-generated
verify-generated: $(CONTROLLER_GEN) ## Fail when committed generated files are out of date.
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/verify-generated.sh

.PHONY: fmt-check
fmt-check: ## Fail when gofmt would change a file.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: chart-check
chart-check: $(HELM) ## Lint and render the Helm chart; auto-recovery must be off by default.
	HELM=$(HELM) hack/chart-check.sh

.PHONY: vet
vet: ## go vet.
	go vet ./...

.PHONY: tidy-check
tidy-check: ## Fail when go.mod/go.sum are not tidy (direct requirements marked indirect, stale sums).
	@go mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit"; exit 1; }

.PHONY: verify-reconciliation
verify-reconciliation: ## Fail when an invariant is unwired, detection/planning gains a write path, or apply loses a guard.
	hack/verify-reconciliation.sh

.PHONY: verify-requirements
verify-requirements: ## Fail when a requirement id cited in code or tests is not in docs/requirements.md.
	hack/verify-requirements.sh

.PHONY: verify-docs
verify-docs: ## Fail on a dead relative link in README.md, CONTRIBUTING.md or docs/, a requirement id or issue number on the landing pages, a README test command .ci/run does not run, or a Go comment holding history or an essay (docs/design/comments.md).
	hack/verify-docs.sh

.PHONY: reference
reference: ## Regenerate docs/reference/ from the code: CRDs (after `make manifests`), manager flags, metrics, completeness endpoint.
	go run ./hack/reference
	go test -count=1 -run '^TestManagerFlagsReference$$' ./cmd/manager -args -update-reference

.PHONY: verify-reference
verify-reference: ## Fail, with the diff, when docs/reference/ differs from the code or a migration has no CHANGELOG.md entry.
	go run ./hack/reference -check
	go test -count=1 -run '^TestManagerFlagsReference$$' ./cmd/manager

.PHONY: build
build: ## Build the manager, the reference member and the kubectl plugin (bin/kubectl-projection).
	go build -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/manager ./cmd/manager
	go build -o $(LOCALBIN)/member ./cmd/member
	go build -o $(LOCALBIN)/kubectl-projection ./cmd/kubectl-projection

.PHONY: build-soak
build-soak: ## Build test/soak's manager and member under the race detector into bin/soak/ (test/soak takes them when make test runs).
	CGO_ENABLED=1 go build -race -tags soak -o $(LOCALBIN)/soak/manager ./cmd/manager
	CGO_ENABLED=1 go build -race -o $(LOCALBIN)/soak/member ./cmd/member

.PHONY: image
image: ## Build the manager+member image into bin/image/ without a Docker daemon and print its reference (docs/image.md).
	go run ./hack/image --out $(LOCALBIN)/image --version $(VERSION)

##@ Test

.PHONY: control-plane
control-plane: ## Build (once, cached) kube-apiserver, etcd and kubectl from source into bin/k8s.
	hack/control-plane.sh

.PHONY: test
test: ## Run every test tier against a real kube-apiserver and PostgreSQL; ends with the time of each phase and test package.
	HELM=$(HELM) hack/make-test.sh  # the checks, the demo smoke, then hack/test.sh (-race over the concurrent packages); test/chart runs $(HELM)

.PHONY: cluster-build
cluster-build: control-plane ## Build (once, cached) the node's kubelet, kube-proxy, controller-manager, scheduler and CoreDNS from source into bin/k8s.
	hack/cluster-build.sh

.PHONY: e2e
e2e: $(HELM) ## As root: a single-node cluster on this machine (hack/cluster.sh), the chart's local profile installed with helm, CURRENT, replay check, faults, uninstall; torn down after (docs/e2e.md).
	HELM=$(HELM) hack/e2e.sh

.PHONY: e2e-smoke
e2e-smoke: $(HELM) ## `make e2e` without the faults: install, CURRENT, replay check, uninstall, then the guide's production install (about 90 s once built).
	HELM=$(HELM) hack/e2e.sh --smoke

.PHONY: tools
tools: $(HELM) $(CONTROLLER_GEN) ## Build (once, cached outside the clone) helm and controller-gen.

.PHONY: bench
bench: control-plane ## Run the benchmarks once at full size (figures as ratios within one run).
	PROJECTION_BENCH_EVENTS=$(BENCH_EVENTS) PROJECTION_BENCH_COUNT=$(BENCH_COUNT) hack/postgres.sh run -- hack/bench.sh

# How long `make fuzz` runs each fuzz target (go test -fuzztime).
FUZZTIME ?= 1m

.PHONY: fuzz
fuzz: ## Run every Go fuzz target for FUZZTIME each (make fuzz FUZZTIME=5m); failing inputs land in testdata/fuzz.
	FUZZTIME=$(FUZZTIME) hack/postgres.sh run -- hack/fuzz.sh

.PHONY: soak
soak: control-plane ## Long seeded tests (hack/soak.sh): 1,000 fault schedules against real processes, then the page-path property test at 10,000 cases; every failure prints its seed.
	hack/soak.sh

##@ Demo

.PHONY: demo-smoke
demo-smoke: control-plane build ## Run `make demo-reconcile` until its proof line and check both proof lines (part of make test).
	@echo "demo-smoke: running the demo until CURRENT, then its reconciliation walk-through (log: bin/demo-smoke.log)"
	@DEMO_EXIT_WHEN_CURRENT=1 hack/demo.sh --reconcile --work-dir .demo-smoke >$(LOCALBIN)/demo-smoke.log 2>&1 || { tail -40 $(LOCALBIN)/demo-smoke.log; exit 1; }
	@grep -E '^==> all [0-9]+ position keys equal an independent replay' $(LOCALBIN)/demo-smoke.log || { tail -40 $(LOCALBIN)/demo-smoke.log; exit 1; }
	@grep -E '^==> after the approved repair: all [0-9]+ position keys equal an independent replay' $(LOCALBIN)/demo-smoke.log || { tail -40 $(LOCALBIN)/demo-smoke.log; exit 1; }

.PHONY: demo
demo: control-plane build ## Local control plane + PostgreSQL + reference member + operator + a sample resource.
	hack/demo.sh

.PHONY: demo-reconcile
demo-reconcile: control-plane build ## `make demo`, then a reconciliation walk-through: break a row, report, approve, verified (DEMO_EXIT_WHEN_CURRENT=1 stops at its proof line).
	hack/demo.sh --reconcile

##@ Tools

$(CONTROLLER_GEN):
	hack/tool.sh $(TOOLS_CACHE) sigs.k8s.io/controller-tools/cmd/controller-gen $(CONTROLLER_TOOLS_VERSION) $@

$(HELM):
	hack/tool.sh $(TOOLS_CACHE) helm.sh/helm/v3/cmd/helm $(HELM_VERSION) $@

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-18s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
