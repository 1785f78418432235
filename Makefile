# journey-operator. Go is the prerequisite (make test also needs Node.js 20+ and npm): every
# Go tool is pinned in go.mod, the envtest control plane is built from source by
# hack/setup-envtest.sh and the e2e tests' npm packages are pinned in hack/npm.

IMG ?= journey-operator:latest
GO ?= go
CONTROLLER_GEN ?= $(GO) tool controller-gen
# Every go command builds with -trimpath: what it compiles does not depend on where the
# clone is, so a second clone of the same code (CI's, a worktree) reuses the packages the
# first compiled instead of compiling them all again, and binaries name module paths,
# not this machine's directories.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)
# In CI every test runs: go test's cache of passed results is for a developer's reruns.
ifeq ($(CI),true)
TEST_COUNT ?= -count=1
endif
# Test timeout for the whole suite; CI allows 90 minutes, we aim well under 30.
TEST_TIMEOUT ?= 25m
# Test binaries are linked without DWARF debug information: nothing in a test run reads
# it (stack traces and race reports come from the binary's own symbol tables), and the
# link of every test binary, with and without -race, takes a fifth to a third less CPU.
TEST_LDFLAGS ?= -w
# Race binaries are cgo binaries, which Go links with the host linker (gcc) by default;
# Go's own linker links them (the standard library's cgo parts, the race runtime) with
# a third less CPU again, and the race reports read the same.
RACE_LDFLAGS ?= $(TEST_LDFLAGS) -linkmode=internal
# Tests of one package that call t.Parallel (each in a namespace of its own) run this many
# at a time: they mostly wait on their control plane.
TEST_PARALLEL ?= 3

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate CRDs, RBAC and webhook configurations from the markers.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./api/..." paths="./internal/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac output:webhook:artifacts:config=config/webhook

.PHONY: generate
generate: ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: docs
docs: ## Regenerate the API reference (docs/api.md).
	bash hack/gen-api-docs.sh

.PHONY: fmt
fmt: ## Run go fmt.
	$(GO) fmt ./...

# CGO_ENABLED=0 is the flavour of `make image`, of lint and of the tests outside
# RACE_PKGS (cgo changes package net and all its importers, so a cgo flavour would
# compile the whole tree once more). make test runs lint, whose govet has these analyzers.
.PHONY: vet
vet: ## Run go vet.
	CGO_ENABLED=0 $(GO) vet ./...

.PHONY: chart
chart: manifests ## Regenerate the Helm chart's CRDs, RBAC rules and webhooks (dist/chart) from config/.
	$(GO) run ./hack/chart .
# --allow-serial-runners: a second run on the machine (another clone's make test) waits
# for the first instead of failing with "parallel golangci-lint is running".
.PHONY: lint
lint: ## Run golangci-lint (pinned in go.mod) with the linters of .golangci.yml.
	CGO_ENABLED=0 $(GO) tool golangci-lint run --allow-serial-runners ./...

.PHONY: verify
verify: manifests generate docs chart ## Regenerate everything, then fail if the tree changed.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- api config docs dist || { echo "generated files are stale: run 'make manifests generate docs' and commit"; exit 1; }

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd from source (cached) for tests and the demo.
	@bash hack/setup-envtest.sh >/dev/null

.PHONY: chromium
chromium: ## Install Chromium (Debian's package, with apt-get) for the console's browser tests, if missing.
	@bash hack/setup-chromium.sh >/dev/null

.PHONY: npm
npm: ## Install the e2e tests' npm packages (hack/npm, pinned by its package-lock.json) into the cache, if missing.
	@bash hack/setup-npm.sh >/dev/null

.PHONY: test-unit
test-unit: ## Unit tests that need no control plane.
	$(GO) test ./api/... ./internal/engine/... ./internal/agent/... ./internal/expr/...

# The packages with goroutines (reconcilers and their managers, the step protocol and
# its performers, the console's server, the webhooks, the revision cache, agent
# pipelines, the plugin's watch, the harness's chat server, the trace export queue,
# the short reliability run) run under the race detector; the others run once without it, with
# CGO_ENABLED=0 like `make image`, so hack/image's test of the real image reuses the
# packages lint compiled and mostly links. Nothing runs twice.
# Each set lists its longest packages first: go test starts them in the order given.
RACE_PKGS ?= ./internal/controller/... ./internal/plugin/... ./internal/console/... ./test/reliability/... ./internal/webhook/... ./internal/step/... ./internal/revision/... ./internal/agent/... ./internal/testenv/... ./internal/tracing/...
LONG_PKGS ?= ./test/e2e ./test/docs ./test/security ./test/deploy

.PHONY: test
test: ## The whole test suite: lint, unit, envtest, browser (headless Chromium), e2e with kubectl and npm clients; concurrent packages under -race.
	@# Chromium and the npm packages install (mostly download and unpacking) and the control
	@# plane builds while lint compiles and checks the CGO-off flavour (its govet runs go
	@# vet's analyzers, so make vet would only repeat them). Lint loads every package with
	@# its tests, compiling them as the CGO-off go test below does: run first, it leaves
	@# that go test only its links; run beside it, both compiled the same packages at the
	@# same time.
	@bash hack/setup-chromium.sh >/dev/null & chromium=$$!; bash hack/setup-npm.sh >/dev/null & npm=$$!; \
	$(MAKE) --no-print-directory envtest & envtest=$$!; \
	$(MAKE) --no-print-directory lint; rc=$$?; \
	wait $$envtest || rc=1; wait $$chromium || rc=1; wait $$npm || rc=1; exit $$rc
	@# Then the race set and the CGO-off set at the same time: most tests wait on their
	@# control plane rather than compute, and neither holds the other back.
	@race="$$($(GO) list $(RACE_PKGS))" && long="$$($(GO) list $(LONG_PKGS))" && \
	rest="$$(echo "$$long"; $(GO) list ./... | grep -vxF "$$race" | grep -vxF "$$long")" && \
	export KUBEBUILDER_ASSETS="$$(bash hack/setup-envtest.sh)" && \
	echo "go test -race $(RACE_PKGS); CGO_ENABLED=0 go test (the other packages): at the same time" && \
	{ $(GO) test -race $(TEST_COUNT) -ldflags='$(RACE_LDFLAGS)' -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $$race & race_pid=$$!; \
	  CGO_ENABLED=0 $(GO) test $(TEST_COUNT) -ldflags='$(TEST_LDFLAGS)' -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $$rest; rc=$$?; \
	  wait $$race_pid || rc=1; exit $$rc; }

.PHONY: test-docs
test-docs: envtest ## Run README.md and docs/*.md against a local control plane (make test runs it too).
	KUBEBUILDER_ASSETS="$$(bash hack/setup-envtest.sh)" $(GO) test -count=1 ./test/docs/...

.PHONY: bench-engine
bench-engine: ## Engine benchmarks.
	$(GO) test -run '^$$' -bench . -benchmem ./internal/engine/...

##@ Build

.PHONY: build
build: ## Build the manager and the kubectl plugin into bin/.
	$(GO) build -o bin/manager ./cmd/manager
	$(GO) build -o bin/kubectl-journey ./cmd/kubectl-journey

.PHONY: run
run: manifests generate ## Run the manager against the cluster of your kubeconfig.
	$(GO) run ./cmd/manager --enable-webhooks=false --metrics-bind-address=:8080 --metrics-secure=false

# The demo and graphs run the plugin that testenv.Binary builds with CGO_ENABLED=0:
# they are built the same way, so that their packages and the plugin's (all but one
# of the plugin's are theirs, half of them change with cgo) compile once, not twice.
.PHONY: demo
demo: envtest ## Run the sample journeys on a local control plane with the builtin agent.
	CGO_ENABLED=0 $(GO) run ./hack/demo

.PHONY: graphs
graphs: envtest ## Redraw the sample journeys in docs/graphs (Mermaid and SVG) with kubectl journey graph.
	CGO_ENABLED=0 $(GO) run ./hack/graphs

.PHONY: install-plugin
install-plugin: ## Install kubectl-journey into $GOBIN (kubectl journey ...).
	$(GO) install ./cmd/kubectl-journey
	@bin="$$($(GO) env GOBIN)"; [ -n "$$bin" ] || bin="$$($(GO) env GOPATH)/bin"; \
	case ":$$PATH:" in *":$$bin:"*) ;; *) echo "kubectl-journey was installed in $$bin, which is not on PATH, so kubectl will say 'unknown command \"journey\"'. Add it: export PATH=\"$$bin:\$$PATH\"" ;; esac

##@ Deployment

.PHONY: install
install: manifests ## Install the CRDs into the cluster of your kubeconfig.
	kubectl apply -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRDs.
	kubectl delete -k config/crd --ignore-not-found

# The kustomization make deploy applies: config/default (cert-manager), config/self-cert
# (the manager provisions its webhook certificate) or config/scoped (namespace-scoped).
KUSTOMIZATION ?= config/default

.PHONY: deploy
deploy: manifests ## Deploy the manager (image $(IMG)) with kustomize ($(KUSTOMIZATION); config/default needs cert-manager, see docs/operations.md).
	$(GO) run ./hack/kustomize -image $(IMG) $(KUSTOMIZATION) | kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: ## Remove the manager (and the CRDs, with every Journey, Pathway and Session).
	$(GO) run ./hack/kustomize $(KUSTOMIZATION) | kubectl delete --ignore-not-found -f -

##@ Image

IMAGE_TAR ?= bin/journey-operator.tar
A2A_IMG ?= journey-operator-a2a-gateway:latest
A2A_IMAGE_TAR ?= bin/journey-operator-a2a-gateway.tar
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)

.PHONY: image
image: ## Build the manager's image as a docker-archive tarball ($(IMAGE_TAR), tagged $(IMG), the format of docker save) without Docker.
	$(GO) run ./hack/image -package ./cmd/manager -binary bin/linux-$(IMAGE_ARCH)/manager -arch $(IMAGE_ARCH) -tag $(IMG) -out $(IMAGE_TAR)

.PHONY: image-a2a-gateway
image-a2a-gateway: ## Build the A2A gateway's image (docs/a2a.md) like `make image`: $(A2A_IMAGE_TAR), tagged $(A2A_IMG).
	$(GO) run ./hack/image -package ./cmd/a2a-gateway -binary bin/linux-$(IMAGE_ARCH)/a2a-gateway -arch $(IMAGE_ARCH) -tag $(A2A_IMG) -out $(A2A_IMAGE_TAR)

.PHONY: image-push
image-push: ## Push $(IMAGE_TAR) to $(IMG) with crane (credentials from ~/.docker/config.json or crane auth login).
	$(GO) tool crane push $(IMAGE_TAR) $(IMG)

##@ Scale and reliability

# Sessions per bench run, comma-separated; 10,000 is opt-in: make bench BENCH_SESSIONS=10000
BENCH_SESSIONS ?= 100,1000
BENCH_ADVANCE ?= watch
BENCH_FLAGS ?=

comma := ,

.PHONY: bench-long
bench-long: envtest ## Long-conversation bench: 1 and 100 Sessions taking 5,000 messages each; size, latency and CPU per turn at 10, 100, 1,000, 5,000.
	KUBEBUILDER_ASSETS="$$(bash hack/setup-envtest.sh)" $(GO) run ./test/bench -long $(or $(BENCH_LONG),5000) -long-sessions $(or $(BENCH_LONG_SESSIONS),1$(comma)100) $(BENCH_FLAGS)

.PHONY: bench-budget
bench-budget: envtest ## API writes per model call with many Sessions sharing one Budget (BENCH_BUDGET_SESSIONS, default 1000; not in make test).
	KUBEBUILDER_ASSETS="$$(bash hack/setup-envtest.sh)" $(GO) test ./test/bench -run '^$$' -bench BudgetWrites -benchtime 3x -budget-sessions $(or $(BENCH_BUDGET_SESSIONS),1000) -timeout 60m

.PHONY: bench
bench: envtest ## End-to-end bench in turns on a local control plane, builtin, LLM and ReAct journeys: turns/s against the plain pair, CPU and writes per turn, heap per Session (not in make test).
	KUBEBUILDER_ASSETS="$$(bash hack/setup-envtest.sh)" $(GO) run ./test/bench -sessions $(BENCH_SESSIONS) -advance $(BENCH_ADVANCE) $(BENCH_FLAGS)

.PHONY: test-reliability
test-reliability: envtest ## Long reliability run: 500 Sessions, manager restarts every few seconds, 20% LLM faults, fuzzed input.
	KUBEBUILDER_ASSETS="$$(bash hack/setup-envtest.sh)" RELIABILITY_FULL=1 $(GO) test -count=1 -timeout 60m -v ./test/reliability/
