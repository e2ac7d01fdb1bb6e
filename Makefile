# EventForge — see README.md. `make up` / `make down` manage the local
# services; `make test` runs every test against them.
SHELL := /bin/bash
GO ?= go
BIN := bin/eventforge
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# The integration tests share one PostgreSQL cluster and one broker. Most
# of them wait on those services, a private one starting or a fault's
# window, not on the CPU: three packages at a time (cdc and cmd/eventforge
# take longest; the third slot runs the rest) and four tests of a package
# at once (each on its own database, slot and topics). More starved the
# timing-bound tests on the shared 2-core machine without ending sooner
# (docs/development.md, "Where make test spends its time"). The test
# binaries are linked without DWARF and symbol table (TEST_LDFLAGS): about
# 1 CPU-second less per package's link, and panics and race reports keep
# their file:line stacks (those come from the Go runtime's own tables).
TEST_LDFLAGS ?= -s -w
TEST_FLAGS ?= -race -count=1 -p 3 -parallel 4 -timeout 15m -ldflags='$(TEST_LDFLAGS)'

.PHONY: all build check up down test test-go test-checks test-tools clean-test-data jaeger vet staticcheck cyclo unit fuzz fuzz-smoke demo clean chaos bench api-fuzz image helm-check console console-test

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/eventforge

# PG_VERSION=16|17|18 runs the local PostgreSQL (make up, make test) on that
# major version, its server binaries resolved from Maven Central; empty: the
# machine's PostgreSQL 15.
PG_VERSION ?= $(EVENTFORGE_PG_VERSION)
export EVENTFORGE_PG_VERSION := $(PG_VERSION)

# Failover drills on make up (docs/development.md): STANDBY=1 adds a
# streaming standby of the local PostgreSQL (slot synchronisation from 17,
# so with PG_VERSION=17 or 18), KAFKA_NODES=3 runs a 3-node Kafka cluster
# instead of the single broker. Both default to the plain setup; a make up
# without STANDBY removes a standby an earlier one made.
STANDBY ?= $(EVENTFORGE_STANDBY)
export EVENTFORGE_STANDBY := $(STANDBY)
KAFKA_NODES ?= $(EVENTFORGE_KAFKA_NODES)
export EVENTFORGE_KAFKA_NODES := $(KAFKA_NODES)

up:
	@deploy/local/up.sh

down:
	@deploy/local/down.sh

vet:
	$(GO) vet ./...

# staticcheck, pinned (a release that supports the go.mod Go version): bugs,
# deprecated calls, simplifications and unused code (U1000) of the product
# module. About 10 s warm; the first run downloads and builds it.
STATICCHECK_VERSION := v0.8.2
staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

# Cyclomatic complexity, pinned: no function outside the tests (_test.go)
# over 15 (gocyclo counts every if, for, case, && and ||). Under a second
# warm; the first run downloads it from the module proxy. CYCLO_ALLOW is a
# regular expression of gocyclo lines ("<n> <package> <function> <file>:")
# still tolerated above the bar, empty when none are; a generated file
# would be added to CYCLO_IGNORE (none today).
GOCYCLO_VERSION := v0.6.0
CYCLO_OVER := 15
CYCLO_IGNORE := _test\.go$$
CYCLO_ALLOW :=
cyclo:
	@out=$$($(GO) run github.com/fzipp/gocyclo/cmd/gocyclo@$(GOCYCLO_VERSION) -over $(CYCLO_OVER) -ignore '$(CYCLO_IGNORE)' . 2>&1); rc=$$?; \
	if [ $$rc -ne 0 ] && ! echo "$$out" | grep -qE '^[0-9]+ [^ ]+ [^ ]+ [^ ]+:[0-9]+:[0-9]+$$'; then echo "$$out"; exit $$rc; fi; \
	over=$$(echo "$$out" | grep -E '^[0-9]+ ' | { if [ -n '$(CYCLO_ALLOW)' ]; then grep -vE '$(CYCLO_ALLOW)'; else cat; fi; }); \
	if [ -n "$$over" ]; then echo "functions over gocyclo $(CYCLO_OVER) (split them where the split names a step):"; echo "$$over"; exit 1; fi

# The trace backend of the tracing test (internal/shared/tracing) and of make demo
# TRACING=1: Jaeger, built once from its own tools module (deploy/local/jaeger)
# into the state folder, so the product's go.mod never takes its dependencies.
jaeger:
	@deploy/local/jaeger.sh build >/dev/null

# The inner loop while changing code: build, vet, staticcheck, the
# complexity bar (cyclo) and the unit tests (-short: every test that needs PostgreSQL or Kafka skips), no
# services, no race detector. Test results are cached as go test caches
# them; CHECK_FLAGS=-count=1 runs every test again. go vet has run on every
# package already, so go test skips its own vet pass (-vet=off).
CHECK_FLAGS ?=
check: build vet staticcheck cyclo
	EVENTFORGE_TEST_BINARY=$(CURDIR)/$(BIN) $(GO) test -short -vet=off -ldflags='$(TEST_LDFLAGS)' $(CHECK_FLAGS) ./...

# Unit tests only: no local services needed.
unit:
	$(GO) test -short $(TEST_FLAGS) ./...

# Everything CI runs: vet, staticcheck, the complexity bar, every Go test against the real
# services, a short fuzz budget for every fuzz target, the schemathesis run
# of the API, the deployment checks and the console's browser tests. The Go
# tests mostly wait on services, so the rest runs beside them in two chains
# (test-go, test-checks and test-tools at once); the Go tests' output is
# printed whole when they end. Test data older runs left behind is dropped
# first (clean-test-data).
test: up jaeger clean-test-data
	@$(MAKE) --no-print-directory -j3 --output-sync=target test-go test-checks test-tools

# The tests that run the eventforge binary take one built here
# (EVENTFORGE_TEST_BINARY) instead of each package's test building its own;
# a file of its own, so a make build beside them (console-test's) cannot
# replace it under a running test.
#
# go test starts packages in the order it is given them: the longest first
# (TEST_FIRST, the slowest first, from go test -json of make test), so the
# last to end is a short one instead of cdc or worker started late. A
# package listed there that no longer exists is left out.
TEST_BIN := bin/eventforge-test
TEST_FIRST_DIRS := cdc worker cmd/eventforge internal/tools/bench internal/testsupport/testenv \
	internal/tools/chaos deploy/prometheus internal/shared/tracing internal/tools/console
TEST_FIRST := $(foreach d,$(TEST_FIRST_DIRS),$(if $(wildcard $(d)/*_test.go),./$(d)/))
test-go:
	$(GO) build -o $(TEST_BIN) ./cmd/eventforge
	EVENTFORGE_TEST_BINARY=$(CURDIR)/$(TEST_BIN) $(GO) test $(TEST_FLAGS) $(TEST_FIRST) ./...

# The Go tests are make test's longest chain (their build first, then
# cdc's), so the other two chains run niced (TEST_SIDE_NICE): they end in
# about half the time and have the slack to yield the CPU while test-go
# compiles or its timing-bound tests run. fuzz-smoke runs more niced: its
# budget is time, not work, so it takes only the CPU left idle.
TEST_SIDE_NICE ?= 5
test-checks:
	@nice -n $(TEST_SIDE_NICE) $(MAKE) --no-print-directory vet staticcheck cyclo
	@nice -n 10 $(MAKE) --no-print-directory fuzz-smoke
	@nice -n $(TEST_SIDE_NICE) $(MAKE) --no-print-directory helm-check

test-tools:
	@nice -n $(TEST_SIDE_NICE) $(MAKE) --no-print-directory api-fuzz
	@nice -n $(TEST_SIDE_NICE) $(MAKE) --no-print-directory console-test

# Drops what test runs left on the local services (a killed or timed-out
# run skips its cleanups): databases and topics with a test's unique name
# (testenv.UniqueName) unused for CLEAN_MIN_AGE, so the data of tests that
# run now stays. CLEAN_FLAGS=--dry-run lists them only.
CLEAN_MIN_AGE ?= 30m
CLEAN_FLAGS ?=
clean-test-data: up
	@$(GO) run ./internal/testsupport/testenv/leftovers --min-age $(CLEAN_MIN_AGE) $(CLEAN_FLAGS)

# The demo migrates with --demo (orders, api_idempotency): a plain
# `eventforge migrate` creates only what the pipeline needs.
demo: build up
	@deploy/local/demo.sh

# The web console in demo mode on the local services: it starts its own API,
# relay and two workers on a fresh database, slot, topics and group, and
# removes them when stopped (Ctrl-C). CONSOLE_ADDR picks the address.
CONSOLE_ADDR ?= 127.0.0.1:8088
console: build up
	@set -a; . "$${EVENTFORGE_STATE_DIR:-.eventforge}/local.env"; set +a; \
		$(BIN) console --demo --http-addr $(CONSOLE_ADDR) --state-dir .eventforge

# Browser tests of the console (tests/console): Playwright (playwright-core
# and axe-core, pinned in package-lock.json, no browser download) driving
# Debian's Chromium headless (/usr/bin/chromium, or CHROMIUM=...). About
# 110-130 s. Screenshots go to .eventforge/console/screenshots/;
# UPDATE_SCREENSHOTS=1 also copies them to docs/img/.
console-test: build up
	@cd tests/console && if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then \
		npm ci --no-audit --no-fund --loglevel=error; fi
	@cd tests/console && node --test --test-reporter=spec console.test.mjs

# Property-based fuzz of the HTTP API against its OpenAPI document with
# schemathesis (pinned, installed from PyPI into .eventforge/venv), then a
# SQL check that no rejected request wrote a row. About 30-45 s.
api-fuzz: build up
	@deploy/local/apifuzz.sh

clean: down
	rm -rf bin .eventforge

# Every fuzz target for FUZZTIME each (the seeds also run in make test).
FUZZTIME ?= 20s
fuzz:
	@set -e; for t in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h '^func Fuzz' $$t/*_test.go | sed 's/func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
			echo "fuzz $$t $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$t; \
		done; \
	done

# Every fuzz target for FUZZ_SMOKE_TIME each, a short budget meant for make
# test: FUZZ_SMOKE_JOBS targets at a time with one fuzzing worker each (13
# targets: 77-85 s on the shared 2-core machine with warm build caches; the
# first run also builds every package with fuzzing instrumentation). A crasher
# is written to the package's testdata/fuzz/ and fails the target: commit it
# as a regression test. Go 1.26 may end a clean run with a bare "context
# deadline exceeded" and no input written (golang/go#75804, fixed in 1.27):
# that is reported as a warning, not a failure.
FUZZ_SMOKE_TIME ?= 8s
FUZZ_SMOKE_JOBS ?= 2
fuzz-smoke:
	@grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do \
		sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file" | sed "s|^|$$(dirname "$$file") |"; \
	done | xargs -P $(FUZZ_SMOKE_JOBS) -L 1 sh -c 'out=$$($(GO) test -run="^$$" -fuzz="^$$1$$" -fuzztime=$(FUZZ_SMOKE_TIME) -parallel 1 "$$0" 2>&1); rc=$$?; \
		if [ $$rc -ne 0 ] && echo "$$out" | grep -q "^    context deadline exceeded$$" && ! echo "$$out" | grep -q "Failing input written"; then \
			echo "warn $$0 $$1: context deadline exceeded without a failing input (golang/go#75804)"; exit 0; fi; \
		if [ $$rc -eq 0 ]; then echo "ok   $$0 $$1"; else echo "FAIL $$0 $$1"; echo "$$out"; fi; exit $$rc'

# Chaos run on PRIVATE services under .eventforge/chaos (a 3-node Kafka
# cluster, a PostgreSQL 17 primary and a synchronous standby with slot
# synchronisation; PG_VERSION=18 picks 18): load with labelled commit
# outcomes, SIGKILLs of relays and workers, broker restarts and freezes
# (SIGSTOP for 10-20 s), PostgreSQL restarts and promotions of the standby,
# then the lost/phantom/order/double-applied check. Not part of make test.
# CHAOS_FLAGS='--kafka-nodes 1 --promotions=false' is the lighter run of
# one broker and one PostgreSQL server.
# CHAOS_FLAGS=--exactly-once runs the relays in exactly-once mode and
# requires duplicates=0.
DURATION ?= 120s
CHAOS_FLAGS ?=
chaos: build
	$(GO) run ./cmd/eventforge-chaos --bin $(BIN) --duration $(DURATION) $(CHAOS_FLAGS)

# The benchmark on the local services (docs/bench.md): backlog
# drain against pg_recvlogical, steady-state latency, worker apply rate.
# Prints a table, writes .eventforge/bench/results.json. Not part of make
# test; at full size it takes about 15 minutes. Example of a smaller run:
#   make bench BENCH_FLAGS='--events 200000 --steady-duration 15s'
BENCH_FLAGS ?=
bench: build up
	@set -a; . .eventforge/local.env; set +a; $(BIN) bench $(BENCH_FLAGS)

# The container image without a Docker engine or a base image: a static
# binary (CGO_ENABLED=0) and, from scratch, the nonroot user 65532 and the
# CA bundle of the build machine (Debian's ca-certificates), written as a
# docker-save tarball by deploy/k8s/cmd/eventforge-image (go-containerregistry).
# Reproducible: every time is the commit's. Load or push it with
# `docker load -i`, `crane push`, `skopeo copy docker-archive:...` or
# `kind load image-archive`.
IMAGE_TAR ?= bin/eventforge-image.tar
IMAGE_REF ?= eventforge:$(VERSION)
REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o bin/eventforge-static ./cmd/eventforge
	cd deploy/k8s && $(GO) run ./cmd/eventforge-image --binary ../../bin/eventforge-static \
		--ref "$(IMAGE_REF)" --version "$(VERSION)" --revision "$(REVISION)" \
		--created "$(SOURCE_DATE_EPOCH)" --out ../../$(IMAGE_TAR)

# Deployment checks without a cluster or an engine (deploy/k8s, a Go module
# of its own so Helm's dependencies stay out of go.mod): helm lint and
# helm template of deploy/helm/eventforge through the Helm library, unit
# tests of the templates, every rendered object validated against the
# Kubernetes 1.30 and 1.37 schemas (kubernetes-validate from PyPI, pinned,
# in .eventforge/kubevalidate), the compose file through compose-go, the
# image of `make image` inspected, and the chart's migration Job and relay
# pair run as processes (the image's binary, the rendered args and env)
# against the local services: readiness of the standby, failover on
# SIGTERM. -mod=mod: deploy/k8s uses the product module through a replace,
# so a dependency added to go.mod is picked up without a manual tidy.
KUBE_VALIDATE_VERSION := 1.37.0
KUBE_VALIDATE := .eventforge/kubevalidate/bin/kubernetes-validate
helm-check: image
	@deploy/k8s/kubevalidate.sh $(KUBE_VALIDATE_VERSION) .eventforge/kubevalidate
	@cd deploy/k8s && $(GO) vet -mod=mod ./...
	@mkdir -p .eventforge; cd deploy/k8s && GOFLAGS="$(GOFLAGS) -mod=mod" EVENTFORGE_KUBE_VALIDATE=$(CURDIR)/$(KUBE_VALIDATE) \
		EVENTFORGE_IMAGE_TAR=$(CURDIR)/$(IMAGE_TAR) EVENTFORGE_VERSION="$(VERSION)" \
		$(GO) test -count=1 -v ./... >$(CURDIR)/.eventforge/helm-check.log 2>&1; rc=$$?; \
		if [ $$rc -ne 0 ]; then cat $(CURDIR)/.eventforge/helm-check.log; exit $$rc; fi; \
		grep -E '^ok|schema validation:|helm template|: image |standby |order ' $(CURDIR)/.eventforge/helm-check.log
